package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// procCatalog is the failover job: one slot firing every second, with a
// history long enough to count every fire of a trial.
const procCatalog = `cluster: %s
membership:
  lease_ttl: %s
jobs:
  - name: load
    schedule: "@every 1s"
    handler: noop
    misfire: fire-all
    catchup_window: 1m
    overlap: skip
    history_limit: 200
`

// memberProc is one `kira run` process of a trial.
type memberProc struct {
	name, log string
	metrics   string // its /metrics URL, when started with --http
	cmd       *exec.Cmd
	ended     bool          // by the bench's signal
	done      chan struct{} // closed when the process has exited and been reaped
}

// procFailover is failover with every member a `kira run` process of the
// bench binary, and the owner killed with SIGKILL: nothing of the member
// runs after the kill. What the members ran is read
// back from the slot's history in etcd; the first start by another member
// after the kill ends a sample.
func procFailover(cfg Config, ttl time.Duration) (Failover, error) {
	anyMoment := func() time.Duration { return rand.N(time.Second) }
	samples, lost, err := procTrials(cfg, "failover", ttl, ownerEnd{sig: syscall.SIGKILL, offset: anyMoment, seen: firstRunElsewhere})
	if err != nil {
		return Failover{TTL: ttl}, err
	}
	f := failoverFigures(ttl, samples, lost)
	return f, nil
}

// procHandover is handover with every member a `kira run` process, the
// owner sent SIGTERM a quarter into a second (its 1 s job idle then). A
// sample ends when another member's election key leads
// the slot's election in etcd, seen by a watch. The lease TTL is 6 s, so a
// handover cannot pass for an expiry.
func procHandover(cfg Config) (*Handover, error) {
	quarter := func() time.Duration { return 250 * time.Millisecond }
	samples, lost, err := procTrials(cfg, "handover", 6*time.Second, ownerEnd{sig: syscall.SIGTERM, offset: quarter, seen: heldElsewhere})
	if err != nil {
		return nil, err
	}
	h := handoverFigures(samples, lost)
	return h, nil
}

// ownerEnd is how a trial ends the owner's process and what it measures:
// sig is sent offset() into a second; seen, set up before the signal, waits
// for the change measured (what it watches ends with ctx).
type ownerEnd struct {
	sig    syscall.Signal
	offset func() time.Duration
	seen   func(ctx context.Context, t *procTrial) (changeSeen, error)
}

// changeSeen waits, once the owner was signalled at at, until the change a
// trial measures is seen, and returns how long after at it came.
type changeSeen func(at time.Time) (time.Duration, error)

// procTrial is one trial's members and the slot's owner among them.
type procTrial struct {
	cli     *clientv3.Client
	cluster string
	slot    shard.Slot
	ttl     time.Duration
	procs   []*memberProc
	owner   string // member id
}

func procTrials(cfg Config, name string, ttl time.Duration, end ownerEnd) ([]time.Duration, int, error) {
	cli, err := etcdclient.New(cfg.Etcd)
	if err != nil {
		return nil, 0, err
	}
	defer cli.Close()
	dir, err := os.MkdirTemp("", "kira-bench-procs")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	var samples []time.Duration
	lost := 0
	for trial := 0; trial < cfg.Trials; trial++ {
		d, l, err := runProcTrial(cfg, cli, filepath.Join(dir, fmt.Sprint(trial)), name, ttl, end)
		if err != nil {
			return samples, lost, fmt.Errorf("%s with processes, trial %d: %w", name, trial+1, err)
		}
		samples = append(samples, d)
		lost += l
	}
	return samples, lost, nil
}

