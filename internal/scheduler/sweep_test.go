package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/sweep"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// storedCatalog stores cat as kira apply does (the per-job layout), and
// returns it as read back: its jobs with their create revisions.
func storedCatalog(t *testing.T, cli *clientv3.Client, cat *config.Catalog) *config.Catalog {
	t.Helper()
	if _, err := config.PutJobs(context.Background(), cli, cat, config.Source{By: config.ByApply, At: time.Now().UTC()}, 0); err != nil {
		t.Fatal(err)
	}
	return readCatalog(t, cli, cat.Cluster)
}

func readCatalog(t *testing.T, cli *clientv3.Client, cluster string) *config.Catalog {
	t.Helper()
	s, err := config.Read(context.Background(), cli, cluster, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s.Catalog
}

// recreate deletes job and creates it again with body, as a single-job
// writer does, and returns its new create revision.
func recreate(t *testing.T, cli *clientv3.Client, cluster, job, body string) int64 {
	t.Helper()
	ctx := context.Background()
	by := config.ManagerAPI("test")
	if _, err := config.DeleteJob(ctx, cli, cluster, job, config.DeleteJobOptions{Manager: by, Force: true}); err != nil {
		t.Fatal(err)
	}
	put, err := config.PutJob(ctx, cli, cluster, []byte(body), job, config.PutJobOptions{Manager: by, CreateOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return put.Revision
}

// follow makes n converge to every catalog stored after cat's revision, as
// a member's incarnation does, until the test ends.
func follow(t *testing.T, cli *clientv3.Client, n *node, cluster string) {
	t.Helper()
	s, err := config.Read(context.Background(), cli, cluster, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.sched.SetCatalog(s.Catalog, s.Revision); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		config.WatchStored(ctx, cli, cluster, s, func(u config.Update) {
			if err := n.sched.SetCatalogUpdate(u); err != nil {
				t.Errorf("catalog %d: %v", u.Revision, err)
			}
		}, func(rev int64, err error) { t.Errorf("catalog %d unreadable: %v", rev, err) })
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// jobKeys counts the keys of job's slots and controls: state, history,
// control and election keys.
func jobKeys(t *testing.T, cli *clientv3.Client, cluster, job string) int64 {
	t.Helper()
	n := int64(0)
	for _, prefix := range []string{keyspace.JobStates(cluster, job), keyspace.History(cluster, job), keyspace.JobControl(cluster, job), keyspace.JobElections(cluster, job)} {
		n += keyCount(t, cli, prefix)
	}
	return n
}

// keyCount counts the keys under prefix.
func keyCount(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// slotState reads a slot's state key; false when there is none.
func slotState(t *testing.T, cli *clientv3.Client, cluster string, s shard.Slot) (history.SlotState, bool) {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.State(cluster, s))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return history.SlotState{}, false
	}
	st, err := history.DecodeState(s, resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return st, true
}

const tickBody = "schedule: '@every 10s'\nhandler: noop\nmisfire: fire-all\ncatchup_window: 1h\n"

// A job deleted and created again under its name is a new job: a member
// that takes its slot over reads the state its predecessor left (a fire
// in doubt, fires since) as not its own, and neither retries the fire in
// doubt nor catches up the fires since, under misfire fire-all; it fires
// from its schedule, and the predecessor's records and manual runs go
// with its first write.
func TestARecreatedJobDoesNotCatchUpItsPredecessorsFires(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := storedCatalog(t, cli, catalog("afresh", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", Misfire: config.MisfireFireAll, CatchupWindow: time.Hour})))
	rec := newRecorder()
	release := make(chan struct{})
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": blockUntil(release)}, nodeOpts{manual: clock})
	waitKind(t, rec, "a raised", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	clock.Advance(10 * time.Second) // 12:00:10.5: tick starts, and is in doubt when a's lease ends
	waitKind(t, rec, "a's run of 12:00:10", 1, func(e Event) bool { return e.Kind == Started && e.Member == a.id })
	slot := shard.Slot{Job: "tick"}
	waitUntil(t, "the run's start recorded", 10*time.Second, func() bool {
		st, ok := slotState(t, cli, "afresh", slot)
		return ok && st.Unfinished() && st.Started.Equal(sec(10))
	})
	if _, err := cli.Revoke(ctx, a.member.Lease()); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "a lost the slot", 1, func(e Event) bool { return e.Kind == Lost && e.Member == a.id })
	close(release)
	if _, err := ops.RequestRun(ctx, cli, "afresh", []shard.Slot{slot}); err != nil { // a manual run of the job about to be deleted
		t.Fatal(err)
	}
	created := recreate(t, cli, "afresh", "tick", tickBody)
	clock.Advance(50 * time.Second) // 12:01:00.5: 20 to 60 passed with nobody
	b := startNode(t, cli, readCatalog(t, cli, "afresh"), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "b raised", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	waitUntil(t, "b's first write", 10*time.Second, func() bool {
		st, ok := slotState(t, cli, "afresh", slot)
		return ok && int64(st.Token) > created
	})
	clock.Advance(10 * time.Second) // 12:01:10.5
	waitKind(t, rec, "b's run of 12:01:10", 1, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	got := started(rec.all(), b.id)
	for _, e := range got {
		t.Logf("b started %v %s attempt %d", e.Execution.ScheduledTime, e.Cause, e.Attempt)
	}
	if len(got) != 1 || !got[0].Execution.ScheduledTime.Equal(sec(70)) || got[0].Cause != history.CauseSchedule {
		t.Fatalf("b started %d runs; want its schedule's 12:01:10 alone, none of the predecessor's fires", len(got))
	}
	hist, err := ops.ReadHistory(ctx, cli, "afresh", "tick", -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hist {
		if int64(r.Token) < created {
			t.Fatalf("the job created again at %d shows its predecessor's record %+v", created, r)
		}
	}
	if n, err := ops.WaitingRuns(ctx, cli, "afresh", "tick"); err != nil || len(n) != 0 {
		t.Fatalf("the predecessor's manual run still waits: %v %v", n, err)
	}
}

// A member that holds a slot when its job is deleted and created again
// (both changes at once, as a member behind on the catalog takes them)
// releases the slot after its run, and campaigns for it anew: its new
// holding, newer than the job, starts afresh.
func TestARecreatedJobsHolderCampaignsAnew(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	clock := clock.NewManual(t0)
	cat := storedCatalog(t, cli, catalog("anew", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", Misfire: config.MisfireFireAll, CatchupWindow: time.Hour})))
	rec := newRecorder()
	release := make(chan struct{})
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": blockUntil(release)}, nodeOpts{manual: clock})
	first := waitKind(t, rec, "a raised", 1, func(e Event) bool { return e.Kind == Raised })[0].Token
	clock.Advance(10 * time.Second) // 12:00:10.5: a run in flight
	waitKind(t, rec, "a's run", 1, func(e Event) bool { return e.Kind == Started })
	created := recreate(t, cli, "anew", "tick", tickBody)
	s, err := config.Read(context.Background(), cli, "anew", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.sched.SetCatalog(s.Catalog, s.Revision); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "the catalog applied", 1, func(e Event) bool { return e.Kind == CatalogApplied && e.Count == int(s.Revision) })
	if _, ok := a.sched.Leading()[shard.Slot{Job: "tick"}]; !ok {
		t.Fatal("the slot was released before its run ended")
	}
	close(release)
	evs := waitKind(t, rec, "the slot won anew", 2, func(e Event) bool { return e.Kind == Raised })
	if again := evs[len(evs)-1].Token; int64(again) <= created || again <= first {
		t.Fatalf("the slot won again under token %d; want one newer than the job, created at %d", again, created)
	}
	if got := filter(rec.all(), func(e Event) bool { return e.Kind == Released }); len(got) != 1 || !strings.Contains(got[0].Reason, "campaigning anew") {
		t.Fatalf("released %+v; want once, as won before its job was created again", got)
	}
	waitUntil(t, "the new holding's first write", 10*time.Second, func() bool {
		st, ok := slotState(t, cli, "anew", shard.Slot{Job: "tick"})
		return ok && int64(st.Token) > created
	})
}

// The keys of a deleted job go: its slots' state and history, its pause
// and its manual run requests, once its holders released its slots; the
// other jobs' stay. Each member forgets the job (Forgotten) and keeps no
// slot of it.
func TestADeletedJobsKeysAreSwept(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := storedCatalog(t, cli, catalog("swept",
		withDefaults(config.Job{Name: "keep", Schedule: "@every 10s", Handler: "noop"}),
		withDefaults(config.Job{Name: "gone", Schedule: "@every 10s", Handler: "noop", Partitions: 3})))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	nodes := []*node{startNode(t, cli, cat, rec, h, nodeOpts{manual: clock}), startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})}
	for _, n := range nodes {
		follow(t, cli, n, "swept")
	}
	waitKind(t, rec, "every slot raised", 4, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "every slot ran", 4, func(e Event) bool { return e.Kind == Finished })
	if err := ops.Pause(ctx, cli, "swept", "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.RequestRunAt(ctx, cli, "swept", []shard.Slot{{Job: "gone", Partition: 1}}, sec(3600)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "gone's state and controls", 10*time.Second, func() bool {
		return keyCount(t, cli, keyspace.JobStates("swept", "gone")) == 3 && keyCount(t, cli, keyspace.JobControl("swept", "gone")) == 2
	})
	if _, err := config.DeleteJob(ctx, cli, "swept", "gone", config.DeleteJobOptions{Manager: config.ManagerAPI("test"), Force: true}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "gone's keys swept", 15*time.Second, func() bool { return jobKeys(t, cli, "swept", "gone") == 0 })
	if _, ok := slotState(t, cli, "swept", shard.Slot{Job: "keep"}); !ok {
		t.Fatal("the sweep of gone took keep's state")
	}
	waitKind(t, rec, "both members forgot gone", 2, isJob(Forgotten, "gone"))
	for _, n := range nodes {
		if err := n.stop(); err != nil { // the loop's maps are read once it has stopped
			t.Fatal(err)
		}
		if kept := keptOf(n.sched, "gone"); len(kept) > 0 {
			t.Fatalf("member %s keeps the deleted job in %v", n.id, kept)
		}
	}
}

// keptOf names what s, stopped, keeps of job by its name: the maps of its
// loop and of what it shares.
func keptOf(s *Scheduler, job string) []string {
	var kept []string
	for id := range s.slots {
		if id.Job == job {
			kept = append(kept, "slots")
		}
	}
	for key := range s.triggering {
		if strings.HasPrefix(key, keyspace.JobControl(s.member.Cluster(), job)) {
			kept = append(kept, "triggering")
		}
	}
	for key := range s.byKey {
		if strings.HasPrefix(key, keyspace.JobElections(s.member.Cluster(), job)) {
			kept = append(kept, "byKey")
		}
	}
	for id := range s.snapshot {
		if id.Job == job {
			kept = append(kept, "snapshot")
		}
	}
	for name, in := range map[string]bool{"jobs": s.jobs[job] != nil, "installed": s.installed[job] != nil, "prepared": s.prepared[job] != nil,
		"paused": s.paused[job], "unplaced": s.unplaced[job], "leaving": s.leaving[job] != 0, "eligible": s.eligible[job] != 0} {
		if in {
			kept = append(kept, name)
		}
	}
	return kept
}

// A sweep that read a deleted job, and commits after the job was created
// again and its new holder wrote, deletes nothing: the new job's state and
// records stay.
func TestASweepRacingARecreateKeepsTheNewJobsState(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := storedCatalog(t, cli, catalog("race", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"})))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "a raised", 1, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a's run", 1, func(e Event) bool { return e.Kind == Finished })
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := config.DeleteJob(ctx, cli, "race", "tick", config.DeleteJobOptions{Manager: config.ManagerAPI("test"), Force: true}); err != nil {
		t.Fatal(err)
	}
	plan, err := sweep.Read(ctx, cli, "race", "tick")
	if err != nil || plan.Outcome != sweep.Swept {
		t.Fatalf("the sweep read %+v, %v; want the deleted job's keys to sweep", plan, err)
	}

	body := "schedule: '@every 10s'\nhandler: noop\n"
	put, err := config.PutJob(ctx, cli, "race", []byte(body), "tick", config.PutJobOptions{Manager: config.ManagerAPI("test"), CreateOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	b := startNode(t, cli, readCatalog(t, cli, "race"), rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "b raised", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "b's run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	if err := b.stop(); err != nil { // nobody holds the slot: only the job's presence guards it
		t.Fatal(err)
	}
	before := jobKeys(t, cli, "race", "tick")
	if o, err := plan.Commit(ctx, cli); err != nil || o != sweep.Moved {
		t.Fatalf("the sweep committed after the job was created again: %v, %v; want moved", o, err)
	}
	st, ok := slotState(t, cli, "race", shard.Slot{Job: "tick"})
	if after := jobKeys(t, cli, "race", "tick"); !ok || int64(st.Token) < put.Revision || after != before {
		t.Fatalf("after the sweep: the new job's state %+v (%v), %d of its %d keys; want them kept", st, ok, after, before)
	}
	if _, o, err := sweep.Job(ctx, cli, "race", "tick"); err != nil || o != sweep.Nothing || jobKeys(t, cli, "race", "tick") != before {
		t.Fatalf("a sweep of the job created again: %v, %v; want nothing of its predecessor's left to sweep", o, err)
	}
}

// A member that still holds a slot of a deleted job (paused, or behind on
// the catalog) may still write its state: the sweep leaves the job's keys
// while its candidacy stands. Once its lease ended the sweep goes, and the
// ex-holder, resumed, cannot write after it: its write compares its leader
// key, gone.
func TestAnExHolderCannotWriteAfterTheSweep(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := storedCatalog(t, cli, catalog("exholder", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"})))
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock}) // follows no catalog: it keeps holding
	waitKind(t, rec, "a raised", 1, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a's run", 1, func(e Event) bool { return e.Kind == Finished })
	slot := shard.Slot{Job: "tick"}
	claim := fencing.Claim{LeaderKey: keyspace.Candidacy("exholder", slot, int64(a.member.Lease())), Token: a.sched.Leading()[slot]}
	if _, err := config.DeleteJob(ctx, cli, "exholder", "tick", config.DeleteJobOptions{Manager: config.ManagerAPI("test"), Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, o, err := sweep.Job(ctx, cli, "exholder", "tick"); err != nil || o != sweep.Held {
		t.Fatalf("a sweep while the slot's holder stands: %v, %v; want held (it writes again below)", o, err)
	}
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a's run after the delete", 2, func(e Event) bool { return e.Kind == Finished })
	waitUntil(t, "a's state of 12:00:20", 10*time.Second, func() bool {
		st, ok := slotState(t, cli, "exholder", slot)
		return ok && st.Finished.Equal(sec(20))
	})

	if _, err := cli.Revoke(ctx, a.member.Lease()); err != nil { // its lease ends, while it is paused
		t.Fatal(err)
	}
	waitUntil(t, "the sweep once the slot's key is gone", 10*time.Second, func() bool {
		_, o, err := sweep.Job(ctx, cli, "exholder", "tick")
		return err == nil && o == sweep.Swept
	})
	w := fenced.NewWriter(cli) // the ex-holder's writer, resumed
	stop := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(wctx, stop); close(done) }()
	defer func() { close(stop); cancel(); kiratest.Receive(t, done, 10*time.Second, "the writer to stop") }()
	answer := make(chan error, 1)
	st := history.EncodeState(slot, history.SlotState{Token: claim.Token, Finished: sec(30)}, history.NewestFormat)
	w.Enqueue(fenced.Write{Claim: claim, Ops: []clientv3.Op{clientv3.OpPut(keyspace.State("exholder", slot), string(st))}, Done: answer})
	if err := kiratest.Receive(t, answer, 10*time.Second, "the ex-holder's write"); !errors.Is(err, fencing.ErrFenced) {
		t.Fatalf("the ex-holder's write after the sweep: %v; want fenced", err)
	}
	if n := jobKeys(t, cli, "exholder", "tick"); n != 0 {
		t.Fatalf("%d keys of the deleted job after the sweep", n)
	}
}

// The history of a job created again shows its own records alone, though
// the journal of its predecessor's holder (a member whose lease ended,
// which handed nothing over) still holds the predecessor's: neither kira
// history nor the dashboard's timeline (of the job, or of every job) reads
// them. The job's records go on from its predecessor's sequence, so that
// a slot's newest records, which a reader keeps (history_limit), are its
// own.
func TestARecreatedJobShowsNoneOfItsPredecessorsRecords(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := storedCatalog(t, cli, catalog("records", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", HistoryLimit: 2})))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "a raised", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	for i := 1; i <= 3; i++ {
		clock.Advance(10 * time.Second)
		waitKind(t, rec, "a's runs", i, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	}
	waitUntil(t, "a's newest records", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(ctx, cli, "records", "tick", -1, -1)
		return err == nil && len(hist) == 2
	})
	if _, err := cli.Revoke(ctx, a.member.Lease()); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "a lost the slot", 1, func(e Event) bool { return e.Kind == Lost && e.Member == a.id })
	created := recreate(t, cli, "records", "tick", "schedule: '@every 10s'\nhandler: noop\nhistory_limit: 2\n")
	b := startNode(t, cli, readCatalog(t, cli, "records"), rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "b raised", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "b's run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	waitUntil(t, "b's record", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(ctx, cli, "records", "tick", -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			if int64(r.Token) < created {
				t.Fatalf("the job created again at %d shows its predecessor's record of %v, token %d", created, r.ScheduledTime, r.Token)
			}
		}
		return len(hist) == 1 && hist[0].Member == b.id
	})
	for _, job := range []string{"tick", ""} {
		tl, err := ops.ReadTimeline(ctx, cli, nil, nil, nil, "records", ops.TimelineQuery{From: t0, To: sec(3600), Bucket: time.Minute, Job: job})
		if err != nil {
			t.Fatal(err)
		}
		if ex := tl.Jobs[0].Slots[0].Executions; len(ex) != 1 || ex[0].Member != b.id {
			t.Fatalf("the timeline (job %q) of the job created again: %+v; want b's one execution", job, ex)
		}
	}
}
