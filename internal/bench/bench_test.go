package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// A small run of every scenario, every member a kira run process: the
// bench works and its figures are coherent. The load is the command job
// with the probe beside it, so the fork floor is measured too. It asserts
// no timing (figures are for kira bench to print).
func TestSmallRunOfEveryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kira and runs real failovers")
	}
	bin := buildKira(t)
	c := etcdtest.Start(t)
	cfg := Config{Etcd: etcdclient.Config{Endpoints: c.Endpoints()}, Binary: bin, Slots: []int{20}, Duration: 2 * time.Second, Warmup: time.Second,
		TTLs: []time.Duration{2 * time.Second}, Trials: 1, Rebalance: 200, Command: true, Probe: true}
	r, err := Run(context.Background(), cfg, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failover) != 1 || len(r.Failover[0].Samples) != 1 || r.Failover[0].Samples[0] <= 0 {
		t.Fatalf("failover %+v", r.Failover)
	}
	if r.Handover == nil || len(r.Handover.Samples) != 1 {
		t.Fatalf("handover %+v", r.Handover)
	}
	if len(r.Lateness) != 2 || !r.Lateness[1].NoScheduler {
		t.Fatalf("lateness %+v: want the load's row and the fork floor's", r.Lateness)
	}
	l := r.Lateness[0]
	if l.Executor != commandText || l.Expected != 40 || l.Started == 0 || l.Started+l.Skipped+l.NotStarted != 40 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
		t.Fatalf("lateness %+v", l)
	}
	if len(l.ByInstant) != 2 || l.ByInstant[0].Started+l.ByInstant[1].Started != l.Started || l.ByInstant[0].Skipped+l.ByInstant[1].Skipped != l.Skipped {
		t.Fatalf("lateness by instant %+v does not add up to %+v", l.ByInstant, l)
	}
	// The probe is one more slot, counted on its own.
	if p := l.Probe; p == nil || p.Expected != 2 || p.Started+p.Skipped+p.NotStarted != 2 || p.Started == 0 || p.P50 <= 0 || p.P50 > p.Max {
		t.Fatalf("probe %+v", l.Probe)
	}
	if len(r.Rebalance) != 4 || r.Rebalance[0].Moved <= 0 || r.Rebalance[0].Moved >= 1 || r.Rebalance[2].Moved <= 0 || r.Rebalance[2].Moved >= 1 ||
		r.Rebalance[0].Shape != "one job" || !strings.HasSuffix(r.Rebalance[2].Shape, "jobs of 1–16") {
		t.Fatalf("rebalance %+v", r.Rebalance)
	}
	if m := r.Memory; m == nil || m.Slots != 200 || m.Members != 3 || m.BaseHeapBytes < 1<<20 || m.BaseRSSBytes < 1<<20 || m.HeapBytes == 0 {
		t.Fatalf("memory %+v: want the members' and the base member's read from their /metrics", r.Memory)
	}
	// The etcd was not the bench's: what it paid is read from its /metrics.
	// An execution puts its slot's state key, and records share their
	// members' journal keys, one per transaction: well under two keys an
	// execution.
	if c := l.EtcdCost; c == nil || c.Keys <= 0 || c.Keys > 1500+c.Txns || c.WALBytes <= 0 || c.DiskBytes != 0 {
		t.Fatalf("etcd cost %+v: want about a key per execution (its state) and one per transaction (records share journal keys), and some WAL, from etcd's metrics", c)
	}
	t.Logf("%+v", r)
}

// The floor row forks the same commands through Kira's executor without a
// scheduler: every one starts, and its figures are ordered.
func TestForkFloorStartsEveryCommand(t *testing.T) {
	l := forkFloor(context.Background(), 5, 2*time.Second, 0)
	if !l.NoScheduler || l.Expected != 10 || l.Started != 10 || l.NotStarted != 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max {
		t.Fatalf("floor %+v", l)
	}
	l = forkFloor(context.Background(), 5, time.Second, 300*time.Millisecond)
	if l.Jitter != 300*time.Millisecond || l.Started != 5 || l.NotStarted != 0 || l.P50 <= 0 || l.P50 > l.Max {
		t.Fatalf("floor with jitter %+v", l)
	}
}

