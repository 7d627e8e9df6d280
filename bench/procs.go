package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/scheduler"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// procCatalog is the failover job for members in processes of their own:
// the in-process bench's, as YAML, with a command (kira run has no Go
// handlers) and a history long enough to count every fire of a trial.
const procCatalog = `cluster: %s
membership:
  lease_ttl: %s
jobs:
  - name: load
    schedule: "@every 1s"
    command: ["true"]
    misfire: fire-all
    catchup_window: 1m
    overlap: skip
    history_limit: 200
`

// memberProc is one `kira run` process of a trial.
type memberProc struct {
	name, log string
	cmd       *exec.Cmd
	killed    bool          // by the bench, with SIGKILL
	done      chan struct{} // closed when the process has exited and been reaped
}

// procFailover is failover with every member a `kira run` process of the
// bench binary, and the owner killed with SIGKILL, as the issue describes:
// nothing of the member runs after the kill. What the members ran is read
// back from the slot's history in etcd; the first start by another member
// after the kill ends a sample.
func procFailover(cfg Config, ttl time.Duration) (Failover, error) {
	out := Failover{TTL: ttl, Processes: true}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return out, err
	}
	defer cli.Close()
	dir, err := os.MkdirTemp("", "kira-bench-procs")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)
	for trial := 0; trial < cfg.Trials; trial++ {
		d, lost, err := procTrial(cfg, cli, filepath.Join(dir, fmt.Sprint(trial)), ttl)
		if err != nil {
			return out, fmt.Errorf("failover with processes, trial %d: %w", trial+1, err)
		}
		out.Samples = append(out.Samples, d)
		out.Lost += lost
	}
	out.Median = median(out.Samples)
	out.Worst = slices.Max(out.Samples)
	out.RatioTTL = float64(out.Median) / float64(ttl)
	return out, nil
}

func procTrial(cfg Config, cli *clientv3.Client, dir string, ttl time.Duration) (time.Duration, int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	clusterName := cluster("procs")
	catalog := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catalog, []byte(fmt.Sprintf(procCatalog, clusterName, ttl)), 0o600); err != nil {
		return 0, 0, err
	}
	var procs []*memberProc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := 0; i < 3; i++ {
		p, err := startProc(cfg, dir, catalog, fmt.Sprintf("p%d", i))
		if err != nil {
			return 0, 0, err
		}
		procs = append(procs, p)
	}
	slot := shard.Slot{Job: "load"}
	var owner string // member id
	var ownerProc *memberProc
	err := waitProcs(procs, 30*time.Second, func(ctx context.Context) (bool, error) {
		st, err := scheduler.ReadStatus(ctx, cli, clusterName)
		if err != nil || len(st.Members) != len(procs) {
			return false, err
		}
		held, _ := st.Slot(slot.Job, slot.Partition)
		leader := held.Owner
		if leader == "" {
			return false, nil
		}
		names := map[string]string{}
		for _, m := range st.Members {
			names[m.ID] = m.Name
		}
		ring, err := shard.New(slices.Collect(maps.Keys(names)))
		if err != nil || ring.Owner(slot) != leader {
			return false, err
		}
		owner = leader
		for _, p := range procs {
			if p.name == names[leader] {
				ownerProc = p
			}
		}
		recs, err := scheduler.ReadHistory(ctx, cli, clusterName, slot.Job, slot.Partition, 200)
		return ownerProc != nil && count(recs, func(r scheduler.Record) bool { return r.Member == owner }) >= 2, err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("waiting for the ring's owner to run the job twice: %w", err)
	}
	first := time.Now()
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + rand.N(time.Second))))
	at := time.Now()
	ownerProc.killed = true
	if err := ownerProc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, 0, err
	}
	<-ownerProc.done
	var took time.Duration
	err = waitProcs(procs, ttl+30*time.Second, func(ctx context.Context) (bool, error) {
		recs, err := scheduler.ReadHistory(ctx, cli, clusterName, slot.Job, slot.Partition, 200)
		for _, r := range recs {
			if r.Member != owner && !r.StartedAt.IsZero() && r.StartedAt.After(at) && (took == 0 || r.StartedAt.Sub(at) < took) {
				took = r.StartedAt.Sub(at)
			}
		}
		return took > 0, err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("waiting for another member to run the job after the kill: %w", err)
	}
	// Let the catch-up and one more fire happen and be recorded, then count holes.
	end := time.Now().Add(1500 * time.Millisecond)
	time.Sleep(time.Until(end) + 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := scheduler.ReadHistory(ctx, cli, clusterName, slot.Job, slot.Partition, 200)
	if err != nil {
		return 0, 0, err
	}
	ran := map[int64]bool{}
	for _, r := range recs {
		if !r.StartedAt.IsZero() {
			ran[r.ScheduledTime.UnixNano()] = true
		}
	}
	return took, holes(ran, first, end), nil
}

// startProc starts `kira run` as member name, its output to a file in dir.
func startProc(cfg Config, dir, catalog, name string) (*memberProc, error) {
	logPath := filepath.Join(dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(cfg.Binary, "run", "--catalog", catalog, "--etcd", strings.Join(cfg.Endpoints, ","), "--name", name, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &memberProc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
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
			if p.killed {
				continue
			}
			log, _ := os.ReadFile(p.log)
			return fmt.Errorf("kira run %s exited (%s): %s", p.name, p.cmd.ProcessState, tail(string(log), 2000))
		default:
		}
	}
	return nil
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

func count(recs []scheduler.Record, ok func(scheduler.Record) bool) int {
	n := 0
	for _, r := range recs {
		if ok(r) {
			n++
		}
	}
	return n
}
