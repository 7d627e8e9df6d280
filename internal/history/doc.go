// Package history owns what a slot records in etcd: its state (what
// started, what finished) and its execution records, their encodings, and
// how a reader finds a slot's newest.
//
// # Where a slot's state lives
//
// A slot's state (SlotState: the latest fire started, with its execution id
// and attempt, the latest finished, the history sequence) lives in one key,
// its state key, and nowhere else that a reader trusts: every write of the
// slot's holder puts it, under the fence (each transaction commits only
// while the holder's leader key has the holder's token as its create
// revision), in the same transaction as the records it writes. Nothing else
// writes it: the records go to the holder's journal (one key per
// transaction of its writer, reused in turn) or the slot's ring without a
// state, so an entry reused, a record copied late, or a transaction that
// etcd applied but answered with an error ("maybe applied") can cost a
// record of the history, never the state. The state key is overwritten only
// by a newer fenced write of the slot. Records written by earlier versions
// carry the state as of their write (Stored.State); NewestState still reads
// them, so a cluster upgraded member by member keeps its state: of all
// these, the one written under the highest token, the newest by revision.
//
// A new holder wins the slot only after the previous leader key is gone,
// so every write fenced by it committed before. The new holder then reads
// the state key, and the journals and the ring for the history, after its
// win. A slot's manual runs in doubt are its trigger keys marked started:
// a final result deletes its trigger in every write of the slot until the
// delete is seen (scheduler: triggerDeletes).
//
// The path a record takes through the journals, and where each step is:
// go doc ./internal/history/journal.
//
// An operator must never delete the state keys (`/kira/<cluster>/state/`)
// nor the journals of members still in the view (`/kira/<cluster>/journal/`):
// together they are the proof of what ran. Members delete the journals of
// members that left once nothing in them is needed.
//
// # The contract
//
//  1. A fire whose run ended on a member that stopped gracefully within
//     --grace never runs again: its result is queued before the slot is
//     released, the resign that releases it carries the state and commits
//     after it (the writer keeps each slot's writes in order), a full writer
//     queue never refuses that last write, and the next holder reads the
//     state key after its win. Held by TestTakeoverReadsTheJournalsAfterItsWin,
//     TestResignCarriesTheLastState, TestLateCreateEventLeavesAResigningKeyToItsResign,
//     TestGracefulStopWritesTheLastDrainedSlotsState,
//     TestSlotGivenUpDuringItsTakeoverWritesNoState,
//     TestReleasedSlotRetractsItsAheadRecord, TestWriterQueuesALastWriteWhenFull
//     and the chaos suite's TestGracefulStopDuringARunUnderLoad and
//     TestRollingRestart, judged by the strict checker (chaos.Check:
//     forbidden replays).
//  2. A fire whose result was committed never runs again, on any member:
//     the state that says it finished is in the slot's state key, put in
//     the transaction that records the result, and every later write of
//     the slot puts the state again, as the holder knows it, so a write
//     that etcd applied but answered with an error changes nothing; an
//     earlier holder's state put again later does not pass for a newer one
//     (the highest token wins); compaction keeps every key's latest
//     version. A manual run's final result deletes its trigger in every
//     write of the slot until the delete is seen, the resign included.
//     Held by TestAnAppliedWriteAnsweredWithAnErrorKeepsItsState,
//     TestJournalEntriesHoldNoState, TestNewestStateIsTheHighestTokensNewest,
//     TestFailoverCatchUp, TestManualRunWhoseResultWriteFailedRunsOnce,
//     TestRandomWriterFaults (whose faults include answers lost after the
//     commit) and the chaos suite's faults (kill -9, SIGSTOP, a cut member,
//     a stalled member, quorum loss, the etcd leader killed, compaction,
//     defragmentation) under the strict checker, which also watches every
//     state etcd commits and fails a fire started again after its success
//     was recorded.
//  3. Only the in-doubt fire (start committed, result not) runs again: under
//     the same execution id, attempt + 1, its start recorded under the new
//     holder's token before it runs, so at most once per change of holder.
//     Held by TestUnfinishedFireRerunsWithSameID and the strict checker
//     (a replay twice under one token, or by the holder that ran it, is
//     forbidden).
//  4. `kira history` keeps the newest history_limit records of each slot
//     across handovers and takeovers, with no sequence number reused: a
//     resign copies the slot's 64 newest journaled records to its ring, and
//     the next holder copies every other one among the newest history_limit
//     it finds in journals, in as many writes as it takes; the older ones a
//     resign did not copy, the old holder copies before it reuses their
//     entries, unless the next holder has read them by then. The one
//     record the history can lose is one whose write etcd applied but
//     answered with an error: the writer does not know that the entry holds
//     it, and does not copy it before reusing the entry. Held by
//     TestTakeoverCopiesEveryRecordOfTheLimit,
//     TestRecordsAHandoverLeftAreCopiedBeforeTheirEntriesAreReused,
//     TestJournalOfALeftMemberIsDeletedOnceItsSlotsAreTaken and
//     TestHistoryKeepsItsLimitAndTrimsWhenLowered.
package history