// With jitter, a fire is due at its slot's offset after its scheduled time,
// and that is what its lateness counts from; a command's fire started when
// its process ran, as its output says.
func TestJitteredFiresAreDueAtTheirOffset(t *testing.T) {
	scheduled := time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)
	from, to := scheduled, scheduled.Add(time.Second)
	for _, command := range []bool{false, true} {
		res := &Figures{}
		tally := newTally(from, to, time.Second, time.Second, command, res)
		load := config.Job{Name: "load", Jitter: time.Second}
		offsets := map[time.Duration]bool{}
		for p := range 8 {
			off := load.JitterOffset(shard.Slot{Job: "load", Partition: p})
			offsets[off] = true
			r := history.Record{Job: "load", Partition: p, ScheduledTime: scheduled, Outcome: string(jobs.Succeeded), Cause: history.CauseSchedule,
				StartedAt: scheduled.Add(off + time.Millisecond)}
			if command {
				ran := scheduled.Add(off + 2*time.Millisecond)
				r.OutputTail = fmt.Sprintf("%d.%09d\n", ran.Unix(), ran.Nanosecond())
			}
			tally.add(r)
		}
		if len(offsets) < 2 {
			t.Fatalf("offsets %v: the slots should spread over the jitter", offsets)
		}
		want := time.Millisecond
		if command {
			want = 2 * time.Millisecond
		}
		if res.NotStarted != 0 || len(tally.late) != 8 || slices.Min(tally.late) != want || slices.Max(tally.late) != want {
			t.Fatalf("command %v: lateness %v (%+v); want %v for each of 8", command, tally.late, res, want)
		}
	}
	if _, ok := processRan("sh: date: not found"); ok {
		t.Fatal("an output that is not an instant read as one")
	}
}

// A load of jobs of one slot each firing every minute is counted by the
// minute: a skip record that took in later skips stands for fires a minute
// apart, and each job's fire is due at its own job's jitter offset.
func TestALoadOfJobsIsCountedByInstant(t *testing.T) {
	from := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	to := from.Add(3 * time.Minute)
	res := &Figures{}
	tally := newTally(from, to, time.Minute, 10*time.Second, false, res)
	cfg := Config{Jobs: true}
	for i := range 4 {
		job := fmt.Sprintf("load-%d", i)
		if !isLoad(job) || !strings.HasPrefix(keyspace.History("c", job), cfg.loadHistory("c")) {
			t.Fatalf("%s is not read as the load's", job)
		}
		off := config.Job{Name: job, Jitter: 10 * time.Second}.JitterOffset(shard.Slot{Job: job})
		tally.add(history.Record{Job: job, ScheduledTime: from, StartedAt: from.Add(off + time.Duration(i+1)*time.Millisecond),
			Outcome: string(jobs.Succeeded), Cause: history.CauseSchedule})
	}
	last := from.Add(3 * time.Minute)
	tally.add(history.Record{Job: "load-0", ScheduledTime: from.Add(time.Minute), Repeats: 2, LastScheduledTime: &last,
		Outcome: history.OutcomeSkipped, Cause: history.CauseSchedule})
	if isLoad("sh-probe") || isLoad("loader") {
		t.Fatal("a job that is not the load's was read as the load's")
	}
	if res.Skipped != 2 || len(tally.late) != 4 || slices.Min(tally.late) != time.Millisecond || slices.Max(tally.late) != 4*time.Millisecond {
		t.Fatalf("skipped %d (want 2: 12:01 and 12:02, not 12:03), lateness %v (want 1 to 4 ms)", res.Skipped, tally.late)
	}
	in := tallied(from, time.Minute, tally.byInstant)
	if len(in) != 3 || in[0].Started != 4 || in[1].Skipped != 1 || in[2].Skipped != 1 || !in[2].At.Equal(from.Add(2*time.Minute)) {
		t.Fatalf("by instant %+v", in)
	}
}

// The lateness load is one job of n partitions, or n jobs of one slot
// each, with its period and policies, in a catalog kira run accepts.
func TestTheLoadIsACatalog(t *testing.T) {
	for _, cfg := range []Config{{}, {Jobs: true, Every: time.Minute}} {
		text := fmt.Sprintf(prodCatalog, "c", loadJobs(cfg, 12, "handler: noop", "overlap: skip, history_limit: 12"), "")
		cat, err := config.Parse("load.yaml", []byte(text))
		if err != nil {
			t.Fatalf("%+v: %v\n%s", cfg, err, text)
		}
		slots := 0
		for _, j := range cat.Jobs {
			if !isLoad(j.Name) || j.Schedule != "@every "+cfg.every().String() || j.HistoryLimit != 12 {
				t.Fatalf("%+v: job %+v", cfg, j)
			}
			slots += j.Partitions
		}
		if want := map[bool]int{false: 1, true: 12}[cfg.Jobs]; len(cat.Jobs) != want || slots != 12 {
			t.Fatalf("%+v: %d jobs, %d slots; want %d jobs, 12 slots", cfg, len(cat.Jobs), slots, want)
		}
	}
}