// runProcTrial starts three members, waits until the ring's owner of the
// job has run it twice, ends the owner's process as end says, and returns
// how long until the change was seen, and the fires no member started
// around it (from the slot's history).
func runProcTrial(cfg Config, cli *clientv3.Client, dir, name string, ttl time.Duration, end ownerEnd) (time.Duration, int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	t := &procTrial{cli: cli, cluster: cluster("procs-" + name), slot: shard.Slot{Job: "load"}, ttl: ttl}
	catalog := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(procCatalog, t.cluster, ttl)), 0o600); err != nil {
		return 0, 0, err
	}
	defer func() {
		for _, p := range t.procs {
			p.stop()
		}
	}()
	for i := 0; i < 3; i++ {
		p, err := startProc(cfg, dir, catalog, fmt.Sprintf("p%d", i))
		if err != nil {
			return 0, 0, err
		}
		t.procs = append(t.procs, p)
	}
	ownerProc, err := waitRingOwnerRan(t)
	if err != nil {
		return 0, 0, fmt.Errorf("waiting for the ring's owner to run the job twice: %w", err)
	}
	watching, stopWatching := context.WithTimeout(context.Background(), ttl+30*time.Second)
	defer stopWatching()
	seen, err := end.seen(watching, t)
	if err != nil {
		return 0, 0, err
	}
	first := time.Now()
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + end.offset())))
	at := time.Now()
	ownerProc.ended = true
	if err := ownerProc.cmd.Process.Signal(end.sig); err != nil {
		return 0, 0, err
	}
	took, err := seen(at)
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-ownerProc.done:
	case <-time.After(time.Minute):
		return 0, 0, fmt.Errorf("%s did not exit within a minute of %v", ownerProc.name, end.sig)
	}
	// Let the catch-up and one more fire happen and be recorded, then count holes.
	until := time.Now().Add(1500 * time.Millisecond)
	time.Sleep(time.Until(until) + 500*time.Millisecond)
	lost, err := holesIn(t, first, until)
	return took, lost, err
}

// waitRingOwnerRan waits until the trial's processes are members, the
// slot is led by the member the assignment over them prefers, and that member
// has run it twice; it returns that member's process.
func waitRingOwnerRan(t *procTrial) (*memberProc, error) {
	var ownerProc *memberProc
	err := waitProcs(t.procs, 30*time.Second, func(ctx context.Context) (bool, error) {
		st, err := ops.ReadStatus(ctx, t.cli, t.cluster)
		if err != nil || len(st.Members) != len(t.procs) {
			return false, err
		}
		held, _ := st.Slot(t.slot.Job, t.slot.Partition)
		leader := held.Owner
		if leader == "" {
			return false, nil
		}
		names := map[string]string{}
		for _, m := range st.Members {
			names[m.ID] = m.Name
		}
		a, err := statusAssignment(st)
		if err != nil || a.Owner(t.slot) != leader {
			return false, err
		}
		t.owner = leader
		for _, p := range t.procs {
			if p.name == names[leader] {
				ownerProc = p
			}
		}
		recs, err := ops.ReadHistory(ctx, t.cli, t.cluster, t.slot.Job, t.slot.Partition, 200)
		return ownerProc != nil && count(recs, func(r history.Record) bool { return r.Member == t.owner }) >= 2, err
	})
	return ownerProc, err
}

// holesIn counts the whole seconds in (first, until) at which the trial's
// slot has no started run in its history.
func holesIn(t *procTrial, first, until time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := ops.ReadHistory(ctx, t.cli, t.cluster, t.slot.Job, t.slot.Partition, 200)
	if err != nil {
		return 0, err
	}
	ran := map[int64]bool{}
	for _, r := range recs {
		if !r.StartedAt.IsZero() {
			ran[r.ScheduledTime.UnixNano()] = true
		}
	}
	return holes(ran, first, until), nil
}

// firstRunElsewhere is failover's change: the first start of the slot by
// another member after the signal, from the slot's history.
func firstRunElsewhere(_ context.Context, t *procTrial) (changeSeen, error) {
	return func(at time.Time) (time.Duration, error) {
		var took time.Duration
		err := waitProcs(t.procs, t.ttl+30*time.Second, func(ctx context.Context) (bool, error) {
			recs, err := ops.ReadHistory(ctx, t.cli, t.cluster, t.slot.Job, t.slot.Partition, 200)
			for _, r := range recs {
				if r.Member != t.owner && !r.StartedAt.IsZero() && r.StartedAt.After(at) && (took == 0 || r.StartedAt.Sub(at) < took) {
					took = r.StartedAt.Sub(at)
				}
			}
			return took > 0, err
		})
		if err != nil {
			return 0, fmt.Errorf("waiting for another member to run the job: %w", err)
		}
		return took, nil
	}, nil
}

