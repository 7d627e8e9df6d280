package fenced

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Write is a set of operations to commit only while claim holds.
type Write struct {
	Claim fencing.Claim
	Ops   []clientv3.Op
	Done  chan error // buffered; nil when nobody waits
	// Lazy says nothing waits for this write soon (a record, or a start
	// recorded ahead of a fire still far off): the writer may hold it for up
	// to Linger to commit it with others.
	Lazy bool
	// Tag names the write for Amend; nil when it is not to be amended.
	Tag any
	// Records go in the member's journal (see Record), committed with Ops
	// under the claim; only with a journal (UseJournal).
	Records []Record
	// Handover says the write ends the slot's leadership here (a resign):
	// it copies the slot's records still in the journal to its ring.
	Handover bool
	// Last says the write is the slot's last on this member (a resign, or
	// the state it leaves on a graceful stop): it is never refused for a
	// full queue (ErrBehind). There is at most one per slot, and refusing a
	// resign would fence out the slot's results still queued.
	// Held by TestWriterQueuesALastWriteWhenFull.
	Last bool
	// Guard, when set, is a further condition of Ops (not of Records): if
	// it fails, Ops are not applied and Done gets ErrGuard, while the rest
	// of the transaction commits. A manual trigger's start consumes its key
	// this way, so a cancel that deleted the key first wins.
	// Held by TestWriterGuardedWriteAppliesOnlyIfItsGuardHolds.
	Guard  *clientv3.Cmp
	queued time.Time // set by Enqueue
	// state is the put of the slot's state key with the state its newest
	// record carries (placeState), committed with the write whatever its
	// Guard says.
	state []clientv3.Op
	// A copy batch's write: the records it copies (fill), committed while
	// guard holds rather than the claim (copyBatch), and its slot's state
	// key, read when guard fails.
	copies   []copyOf
	guard    clientv3.Cmp
	stateKey string
}

// linger is the longest the writer holds lazy writes, while nothing else is
// queued, to commit them together (see lingerLeft). Slots that fire together
// queue their writes together; without it, slots whose fires are spread over
// the second (jitter) would each have a transaction of their own, and etcd
// pays for each (docs/decisions/0010-writer-lingers-and-fills-transactions.md). It must stay well
// under the scheduler's lingerAhead, so a start recorded ahead lazily lands
// before its fire. Held by TestWriterHoldsLazyWritesUntilLingerOrAnUrgentWrite.
const linger = 100 * time.Millisecond

// maxBatch and maxTxnOps bound the writes committed in one transaction:
// etcd allows 128 operations (and 128 comparisons) per transaction by
// default, and a write has one comparison and usually one operation (a
// record, or a state), two with a trigger it consumes or records it trims.
// A transaction costs etcd a raft entry and a commit on every member
// whatever it holds, so the writer fills it (docs/decisions/0010-writer-lingers-and-fills-transactions.md).
const (
	maxBatch  = 128
	maxTxnOps = 128
)

// maxInFlight bounds the transactions the writer has in flight at once. One
// at a time would cap a member at maxBatch writes per etcd round trip.
// Held by TestWriterKeepsEachSlotsOrderWithTransactionsInFlight.
const maxInFlight = 4

// maxQueued bounds the writes waiting for the writer: past it, etcd is far
// behind and a write is refused rather than queued (ErrBehind).
const maxQueued = 1 << 16

// Writer commits fenced writes, batching those that are queued together
// into one transaction (slots that fire together cost one round trip), with
// up to maxInFlight transactions in flight. The writes of one slot commit in
// the order they were queued: a write that shares a leader key or a written
// key with a batch in flight stays queued until that batch lands (see next).
// That includes a resign (the delete of the leader key), which must not
// overtake the slot's last results.
type Writer struct {
	kv     clientv3.KV
	limit  int
	linger time.Duration // see linger
	now    func() time.Time
	bell   chan struct{} // rung (capacity one) when a write is queued

	mu       sync.Mutex
	changed  *sync.Cond // a batch in flight ended
	queue    []Write
	urgent   int               // writes in queue that are not lazy
	flying   map[string]int    // order keys of the batches in flight
	inFlight int               // batches in flight
	since    map[int]time.Time // when each commit in flight began
	landed   time.Time         // when a commit last succeeded
	overtook time.Time         // when the latest-begun commit that succeeded began
	seq      int
	index    *journalIndex // nil: no records are journaled

	// failing is set while etcd answers the writer's transactions with errors.
	failing atomic.Bool
	// stateFormat is the format of the state keys it puts (SetStateFormat).
	stateFormat atomic.Int32
}

