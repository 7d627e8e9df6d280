package scheduler

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// slot is one slot's life on this member. The scheduler's loop goroutine
// owns every field but three: unrecorded and refused, which its runs'
// goroutines count, and an armed run's fate, which a compare-and-swap decides between
// the loop and the run (see armedRun).
type slot struct {
	id    shard.Slot
	job   *job
	phase phase // changed only by setPhase
	// gen identifies the current campaign, so a late result of an abandoned
	// campaign is recognised.
	gen            uint64
	wanted         bool // the current view prefers this member for the slot
	election       *concurrency.Election
	cancelCampaign context.CancelFunc // while its campaign goroutine runs
	campaignTimer  *time.Timer        // while its campaign waits out a delay
	token          fencing.Token
	leaderKey      string
	// resignRev is the create revision of the candidacy key being resigned,
	// while in resigning: that key is the resign's to delete (ownKeyCreated).
	resignRev int64
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
	// recorded is the slot's state as this member last wrote it (loaded
	// from etcd when the slot is won).
	recorded history.SlotState
	// readAt is the token under which recorded was read from etcd: until
	// it is the slot's token, recorded is not the slot's state (the slot
	// was given up before its takeover read ended) and must not be written.
	readAt fencing.Token
	// runs cancels each execution in flight, by run number; nil until the
	// slot's first run.
	runs   map[uint64]context.CancelFunc
	runSeq uint64
	// owed are the fires waiting for the slot to be free.
	owed owedFires
	// lastMisfire says the latest run was a misfire (fire.misfire): a
	// scheduled fire that comes while it is in flight joins the backlog
	// under fire-all.
	lastMisfire bool
	// unrecorded counts this slot's runs still waiting for etcd to record
	// their start (decremented by their goroutines).
	unrecorded atomic.Int32
	// refused counts this slot's runs whose start etcd refused (other than
	// by the fence) whose result the loop has not taken yet: a fire due
	// meanwhile is due while etcd fails (see dispatch). Incremented by the
	// runs' goroutines, decremented by the loop (runEnded).
	refused atomic.Int32
	// carried are the history records of fires skipped while a run of the
	// slot waited for its start to be recorded: they go with the slot's next
	// record, the last of them in its key (see skip and recordOps).
	carried []history.Record
	// endedTriggers are the keys of the manual runs whose final result this
	// holder recorded, until the control watch sees them deleted: every
	// write of the slot deletes them (triggerDeletes).
	endedTriggers []string
	// queuedSkip is the skip record of the slot's last write, while that
	// write may still be waiting in the writer's queue: the next skip of
	// the slot is added to it (see skip).
	queuedSkip *queuedSkip
	// ahead is the start of the next scheduled fire, recorded ahead of time
	// (with the previous run's result, or on acquisition), so that fire
	// starts without an etcd round trip once the write is acknowledged.
	ahead *aheadRecord
	// armed is the fire armed ahead of its time, from arming until its run
	// ends or is withdrawn.
	armed *armedRun
	// backoff delays the next campaign by campaignRetry: a fence, or Admit,
	// refused the token this member won. It is what the next campaign
	// waits, not a phase: set on the way out of raising or campaigning,
	// cleared when the campaign is put in line (startCampaign).
	backoff bool
	// removed is set when the catalog no longer has the slot, whatever its
	// phase: the catalog's, not the life's. The slot is released after its
	// in-flight runs and then forgotten (dropIfRemoved).
	removed bool
	// after is a dependent slot's decisions about its upstreams' fires (after.go).
	after afterState
}

// outlived reports whether the slot is held under a token older than its
// job: won for a job of the same name deleted since, and created again.
// Such a holding is released after its runs, and the slot campaigned for
// anew, so that its new holder reads the state as its predecessor's and
// starts afresh (readTakeover). Held by
// TestARecreatedJobsHolderCampaignsAnew.
func (sl *slot) outlived() bool {
	return sl.held() && int64(sl.token) < sl.job.spec.CreateRevision
}

// wants reports whether this member keeps holding the slot: the view
// prefers it, and its holding is not outlived.
func (sl *slot) wants() bool { return sl.wanted && !sl.outlived() }

// unwanted says why a held slot is released when it is not wanted.
func (sl *slot) unwanted() string {
	if sl.outlived() {
		return "won before its job was deleted and created again: campaigning anew"
	}
	return "not preferred in the current view"
}

// owedFires are a slot's fires that wait for it to be free, each kind with
// its own rule (see dispatch and startWaiting).
type owedFires struct {
	// backlog is run one at a time, before the schedule's own fires: what
	// a new holder owes on acquisition (catch-ups, an unfinished fire, manual
	// triggers), and under fire-all the scheduled fires that came meanwhile.
	backlog []fire
	// aside is the backlog while dispatchFree dispatches its head.
	aside []fire
	// holdUntil keeps the backlog's head from starting before it: a fire
	// whose start etcd did not record waits there a moment before it is
	// tried again (startAgainLater).
	holdUntil time.Time
	// queued is the one fire waiting for the running one (overlap: queue,
	// or a retry).
	queued *fire
	// undecided are the scheduled fires of a fire-all slot that fell due
	// while its previous start waited for etcd: overlaps if that run
	// starts, misfires if it does not (decideUndecided).
	undecided []fire
	// lateTriggers are the manual triggers the control watch reported while
	// the fences were raised; they join those read at acquisition.
	lateTriggers []fire
	// later are the one-off runs (kira trigger --at) waiting for their
	// time, each also in the loop's heap of them (oneoff.go).
	later []fire
}

// owesMisfires reports whether the backlog still holds a misfire
// (fire.misfire), as opposed to only scheduled fires that joined it.
func (o *owedFires) owesMisfires() bool {
	return slices.ContainsFunc(o.backlog, func(f fire) bool { return f.misfire })
}

// clear empties o and returns the fires it held.
func (o *owedFires) clear() []fire {
	all := slices.Concat(o.backlog, o.undecided, o.lateTriggers, o.later)
	if o.queued != nil {
		all = append(all, *o.queued)
	}
	*o = owedFires{}
	return all
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
