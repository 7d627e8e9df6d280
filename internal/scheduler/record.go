package scheduler

import (
	"fmt"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func (sl *slot) claim() fencing.Claim { return fencing.Claim{LeaderKey: sl.leaderKey, Token: sl.token} }

// stateOp is the put of the slot's current state into its state key, for a
// write without a record (a record carries the state: history.Stored), and
// for the write that leaves the slot (lastState).
func (s *Scheduler) stateOp(sl *slot) clientv3.Op {
	sl.recorded.Token, sl.recorded.Member = sl.token, s.member.ID()
	sl.noteOwed()
	data := history.EncodeState(sl.id, sl.recorded, s.historyFormat)
	return clientv3.OpPut(keyspace.State(s.member.Cluster(), sl.id), string(data))
}

// record writes an execution record (and the slot's state) under the fence.
func (s *Scheduler) record(sl *slot, r history.Record, extra []clientv3.Op) {
	s.recordWith(sl, r, extra, nil)
}

func (s *Scheduler) recordWith(sl *slot, r history.Record, extra []clientv3.Op, done chan error) {
	limit := sl.job.spec.HistoryLimit
	if sl.recorded.HistoryLimit != limit {
		// The limit changed, or the state predates it: drop the records the
		// new ring will never overwrite.
		extra = append(slices.Clip(extra), historyTrim(s.member.Cluster(), sl.id, limit))
		sl.recorded.HistoryLimit = limit
	}
	fw := s.recordWrite(sl, r, sl.takeCarried())
	fw.Ops = append(fw.Ops, extra...)
	fw.Done = done
	fw.Lazy = done == nil // a record: nothing waits for it
	if a := sl.ahead; a != nil && done == a.done {
		fw.Lazy = sl.next.Sub(s.cfg.Clock.Now()) > lingerAhead // with a start recorded ahead
	}
	s.writer.Enqueue(fw)
}

// queuedSkip is a skip record written alone, the tag of its write, and the
// place in the slot's history ring it went to.
type queuedSkip struct {
	record history.Record
	seq    int64
}

// recordSkip writes a skip record alone, tagged so the next skip of the
// slot can be added to it while it waits in the writer's queue.
func (s *Scheduler) recordSkip(sl *slot, r history.Record) {
	if len(sl.carried) > 0 || sl.recorded.HistoryLimit != sl.job.spec.HistoryLimit {
		s.record(sl, r, nil) // not a write of the record alone
		return
	}
	q := &queuedSkip{record: r, seq: sl.recorded.HistorySeq}
	sl.queuedSkip = q
	fw := s.recordWrite(sl, r, nil)
	fw.Lazy, fw.Tag = true, q
	s.writer.Enqueue(fw)
}

// amendQueuedSkip adds skip r to the slot's last skip record if its write
// is still queued and still the slot's last (fenced.Writer.Amend), and
// reports whether it did.
func (s *Scheduler) amendQueuedSkip(sl *slot, r history.Record) bool {
	q := sl.queuedSkip
	if q == nil || !sameSkip(q.record, r) || sl.recorded.HistoryLimit != sl.job.spec.HistoryLimit || sl.recorded.HistorySeq != q.seq+1 {
		return false
	}
	merged := mergeSkip(q.record, r)
	var fw fenced.Write
	s.addRecord(&fw, sl, history.Stored{Record: merged}, q.seq)
	if !s.writer.Amend(sl.leaderKey, q, fw.Ops, fw.Records) {
		sl.queuedSkip = nil
		return false
	}
	q.record = merged
	return true
}

// addRecord adds stored (its record, and its carried skip if any) with the
// slot's current state to fw, at place seq of the slot's history: to the
// member's journal while every member reads journals
// (history.FormatJournal), else as a put in the slot's history ring.
func (s *Scheduler) addRecord(fw *fenced.Write, sl *slot, stored history.Stored, seq int64) {
	sl.noteOwed()
	st := sl.recorded
	stored.State = &st
	stamp := func(r *history.Record) {
		r.Job, r.Partition, r.Member, r.Token = sl.id.Job, sl.id.Partition, s.member.ID(), sl.token
	}
	stamp(&stored.Record)
	if stored.Skipped != nil {
		skipped := *stored.Skipped
		stamp(&skipped)
		stored.Skipped = &skipped
	}
	if s.historyFormat >= history.FormatJournal {
		stored.Seq, stored.Limit = &seq, sl.job.spec.HistoryLimit
		if history.Journaled(stored) {
			fw.Records = append(fw.Records, fenced.Record{Slot: sl.id, Limit: sl.job.spec.HistoryLimit, Stored: stored})
			return
		}
	}
	data := history.Encode(stored, s.historyFormat)
	fw.Ops = append(fw.Ops, clientv3.OpPut(keyspace.HistoryEntry(s.member.Cluster(), sl.id, seq, sl.job.spec.HistoryLimit), string(data)))
}

// noteOwed brings the fires the slot's state names as owed up to date,
// while it is led; once its leadership ends, they stay as dropLeadership
// left them, for the write that leaves the slot.
func (sl *slot) noteOwed() {
	if sl.leadCtx != nil && sl.leadCtx.Err() == nil {
		sl.recorded.Owed = sl.owedFires()
	}
}

// recordWrite is the write of record r, and of the skip records carried to
// it, at the slot's next sequence numbers (see fenced.LastPutPerKey), each
// with the slot's state as of this write, which they hold from then on
// (history.Stored): the body of a record, and no put of the state key. The
// last carried skip goes with r (Stored.Skipped); the others, rare (skips
// for different reasons), each as a record of its own.
func (s *Scheduler) recordWrite(sl *slot, r history.Record, carried []history.Record) fenced.Write {
	last := history.Stored{Record: r}
	if n := len(carried); n > 0 {
		last.Skipped = &carried[n-1]
		carried = carried[:n-1]
	}
	first := sl.recorded.HistorySeq
	sl.recorded.HistorySeq += int64(len(carried)) + 1
	sl.recorded.Token, sl.recorded.Member = sl.token, s.member.ID()
	fw := fenced.Write{Claim: sl.claim()}
	for i, c := range carried {
		s.addRecord(&fw, sl, history.Stored{Record: c}, first+int64(i))
	}
	s.addRecord(&fw, sl, last, first+int64(len(carried)))
	fw.Ops = append(fenced.LastPutPerKey(fw.Ops), triggerDeletes(sl)...)
	return fw
}

// stateOps are the puts of a write without a record: the slot's state,
// and the deletes of its ended manual runs' triggers (triggerDeletes).
func (s *Scheduler) stateOps(sl *slot) []clientv3.Op {
	return append([]clientv3.Op{s.stateOp(sl)}, triggerDeletes(sl)...)
}

// triggerDeletes are the deletes of the triggers of the slot's manual runs
// whose final result this holder recorded (slot.endedTriggers). Every
// write of the slot carries them, the one that leaves the slot too, until
// the control watch sees the keys gone (triggerGone): a result whose write
// failed, or whose answer was lost, leaves no trigger marked started for
// the next holder to run again. Held by
// TestManualRunWhoseResultWriteFailedRunsOnce.
func triggerDeletes(sl *slot) []clientv3.Op {
	ops := make([]clientv3.Op, 0, len(sl.endedTriggers))
	for _, key := range sl.endedTriggers {
		ops = append(ops, clientv3.OpDelete(key))
	}
	return ops
}

// recordAhead marks the slot's next scheduled fire as started, in the state
// being written now, and returns the record the fire will wait on. A holder
// that stops before that fire leaves it recorded as started: the next holder
// re-runs it with the same execution id, which is safe, and starts nothing
// twice. Only when nothing of the slot runs: a record for a later fire would
// otherwise hide a run still in flight.
func (s *Scheduler) recordAhead(sl *slot) *aheadRecord {
	if !sl.nextScheduled.After(sl.recorded.Started) {
		return nil
	}
	return s.recordAheadOf(sl)
}

// recordAheadOf is recordAhead without the check that the slot's next fire
// is later than its recorded start: for a new holder whose predecessor
// recorded that fire ahead (takeOverAhead).
func (s *Scheduler) recordAheadOf(sl *slot) *aheadRecord {
	if len(sl.runs) > 0 || len(sl.owed.backlog) > 0 || sl.owed.queued != nil || sl.heapIndex < 0 || sl.nextScheduled.IsZero() {
		return nil
	}
	next := sl.nextScheduled
	a := &aheadRecord{scheduled: next, done: make(chan error, 1),
		prevStarted: sl.recorded.Started, prevStartedID: sl.recorded.StartedID, prevAttempt: sl.recorded.StartedAttempt}
	sl.recorded.Started, sl.recorded.StartedID, sl.recorded.StartedAttempt = next, jobs.ExecutionID(sl.id.Job, sl.id.Partition, next), 1
	sl.ahead = a
	return a
}

// takeBackAhead restores, in memory, the start that the slot's start
// recorded ahead replaced, for a fire that will not run here, so the next
// holder does not take it for a started fire (once written: writeLastState).
// It reports whether there was one to take back.
func takeBackAhead(sl *slot) bool {
	a := sl.ahead
	sl.ahead = nil
	if a == nil || !sl.recorded.Started.Equal(a.scheduled) {
		return false
	}
	sl.recorded.Started, sl.recorded.StartedID, sl.recorded.StartedAttempt = a.prevStarted, a.prevStartedID, a.prevAttempt
	return true
}

// lastState is the put of the slot's state as this member leaves it, for
// its last write; none if the state was never read under the slot's token
// (it was given up during its takeover): writing what this member held
// before would send the slot's state back. Held by
// TestSlotGivenUpDuringItsTakeoverWritesNoState.
func (s *Scheduler) lastState(sl *slot) []clientv3.Op {
	if sl.readAt != sl.token {
		return nil
	}
	return s.stateOps(sl)
}

// writeLastState queues the slot's state as this member leaves it (if it
// knows it: lastState), as a last write (fenced.Write.Last), so a full
// queue cannot refuse it.
func (s *Scheduler) writeLastState(sl *slot) {
	if ops := s.lastState(sl); len(ops) > 0 {
		s.writer.Enqueue(fenced.Write{Claim: sl.claim(), Ops: ops, Last: true})
	}
}

// stateReset records, in the slot's history, that its state could not be
// read and the slot starts afresh, and logs it.
func (s *Scheduler) stateReset(sl *slot, why error, now time.Time) {
	s.cfg.Logger.Warn("a slot's recorded state is unreadable; treating the slot as never run", "slot", sl.id.String(), "err", why)
	s.record(sl, history.Record{ExecutionID: "reset-" + jobs.ExecutionID(sl.id.Job, sl.id.Partition, now), ScheduledTime: now, StartedAt: now, FinishedAt: now,
		Outcome: history.OutcomeReset, Attempt: 1, Cause: history.CauseCatchup, Error: why.Error() + "; the slot starts afresh"}, nil)
}

// historyTrim deletes a slot's records at or past limit in the ring: after
// the limit was lowered, they would never be overwritten.
func historyTrim(cluster string, s shard.Slot, limit int) clientv3.Op {
	slotPrefix := keyspace.SlotHistory(cluster, s)
	return clientv3.OpDelete(fmt.Sprintf("%s%03d", slotPrefix, limit), clientv3.WithRange(clientv3.GetPrefixRangeEnd(slotPrefix)))
}

// lingerAhead is how far off a fire must be for its start recorded ahead to
// be lazy: its record then lands (linger and a loaded etcd's round trip)
// well before the fire is armed.
const lingerAhead = 500 * time.Millisecond