// stalledAfter is how long a transaction may hang before the writer counts
// as stalled (etcd electing a leader or unreachable) rather than slow: far
// above a loaded etcd's commit latency, well below a missed fire.
const stalledAfter = 500 * time.Millisecond

// Stalled reports whether etcd is failing the writer's transactions, or
// one has hung for stalledAfter while none succeeded, or while one begun at
// least stalledAfter after it already succeeded (its connection died: an
// etcd member killed, the client moved on to another). A loaded etcd keeps
// committing, in the order it was sent, even if each transaction waits long
// in its queue: counting that as stalled would turn fire-all fires into a
// backlog whose starts each cost a write, a spiral. Held by
// TestWriterIsStalledOnlyWhenNothingCommits and
// TestWriterIsStalledWhenALaterCommitOvertakesAHungOne.
func (w *Writer) Stalled() bool {
	if w.failing.Load() {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	nothingLanded := time.Since(w.landed) >= stalledAfter
	for _, t := range w.since {
		if time.Since(t) > stalledAfter && (nothingLanded || t.Add(stalledAfter).Before(w.overtook)) {
			return true
		}
	}
	return false
}

// behindAfter is how long the oldest queued write may wait before the
// writer counts as behind: well past linger and a loaded etcd's round
// trip, so only writes coming faster than etcd commits them make it.
const behindAfter = 250 * time.Millisecond

// Behind reports whether the oldest queued write has waited behindAfter:
// writes come faster than etcd commits them, and a queue stands. Held by
// TestWriterIsBehindOnlyWhileAWriteWaitsLong.
func (w *Writer) Behind() bool {
	_, oldest := w.Backlog()
	return oldest >= behindAfter
}

// Backlog reports how many writes wait in the queue and how long the
// oldest of them has waited (0 when none does).
func (w *Writer) Backlog() (queued int, oldest time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return 0, 0
	}
	return len(w.queue), w.now().Sub(w.queue[0].queued)
}

// UseJournal lets writes carry Records, journaled under member's journal
// in cluster, of entries keys (DefaultJournalEntries if not above 0);
// before the writer runs.
func (w *Writer) UseJournal(cluster, member string, entries int) {
	if entries <= 0 {
		entries = DefaultJournalEntries
	}
	w.index = newIndex(cluster, member, entries)
}

func NewWriter(kv clientv3.KV) *Writer {
	w := &Writer{kv: kv, limit: maxQueued, linger: linger, now: time.Now, bell: make(chan struct{}, 1), flying: map[string]int{}, since: map[int]time.Time{}}
	w.changed = sync.NewCond(&w.mu)
	return w
}

// errNoJournal refuses records given to a writer without a journal.
var errNoJournal = errors.New("fenced: records for a writer without a journal")

// ErrBehind is returned for a write refused because the writer's queue
// is full: etcd is slow or unreachable.
var ErrBehind = errors.New("fenced: state writer is behind (etcd slow or unreachable)")

// ErrGuard is returned for a write whose Guard failed: its Ops were not
// applied.
var ErrGuard = errors.New("fenced: the write's guard failed")