func TestHolesCountsMissingSeconds(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 29, 12, 0, s, 0, time.UTC) }
	ran := map[int64]bool{at(1).UnixNano(): true, at(2).UnixNano(): true, at(4).UnixNano(): true}
	if lost := holes(ran, at(0).In(time.Local).Add(100*time.Millisecond), at(5)); lost != 1 {
		t.Fatalf("lost %d; want 1 (12:00:03)", lost)
	}
}

// Failover and handover with members in processes of their own: kira run
// processes of a freshly built binary. The owner killed with SIGKILL:
// another member runs the job after the kill and no fire is lost (misfire
// fire-all). The owner sent SIGTERM: another member leads the slot well
// within the lease TTL (6 s), so the lease was revoked, not left to expire,
// and no fire is lost.
func TestProcessFailoverAndHandover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kira and runs a real failover")
	}
	bin := buildKira(t)
	c := etcdtest.Start(t)
	f, err := procFailover(Config{Etcd: etcdclient.Config{Endpoints: c.Endpoints()}, Binary: bin, Trials: 1}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Samples) != 1 || f.Samples[0] <= 0 || f.Median != f.Samples[0] || f.Lost != 0 {
		t.Fatalf("failover %+v", f)
	}
	t.Logf("%+v", f)
	h, err := procHandover(Config{Etcd: etcdclient.Config{Endpoints: c.Endpoints()}, Binary: bin, Trials: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Samples) != 1 || h.Samples[0] <= 0 || h.Samples[0] >= 3*time.Second || h.Lost != 0 {
		t.Fatalf("handover %+v; want one sample under half the TTL, none lost", h)
	}
	t.Logf("%+v", h)
}

// buildKira builds the kira binary into the test's temp dir.
func buildKira(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kira")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kira").CombinedOutput(); err != nil {
		t.Fatalf("building kira: %v\n%s", err, out)
	}
	return bin
}

