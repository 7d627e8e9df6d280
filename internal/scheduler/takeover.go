package scheduler

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/takeoverread"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// What a new holder learns of a slot, and what it copies. A slot's state
// is in its state key, put by every write of its holders; its records are
// in its ring and in the journals of its earlier holders (see
// fenced.Record). A new holder reads all three, and its first write copies
// to the ring the records it found only in journals: from then on the
// slot's history needs no other member's journal, which lets a departed
// member's journal be deleted (sweepJournals). Held by TestFailoverCatchUp (the new holder reads what
// the stopped one ran from its journal) and
// TestJournalOfALeftMemberIsDeletedOnceItsSlotsAreTaken.

// acquiredRead is what readTakeover learns of a slot.
type acquiredRead struct {
	state history.SlotState
	// unreadable says why the recorded state could not be read: the slot is
	// then treated as one never run.
	unreadable error
	triggers   []fire
	// copies are the slot's records found only in journals, among its
	// newest: the takeover write copies them to the ring.
	copies []history.Stored
	// journaled says the slot has records in some journal.
	journaled bool
	// lastEnded is when the newest of the slot's records read ended (zero
	// if none, or if the slot's job is no dependent): a dependent's
	// previous holder could start nothing before.
	lastEnded time.Time
	// afresh says the state read was the job's predecessor's (a job of
	// the same name, deleted); left says the predecessor left keys in the
	// slot (its state, its ring, its manual triggers: staleTriggers), which
	// the new holder's first write overwrites or deletes (startAfresh).
	afresh, left  bool
	staleTriggers []string
}

// readTakeover reads what a new holder needs of slot s: its records in
// journals, then its state key, its ring and the manual triggers waiting
// for it (and, for a dependent, when its last record ended), all at one revision (shared with the slots taken over at the
// same time, package takeoverread). The read comes after the win, so after every
// write the previous holders' claims let commit: the previous holder's
// newest state is in the state key. A record can move from a
// journal to the ring while the slot is read (fenced.Record): at one
// revision it is in one of them. Held by
// TestTakeoverReadsTheJournalsAfterItsWin and
// TestTakeoverFindsARecordMovedToTheRingWhileItReads. A rebalance does this
// for thousands of slots at once; they share the journal read too.
//
// A state that cannot be read (corrupt, or written by hand) is returned as
// unreadable with the zero state: the slot is treated as never run, rather
// than never fired again. Held by TestJunkInEtcdLeavesEverySlotFiring.
//
// A state whose token is older than the job (created, its create revision;
// 0: unknown) is its predecessor's: see afresh.
func readTakeover(ctx context.Context, reads *takeoverread.Queue, s shard.Slot, dependent bool, created int64) (acquiredRead, error) {
	q, err := reads.Read(ctx, s)
	if err != nil {
		return acquiredRead{}, err
	}
	placed := q.Journaled
	r := acquiredRead{triggers: triggersFrom(s, q.Triggers, created), journaled: len(placed) > 0}
	r.state, r.unreadable = history.NewestState(s, q.State, q.Ring, placed)
	if r.unreadable != nil {
		r.state = history.SlotState{}
		return r, nil
	}
	if int64(r.state.Token) < created {
		return afresh(s, q, created, r.state.HistorySeq), nil
	}
	placed = slices.DeleteFunc(placed, func(p history.Slotted) bool { return int64(p.Stored.Token) < created })
	r.copies = journalOnly(s, r.state, q.Ring, placed)
	if dependent {
		r.lastEnded = lastEnded(s, q.Ring, placed)
	}
	return r, nil
}

// afresh is what a new holder reads of slot s when its state is older than
// its job (created): a predecessor's, a job of the same name deleted before
// this one was created. The slot starts as one never run: nothing of the
// predecessor's is caught up or retried, its records (in the ring and the
// journals) and its manual triggers are not the job's. What it left in the
// slot's keys goes with the new holder's first write: its ring, its
// triggers, and its state, overwritten (startAfresh); a slot of a new job
// with nothing left writes nothing more. Its records go on from the
// predecessor's sequence number (seq), so that they are the slot's newest
// beside any of the predecessor's a journal still holds. Held by
// TestARecreatedJobDoesNotCatchUpItsPredecessorsFires and
// TestARecreatedJobShowsNoneOfItsPredecessorsRecords.
func afresh(s shard.Slot, q *takeoverread.Slot, created, seq int64) acquiredRead {
	r := acquiredRead{afresh: true, state: history.SlotState{HistorySeq: seq}, triggers: triggersFrom(s, q.Triggers, created)}
	for _, kv := range q.Triggers {
		if kv.CreateRevision < created {
			r.staleTriggers = append(r.staleTriggers, string(kv.Key))
		}
	}
	r.left = len(q.State) > 0 || len(q.Ring) > 0 || len(r.staleTriggers) > 0
	return r
}

