// Package history owns what a slot records in etcd: its state (what
// started, what finished) and its execution records, their encodings, and
// how a reader finds a slot's newest.
//
// # Where a slot's state lives
//
// A slot's state (SlotState: the latest fire started, with its execution id
// and attempt, the latest finished, the history sequence) is written by its
// holder under the fence: each transaction commits only while the holder's
// leader key has the holder's token as its create revision. A write without
// a record (a start, a start taken back) puts the state key; a record
// carries the state as of its write (Stored.State), in the holder's journal
// (one key per transaction of its writer, reused in turn) or the slot's
// ring; the write that leaves the slot (the resign that hands it over, or
// the state a graceful stop leaves) puts the state key in the same
// transaction; and a new holder's first write puts it too. The slot's state
// is the one of all these written under the highest token, the newest by
// revision of those (NewestState).
//
// A new holder wins the slot only after the previous leader key is gone,
// so every write fenced by it committed before. The new holder then reads
// the journals, and the state key and the ring at the same revision, after
// its win, and no place loses the previous holder's newest state before
// that: a writer reuses a journal entry only after copying the records
// still among their slot's newest committed to the ring, also after their
// claim ended, until a newer holder has put the slot's state key (which it
// does after its read); a record moves from a journal to the ring, never
// out of both; and a departed member's journal is deleted only once every
// slot in it has a state key of a later holder, and only as it was read.
//
// The path a record takes through the journals, and where each step is:
// go doc ./journal.
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
//     journals after its win. Held by TestTakeoverReadsTheJournalsAfterItsWin,
//     TestResignCarriesTheLastState, TestLateCreateEventLeavesAResigningKeyToItsResign,
//     TestGracefulStopWritesTheLastDrainedSlotsState,
//     TestSlotGivenUpDuringItsTakeoverWritesNoState,
//     TestReleasedSlotRetractsItsAheadRecord, TestWriterQueuesALastWriteWhenFull
//     and the chaos suite's TestGracefulStopDuringARunUnderLoad and
//     TestRollingRestart, judged by the strict checker (chaos.Check:
//     forbidden replays).
//  2. A fire whose result was committed never runs again, on any member:
//     the result is in the holder's journal or the state key, read by the
//     next holder as above; an earlier holder's record put again later does
//     not pass for a newer state (the highest token wins); compaction keeps
//     every key's latest version. Held by TestNewestStateIsTheHighestTokensNewest,
//     TestSweepSparesAJournalWrittenSinceItsRead, TestFailoverCatchUp,
//     TestAnEntryIsReusedOnlyAfterItsSlotsNewerRecordsLanded,
//     TestACopyLandsAfterTheClaimEndedUntilANewerHolderTookOver,
//     TestAHandoverThatCouldNotCopyLeavesItsRecordsToCopy,
//     TestTakeoverFindsARecordMovedToTheRingWhileItReads and the
//     chaos suite's faults (kill -9, SIGSTOP, a cut member, a stalled member,
//     quorum loss, the etcd leader killed, compaction, defragmentation) under
//     the strict checker, which also watches every state etcd commits and
//     fails a fire started again after its success was recorded.
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
//     entries, unless the next holder has read them by then. Held by
//     TestTakeoverCopiesEveryRecordOfTheLimit,
//     TestRecordsAHandoverLeftAreCopiedBeforeTheirEntriesAreReused,
//     TestJournalOfALeftMemberIsDeletedOnceItsSlotsAreTaken and
//     TestHistoryKeepsItsLimitAndTrimsWhenLowered.
package history