// The production shape, small: three kira etcd processes, three kira run
// members running an HTTP job that prints, every fire of the window found
// in etcd's history, and what etcd paid counted from its own metrics and
// /proc: fewer keys than executions, and some CPU, disk and database.
func TestProductionShape(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kira and runs six processes")
	}
	bin := buildKira(t)
	cluster, err := StartEtcdCluster(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	cfg := Config{Etcd: etcdclient.Config{Endpoints: cluster.Endpoints}, Cluster: cluster, Binary: bin,
		Duration: 3 * time.Second, Warmup: time.Second, HTTP: true, OutputBytes: 1024}
	l, err := procLateness(cfg, 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v %+v", l.Figures, *l.EtcdCost)
	c := l.EtcdCost
	if l.Expected != 90 || l.Started+l.Skipped+l.NotStarted != l.Expected || l.Started < 80 || l.MemberLost != "" {
		t.Fatalf("lateness %+v", l)
	}
	if c == nil || c.Keys <= 0 || c.Keys > 1500+c.Txns || c.CPUSeconds <= 0 || c.DiskBytes <= 0 || c.WALBytes <= 0 || c.DBBytes <= 0 {
		t.Fatalf("etcd cost %+v: want about a key per execution (its state) and one per transaction (records share journal keys), and some CPU, disk and database", c)
	}
	if k := l.Cores; k == nil || k.Etcd <= 0 || k.Members <= 0 || k.Bench <= 0 || k.Machine < 1 {
		t.Fatalf("cores %+v: want each share measured", k)
	}
	started, skipped := 0, 0
	for _, s := range l.ByInstant {
		started, skipped = started+s.Started, skipped+s.Skipped
	}
	if len(l.ByInstant) != 3 || started != l.Started || skipped != l.Skipped {
		t.Fatalf("lateness by instant %+v does not add up to %+v", l.ByInstant, l.Figures)
	}
	handlerShape(t, cfg)
	soakShape(t, cfg)
	jobWritesShape(t, cfg)
	for _, many := range []bool{false, true} {
		rb, _, err := procRebalance(cfg, 200, many)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rebalance %+v", rb)
		if len(rb) != 2 || rb[0].Change != "3→4" || rb[1].Change != "4→3" {
			t.Fatalf("rebalance %+v: want 3→4 then 4→3", rb)
		}
		for _, b := range rb {
			// 200 slots split evenly: a quarter moves, more with small jobs
			// (their bounds by shape: shard.TestFewMovesManySmallJobs).
			if b.Moved < 0.2 || b.Moved > 0.4 || b.Settle <= 0 || b.Ideal != 0.25 {
				t.Fatalf("rebalance %+v: want about a quarter of the slots moved, by processes", b)
			}
		}
	}
}

// handlerShape runs the lateness load as kira run's built-in Go handler
// noop: every fire of the window starts.
func handlerShape(t *testing.T, cfg Config) {
	t.Helper()
	cfg.HTTP = false
	l, err := procLateness(cfg, 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("go handler %+v", l.Figures)
	if l.Executor != "go-handler" || l.Expected != 90 || l.Started < 80 || l.Started+l.Skipped+l.NotStarted != l.Expected || l.MemberLost != "" {
		t.Fatalf("lateness with the Go handler %+v", l)
	}
}

// soakShape runs a short soak of 30 slots on cfg's cluster, sampled every
// 2 s, and checks every sample and the summary hold what was measured.
func soakShape(t *testing.T, cfg Config) {
	t.Helper()
	cfg.Soak, cfg.SoakSlots, cfg.SoakEvery = 12*time.Second, 30, 2*time.Second
	s, err := procSoak(context.Background(), cfg, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("soak %+v", s.Summary)
	if s.MemberLost != "" || len(s.Samples) < 6 || s.Duration < cfg.Soak || s.QuotaBytes < 1<<30 {
		t.Fatalf("soak %+v: want 12 s of samples every 2 s, no member lost, etcd's default 2 GiB quota read", s)
	}
	for _, x := range s.Samples {
		if x.DBBytes <= 0 || x.DBInUseBytes <= 0 || len(x.RSSBytes) != 3 || len(x.Goroutines) != 3 {
			t.Fatalf("sample %+v: want the database sizes and each member's memory and goroutines", x)
		}
		for i := range x.RSSBytes {
			if x.RSSBytes[i] < 1<<20 || x.Goroutines[i] < 10 {
				t.Fatalf("sample %+v: member %d's memory or goroutines not read", x, i)
			}
		}
	}
	last, sum := s.Samples[len(s.Samples)-1], s.Summary
	// 30 slots a second for 12 s, counted from the first sample.
	if sum.Executions != last.Executions || sum.Executions < 250 || sum.Executions > 450 || sum.Failed != 0 {
		t.Fatalf("summary %+v, last sample %+v: want about 360 executions, none failed", sum, last)
	}
	if sum.DBMax < last.DBBytes || sum.RSSFirstQuarter <= 0 || sum.RSSLastQuarter <= 0 || sum.GoroutinesMin < 10 || sum.GoroutinesMax < sum.GoroutinesMin {
		t.Fatalf("summary %+v does not sum up the samples", sum)
	}
}

// jobWritesShape creates 40 jobs through the members' API over 50 stored
// ones, then deletes them: every write answered, every created job's first
// fire on time, none after its delete; a churn of 20 seconds is sampled.
func jobWritesShape(t *testing.T, cfg Config) {
	t.Helper()
	cfg.SoakEvery = 5 * time.Second
	cfg.JobWrites = &JobWritesConfig{Stored: 50, Clients: 4, Creates: 40, CreatedEvery: 2 * time.Second, Churn: 12 * time.Second, ChurnRate: 5}
	w, err := procJobWrites(context.Background(), cfg, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("job writes %+v", w)
	if w.Creates.Done != 40 || w.Creates.Failed != 0 || w.Deletes.Done != 40 || w.Deletes.Failed != 0 || w.Creates.PerSecond <= 0 || w.Creates.P99 <= 0 {
		t.Fatalf("writes %+v %+v: want every create and delete answered", w.Creates, w.Deletes)
	}
	if f := w.FirstFires; f.Expected != 40 || f.Started != 40 || w.FirstOverwritten != 0 || w.FiredAfterDelete != 0 || w.MemberLost != "" {
		t.Fatalf("first fires %+v, %d fired after a delete, lost %q: want every created job fired once on time, none after its delete", f, w.FiredAfterDelete, w.MemberLost)
	}
	if len(w.Churn) < 2 || w.Churn[0].DBBytes <= 0 || len(w.Churn[0].RSSBytes) != 3 {
		t.Fatalf("churn samples %+v: want the database and three members' memory sampled", w.Churn)
	}
}