// heldElsewhere is handover's change: another member's key leads the
// slot's election (its oldest key is not the owner's), seen by a watch from
// the revision of a read made before the signal, so no event is missed.
func heldElsewhere(ctx context.Context, t *procTrial) (changeSeen, error) {
	prefix := keyspace.Election(t.cluster, t.slot) + "/"
	resp, err := t.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	type candidate struct {
		created int64
		member  string
	}
	keys := map[string]candidate{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = candidate{kv.CreateRevision, string(kv.Value)}
	}
	leader := func() string {
		var lead candidate
		for _, c := range keys {
			if lead.created == 0 || c.created < lead.created {
				lead = c
			}
		}
		return lead.member
	}
	w := t.cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	return func(at time.Time) (time.Duration, error) {
		for wr := range w {
			if err := wr.Err(); err != nil {
				return 0, err
			}
			for _, e := range wr.Events {
				if e.Type == clientv3.EventTypeDelete {
					delete(keys, string(e.Kv.Key))
				} else {
					keys[string(e.Kv.Key)] = candidate{e.Kv.CreateRevision, string(e.Kv.Value)}
				}
			}
			if l := leader(); l != "" && l != t.owner {
				return time.Since(at), nil
			}
		}
		return 0, fmt.Errorf("no other member led the slot: %w", ctx.Err())
	}, nil
}

// startProc starts `kira run` as member name, with the extra arguments
// args, its output to a file in dir.
func startProc(cfg Config, dir, catalog, name string, args ...string) (*memberProc, error) {
	logPath := filepath.Join(dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	argv := append(append([]string{"run", "--catalog", catalog}, cfg.Etcd.Args()...), "--name", name, "--log-level", "warn")
	cmd := exec.Command(cfg.Binary, append(argv, args...)...)
	cmd.Env = append(os.Environ(), cfg.Etcd.Env()...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &memberProc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// startServingProc is startProc for a member serving HTTP, and so
// /metrics (memberProc.metrics), on a free port. A port free a moment ago
// can be taken before the member binds it (an outgoing connection of any
// process takes its local port from the same range), so a member that
// exits for that is started again on another port.
func startServingProc(cfg Config, dir, catalog, name string, args ...string) (*memberProc, error) {
	const attempts = 5
	for i := 1; ; i++ {
		addrs, err := etcdnode.FreeAddrs(1)
		if err != nil {
			return nil, err
		}
		p, err := startProc(cfg, dir, catalog, name, append([]string{"--http", addrs[0]}, args...)...)
		if err != nil {
			return nil, err
		}
		p.metrics = "http://" + addrs[0] + "/metrics"
		taken, err := p.waitServing(addrs[0], time.Minute)
		switch {
		case err != nil:
			p.stop()
			return nil, err
		case !taken:
			return p, nil
		case i == attempts:
			return nil, fmt.Errorf("kira run %s: every port tried was taken before it bound it", name)
		}
	}
}

// waitServing waits until the member accepts connections on addr. It
// tells whether the member exited because addr was taken; any other exit,
// or timeout passing, is an error.
func (p *memberProc) waitServing(addr string, timeout time.Duration) (taken bool, err error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			log, _ := os.ReadFile(p.log)
			if strings.Contains(string(log), "address already in use") {
				return true, nil
			}
			return false, p.exitError(log)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return false, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false, fmt.Errorf("kira run %s did not serve HTTP on %s within %s", p.name, addr, timeout)
}

// stop ends the process gracefully (SIGTERM), or kills it after 10s.
func (p *memberProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited returns an error with the log tail of the first process that
// exited, or nil.
func exited(procs []*memberProc) error {
	for _, p := range procs {
		select {
		case <-p.done:
			if p.ended {
				continue
			}
			log, _ := os.ReadFile(p.log)
			return p.exitError(log)
		default:
		}
	}
	return nil
}

// exitError says the process exited, with the tail of its log.
func (p *memberProc) exitError(log []byte) error {
	return fmt.Errorf("kira run %s exited (%s): %s", p.name, p.cmd.ProcessState, tail(string(log), 2000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// waitProcs polls cond every 10 ms until it holds, a process exits on its
// own, or timeout passes.
func waitProcs(procs []*memberProc, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if err := exited(procs); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := cond(ctx)
		cancel()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("not within %s", timeout), last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func count(recs []history.Record, ok func(history.Record) bool) int {
	n := 0
	for _, r := range recs {
		if ok(r) {
			n++
		}
	}
	return n
}
