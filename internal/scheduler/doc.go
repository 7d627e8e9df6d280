// Package scheduler decides, on one member, which slots to campaign for,
// holds their elections, and fires their executions on time.
//
// # Where to look
//
// Each file answers one question:
//
//	doc.go            this map
//	scheduler.go      the Scheduler, its Config and defaults
//	clock.go          the scheduling clock: the real one, and a manual one for tests
//	event.go          the events observers (metrics, logs, tests) wait on, and slot spans
//	run.go            the member's phases: running, draining, closing (Run)
//	loop.go           the loop: one select, one call per case; views and trust
//	catalog.go        what happens when the catalog changes (SetCatalog)
//	campaign.go       how a slot is campaigned for, at most maxCampaigning at once
//	candidacy.go      how a campaign nobody else stands in is won in one transaction, shared
//	takeover.go       what a new holder reads of a slot, and what it copies to the ring
//	takeoverreads.go  how the reads of slots taken over together share transactions
//	fence.go          what a new holder does before its first fire (raise the fences)
//	catchup.go        what a new holder owes: unfinished, missed and requested fires
//	leadership.go     what happens when leadership ends (released, lost, resigned)
//	fire.go           when a slot's next fire is due (the timer heap)
//	dispatch.go       whether a due fire starts: pause, overlap, backlog
//	arm.go            fires prepared ahead of their instant, and taken back
//	execute.go        how an execution starts once its start is recorded
//	permits.go        how a fire of a job with a concurrency limit waits for a permit
//	gate.go           the gates armed fires wait at, opened at their instant
//	finish.go         what happens when an execution ends
//	retry.go          retries and fires whose start etcd did not record
//	notify.go         the notifications of final records, handed to package notify
//	record.go         what a slot writes to etcd, under its fence
//	journals.go       when the journal of a member that has left is deleted
//	watch.go          the election and control watches
//	control.go        pause, resume and manual triggers as the loop sees them
//	oneoff.go         manual runs at a time (kira trigger --at), and a trigger's start mark
//	at.go             what a slot never held owes of an @at schedule's one fire
//	after.go          when a dependent slot (after:) fires: its upstreams' logical times, in order
//	upstreams.go      how a member reads its upstreams' records (journals, then rings, at one revision)
//	slot.go           a slot's life on this member, and what it owes
//
// # One loop, one timer
//
// A Scheduler's state (every slot's life, the heap of next fire times) is
// owned by the single goroutine of its loop. Campaigns, resigns and
// executions run in goroutines the loop starts and report back on channels;
// the loop never blocks on etcd or on a job. One timer (on the scheduling
// clock) for the next fire, and one (on the member's own clock) for the
// lease's trust window, serve every slot: 10,000 slots cost 10,000 heap
// entries, not 10,000 goroutines. The fire path reads nothing from etcd: the
// token was learned when the election was won.
//
// # The life of a slot
//
//	         view prefers me                 won (token T)
//	idle ───────────────────► campaigning ─────────────────► leading ──► fire ──► executing
//	 ▲                              │ view prefers another     │                        │
//	 │                              ▼                          │ view prefers another   │
//	 └──── resigning ◄──── (between executions) ◄──────────────┘ (finish, then resign)  │
//	 ▲                                                                                   │
//	 └──────── lease lost or trust window closed: cancel everything, start nothing ─────┘
//
// The stage is one of the four names above (slot.stage). Three phases of
// leading are flags beside it, each a step the diagram passes through:
//
//	leading, raising   the takeover: state, ring and journals read, the
//	                   fences raised (fence.go); nothing fires yet
//	leading, removed   the catalog no longer has the job: released after
//	                   its runs, then forgotten (catalog.go)
//	resigning or idle, a fence refused the token, or Admit did: the next
//	backoff            campaign waits campaignRetry (campaign.go)
//
// A member campaigns (concurrency.Election, one per slot, all on the
// member's one session) only for the slots the assignment prefers it for
// in its latest view, and resigns the others between executions. Views of
// different members converge on the latest revision; meanwhile the election
// keeps it safe, since etcd grants a slot's election to one key at a time.
// After Campaign returns, the member confirms it: the session is alive and
// its key still exists with the revision it was elected at. That revision is
// the slot's fencing token.
//
// # Trust window
//
// Before the loop starts anything it asks the member whether its lease is
// provably alive (last acknowledged renewal + TTL − margin, monotonic
// clock). If not, Run cancels every execution, reports every slot lost and
// returns: it starts nothing. Executions derive their context from the
// slot's leadership, so losing a slot, or a 409 from a fencing guard,
// cancels that slot's work at once.
//
// # Raising the fence on acquire
//
// A newly won slot does not fire until its fences are raised: the job's
// fence_url or fence_command, then Config.OnAcquire, each given the new
// claim. If they fail, the slot is given up and campaigned for again after a
// pause. So an ex-leader cannot slip a write in between the new leader's
// acquisition and its first execution. Before all that, Config.Admit may
// refuse the token (package highwater: etcd's revision went back, and the
// token may have named another holder): the slot is then not led at all.
//
// # What a slot remembers
//
// A slot's state (last scheduled time started and finished, outcome, token)
// and a bounded history live in etcd (package history), written only under
// the fence by the member's one batched writer (internal/fenced), each
// slot's writes in the order they were queued. Every write of the slot puts
// its state key, the one place of its state; records go to the history
// without it. An error from etcd means "maybe applied": nothing the loop
// does after one assumes the write did not land. A fire starts only once its
// start is recorded; a scheduled fire's start is recorded ahead, with the
// previous run's result, so it needs no round trip at its instant. A new
// holder reads the state when it wins the slot and owes: the unfinished fire
// (same execution id, as a retry), the missed fires its misfire policy keeps,
// and waiting manual triggers (one marked started is a manual run in doubt,
// a retry too), one at a time; then the schedule's own fires, under the
// job's overlap policy, and the one-off runs at their times. Schedules without CRON_TZ or timezone are
// evaluated in UTC, so members in different local zones agree.
//
// # Arming
//
// Config.ArmAhead before a fire, if the slot is free, the job not paused
// and the lease trusted past the fire's time, the loop arms the fire: its
// goroutine is made then and waits at a gate that one goroutine per process
// opens at the instant. At the instant the fire checks the slot is still
// held and the lease trusted, and starts. A graceful stop, a slot given up,
// or a changed schedule takes an armed fire back if it has not started (a
// compare-and-swap decides); its start stays recorded ahead for the next
// holder.
//
// # Stopping
//
// A graceful stop (ctx cancelled) stops firing, hands idle slots over at
// once, waits for in-flight runs up to Config.Grace, then cancels the rest.
// The caller then leaves (Member.Leave): the lease revoke deletes all of the
// member's election keys in one etcd revision, so the next owners take over
// in milliseconds instead of a TTL.
package scheduler
