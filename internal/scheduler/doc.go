// Package scheduler decides, on one member, which slots to campaign for,
// holds their elections, and fires their executions on time. Each file
// answers one question, named at its top; the rules every member follows,
// and why, are in docs/architecture.md.
//
// # One loop, one timer
//
// A Scheduler's state (every slot's life, the heap of next fire times) is
// owned by the single goroutine of its loop. Campaigns, resigns and
// executions run in goroutines the loop starts and report back on channels;
// the loop never blocks on etcd or on a job. One timer (on the scheduling
// clock) for the next fire, and one (on the member's own clock) for the
// lease's trust window, serve every slot. The fire path reads nothing from
// etcd: the token was learned when the election was won, and a fire's
// start is recorded ahead, with the previous run's result.
//
// # The life of a slot
//
// A slot is in one of five phases (phase.go); setPhase is the one place
// that changes them, and refuses a change not drawn here:
//
//	       view prefers me            won (token T)           fences raised
//	idle ───────────────► campaigning ─────────────► raising ───────────────► leading ─► fires
//	 ▲  ▲                      │ view prefers another   │ fence refused,          │
//	 │  │                      ▼                        │ or not preferred        │ not preferred:
//	 │  └───────────────── resigning ◄──────────────────┴─────────────────────────┘ after its runs
//	 │
//	 └── from campaigning, raising or leading: lease lost or trust window closed (cancel everything)
//
//	idle         not held here, no campaign
//	campaigning  in line for a campaign (at most maxCampaigning run at once), or waiting to win
//	raising      the takeover: state, ring, triggers and journals read, the job's fence and
//	             Config.OnAcquire run, Config.Admit asked; nothing fires (TakingOver counts these)
//	leading      fires from the timer heap; a new view that prefers another member resigns
//	             it between executions
//	resigning    a fenced delete of the leader key, behind the slot's own queued writes
//
// Beside the phase, two facts that are not phases: backoff (a fence or Admit
// refused the token: the next campaign waits campaignRetry) and removed (the
// catalog no longer has the job: released after its runs, then forgotten,
// forget.go; the first member of the view sweeps its keys, jobsweep.go). A
// slot held under a token older than its job (deleted and created again
// since) is released after its runs too, and campaigned for anew
// (slot.outlived): its next holder starts it afresh (takeover.go).
//
// # What a slot remembers
//
// A slot's state lives in its state key in etcd (package history), put by
// every write of the slot, under its fence, by the member's one batched
// writer (internal/fenced), each slot's writes in the order they were
// queued. An error from etcd means "maybe applied": nothing the loop does
// after one assumes the write did not land. A new holder reads the state
// when it wins the slot and owes the unfinished fire (same execution id, a
// retry), the missed fires its misfire policy keeps, and waiting manual
// triggers, one at a time; then the schedule's own fires.
package scheduler
