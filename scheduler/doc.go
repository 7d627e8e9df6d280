// Package scheduler decides, on one member, which slots to campaign for,
// holds their elections, and fires their executions on time.
//
// # One loop, one timer
//
// A Scheduler's state (every slot's life, the heap of next fire times) is
// owned by the single goroutine in Run. Campaigns, resigns and executions run
// in goroutines that the loop starts, and report back on channels; the loop
// never blocks on etcd or on a job. One timer (on the scheduling clock) for the
// next fire, and one (on the member's own clock) for the lease deadline, serve
// every slot: 10,000 slots cost 10,000 heap entries, not 10,000 goroutines. The fire path reads nothing from
// etcd: the token was learned when the election was won.
//
// # Arming: the fire's instant costs nothing but the start
//
// A slot's start is recorded ahead (with the previous run's result), so a
// fire needs no etcd round trip. The loop goes further: Config.ArmAhead
// (300 ms) before a fire, if the slot is free, the job not paused and the
// lease trusted past the fire's time, it arms the fire: the execution's
// goroutine is made then and waits at a gate. One releaser goroutine per
// process (shared by its real-clock schedulers) opens each instant's gate,
// waking a millisecond early and yielding
// until the instant, because Go's timers wake a parked process up to a
// millisecond late. At the instant the fires' goroutines check the slot is
// still held and the lease trusted, and start (the span's attributes and the
// execution's context were built when it was armed); a run that ends yields
// once before its bookkeeping, and the loop puts off recording results while
// fires released together are starting (at most 50 ms), so starts go first. A
// graceful stop, a slot given up, or a changed schedule takes an armed fire
// back if it has not started (a compare-and-swap decides); its start stays
// recorded ahead for the next holder. Started events come from the
// execution's goroutine, at the start. The fires of command jobs are woken
// first at their instant, and the others once those processes have started
// (at most 5 ms later): a fork and an exec is the slowest start, and the new
// process needs a CPU that the instant's other fires would take.
//
// # One writer per member
//
// Every fenced write (a start, a result with the next start recorded ahead,
// a resign) goes through the member's state writer, which batches the writes
// queued together into one transaction (up to 64 writes, 128 operations),
// with up to 4 transactions in flight, each slot's writes in queue order.
// Writes nothing waits for soon (records, starts recorded ahead of a fire
// more than 500 ms off) may wait up to 20 ms for others, so that slots whose
// fires are spread over time (jitter) still share transactions.
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
// A member campaigns (concurrency.Election, one per slot, all on the member's
// one session) only for the slots the ring prefers it for in its latest view,
// and resigns the others between executions. At most 256 campaigns talk to
// etcd at once, each in a goroutine; the others wait in line in the loop,
// with no goroutine (a member taking 10,000 slots would otherwise make 10,000
// goroutines, whose descriptors Go keeps for good). Views of different members
// converge on the latest revision; meanwhile the election keeps it safe, since
// etcd grants a slot's election to one key at a time.
//
// After Campaign returns, the member confirms it: the session is alive and its
// key still exists with the revision it was elected at (Campaign can return
// after the lease already expired). That revision is the slot's fencing token.
//
// # Trust window
//
// Before the loop starts anything it asks the member whether its lease is
// provably alive (last keepalive ack + TTL − margin, monotonic clock). If not,
// Run cancels every execution, reports every slot lost and returns: it starts
// nothing. A loss of the session does the same. Executions derive their
// context from the slot's leadership, so losing a slot, or a 409 from a
// fencing guard, cancels that slot's work at once.
//
// # Raising the fence on acquire
//
// A newly won slot does not fire until its fences are raised: the job's
// fence_url or fence_command, then Config.OnAcquire, each given the new claim
// (leader key and token). Until they succeed the slot is out of the timer
// heap; if they fail, the slot is given up and campaigned for again after a
// pause. So an ex-leader cannot slip a write in between the new leader's
// acquisition and its first execution. A 409 (or a handler's
// fencing.ErrFenced) from a protected resource means a newer token exists: the
// member gives the slot up at once and campaigns again.
//
// # Stopping
//
// A graceful stop (ctx cancelled) stops firing, waits for in-flight runs up to
// Config.Grace, then cancels the rest. The caller then calls Member.Leave: the
// lease revoke deletes all of the member's election keys in one etcd revision
// (the resign of every slot at once), so the next owners take over in
// milliseconds instead of a TTL. With runs in flight, the member first
// withdraws its record (it leaves every view, so the others want its slots)
// and resigns its idle slots at once, and each busy slot as its run ends.
// Resigns are fenced deletes queued in the state writer behind the slot's
// own writes, so a run's result is never fenced out by its slot's resign.
//
// # What a slot remembers
//
// Each slot's state (last scheduled time started and finished, outcome,
// token) and a bounded history live in etcd, written only under the fence
// by one writer per member that batches slots firing together, with up to
// four transactions in flight and each slot's writes (its resign too) kept
// in the order they were queued, never two of one slot in one transaction.
// An execution record carries the slot's state as of its write, so a result
// and the next start recorded ahead are one key; the state key is written
// only by writes without a record, and the state is whichever of the two
// was written last (by revision). A
// fire starts only once its start is recorded. A new holder reads the state
// when it wins the slot and owes: the unfinished fire (same execution id,
// as a retry), the missed fires its misfire policy keeps, and waiting manual
// triggers (control keys, consumed in the fenced write that records their
// start), one at a time; then the schedule's own fires, under the job's
// overlap policy. The catalog itself can change under a running loop
// (SetCatalog). Schedules without CRON_TZ or timezone are evaluated in UTC,
// so members in different local zones agree.
package scheduler
