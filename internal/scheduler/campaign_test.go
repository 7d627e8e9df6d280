package scheduler

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// unrunScheduler builds a scheduler for cat on a member of a fresh etcd, for a
// test that plays its loop: Run is not called. The member leaves at the end.
func unrunScheduler(t testing.TB, cat *config.Catalog) (*Scheduler, *clientv3.Client) {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	m := joinTestMember(t, cli, cat.Cluster, nodeOpts{ttl: 2 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Leave(ctx)
	})
	s, err := New(m, member.NewViews(cli, cat.Cluster), cat, Config{Handlers: jobs.Handlers{"noop": noop}})
	if err != nil {
		t.Fatal(err)
	}
	return s, cli
}

// Campaigns beyond maxCampaigning wait in line without a goroutine each, start
// in order as places come free, and one abandoned in line (or while waiting
// out its delay) is idle at once and never starts. The test plays the loop:
// the scheduler is built but not run.
func TestCampaignsInLineHaveNoGoroutine(t *testing.T) {
	const slots = 1000
	s, cli := unrunScheduler(t, catalog("line", config.Job{Name: "j", Schedule: "@hourly", Partitions: slots, Handler: "noop"}))
	for range maxCampaigning {
		s.campaigning <- struct{}{} // every place taken
	}
	before := runtime.NumGoroutine()
	var line []*slot
	for _, sl := range s.slots {
		s.startCampaign(sl, 0)
		line = append(line, sl)
	}
	// etcd's own goroutines come and go meanwhile: allow for them.
	if n := runtime.NumGoroutine() - before; n >= slots/10 {
		t.Fatalf("%d campaigns in line started %d goroutines", slots, n)
	}
	if len(s.waiting) != slots {
		t.Fatalf("%d campaigns in line, want %d", len(s.waiting), slots)
	}

	// Abandoned in line: idle at once, and its place is skipped.
	s.abandonCampaign(line[0])
	if line[0].phase != idle {
		t.Fatalf("abandoned in line: %v, want idle", line[0].phase)
	}
	// A delayed campaign abandoned before its delay is over never joins the line.
	delayed := line[slots-1]
	s.abandonCampaign(delayed)
	s.startCampaign(delayed, time.Hour)
	if delayed.campaignTimer == nil {
		t.Fatal("a delayed campaign has no timer")
	}
	s.abandonCampaign(delayed)
	if delayed.phase != idle || delayed.campaignTimer != nil {
		t.Fatalf("abandoned while delayed: %v, timer %v; want idle, none", delayed.phase, delayed.campaignTimer)
	}

	// A campaign due after a delay joins the back of the line when its timer
	// rings (nothing else rings the bell yet: no campaign has a goroutine).
	s.abandonCampaign(line[2])
	s.startCampaign(line[2], time.Millisecond)
	kiratest.Receive(t, s.campaignsDue.bell, 10*time.Second, "s.campaignsDue.bell")
	s.campaignsFreed()
	if last := s.waiting[len(s.waiting)-1]; last.sl != line[2] || last.gen != line[2].gen || line[2].cancelCampaign != nil {
		t.Fatal("a delayed campaign did not join the line once due")
	}

	// One place comes free: the next in line takes it, no other. Another
	// lease's key stands first in its election, so its campaign waits and
	// keeps the place (an uncontested one could end, and free it, at once).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	other, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, keyspace.Election("line", line[1].id)+"/other", "x", clientv3.WithLease(other.ID)); err != nil {
		t.Fatal(err)
	}
	kiratest.Receive(t, s.campaigning, 10*time.Second, "s.campaigning")
	s.campaignsFreed()
	if line[1].cancelCampaign == nil {
		t.Fatal("the first campaign in line did not start when a place came free")
	}
	for _, sl := range line[2:] {
		if sl.cancelCampaign != nil {
			t.Fatalf("slot %v started with no place free", sl.id)
		}
	}
	if line[0].cancelCampaign != nil || line[0].phase != idle {
		t.Fatal("a campaign abandoned in line started")
	}

	close(s.stopped) // nobody reads the results
	line[1].cancelCampaign()
	s.wg.Wait()
}

// Skip records still carried when leadership ends are written under the
// fence, not dropped, and before the resign (queued after it, they would be
// fenced out: the writer never puts two writes of one slot in one
// transaction). The test plays the loop around one slot won by a campaign of
// its own.
func TestCarriedRecordsAreWrittenWhenLeadershipEnds(t *testing.T) {
	cat := catalog("carried", config.Job{Name: "j", Schedule: "@hourly", Handler: "noop"})
	s, cli := unrunScheduler(t, cat)
	m := s.member
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := shard.Slot{Job: "j", Partition: 0}
	e := concurrency.NewElection(m.Session(), keyspace.Election(cat.Cluster, id))
	if err := e.Campaign(ctx, m.ID()); err != nil {
		t.Fatal(err)
	}
	sl := s.slots[id]
	sl.phase, sl.election, sl.token, sl.leaderKey = leading, e, fencing.Token(e.Rev()), e.Key()
	sl.leadCtx, sl.cancelLead = context.WithCancel(context.Background())
	scheduled := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sl.carried = append(sl.carried, history.Record{ExecutionID: jobs.ExecutionID("j", 0, scheduled), ScheduledTime: scheduled, Outcome: history.OutcomeSkipped})

	stop, written := make(chan struct{}), make(chan struct{})
	go func() { s.writer.Run(context.Background(), stop); close(written) }()
	defer func() { close(stop); <-written }()
	s.endLeadership(sl, Released, "not preferred in the current view")
	kiratest.Receive(t, s.resigned, 10*time.Second, "s.resigned")
	close(s.stopped)
	s.wg.Wait()

	if resp, err := cli.Get(ctx, e.Key()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("leader key after the resign: %v, %v; want deleted", resp, err)
	}
	records, err := ops.ReadHistory(ctx, cli, cat.Cluster, "j", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 || records[0].Outcome != history.OutcomeSkipped || !records[0].ScheduledTime.Equal(scheduled) {
		t.Fatalf("history %+v; want the carried skip record", records)
	}
	if st, _, _, err := readAcquired(ctx, cli, cat.Cluster, id); err != nil || st.HistorySeq != 1 {
		t.Fatalf("state after the flush: %+v, %v; want the record's (history_seq 1)", st, err)
	}
}
