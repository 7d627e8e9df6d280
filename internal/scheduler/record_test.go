package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/takeoverread"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A slot's state is the newer, by revision, of its state key and its newest
// record; a record written before records held a state has none.
func TestStateIsTheNewerOfStateKeyAndRecord(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	slot := shard.Slot{Job: "tick", Partition: 3}
	put := func(key string, v any) {
		t.Helper()
		data, _ := json.Marshal(v)
		if _, err := cli.Put(ctx, key, string(data)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() history.SlotState {
		t.Helper()
		st, _, _, err := readAcquired(ctx, cli, "c", slot)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := read(); !reflect.DeepEqual(st, history.SlotState{}) {
		t.Fatalf("state of a slot never run: %+v; want zero", st)
	}
	put(keyspace.State("c", slot), history.SlotState{HistorySeq: 1, StartedID: "state-1"})
	put(keyspace.HistoryEntry("c", slot, 1, 10), history.Stored{Record: history.Record{ExecutionID: "r1"}, State: &history.SlotState{HistorySeq: 2, StartedID: "record-2"}})
	put(keyspace.HistoryEntry("c", slot, 0, 10), history.Stored{Record: history.Record{ExecutionID: "r0"}, State: &history.SlotState{HistorySeq: 1, StartedID: "record-1"}})
	if st := read(); st.StartedID != "record-1" {
		t.Fatalf("state %+v; want the newest record's (record-1, written last)", st)
	}
	put(keyspace.State("c", slot), history.SlotState{HistorySeq: 2, StartedID: "state-2"})
	if st := read(); st.StartedID != "state-2" {
		t.Fatalf("state %+v; want the state key's, written after the records", st)
	}
	put(keyspace.HistoryEntry("c", slot, 2, 10), history.Record{ExecutionID: "old"}) // as an earlier version wrote it
	if st := read(); st.StartedID != "state-2" {
		t.Fatalf("state %+v; want the state key's: the newest record holds none", st)
	}
	other := shard.Slot{Job: "tick", Partition: 30} // shares the prefix "tick/3" but not "tick/3/"
	put(keyspace.HistoryEntry("c", other, 0, 10), history.Stored{Record: history.Record{ExecutionID: "x"}, State: &history.SlotState{StartedID: "other"}})
	if st := read(); st.StartedID != "state-2" {
		t.Fatalf("state %+v; want slot 3's, not slot 30's", st)
	}
	if _, err := cli.Put(ctx, keyspace.HistoryEntry("c", slot, 3, 10), "{not json"); err != nil {
		t.Fatal(err)
	}
	st, unreadable, _, err := readAcquired(ctx, cli, "c", slot)
	if err != nil || unreadable == nil || !strings.Contains(unreadable.Error(), "unreadable") || !reflect.DeepEqual(st, history.SlotState{}) {
		t.Fatalf("newest record unreadable: state %+v, unreadable %v, err %v; want the zero state and the reason", st, unreadable, err)
	}
}

// A member writes records in the newest format every member of its view
// reads: beside a member of a version before history.FormatCompact, whose
// record publishes no history format, it writes JSON, which that version
// reads with its state; once that member has left, beside one that reads
// FormatCompact, compact records; once that one has left, beside one that
// reads FormatWire, wire records; once that one has left too, records in
// its journal (FormatJournal). Every record written on the way stays
// readable.
func TestOldMembersKeepRecordsReadable(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	// Enough partitions that each of the four members leads some: the
	// current member must write while the others are members.
	const partitions = 32
	cat := catalog("formats", config.Job{Name: "tick", Schedule: "@every 1s", Partitions: partitions, Handler: "noop"})
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	beforeFormats := startNode(t, cli, cat, rec, h, nodeOpts{readsFormat: -1})
	readsCompact := startNode(t, cli, cat, rec, h, nodeOpts{readsFormat: history.FormatCompact})
	readsWire := startNode(t, cli, cat, rec, h, nodeOpts{readsFormat: history.FormatWire})
	current := startNode(t, cli, cat, rec, h, nodeOpts{})
	// formats counts the current member's records by the format they are in.
	formats := func() map[int]int {
		resp, err := cli.Get(ctx, keyspace.History(cat.Cluster, "tick"), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		by := map[int]int{}
		for _, kv := range resp.Kvs {
			if r, err := history.Decode(shard.Slot{Job: "tick"}, kv.Value); err != nil || r.Member != current.id {
				continue
			}
			var earlier history.Stored // as a version before FormatCompact reads it
			switch {
			case json.Unmarshal(kv.Value, &earlier) == nil && earlier.State != nil:
				by[history.FormatJSON]++
			case bytes.HasPrefix(kv.Value, []byte("2{")):
				by[history.FormatCompact]++
			default:
				by[history.FormatWire]++
			}
		}
		return by
	}
	waitUntil(t, "records of the current member, beside the earlier ones", 15*time.Second, func() bool {
		return formats()[history.FormatJSON] >= 8
	})
	if by := formats(); by[history.FormatCompact]+by[history.FormatWire] > 0 {
		t.Fatalf("records by format %v: some an earlier version cannot read, written while it was a member", by)
	}
	if err := beforeFormats.stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "compact records once the member reading only JSON left", 15*time.Second, func() bool {
		return formats()[history.FormatCompact] >= 8
	})
	if by := formats(); by[history.FormatWire] > 0 {
		t.Fatalf("records by format %v: wire records written beside a member that reads only compact ones", by)
	}
	if err := readsCompact.stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "wire records once every member reads them", 15*time.Second, func() bool {
		return formats()[history.FormatWire] >= 8
	})
	if by := formats(); by[history.FormatJournal] > 0 {
		t.Fatalf("records by format %v: journal records written beside a member that reads only wire ones", by)
	}
	// journaled counts the records in the current member's journal, by partition.
	journaled := func() map[int]int {
		resp, err := cli.Get(ctx, keyspace.Journal(cat.Cluster, current.id), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		by := map[int]int{}
		for _, kv := range resp.Kvs {
			items, err := history.JournalItems(cat.Cluster, kv)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				by[it.Slot.Partition]++
			}
		}
		return by
	}
	if err := readsWire.stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "records in the journal once every member reads them", 15*time.Second, func() bool {
		n := 0
		for _, c := range journaled() {
			n += c
		}
		return n >= 8
	})
	if err := current.stop(); err != nil {
		t.Fatal(err)
	}
	inJournal := journaled()
	hist, err := ops.ReadHistory(ctx, cli, cat.Cluster, "tick", -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	read := map[int]int{}
	for _, r := range hist {
		read[r.Partition]++
	}
	for p := range partitions {
		resp, err := cli.Get(ctx, keyspace.SlotHistory(cat.Cluster, shard.Slot{Job: "tick", Partition: p}), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		// No record was copied from the journal (no entry was reused, no
		// slot handed over by a member writing journals): they are apart.
		if want := min(config.DefaultHistoryLimit, int(resp.Count)+inJournal[p]); read[p] != want {
			t.Fatalf("kira history reads %d records of partition %d; want %d (%d in its ring, %d in the journal, the newest %d)",
				read[p], p, want, resp.Count, inJournal[p], config.DefaultHistoryLimit)
		}
	}
	for _, r := range hist {
		if r.Job != "tick" || r.ExecutionID != jobs.ExecutionID("tick", r.Partition, r.ScheduledTime) || r.Outcome != "succeeded" || r.Cause != history.CauseSchedule {
			t.Fatalf("a record read back as %+v", r)
		}
	}
}

// readAcquired reads what a new holder of slot s would take as its state,
// with a journal read of its own.
func readAcquired(ctx context.Context, kv clientv3.KV, cluster string, s shard.Slot) (st history.SlotState, unreadable error, triggers []fire, err error) {
	reads := takeoverread.New(kv, cluster, journal.NewCache(kv, cluster), raiseTimeout)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { reads.Run(runCtx); close(done) }()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			panic("the takeover reads did not stop")
		}
	}()
	r, err := readTakeover(ctx, reads, s, false, 0)
	return r.state, r.unreadable, r.triggers, err
}

// stateKey reads slot s's state key alone, with its revision (0: none).
func stateKey(t *testing.T, cli *clientv3.Client, cluster string, s shard.Slot) (history.SlotState, int64) {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.State(cluster, s))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return history.SlotState{}, 0
	}
	st, err := history.DecodeState(s, resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return st, resp.Kvs[0].ModRevision
}