// enqueue hands fw to the writer without ever blocking the loop: when the
// queue is full, fw is refused at once (a start waiting for it does not run;
// a record is lost and counted by its caller's logs). A loop blocked here
// could not notice that its lease is gone.
func (w *Writer) Enqueue(fw Write) {
	if len(fw.Records) > 0 && w.index == nil {
		reply(fw, errNoJournal)
		return
	}
	w.mu.Lock()
	if len(w.queue) >= w.limit && !fw.Last {
		w.mu.Unlock()
		reply(fw, ErrBehind)
		return
	}
	if w.index != nil {
		w.index.placeState(&fw, int(w.stateFormat.Load()))
	}
	fw.queued = w.now()
	w.queue = append(w.queue, fw)
	if !fw.Lazy {
		w.urgent++
	}
	w.mu.Unlock()
	notify(w.bell)
}

// commitTimeout bounds one transaction of the writer; lease expiry and the
// fence make a late commit harmless, a hung one would only delay the rest.
const commitTimeout = 5 * time.Second

// run commits writes until stop is closed, then commits what is already
// queued, so the last results of a graceful stop are kept. Cancelling ctx
// abandons the rest: the commits in flight are cut short and every write still
// queued is answered ErrAbandoned. A member that lost its lease does
// that: its fenced writes could only fail, or wait out commitTimeout each on
// an etcd that cannot answer, while its successor waits for it to leave.
func (w *Writer) Run(ctx context.Context, stop <-chan struct{}) {
	var commits sync.WaitGroup
	defer commits.Wait()
	stopping := false
	lingering := time.NewTimer(time.Hour)
	defer lingering.Stop()
	for {
		if !stopping { // also while batches keep coming: a copy that fails is taken again
			select {
			case <-stop:
				stopping = true
			default:
			}
		}
		if d := w.lingerLeft(); d > 0 && !stopping {
			lingering.Reset(d)
			select {
			case <-w.bell: // perhaps an urgent write
			case <-lingering.C:
			case <-stop:
				stopping = true
			}
			continue
		}
		b, t := w.next()
		if b == nil {
			if stopping {
				return
			}
			select {
			case <-w.bell:
			case <-stop:
				stopping = true
			}
			continue
		}
		if stopping && ctx.Err() != nil {
			for _, fw := range b {
				reply(fw, ErrAbandoned)
			}
			w.land(b, t)
			// Everything queued goes with it: a copy batch abandoned is
			// taken again as long as records wait for its entry.
			w.abandonQueued()
			continue
		}
		commits.Add(1)
		go func() {
			defer commits.Done()
			w.commitBatch(ctx, b, t)
			w.land(b, t)
		}()
	}
}

// abandonQueued answers every queued write with ErrAbandoned and empties
// the queue. Held by TestWriterStopsWhenItAbandonsACopy.
func (w *Writer) abandonQueued() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fw := range w.queue {
		reply(fw, ErrAbandoned)
	}
	w.queue, w.urgent = nil, 0
}

// ErrAbandoned answers the writes a member gave up when it lost its lease.
var ErrAbandoned = errors.New("fenced: state write abandoned: the lease was lost")

// ring sends on a bell, a channel of capacity one, without blocking: a bell
// already rung and not yet answered says the same.
func notify(bell chan<- struct{}) {
	select {
	case bell <- struct{}{}:
	default:
	}
}

// Amend replaces the operations of the write tagged tag with ops, if it is
// still queued (not in a transaction yet) and is the last write queued for
// its leader key, so it is still the slot's newest write; it reports whether
// it did. Held by TestAmendReplacesOnlyTheSlotsLastQueuedWrite.
func (w *Writer) Amend(leaderKey string, tag any, ops []clientv3.Op, records []Record) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.queue) - 1; i >= 0; i-- {
		if fw := &w.queue[i]; fw.Claim.LeaderKey == leaderKey {
			if tag == nil || fw.Tag != tag || len(ops) != len(fw.Ops) || len(records) != len(fw.Records) {
				return false
			}
			fw.Ops, fw.Records = ops, records
			if w.index != nil {
				w.index.placeState(fw, int(w.stateFormat.Load()))
			}
			return true
		}
	}
	return false
}

// Queued reports how many writes wait in the queue, and how many
// transactions are in flight.
func (w *Writer) Queued() (queued, inFlight int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue), w.inFlight
}
