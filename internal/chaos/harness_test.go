package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

var (
	kiraBin, writerBin string
	seedFlag           = flag.Uint64("chaos.seed", 0, "TestRandomFaults: the first schedule's seed (0: drawn from the clock)")
	seedsFlag          = flag.Int("chaos.seeds", 1, "TestRandomFaults: how many schedules to run, seeds seed, seed+1, …")
	faultsFlag         = flag.Int("chaos.faults", 5, "TestRandomFaults: faults per schedule")
	journalFlag        = flag.Int("chaos.journal", 16, "TestRandomFaults: keys in each member's journal, few so they wrap round (0: kira run's default)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "kira-chaos")
	if err != nil {
		panic(err)
	}
	kiraBin, writerBin = filepath.Join(dir, "kira"), filepath.Join(dir, "writer")
	for bin, pkg := range map[string]string{kiraBin: "../../cmd/kira", writerBin: "./writer"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	printTable()
	if code == 0 {
		if err := goleak.Find(etcdtest.IgnoredGoroutines()...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// ttl is the members' lease TTL: short, so that a fault's outage is short.
const ttl = 2 * time.Second

// sweepWork is how long the command job works between its begin and its
// write: longer than a takeover (TTL + detection), so that a write begun just
// before its member froze lands after the next leader raised the fence.
const sweepWork = 3500 * time.Millisecond

// holdWork is how long each run of the quota job works at the witness
// (POST /hold): shorter than the least time a frozen member's lease outlives
// its freeze (TTL minus a renewal interval), so the run of a frozen member
// that holds a permit is done before its permit can pass to another run; a
// run that outlived its lease would be counted as one too many
// (judgeConcurrency), as it should be.
const holdWork = 400 * time.Millisecond

// The catalog every test runs: 18 slots of five jobs, one per misfire policy
// and executor kind and one with a concurrency limit, all writing through
// the witness.
const catalogTemplate = `cluster: chaos
membership:
  lease_ttl: 2s
jobs:
  - name: ledger           # HTTP, every missed fire must run
    schedule: "@every 1s"
    partitions: 6
    misfire: fire-all
    catchup_window: 2m
    timeout: 5s
    fence_url: "{{W}}/fence"
    http: {url: "{{W}}/write", method: POST}
  - name: report           # HTTP, indivisible, one run for a gap
    schedule: "@every 1s"
    misfire: fire-once
    timeout: 5s
    fence_url: "{{W}}/fence"
    http: {url: "{{W}}/write", method: POST}
  - name: digest           # HTTP, a gap is skipped
    schedule: "@every 1s"
    partitions: 2
    misfire: skip
    timeout: 5s
    fence_url: "{{W}}/fence"
    http: {url: "{{W}}/write", method: POST}
  - name: sweep            # command: begins, works, then writes
    schedule: "@every 5s"
    partitions: 3
    misfire: fire-all
    catchup_window: 2m
    overlap: queue        # a fire during a catch-up's re-run waits for it
    timeout: 20s
    fence_url: "{{W}}/fence"
    command: ["{{WRITER}}", "{{W}}", "{{WORK}}"]
  - name: quota            # HTTP, at most 2 of its 6 slots run at once
    schedule: "@every 3s"
    partitions: 6
    max_running: 2
    misfire: fire-once
    overlap: queue        # a fire that comes while one waits for a permit waits too
    timeout: 5s
    fence_url: "{{W}}/fence"
    http: {url: "{{W}}/hold?work={{HOLD}}", method: POST}
`

// cluster is one test's world: three kira etcd processes, kira run members
// whose etcd connections each go through a fault proxy, and the witness.
type cluster struct {
	t          *testing.T
	dir        string
	witness    *Witness
	witnessURL string
	catalog    string
	cat        *config.Catalog
	loadSlots  int      // the load job's slots, in the members' catalog but not in cat
	memberArgs []string // added to every kira run
	statesMu   sync.Mutex
	states     []StateWrite  // every state written, from the watch
	records    []RecordWrite // every record of cat's jobs not a success, from the watch
	statesErr  error         // why the watch missed writes, if it did
	etcd       []*etcdNode
	cli        *clientv3.Client // the test's own, straight to etcd
	members    []*memberProc
	started    time.Time
}

type etcdNode struct {
	name, clientURL string
	args            []string
	proc            *etcdtest.Process
}

// memberProc is one kira run process and the proxies its etcd traffic takes.
type memberProc struct {
	name    string
	proc    *etcdtest.Process
	past    []*etcdtest.Process // its processes before restarts, for their output
	proxies []proxy.Server
}

func newCluster(t *testing.T, members int) *cluster { return newLoadedCluster(t, members, 0, "") }

// loadJob is the catalog entry of the load a test may add: noop slots
// firing every second, so the members' writers are busy. The checker does
// not judge them (they write nowhere); they only load etcd and the writers.
const loadJob = `  - name: load
    schedule: "@every 1s"
    partitions: %d
    handler: noop
`

// newLoadedCluster is newCluster with the load job of loadSlots partitions
// (none if 0) in the members' catalog, the jobs of extra (catalog entries
// in catalogTemplate's terms) judged with the others, and memberArgs added
// to every kira run.
func newLoadedCluster(t *testing.T, members, loadSlots int, extra string, memberArgs ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), witness: NewWitness(), started: time.Now(), memberArgs: memberArgs}
	srv := httptest.NewServer(c.witness)
	t.Cleanup(srv.Close)
	c.witnessURL = srv.URL
	text := strings.NewReplacer("{{W}}", srv.URL, "{{WRITER}}", writerBin, "{{WORK}}", sweepWork.String(), "{{HOLD}}", holdWork.String()).Replace(catalogTemplate + extra)
	cat, err := config.Parse("catalog.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	c.cat = cat // what the checker judges
	c.loadSlots = loadSlots
	if loadSlots > 0 {
		text += fmt.Sprintf(loadJob, loadSlots)
	}
	c.catalog = filepath.Join(c.dir, "catalog.yaml")
	if err := os.WriteFile(c.catalog, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	addrs, err := etcdnode.FreeAddrs(6)
	if err != nil {
		t.Fatal(err)
	}
	var peers, initial []string
	for i := 0; i < 3; i++ {
		c.etcd = append(c.etcd, &etcdNode{name: fmt.Sprintf("e%d", i), clientURL: "http://" + addrs[2*i]})
		peers = append(peers, "http://"+addrs[2*i+1])
		initial = append(initial, fmt.Sprintf("e%d=%s", i, peers[i]))
	}
	var urls []string
	for i, e := range c.etcd {
		e.args = []string{"etcd", "--name", e.name, "--data-dir", filepath.Join(c.dir, e.name),
			"--listen-client-urls", e.clientURL, "--advertise-client-urls", e.clientURL,
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new"}
		e.proc = etcdtest.StartProcess(t, kiraBin, e.args...)
		urls = append(urls, e.clientURL)
	}
	c.cli = etcdtest.NewClient(t, urls...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := etcdtest.WaitHealthy(ctx, c.cli); err != nil {
		t.Fatalf("etcd cluster never became healthy: %v", err)
	}
	c.watchStates()
	for i := 0; i < members; i++ {
		c.addMember(fmt.Sprintf("m%d", i))
	}
	c.waitSettled(members, time.Minute)
	c.waitAllFiring(time.Minute)
	return c
}

// watchStates logs every state etcd commits for a slot, from the
// cluster's first revision until the test ends: in its state key, and with
// each record in a journal entry or a history ring. It is the checker's
// proof of which results were recorded (Spec.States).
func (c *cluster) watchStates() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.t.Cleanup(func() { cancel(); kiratest.Receive(c.t, done, 10*time.Second, "the state watch to stop") })
	go func() {
		defer close(done)
		for resp := range c.cli.Watch(ctx, keyspace.Cluster("chaos"), clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithFilterDelete()) {
			c.statesMu.Lock()
			if err := resp.Err(); err != nil && c.statesErr == nil && ctx.Err() == nil {
				c.statesErr = err
			}
			for _, ev := range resp.Events {
				states, records := writesIn(ev.Kv)
				c.states = append(c.states, states...)
				for _, r := range records {
					if _, ours := c.cat.Job(r.Record.Job); ours && r.Record.Outcome != string(jobs.Succeeded) {
						c.records = append(c.records, r)
					}
				}
			}
			c.statesMu.Unlock()
		}
	}()
}

// writesIn are the slot states and the history records kv holds (each
// journal entry or history record decoded once): a state key's state, or a
// journal entry's or history record's states and records, a skip they
// carry included.
func writesIn(kv *mvccpb.KeyValue) (states []StateWrite, records []RecordWrite) {
	const cluster = "chaos"
	key := string(kv.Key)
	if rest, ok := strings.CutPrefix(key, keyspace.Cluster(cluster)+"state/"); ok {
		job, partition, _ := strings.Cut(rest, "/")
		p, err := strconv.Atoi(partition)
		if err != nil {
			return nil, nil
		}
		if st, err := history.DecodeState(shard.Slot{Job: job, Partition: p}, kv.Value); err == nil {
			states = append(states, StateWrite{Slot: rest, Revision: kv.ModRevision, State: st})
		}
		return states, nil
	}
	var items []history.JournalItem
	if _, ok := keyspace.ParseJournalEntry(cluster, key); ok {
		items, _ = history.JournalItems(cluster, kv)
	} else if s, ok := keyspace.ParseHistoryEntry(cluster, key); ok {
		if st, err := history.DecodeEntry(cluster, kv); err == nil {
			items = []history.JournalItem{{Slot: s, Stored: st}}
		}
	}
	for _, it := range items {
		if it.Stored.State != nil {
			states = append(states, StateWrite{Slot: it.Slot.String(), Revision: kv.ModRevision, State: *it.Stored.State})
		}
		for _, r := range it.Stored.Records() {
			records = append(records, RecordWrite{Revision: kv.ModRevision, Record: r})
		}
	}
	return states, records
}

// recordLog is the records of cat's jobs, not successes, written so far,
// or nil if the watch missed some.
func (c *cluster) recordLog() []RecordWrite {
	c.statesMu.Lock()
	defer c.statesMu.Unlock()
	if c.statesErr != nil {
		return nil
	}
	return slices.Clone(c.records)
}

// stateLog is the slots' states written so far, or nil (with a log line) if
// the watch missed some.
func (c *cluster) stateLog() []StateWrite {
	c.statesMu.Lock()
	defer c.statesMu.Unlock()
	if c.statesErr != nil {
		c.t.Logf("the state keys' watch missed writes (%v): their check is skipped", c.statesErr)
		return nil
	}
	return slices.Clone(c.states)
}

// addMember starts kira run as name, with one proxy per etcd member.
func (c *cluster) addMember(name string) *memberProc {
	c.t.Helper()
	m := &memberProc{name: name}
	var endpoints []string
	for _, e := range c.etcd {
		to, _ := url.Parse(e.clientURL)
		from := url.URL{Scheme: "tcp", Host: freePort(c.t)}
		p := proxy.NewServer(proxy.ServerConfig{Logger: zap.NewNop(), From: from, To: *to})
		select {
		case <-p.Ready():
		case err := <-p.Error():
			c.t.Fatalf("proxy %s: %v", from.Host, err)
		}
		c.t.Cleanup(func() { p.Close() })
		m.proxies = append(m.proxies, p)
		endpoints = append(endpoints, "http://"+from.Host)
	}
	args := []string{"run", "--catalog", c.catalog, "--etcd", strings.Join(endpoints, ","), "--name", name, "--grace", "10s"}
	m.proc = etcdtest.StartProcess(c.t, kiraBin, append(args, c.memberArgs...)...)
	c.members = append(c.members, m)
	return m
}

// restart starts a member process again (a new incarnation, a new id), on
// the same proxies.
func (c *cluster) restart(m *memberProc, offset time.Duration) {
	c.t.Helper()

	var endpoints []string
	for _, p := range m.proxies {
		endpoints = append(endpoints, strings.Replace(p.From(), "tcp://", "http://", 1))
	}
	args := []string{"run", "--catalog", c.catalog, "--etcd", strings.Join(endpoints, ","), "--name", m.name,
		"--grace", "10s", "--clock-offset", offset.String()}
	m.past = append(m.past, m.proc)
	m.proc = etcdtest.StartProcess(c.t, kiraBin, append(args, c.memberArgs...)...)
}

// status is kira status -o json, as an operator would read it.
type status struct {
	Members []member.Record `json:"members"`
	Slots   []struct {
		Job       string `json:"job"`
		Partition int    `json:"partition"`
		Owner     string `json:"owner"`
		Token     int64  `json:"token"`
	} `json:"slots"`
}

func (c *cluster) status() (status, error) {
	var urls []string
	for _, e := range c.etcd {
		urls = append(urls, e.clientURL)
	}
	cmd := exec.Command(kiraBin, "status", "-o", "json", "--etcd", strings.Join(urls, ","), "--cluster", "chaos")
	out, err := cmd.Output()
	if err != nil {
		return status{}, fmt.Errorf("kira status: %v: %s", err, out)
	}
	var st status
	return st, json.Unmarshal(out, &st)
}

// slotCount is the number of slots in the catalog.
func (c *cluster) slotCount() int {
	n := 0
	for _, j := range c.cat.Jobs {
		n += j.Partitions
	}
	return n
}

// waitSettled waits until n members are registered and every slot is owned
// by one of them, and returns that status.
func (c *cluster) waitSettled(n int, timeout time.Duration) status {
	c.t.Helper()
	var st status
	var err error
	c.eventually(fmt.Sprintf("%d members owning every slot", n), timeout, func() bool {
		if st, err = c.status(); err != nil {
			return false
		}
		live := map[string]bool{}
		for _, m := range st.Members {
			live[m.ID] = true
		}
		for _, s := range st.Slots {
			if !live[s.Owner] {
				return false
			}
		}
		return len(st.Members) == n && len(st.Slots) == c.slotCount()+c.loadSlots
	})
	return st
}

// waitAllFiring waits until every slot has had a write accepted after now.
func (c *cluster) waitAllFiring(timeout time.Duration) {
	c.t.Helper()
	since := time.Now()
	c.eventually("every slot firing", timeout, func() bool {
		seen := map[string]bool{}
		for _, a := range c.witness.Attempts() {
			if a.Kind == Write && a.Outcome == Accepted && a.At.After(since) {
				seen[a.Slot()] = true
			}
		}
		return len(seen) == c.slotCount()
	})
}

// waitWrittenThrough waits until every slot's fires scheduled before until
// have had their chance: a write accepted for a scheduled time at or after
// until (sweep's writes come sweepWork after its fires).
func (c *cluster) waitWrittenThrough(until time.Time, timeout time.Duration) {
	c.t.Helper()
	// Not fatal: the checker says which fires are missing.
	kiratest.PollEach(timeout, 100*time.Millisecond, func() bool {
		done := map[string]bool{}
		for _, a := range c.witness.Attempts() {
			if a.Kind == Write && a.Outcome == Accepted && !a.Scheduled.Before(until) {
				done[a.Slot()] = true
			}
		}
		return len(done) == c.slotCount()
	})
}

// byID finds the member whose current incarnation has id.
func (c *cluster) byID(st status, id string) *memberProc {
	for _, r := range st.Members {
		if r.ID == id {
			for _, m := range c.members {
				if m.name == r.Name && !m.proc.Exited() {
					return m
				}
			}
		}
	}
	return nil
}

// idOf returns the id the member's current incarnation registered.
func (c *cluster) idOf(st status, m *memberProc) string {
	for _, r := range st.Members {
		if r.Name == m.name {
			return r.ID
		}
	}
	return ""
}

// mostSlots returns the member leading the most slots, optionally only
// among those leading a slot of job.
func (c *cluster) mostSlots(st status, job string) (*memberProc, string) {
	owned := map[string]int{}
	eligible := map[string]bool{}
	for _, s := range st.Slots {
		owned[s.Owner]++
		if job == "" || s.Job == job {
			eligible[s.Owner] = true
		}
	}
	var ids []string
	for id := range eligible {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return owned[ids[i]] > owned[ids[j]] })
	if len(ids) == 0 {
		c.t.Fatalf("no member leads a slot of %q", job)
	}
	m := c.byID(st, ids[0])
	if m == nil {
		c.t.Fatalf("member %s is not one of ours", ids[0])
	}
	return m, ids[0]
}

// cut black-holes the member's etcd traffic both ways; heal undoes it.
func (m *memberProc) cut() {
	for _, p := range m.proxies {
		p.BlackholeTx()
		p.BlackholeRx()
	}
}

// loseAnswers drops what etcd sends the member (its proxies forward its
// requests, and etcd applies them): every write it makes meanwhile is
// "maybe applied", answered with an error or not at all. Healed, its
// connections, cut mid-stream, are made anew.
func (m *memberProc) loseAnswers() {
	for _, p := range m.proxies {
		p.BlackholeRx()
	}
}

func (m *memberProc) heal() {
	for _, p := range m.proxies {
		p.UnblackholeTx()
		p.UnblackholeRx()
		p.UndelayTx()
	}
}

// delay adds latency ± jitter to every request the member sends to etcd.
func (m *memberProc) delay(latency, jitter time.Duration) {
	for _, p := range m.proxies {
		p.DelayTx(latency, jitter)
	}
}

// etcdLeader returns the index of the etcd member that leads, among the
// running ones.
func (c *cluster) etcdLeader() int {
	c.t.Helper()
	for try := 0; try < 100; try++ {
		for i, e := range c.etcd {
			if e.proc.Exited() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := c.cli.Status(ctx, strings.TrimPrefix(e.clientURL, "http://"))
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatal("no etcd leader")
	return -1
}

func (c *cluster) eventually(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	if !kiratest.PollEach(timeout, 100*time.Millisecond, cond) {
		c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// spec is the checker's spec for the history from `from` on.
func (c *cluster) spec(from, to time.Time, faults ...Fault) Spec {
	return Spec{Catalog: c.cat, From: from, To: to, Born: c.started.Truncate(time.Second), Faults: faults, OnTime: time.Second, Recovery: recoveryBound,
		Work: map[string]time.Duration{"sweep": sweepWork}, Timed: []string{"ledger", "report", "digest"}}
}

// recoveryBound is how long after a fault heals the cluster may take to be
// back at full speed: every fire of the 1 s HTTP jobs accepted, within
// OnTime of its schedule. A takeover is a TTL plus detection; after a quorum
// loss the members also rejoin. Sweep (3.5 s of work a run) is not timed: a
// takeover re-runs its unfinished fire and catches its missed fires up one
// after another, so its lateness measures its own work.
const recoveryBound = 4 * ttl

// finish closes the test's window at now (on a whole second), waits for the
// fires inside it to write, checks the history, records the row of the
// summary table and fails the test on any violation.
func (c *cluster) finish(fault string, from time.Time, faults []Fault, adjust ...func(*Spec)) Report {
	c.t.Helper()
	to := time.Now().Truncate(time.Second)
	c.waitWrittenThrough(to, 30*time.Second)
	spec := c.spec(from, to, faults...)
	for _, f := range c.observedFaults(faults, spec.OnTime) {
		c.t.Logf("observed, not injected: %s at %s", f.Name, f.Heal.Format("15:04:05.000"))
		spec.Faults = append(spec.Faults, f)
	}
	spec.States = c.stateLog()
	spec.Records = c.recordLog()
	for _, f := range adjust {
		f(&spec)
	}
	rep := Check(c.witness.Attempts(), spec)
	var faultTime time.Duration
	for _, f := range faults {
		faultTime += f.Heal.Sub(f.Start)
	}
	recordRow(row{fault: fault, window: to.Sub(from), faultTime: faultTime, rep: rep, timing: spec.Recovery > 0})
	for _, f := range faults {
		c.t.Logf("fault %q: %s → %s, may drop until %s", f.Name, f.Start.Format("15:04:05.000"), f.Heal.Format("15:04:05.000"), f.Start.Add(f.MayDrop).Format("15:04:05.000"))
	}
	c.t.Logf("%s: window %s → %s: %s", fault, from.Format("15:04:05"), to.Format("15:04:05"), rep.summary())
	for _, v := range rep.Violations {
		c.t.Errorf("violation: %s", v)
	}
	if !rep.OK() {
		c.logHistory(rep)
	}
	if rep.Overlapped > 0 {
		c.logOverlapSkips(from, to)
	}
	if rep.Replays > 0 {
		c.logReplays()
	}
	return rep
}

// logReplays logs the fires that ran again (the first ten): a replay is
// expected after a crash between an execution's write and its result's
// record, and suspect anywhere else.
func (c *cluster) logReplays() {
	c.t.Helper()
	first := map[string]Attempt{}
	var b strings.Builder
	n := 0
	for _, a := range c.witness.Attempts() {
		switch {
		case a.Kind != Write:
		case a.Outcome == Accepted:
			first[a.ExecutionID] = a
		case a.Outcome == Replay && n < 10:
			n++
			f := first[a.ExecutionID]
			fmt.Fprintf(&b, "  %s scheduled %s: again at %s by %s (token %d); first at %s by %s (token %d)\n", a.Slot(), a.Scheduled.Format("15:04:05"),
				a.At.Format("15:04:05.000"), a.Member, a.Token, f.At.Format("15:04:05.000"), f.Member, f.Token)
		}
	}
	c.t.Logf("replays (a fire run again with its execution id; the witness let it take no effect):\n%s", b.String())
}

// logOverlapSkips logs the skip records of the overlap policy (the first
// ten) of fires scheduled in [from, to): the missed fires the checker let
// pass as Report.Overlapped.
func (c *cluster) logOverlapSkips(from, to time.Time) {
	c.t.Helper()
	var b strings.Builder
	seen := map[string]bool{} // a record is committed again when it moves from a journal to a ring
	for _, w := range c.recordLog() {
		r := w.Record
		k := fmt.Sprintf("%s/%d %d", r.Job, r.Partition, r.ScheduledTime.UnixNano())
		if !overlapSkip(r) || r.ScheduledTime.Before(from) || !r.ScheduledTime.Before(to) || seen[k] || len(seen) == 10 {
			continue
		}
		seen[k] = true
		fmt.Fprintf(&b, "  %s/%d scheduled %s (and %d more): %s, at %s by %s (token %d)\n", r.Job, r.Partition, r.ScheduledTime.Format("15:04:05.000"),
			r.Repeats, r.Error, r.StartedAt.Format("15:04:05.000"), r.Member, r.Token)
	}
	c.t.Logf("fires the overlap policy skipped:\n%s", b.String())
}

// logHistory logs the witness's log of each slot a violation names.
func (c *cluster) logHistory(rep Report) {
	c.t.Helper()
	named := map[string]bool{}
	for _, v := range rep.Violations {
		if slot, _, ok := strings.Cut(v, ": "); ok && strings.Contains(slot, "/") {
			named[slot] = true
		}
	}
	var b strings.Builder
	for _, a := range c.witness.Attempts() {
		if named[a.Slot()] {
			fmt.Fprintf(&b, "  #%d %s %s %s token %d member %s scheduled %s id %s\n", a.Seq, a.At.Format("15:04:05.000"), a.Slot(), a.Kind+"/"+Kind(a.Outcome),
				a.Token, a.Member, a.Scheduled.Format("15:04:05.000"), a.ExecutionID)
		}
	}
	c.t.Logf("witness log of the slots named above:\n%s", b.String())
	b.Reset()
	for _, w := range c.recordLog() {
		r := w.Record
		if named[fmt.Sprintf("%s/%d", r.Job, r.Partition)] {
			last := ""
			if r.LastScheduledTime != nil {
				last = " through " + r.LastScheduledTime.Format("15:04:05.000")
			}
			fmt.Fprintf(&b, "  rev %d %s/%d scheduled %s%s: %s (%s) at %s, member %s token %d attempt %d trigger %s\n", w.Revision, r.Job, r.Partition,
				r.ScheduledTime.Format("15:04:05.000"), last, r.Outcome, r.Error, r.StartedAt.Format("15:04:05.000"), r.Member, r.Token, r.Attempt, r.Cause)
		}
	}
	c.t.Logf("their records in etcd other than successes:\n%s", b.String())
}

// windowStart is the first whole second after now: the window of a check.
func windowStart() time.Time { return time.Now().Truncate(time.Second).Add(time.Second) }

func freePort(t *testing.T) string { return etcdtest.FreeAddr(t) }

// The summary table, one row per fault test that ran.
type row struct {
	fault     string
	window    time.Duration
	faultTime time.Duration
	rep       Report
	timing    bool
}

var (
	tableMu sync.Mutex
	table   []row
)

func recordRow(r row) {
	tableMu.Lock()
	defer tableMu.Unlock()
	table = append(table, r)
}

// maxListed is how many violations of one row the summary lists.
const maxListed = 10

// printTable prints the summary, and each failed row's violations, to
// stdout and, if $KIRA_CHAOS_TABLE names a file, appends it there (CI
// prints that file after the tests, where a shortened log still shows it).
func printTable() {
	tableMu.Lock()
	defer tableMu.Unlock()
	if len(table) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| fault | window | fault time | expected | accepted | rejected stale | replays | forbidden replays | duplicates | missed (allowed by policy) | back to full speed |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range table {
		var rec []string
		for _, name := range sortedKeys(r.rep.Recovered) {
			d := r.rep.Recovered[name]
			if d < 0 {
				rec = append(rec, name+": never")
			} else {
				rec = append(rec, fmt.Sprintf("%s: %s", name, d.Round(10*time.Millisecond)))
			}
		}
		if !r.timing {
			rec = []string{"not timed"}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %d | %d | %d (%s) | %s |\n", r.fault, r.window.Round(time.Second), r.faultTime.Round(100*time.Millisecond),
			r.rep.Expected, r.rep.Accepted, r.rep.Stale, r.rep.Replays, r.rep.Forbidden, r.rep.Duplicates, r.rep.Missed, dropped(r.rep), strings.Join(rec, "; "))
	}
	for _, r := range table {
		if len(r.rep.Violations) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nviolations of %q:\n", r.fault)
		for i, v := range r.rep.Violations {
			if i == maxListed {
				fmt.Fprintf(&b, "- and %d more\n", len(r.rep.Violations)-i)
				break
			}
			fmt.Fprintf(&b, "- %s\n", v)
		}
	}
	fmt.Print(b.String())
	if path := os.Getenv("KIRA_CHAOS_TABLE"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			f.WriteString(b.String())
			f.Close()
		}
	}
}

func dropped(r Report) string {
	var parts []string
	for _, p := range []config.Misfire{config.MisfireFireOnce, config.MisfireSkip} {
		if n := r.Dropped[p]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p, n))
		}
	}
	if r.Overlapped > 0 {
		parts = append(parts, fmt.Sprintf("overlap %d", r.Overlapped))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]time.Duration) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// signal sends sig to the member's process.
func (m *memberProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := m.proc.Signal(sig); err != nil {
		t.Fatalf("%v to %s: %v", sig, m.name, err)
	}
}
