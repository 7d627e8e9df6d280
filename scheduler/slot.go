package scheduler

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/shard"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// state is where a slot is in its life on this member (see doc.go).
type state int

const (
	idle        state = iota
	campaigning       // in line for a campaign, or a campaign goroutine is waiting to win
	leading           // won; fires are in the timer heap unless draining
	resigning         // a resign goroutine is deleting the key
)

func (s state) String() string {
	return [...]string{"idle", "campaigning", "leading", "resigning"}[s]
}

// job is a catalog job prepared for dispatch.
type job struct {
	spec     config.Job
	schedule config.Schedule
	executor jobs.Executor
	fence    jobs.Fence // nil without fence_url or fence_command
}

// slot is owned by the scheduler's loop goroutine; nothing else touches it.
type slot struct {
	id    shard.Slot
	job   *job
	state state
	// gen identifies the current campaign, so a late result of an abandoned
	// campaign is recognised.
	gen            uint64
	wanted         bool // the current view prefers this member for the slot
	election       *concurrency.Election
	cancelCampaign context.CancelFunc // while its campaign goroutine runs
	campaignTimer  *time.Timer        // while its campaign waits out a delay
	token          fencing.Token
	leaderKey      string
	// leadCtx is cancelled when leadership ends; every execution derives from it.
	leadCtx    context.Context
	cancelLead context.CancelFunc
	next       time.Time // when the next fire starts (scheduled time + jitter), while in the heap
	// wakeAt orders the heap: Config.ArmAhead before next, so a free slot's
	// fire is armed ahead of its time; next itself once arming was declined.
	wakeAt    time.Time
	heapIndex int // -1 when not in the heap
	// nextScheduled is the scheduled time of the next fire.
	nextScheduled time.Time
	// st is the slot's recorded state, loaded when the slot is won.
	st SlotState
	// runs cancels each execution in flight, by run number; nil until the
	// slot's first run.
	runs   map[uint64]context.CancelFunc
	runSeq uint64
	// queued is the one fire waiting under overlap: queue (or a retry).
	queued *fire
	// pending are fires owed on acquisition (catch-up, unfinished, manual),
	// run one at a time before the schedule's own.
	pending []fire
	// lastTakeover says the latest run was owed on acquisition (a catch-up,
	// or the retry of a fire the previous holder left unfinished): a
	// scheduled fire that comes while it is in flight joins the backlog
	// under fire-all.
	lastTakeover bool
	// unrecorded counts this slot's runs still waiting for etcd to record
	// their start (decremented by their goroutines).
	unrecorded atomic.Int32
	// carried are the history records of fires skipped while a run of the
	// slot waited for its start to be recorded: they go with the slot's next
	// write (see skip).
	carried []Record
	// ahead is the start of the next scheduled fire, recorded ahead of time
	// (with the previous run's result, or on acquisition), so that fire
	// starts without an etcd round trip once the write is acknowledged.
	ahead *aheadRecord
	// armed is the fire armed ahead of its time, from arming until its run
	// ends or is withdrawn.
	armed *armedRun
	// raising is set while the fences are raised for a new token; the slot
	// fires only after that succeeded.
	raising bool
	// lateTriggers are the manual triggers the control watch reported while
	// the fences were raised; they join the ones read at acquisition.
	lateTriggers []fire
	// backoff delays the next campaign after a failure to raise a fence.
	backoff bool
	// removed is set when the catalog no longer has the slot: it is released
	// after its in-flight runs and then forgotten.
	removed bool
}

// slotHeap orders leading slots by when the loop next has to look at them
// (wakeAt): one timer for all slots of the member, not a goroutine or timer
// per slot.
type slotHeap []*slot

func (h slotHeap) Len() int { return len(h) }
func (h slotHeap) Less(i, j int) bool {
	return h[i].wakeAt.Before(h[j].wakeAt)
}
func (h slotHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *slotHeap) Push(x any) {
	s := x.(*slot)
	s.heapIndex = len(*h)
	*h = append(*h, s)
}
func (h *slotHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.heapIndex = -1
	return s
}

// aheadRecord is a start recorded before its scheduled time.
type aheadRecord struct {
	scheduled time.Time
	done      chan error // the write's answer, read by the fire that uses it
	// what Started said before, restored when the slot is given up first
	prevStarted   time.Time
	prevStartedID string
	prevAttempt   int
}

// armedRun is a fire started ahead of its time (see Config.ArmAhead). Its
// goroutine waits for the fire's instant (the releaser opens its gate) and
// then claims the run (waiting → released); until then the loop can take it
// back (waiting → withdrawn) when it gives the slot up, and the fire stays
// recorded ahead for the next holder. The compare-and-swap decides which happened, so a run is never
// both withdrawn and started.
type armedRun struct {
	run   uint64
	ahead *aheadRecord // consumed by the run; given back on withdrawal
	at    time.Time    // the fire's instant
	place *place
	state atomic.Int32
}

const (
	armedWaiting int32 = iota
	armedReleased
	armedWithdrawn
)