// startAfresh is the first write of a new holder whose slot's state was
// its job's predecessor's (afresh), when the predecessor left keys there:
// it deletes the slot's ring and the predecessor's triggers, and puts the
// slot's state, the never-run state under this holder's token.
func (s *Scheduler) startAfresh(sl *slot, read acquiredRead) {
	s.cfg.Logger.Info("the slot's state is of a job of the same name deleted before this one was created: the slot starts afresh", "slot", sl.id.String(), "token", sl.token.String())
	ops := []clientv3.Op{clientv3.OpDelete(keyspace.SlotHistory(s.member.Cluster(), sl.id), clientv3.WithPrefix())}
	for _, key := range read.staleTriggers {
		ops = append(ops, clientv3.OpDelete(key))
	}
	s.writer.Enqueue(fenced.Write{Claim: sl.claim(), Ops: append(ops, s.stateOp(sl))})
}

// lastEnded is when the newest of the slot's records in ringKvs and placed
// ended.
func lastEnded(s shard.Slot, ringKvs []*mvccpb.KeyValue, placed []history.Slotted) time.Time {
	var at time.Time
	consider := func(st history.Stored) {
		for _, r := range st.Records() {
			at = latest(at, r.FinishedAt)
		}
	}
	for _, kv := range ringKvs {
		if st, err := history.Decode(s, kv.Value); err == nil {
			consider(st)
		}
	}
	for _, p := range placed {
		consider(p.Stored)
	}
	return at
}

// journalOnly are the records of placed, among the slot's newest as of
// state, that its ring does not hold: each once, oldest first.
func journalOnly(s shard.Slot, state history.SlotState, ringKvs []*mvccpb.KeyValue, placed []history.Slotted) []history.Stored {
	inRing := map[int64]bool{}
	for _, kv := range ringKvs {
		if st, err := history.Decode(s, kv.Value); err == nil && st.Seq != nil {
			inRing[*st.Seq] = true
		}
	}
	limit := int64(max(state.HistoryLimit, 1))
	var out []history.Stored
	for _, p := range placed {
		seq := *p.Stored.Seq
		if inRing[seq] || seq < state.HistorySeq-limit {
			continue
		}
		inRing[seq] = true
		out = append(out, p.Stored)
	}
	slices.SortFunc(out, func(a, b history.Stored) int { return cmp.Compare(*a.Seq, *b.Seq) })
	return out
}

// maxTakeoverCopies bounds the records one takeover write copies: a
// transaction has room for 128 operations.
const maxTakeoverCopies = 100

// takeoverWrite is a new holder's first writes of a slot with records in
// journals: the copies to its ring of those found only there (every one
// among the slot's history_limit newest, up to maxTakeoverCopies a write,
// oldest first), without their states, and with the last of them the
// slot's state in its state key, newer than any of them. The writer keeps a
// slot's writes in order. Held by TestTakeoverCopiesEveryRecordOfTheLimit.
func (s *Scheduler) takeoverWrite(sl *slot, copies []history.Stored) {
	for {
		n := min(len(copies), maxTakeoverCopies)
		ops := make([]clientv3.Op, 0, n+1)
		for _, st := range copies[:n] {
			st.State = nil
			key := keyspace.HistoryEntry(s.member.Cluster(), sl.id, *st.Seq, sl.job.spec.HistoryLimit)
			ops = append(ops, clientv3.OpPut(key, string(history.Encode(st, s.historyFormat))))
		}
		ops = fenced.LastPutPerKey(ops)
		if copies = copies[n:]; len(copies) == 0 {
			s.writer.Enqueue(fenced.Write{Claim: sl.claim(), Ops: append(ops, s.stateOp(sl))})
			return
		}
		s.writer.Enqueue(fenced.Write{Claim: sl.claim(), Ops: ops})
	}
}
