// Package shard maps every slot (a job partition) to its preferred owner
// among the members of a view that the job's placement admits.
//
// Assign places all slots of a catalog at once, from rendezvous scores (a
// hash of slot and member id) in two steps. Each job's base, ⌊P/N⌋ of its P
// slots for each of its N members, is the stable matching of its slots to
// its members (deferred acceptance: a member keeps the slots that score
// highest with it). The P mod N slots left over, from all jobs, then go to
// the member that prefers them most among those of the job without a
// leftover of it yet, a member whose total already exceeds the average
// only when no other can take it (bounded loads). Bounds, and the tests
// that hold them:
//
//   - Per job: each member leads ⌊P/N⌋ or ⌈P/N⌉ of the job's slots, so at
//     most one when P < N (TestEveryJobSplitsEvenly,
//     TestSmallJobsAtMostOneEach).
//   - Across the cluster: without placements, no member's total exceeds the
//     average by more than 5 % plus one slot, in the shapes the test tries:
//     500 jobs of 1 to 16 partitions over 5 members, 40 single-slot jobs
//     over 3, random catalogs over 1 to 50 members
//     (TestClusterTotalsBounded). A placement can force more onto the few
//     members it admits.
//   - Few moves: at 10,000 slots, a fourth member joining three moves at most
//     26 % of them, ideal 25 % (TestFewMovesOneBigJob). For catalogs of small
//     jobs, averaged over random views, at most 1.3 × the ideal for
//     single-slot jobs and jobs of 1 to 100 partitions at 3 → 4 and 4 → 5
//     members; exact splits cost more for jobs of 1 to 16 partitions and at
//     7 → 8 members, up to about 1.9 × (TestFewMovesManySmallJobs holds each
//     shape; BenchmarkMoves and BenchmarkMovesOneJob report them).
//
// The answer is a pure function of the jobs and their members' ids: every
// member that computes it for the same view and catalog gets the same
// owners, whatever the order it lists them in (TestSameInputSameOwners).
// It depends on the whole catalog, not on the view alone, though little
// (adding a job to 500 moves under 1 % of the others' slots,
// TestAddingAJobMovesFewOthers): members that run different catalog
// revisions (during an apply) may prefer different owners for some
// leftovers until they run the same one.
//
// Place and Remove change one job of an assignment and move no other
// job's slot. Place's answer depends on the job and its members alone: the
// job's base is Assign's, and each leftover goes to its highest-scoring
// member without a leftover of the job yet, whatever the members' totals,
// so every member places a job the same way whatever its history
// (TestPlaceDependsOnTheJobAlone). Assign over the whole catalog bounds
// the totals, so it may put the job's leftovers elsewhere
// (TestPlaceKeepsOtherJobsAndTheJobsBase). A member places jobs added one
// by one so, then computes Assign again and hands over the slots whose
// owner it changed, under their fences.
//
// It does not decide who leads a slot (the slot's election does, and keeps
// it safe while members' views disagree); it decides who campaigns for it.
package shard
