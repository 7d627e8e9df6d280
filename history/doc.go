// Package history owns what a slot records in etcd: its state (what
// started, what finished) and its execution records, their encodings, and
// how a reader finds a slot's newest.
//
// # Where a slot's state lives
//
// A slot's state (history.SlotState: the latest fire started, with its
// execution id and attempt, the latest finished, the history sequence) is
// in its state key, keyspace.State. Every write of the holder that changes
// it (a start, a start recorded ahead with the previous result, a result, a
// start taken back, the resign that hands the slot over) puts the state key
// in the same fenced transaction: the transaction commits only while the
// holder's leader key has the holder's token as its create revision. A new
// holder wins the slot only after the previous leader key is gone, so every
// write fenced by it committed before; the new holder then reads the state
// key (a linearizable read, after its win) and knows what started and what
// finished. Execution records go, with a copy of the state, to the holder's
// journal (one key per transaction of its writer, reused in turn) or to the
// slot's ring of history keys; they are the history `kira history` shows,
// and the state key wins over them at equal revision (NewestState).
//
// An operator must never delete the state keys (`/kira/<cluster>/state/`):
// they are the only proof of what ran. Journals and rings are history: a
// lost journal loses history lines, never makes a fire run again.
//
// # The contract
//
//  1. A fire whose run ended on a member that stopped gracefully within
//     --grace never runs again: its result is queued before the slot is
//     released, the resign that releases it carries the state and commits
//     after it (the writer keeps each slot's writes in order), and a full
//     writer queue never refuses that last write. Held by
//     TestResignCarriesTheLastState, TestReleasedSlotRetractsItsAheadRecord,
//     TestWriterQueuesALastWriteWhenFull and the chaos suite's
//     TestGracefulStopDuringARunUnderLoad and TestRollingRestart, judged by
//     the strict checker (chaos.Check: forbidden replays).
//  2. A fire whose result was committed never runs again, on any member:
//     the result is in the state key, which no journal reuse, sweep of a
//     departed member's journal or compaction removes (compaction keeps
//     every key's latest version). Held by
//     TestEveryWriteKeepsTheStateKeyCurrent, TestFailoverCatchUp and the
//     chaos suite's faults (kill -9, SIGSTOP, a cut member, quorum loss,
//     an etcd leader killed) under the strict checker.
//  3. Only the in-doubt fire (start committed, result not) runs again: under
//     the same execution id, attempt + 1, its start recorded under the new
//     holder's token before it runs, so at most once per change of holder.
//     Held by TestUnfinishedFireRerunsWithSameID and the strict checker
//     (a replay twice under one token is forbidden).
//  4. `kira history` keeps the newest history_limit records of each slot
//     across handovers and takeovers, with no sequence number reused: a
//     resign copies the slot's 64 newest journaled records to its ring, and
//     the next holder copies every other one among the newest history_limit
//     it finds in journals, in as many writes as it takes. Held by
//     TestTakeoverCopiesEveryRecordOfTheLimit,
//     TestJournalOfALeftMemberIsDeletedOnceItsSlotsAreTaken and
//     TestHistoryKeepsItsLimitAndTrimsWhenLowered. Not held: after a resign,
//     the old holder no longer copies the slot's older records out of its
//     journal before reusing their entries, so a slot keeping more than 64
//     records whose next holder reads the journals only after 1,024 more
//     transactions of the old holder loses the older ones.
package history