// A takeover reads the journals as of a revision after its win, not after
// its token: the token (its candidacy key's create revision) can be older
// than the previous holder's last write, here the result of a fire whose
// start a journal cache already held as of the token. With the token as the
// bound the cache is fresh enough, and the fire looks unfinished: the new
// holder would run it again.
func TestTakeoverReadsTheJournalsAfterItsWin(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	slot := shard.Slot{Job: "tick"}
	at := time.Date(2026, 12, 3, 12, 0, 10, 0, time.UTC)
	id := jobs.ExecutionID("tick", 0, at)
	entry := func(n int, st history.SlotState) int64 {
		t.Helper()
		seq := int64(n)
		st.Token, st.Member, st.HistorySeq, st.HistoryLimit = 5, "old", seq+1, 10
		item := history.JournalItem{Slot: slot, Stored: history.Stored{Seq: &seq, State: &st,
			Record: history.Record{Job: "tick", ExecutionID: id, ScheduledTime: at, Outcome: "succeeded", Member: "old", Token: 5, Attempt: 1}}}
		resp, err := cli.Put(ctx, keyspace.JournalEntry("fresh", "old", n), string(history.EncodeJournal("old", []history.JournalItem{item})))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	token := entry(0, history.SlotState{Started: at, StartedID: id, StartedAttempt: 1}) // the start, recorded ahead
	journals := journal.NewCache(cli, "fresh")
	if _, err := journals.Slot(ctx, slot, token); err != nil { // another takeover filled the cache as of the token
		t.Fatal(err)
	}
	entry(1, history.SlotState{Started: at, StartedID: id, StartedAttempt: 1, Finished: at, Outcome: "succeeded"}) // its result
	reads := takeoverread.New(cli, "fresh", journals, raiseTimeout)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { reads.Run(runCtx); close(done) }()
	defer func() { stop(); kiratest.Receive(t, done, 10*time.Second, "the takeover reads to stop") }()
	r, err := readTakeover(ctx, reads, slot, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.state.Unfinished() || !r.state.Finished.Equal(at) {
		t.Fatalf("the new holder read started %v, finished %v; want the fire of %v finished (the previous holder's last write)", r.state.Started, r.state.Finished, at)
	}
}

// A record moves from its journal entry to the slot's ring (the previous
// holder's writer copies it, then reuses the entry) while a new holder
// reads the slot: reading the ring before the journals, the takeover found
// it in neither, took an older state and ran the finished fire again. Read
// at one revision, it is in one of the two.
func TestTakeoverFindsARecordMovedToTheRingWhileItReads(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	slot, other := shard.Slot{Job: "tick"}, shard.Slot{Job: "other"}
	at := time.Date(2026, 12, 3, 12, 0, 10, 0, time.UTC)
	item := func(s shard.Slot, st history.SlotState) history.JournalItem {
		seq := int64(0)
		st.Token, st.Member, st.HistorySeq, st.HistoryLimit = 5, "old", seq+1, 10
		id := jobs.ExecutionID(s.Job, 0, at)
		return history.JournalItem{Slot: s, Stored: history.Stored{Seq: &seq, State: &st,
			Record: history.Record{Job: s.Job, ExecutionID: id, ScheduledTime: at, Outcome: "succeeded", Member: "old", Token: 5, Attempt: 1}}}
	}
	finished := item(slot, history.SlotState{Started: at, StartedAttempt: 1, Finished: at, Outcome: "succeeded"})
	if _, err := cli.Put(ctx, keyspace.JournalEntry("moved", "old", 0), string(history.EncodeJournal("old", []history.JournalItem{finished}))); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	move := func() {
		ring := keyspace.HistoryEntry("moved", slot, 0, 10)
		if _, err := cli.Put(ctx, ring, string(history.Encode(finished.Stored, history.FormatJournal))); err != nil {
			t.Error(err)
		}
		reused := history.EncodeJournal("old", []history.JournalItem{item(other, history.SlotState{})})
		if _, err := cli.Put(ctx, keyspace.JournalEntry("moved", "old", 0), string(reused)); err != nil {
			t.Error(err)
		}
	}
	kv := &gatedKV{KV: cli, committed: func() { once.Do(move) }} // after the takeover's first transaction
	st, _, _, err := readAcquired(ctx, kv, "moved", slot)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Finished.Equal(at) {
		t.Fatalf("the new holder read finished %v; want the fire of %v finished, in the journal or the ring", st.Finished, at)
	}
}

// A slot handed over on a view change is resigned in one transaction with
// the put of its state: the state key at the revision that deleted the old
// holder's leader key was written by that revision, by the old holder, so
// the next holder reads the state the old one left, whatever its journal
// holds.
func TestResignCarriesTheLastState(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deleted := make(chan *clientv3.Event, 64) // deletes of leader keys, with what they deleted
	watch := cli.Watch(ctx, keyspace.Elections("resign"), clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithFilterPut())
	go func() {
		for resp := range watch {
			for _, ev := range resp.Events {
				select {
				case deleted <- ev:
				default:
				}
			}
		}
	}()
	cat := catalog("resign", withDefaults(config.Job{Name: "tick", Schedule: "@every 1s", Partitions: 8, Handler: "noop"}))
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{})
	waitKind(t, rec, "a leads every slot", 8, func(e Event) bool { return e.Kind == Acquired && e.Member == a.id })
	waitKind(t, rec, "a's runs", 8, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	b := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{})
	waitKind(t, rec, "b's first run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	ev := kiratest.Receive(t, deleted, 10*time.Second, "a leader key deleted")
	for checked := 0; ev != nil; checked++ {
		s, _, _ := keyspace.ParseCandidacy("resign", string(ev.PrevKv.Key))
		resp, err := cli.Get(ctx, keyspace.State("resign", s), clientv3.WithRev(ev.Kv.ModRevision))
		if err != nil {
			t.Fatal(err)
		}
		var st history.SlotState
		if len(resp.Kvs) == 1 {
			st, _ = history.DecodeState(s, resp.Kvs[0].Value)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != ev.Kv.ModRevision || int64(st.Token) != ev.PrevKv.CreateRevision {
			t.Fatalf("%s: the resign at revision %d did not write a's state (state key %v, %+v)", s, ev.Kv.ModRevision, resp.Kvs, st)
		}
		select {
		case ev = <-deleted:
		default:
			ev = nil
			t.Logf("%d handovers checked", checked+1)
		}
	}
}

// A slot given up before its takeover read ended (here: its fence cannot be
// raised) resigns without a state: its member never read the slot's state
// under its token, and writing what it held before would send the state
// back, so the next holder would run finished fires again.
func TestSlotGivenUpDuringItsTakeoverWritesNoState(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("givenup", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"}))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	aRaised := func(e Event) bool { return e.Kind == Raised && e.Member == a.id }
	raised := filter(waitKind(t, rec, "a ready", 1, aRaised), aRaised)
	advance(t, rec, clock, 10*time.Second)
	waitKind(t, rec, "a's run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	slot := shard.Slot{Job: "tick"}
	left, rev := stateKey(t, cli, "givenup", slot)
	if left.Token != raised[0].Token || !left.Finished.Equal(sec(10)) {
		t.Fatalf("a left the state %+v; want its run of 12:00:10 finished", left)
	}
	refuse := func(context.Context, shard.Slot, fencing.Claim) error { return errors.New("the resource is down") }
	b := startNode(t, cli, cat, rec, h, nodeOpts{clock: clock, memberNow: clock.Now, cfg: Config{OnAcquire: refuse}})
	waitKind(t, rec, "b giving the slot up twice", 2, func(e Event) bool { return e.Kind == Released && e.Member == b.id })
	waitUntil(t, "b's resign", 10*time.Second, func() bool {
		resp, err := cli.Get(context.Background(), keyspace.Election("givenup", slot)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	})
	if st, now := stateKey(t, cli, "givenup", slot); now != rev || !reflect.DeepEqual(st, left) {
		t.Fatalf("after b gave the slot up during its takeover, the state key is %+v (revision %d); want a's %+v (revision %d)", st, now, left, rev)
	}
}

// A late watch event for the creation of a slot's candidacy key reaches
// the loop while the slot is resigning (its resign still in the writer's
// queue): the key is the resign's to delete, with the slot's last state and
// after its queued records. Deleting it at once, as an orphan, fenced the
// resign out; the next holder then found an older state and ran a finished
// fire again (TestJournalOfALeftMemberIsDeletedOnceItsSlotsAreTaken, once in
// about thirty runs on a loaded machine).
func TestLateCreateEventLeavesAResigningKeyToItsResign(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const cluster = "late"
	deleted := make(chan *clientv3.Event, 64)
	watch := cli.Watch(ctx, keyspace.Elections(cluster), clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithFilterPut())
	go func() {
		for resp := range watch {
			for _, ev := range resp.Events {
				select {
				case deleted <- ev:
				default:
				}
			}
		}
	}()
	clock := clock.NewManual(t0)
	cat := catalog(cluster, withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Partitions: 8, Handler: "noop"}))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	gate := newGatedKV()
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock, gate: gate})
	waitKind(t, rec, "a leads every slot", 8, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a's runs", 8, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })

	gate.close()
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	owners := ringOwners(t, cat, a, b)
	var moved []shard.Slot
	for s, owner := range owners {
		if owner == b.id {
			moved = append(moved, s)
		}
	}
	waitKind(t, rec, "a releases b's slots", len(moved), func(e Event) bool { return e.Kind == Released && e.Member == a.id })
	keys := map[string]bool{}
	for _, s := range moved {
		key := fmt.Sprintf("%s/%x", keyspace.Election(cluster, s), a.member.Lease())
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: a's candidacy key %v (%v); want it until the resign commits", s, resp, err)
		}
		keys[key] = true
		a.sched.created <- createdKey{slot: s, key: key, rev: resp.Kvs[0].CreateRevision}
	}
	// Deleted at once, a key would be gone within milliseconds.
	if kiratest.Poll(500*time.Millisecond, func() bool { return len(deleted) > 0 }) {
		ev := kiratest.Receive(t, deleted, time.Second, "the delete")
		t.Fatalf("%s deleted at revision %d while its resign waits at the gate", ev.PrevKv.Key, ev.Kv.ModRevision)
	}
	gate.open()
	waitKind(t, rec, "b leads its slots", len(moved), func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	for range moved {
		ev := kiratest.Receive(t, deleted, 10*time.Second, "a resigned key")
		s, _, _ := keyspace.ParseCandidacy(cluster, string(ev.PrevKv.Key))
		if !keys[string(ev.PrevKv.Key)] {
			t.Fatalf("deleted %s; want only a's keys of b's slots", ev.PrevKv.Key)
		}
		st, rev := stateKey(t, cli, cluster, s)
		if rev < ev.Kv.ModRevision {
			t.Fatalf("%s: the state key (revision %d) predates the resign (%d)", s, rev, ev.Kv.ModRevision)
		}
		resp, err := cli.Get(ctx, keyspace.State(cluster, s), clientv3.WithRev(ev.Kv.ModRevision))
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != ev.Kv.ModRevision {
			t.Fatalf("%s: the resign at revision %d did not write a's state (%v, %v; now %+v)", s, ev.Kv.ModRevision, resp, err, st)
		}
	}
	if got := started(rec.all(), b.id); len(got) != 0 {
		t.Fatalf("b started %v; want nothing before its first fire", got[0].Execution)
	}
}
