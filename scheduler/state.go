package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Trigger says why an execution ran. The values are shown to users.
type Trigger string

const (
	TriggerSchedule Trigger = "schedule"
	TriggerCatchup  Trigger = "catchup" // a fire missed while nobody held the slot
	TriggerManual   Trigger = "manual"  // kira trigger
	TriggerRetry    Trigger = "retry"   // a failed attempt, or a fire an ex-holder started but did not finish
)

// SlotState is what the holder of a slot records in etcd, so the next holder
// learns what ran. It is written only while the writer holds the slot (the
// transaction compares the leader key's create revision with the token).
type SlotState struct {
	Token  fencing.Token `json:"token"`
	Member string        `json:"member"`
	// Started is the scheduled time of the latest fire started (recorded
	// before it starts), with its execution id and attempt.
	Started        time.Time `json:"started"`
	StartedID      string    `json:"started_id,omitempty"`
	StartedAttempt int       `json:"started_attempt,omitempty"`
	Finished       time.Time `json:"finished"` // scheduled time of the latest fire finished
	Outcome        string    `json:"outcome,omitempty"`
	HistorySeq     int64     `json:"history_seq"`
	// HistoryLimit is the job's history_limit when the holder last wrote a
	// record; zero in states written before there was one (those kept 100).
	HistoryLimit  int   `json:"history_limit,omitempty"`
	MissedDropped int64 `json:"missed_dropped,omitempty"` // fires dropped for being older than catchup_window
}

// Unfinished reports whether a fire was started but not recorded as finished.
func (s SlotState) Unfinished() bool { return s.Started.After(s.Finished) }

// Record is one execution in the history, as kira history prints it.
type Record struct {
	Job           string        `json:"job"`
	Partition     int           `json:"partition"`
	ExecutionID   string        `json:"execution_id"`
	Member        string        `json:"member"`
	Token         fencing.Token `json:"token"`
	ScheduledTime time.Time     `json:"scheduled_time"`
	StartedAt     time.Time     `json:"started_at"`
	FinishedAt    time.Time     `json:"finished_at"`
	Outcome       string        `json:"outcome"`
	Attempt       int           `json:"attempt"`
	Trigger       Trigger       `json:"trigger"`
	OutputTail    string        `json:"output_tail,omitempty"`
	Error         string        `json:"error,omitempty"`
}

// Outcomes recorded without an execution.
const (
	OutcomeSkipped = "skipped" // overlap policy or pause
	OutcomeMissed  = "missed"  // misfire policy or catchup window
)

// StateKey is where a slot's state lives.
func StateKey(cluster string, s shard.Slot) string {
	return membership.ClusterPrefix(cluster) + "state/" + s.String()
}

// HistoryPrefix is where a job's execution records live.
func HistoryPrefix(cluster, job string) string {
	return membership.ClusterPrefix(cluster) + "history/" + job + "/"
}

// historyKey is where a slot's record seq goes: the records of a slot are a
// ring of limit keys, so the oldest is overwritten, never accumulated.
func historyKey(cluster string, s shard.Slot, seq int64, limit int) string {
	return fmt.Sprintf("%s%03d", slotHistoryPrefix(cluster, s), seq%int64(limit))
}

func slotHistoryPrefix(cluster string, s shard.Slot) string {
	return fmt.Sprintf("%s%d/", HistoryPrefix(cluster, s.Job), s.Partition)
}

// historyTrim deletes a slot's records at or past limit in the ring: after
// the limit was lowered, they would never be overwritten.
func historyTrim(cluster string, s shard.Slot, limit int) clientv3.Op {
	slotPrefix := slotHistoryPrefix(cluster, s)
	return clientv3.OpDelete(fmt.Sprintf("%s%03d", slotPrefix, limit), clientv3.WithRange(clientv3.GetPrefixRangeEnd(slotPrefix)))
}

// ReadHistory returns up to n records of job (all partitions, or one when
// partition >= 0), newest first.
func ReadHistory(ctx context.Context, kv clientv3.KV, cluster, job string, partition, n int) ([]Record, error) {
	prefix := HistoryPrefix(cluster, job)
	if partition >= 0 {
		prefix += fmt.Sprintf("%d/", partition)
	}
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := []Record{}
	for _, kv := range resp.Kvs {
		var r Record
		if json.Unmarshal(kv.Value, &r) == nil && strings.HasPrefix(string(kv.Key), prefix) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.StartedAt.Equal(b.StartedAt) {
			return a.StartedAt.After(b.StartedAt)
		}
		return a.ScheduledTime.After(b.ScheduledTime)
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// storedRecord is a history record as etcd stores it: the record, and the
// slot's state as of the write that stored it. So a run's result and the
// start of the slot's next fire recorded ahead are one key written, not a
// record and a state: at 10,000 slots firing every second, the second put of
// each execution cost a third of the process's CPU (kira bench, history
// writes left out: 0.049–0.051 → 0.031–0.037 s/s per 1,000 slots per
// member). The state key is written only by writes without a record (a
// start not recorded with a result, a retraction). The slot's state is the
// newer of the two by etcd revision (stateFrom).
type storedRecord struct {
	Record
	State *SlotState `json:"state,omitempty"`
}

// stateFrom decodes slot s's state from what readAcquired read: its state
// key and its newest record. The newer of them by revision holds the state;
// the writer never commits two writes of one slot in one transaction, so
// they never share one (a record written before there were states in
// records has none, and the state key, written in its transaction, holds).
// With neither, the state is the zero state (a slot never run).
func stateFrom(s shard.Slot, stateKvs, recordKvs []*mvccpb.KeyValue) (SlotState, error) {
	var st SlotState
	var rev int64
	if len(stateKvs) > 0 {
		if err := json.Unmarshal(stateKvs[0].Value, &st); err != nil {
			return SlotState{}, fmt.Errorf("scheduler: state of %s is unreadable: %w", s, err)
		}
		rev = stateKvs[0].ModRevision
	}
	if len(recordKvs) > 0 && recordKvs[0].ModRevision > rev {
		var r storedRecord
		if err := json.Unmarshal(recordKvs[0].Value, &r); err != nil {
			return SlotState{}, fmt.Errorf("scheduler: newest record of %s (%s) is unreadable: %w", s, recordKvs[0].Key, err)
		}
		if r.State != nil {
			st = *r.State
		}
	}
	return st, nil
}

// readAcquired reads what a new holder needs of slot s, its recorded state
// (its state key and its newest record) and the manual triggers waiting for
// it, in one transaction: one round trip, and all as of one revision. A
// rebalance does this for thousands of slots at once.
func readAcquired(ctx context.Context, kv clientv3.KV, cluster string, s shard.Slot) (SlotState, []fire, error) {
	newest := clientv3.OpGet(slotHistoryPrefix(cluster, s), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	resp, err := kv.Txn(ctx).Then(clientv3.OpGet(StateKey(cluster, s)), newest, triggersOp(cluster, s)).Commit()
	if err != nil {
		return SlotState{}, nil, err
	}
	st, err := stateFrom(s, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return SlotState{}, nil, err
	}
	return st, triggersFrom(s, resp.Responses[2].GetResponseRange().Kvs), nil
}

// fencedWrite is a set of operations to commit only while claim holds.
type fencedWrite struct {
	claim fencing.Claim
	ops   []clientv3.Op
	done  chan error // buffered; nil when nobody waits
	// lazy says nothing waits for this write soon (a record, or a start
	// recorded ahead of a fire still far off): the writer may hold it for up
	// to linger to commit it with others.
	lazy   bool
	queued time.Time // set by enqueue
}

// linger is how long the writer holds lazy writes, while nothing else is
// queued, to commit them together. Slots that fire together queue their
// writes together; slots whose fires are spread over the second (jitter)
// each had a transaction of their own: 0.93 per execution at 1,000 slots
// with a 1 s jitter, and 0.28–0.31 CPU seconds per second per 1,000 slots per
// member (0.055 when they fire together). With the linger: 0.13, and
// 0.14–0.15 (kira bench --jitter 1s).
const linger = 20 * time.Millisecond

// lingerAhead is how far off a fire must be for its start recorded ahead to
// be lazy: its record then lands (linger and a loaded etcd's round trip)
// well before the fire is armed.
const lingerAhead = 500 * time.Millisecond

// maxBatch and maxTxnOps bound the writes committed in one transaction:
// etcd allows 128 operations (and 128 comparisons) per transaction by
// default, and a write has one comparison and usually one operation (a
// record, or a state), two with a trigger it consumes or records it trims.
const (
	maxBatch  = 64
	maxTxnOps = 128
)

// maxInFlight bounds the transactions the writer has in flight at once. One
// at a time capped a member at maxBatch writes per etcd round trip, and at
// 10,000 slots firing every second the queue overflowed (kira bench).
const maxInFlight = 4

// maxQueued bounds the writes waiting for the writer: past it, etcd is far
// behind and a write is refused rather than queued (errWriterBehind).
const maxQueued = 1 << 16

// stateWriter commits fenced writes, batching those that are queued together
// into one transaction (slots that fire together cost one round trip), with
// up to maxInFlight transactions in flight. The writes of one slot commit in
// the order they were queued: a write that shares a leader key or a written
// key with a batch in flight stays queued until that batch lands (see next).
// That includes a resign (the delete of the leader key), which must not
// overtake the slot's last results.
type stateWriter struct {
	kv     clientv3.KV
	limit  int
	linger time.Duration // see linger
	bell   chan struct{} // rung (capacity one) when a write is queued

	mu       sync.Mutex
	changed  *sync.Cond // a batch in flight ended
	queue    []fencedWrite
	urgent   int               // writes in queue that are not lazy
	flying   map[string]int    // order keys of the batches in flight
	inFlight int               // batches in flight
	since    map[int]time.Time // when each commit in flight began
	landed   time.Time         // when a commit last succeeded
	seq      int

	// failing is set while etcd answers the writer's transactions with errors.
	failing atomic.Bool
}

// stalledAfter is how long a transaction may hang before the writer counts
// as stalled (etcd electing a leader or unreachable) rather than slow: far
// above a loaded etcd's commit latency, well below a missed fire.
const stalledAfter = 500 * time.Millisecond

// stalled reports whether etcd is failing the writer's transactions, or one
// has hung for stalledAfter while none succeeded. A loaded etcd keeps
// committing, even if each transaction waits long in its queue: counting
// that as stalled turned fire-all fires into a backlog whose starts each
// cost a write, and 10,000 slots spiralled (kira bench).
func (w *stateWriter) stalled() bool {
	if w.failing.Load() {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.landed) < stalledAfter {
		return false
	}
	for _, t := range w.since {
		if time.Since(t) > stalledAfter {
			return true
		}
	}
	return false
}

func newStateWriter(kv clientv3.KV) *stateWriter {
	w := &stateWriter{kv: kv, limit: maxQueued, linger: linger, bell: make(chan struct{}, 1), flying: map[string]int{}, since: map[int]time.Time{}}
	w.changed = sync.NewCond(&w.mu)
	return w
}

// errWriterBehind is returned for a write refused because the writer's queue
// is full: etcd is slow or unreachable.
var errWriterBehind = errors.New("scheduler: state writer is behind (etcd slow or unreachable)")

// enqueue hands fw to the writer without ever blocking the loop: when the
// queue is full, fw is refused at once (a start waiting for it does not run;
// a record is lost and counted by its caller's logs). A loop blocked here
// could not notice that its lease is gone.
func (w *stateWriter) enqueue(fw fencedWrite) {
	w.mu.Lock()
	if len(w.queue) >= w.limit {
		w.mu.Unlock()
		reply(fw, errWriterBehind)
		return
	}
	fw.queued = time.Now()
	w.queue = append(w.queue, fw)
	if !fw.lazy {
		w.urgent++
	}
	w.mu.Unlock()
	ring(w.bell)
}

// commitTimeout bounds one transaction of the writer; lease expiry and the
// fence make a late commit harmless, a hung one would only delay the rest.
const commitTimeout = 5 * time.Second

// run commits writes until stop is closed, then commits what is already
// queued, so the last results of a graceful stop are kept. Cancelling ctx
// abandons the rest: the commits in flight are cut short and every write still
// queued is answered errWritesAbandoned. A member that lost its lease does
// that: its fenced writes could only fail, or wait out commitTimeout each on
// an etcd that cannot answer, while its successor waits for it to leave.
func (w *stateWriter) run(ctx context.Context, stop <-chan struct{}) {
	var commits sync.WaitGroup
	defer commits.Wait()
	stopping := false
	lingering := time.NewTimer(time.Hour)
	defer lingering.Stop()
	for {
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
		b, keys := w.next()
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
				reply(fw, errWritesAbandoned)
			}
			w.land(keys)
			continue
		}
		commits.Add(1)
		go func() {
			defer commits.Done()
			w.commitBatch(ctx, b)
			w.land(keys)
		}()
	}
}

// errWritesAbandoned answers the writes a member gave up when it lost its lease.
var errWritesAbandoned = errors.New("scheduler: state write abandoned: the lease was lost")

// orderKeys are the keys that order fw against other writes: its slot's
// leader key and every key it writes.
func orderKeys(fw fencedWrite) []string {
	keys := []string{fw.claim.LeaderKey}
	for _, op := range fw.ops {
		keys = append(keys, string(op.KeyBytes()))
	}
	return keys
}

// maxScan bounds how far into the queue one batch looks past writes that
// must wait.
const maxScan = 4 * maxBatch

// next waits for a free transaction slot and takes the next batch off the
// queue, marking its order keys as in flight (land unmarks them); it returns
// nil when the queue is empty. A batch holds writes in queue order, up to
// maxBatch, leaving in the queue (in order) each write that shares an order
// key with a batch in flight, with a write left behind or with a write in
// the batch: etcd refuses a transaction that writes a key twice, and two
// writes of one slot in one transaction would share a revision, which
// stateFrom needs to tell them apart. So each slot's writes commit in the
// order they were queued, each at a revision of its own, and
// the others need not wait for them: consecutive batches often share a few
// slots, and waiting on those made the writer serial with tiny batches
// (kira bench, 10,000 slots).
func (w *stateWriter) next() ([]fencedWrite, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for w.inFlight >= maxInFlight {
			w.changed.Wait()
		}
		if len(w.queue) == 0 {
			return nil, nil
		}
		if b, keys := w.takeLocked(); len(b) > 0 {
			w.inFlight++
			for _, k := range keys {
				w.flying[k]++
			}
			return b, keys
		}
		w.changed.Wait() // everything queued waits for a batch in flight
	}
}

func (w *stateWriter) takeLocked() (b []fencedWrite, keys []string) {
	held := map[string]bool{}  // order keys of writes left in the queue
	taken := map[string]bool{} // order keys of the writes in the batch
	var left []fencedWrite
	i, ops := 0, 0
	for ; i < len(w.queue) && i < maxScan && len(b) < maxBatch; i++ {
		fw := w.queue[i]
		if ops+len(fw.ops) > maxTxnOps {
			break // it leads the next batch
		}
		ok := true
		order := orderKeys(fw)
		for _, k := range order {
			if w.flying[k] > 0 || held[k] || taken[k] {
				ok = false
			}
		}
		if !ok {
			left = append(left, fw)
			for _, k := range order {
				held[k] = true
			}
			continue
		}
		b = append(b, fw)
		if !fw.lazy {
			w.urgent--
		}
		ops += len(fw.ops)
		keys = append(keys, order...)
		for _, k := range order {
			taken[k] = true
		}
	}
	// The writes left behind go back in front of the rest, in order.
	start := i - len(left)
	copy(w.queue[start:i], left)
	clear(w.queue[:start])
	w.queue = w.queue[start:]
	if len(w.queue) == 0 {
		w.queue = nil
	}
	return b, keys
}

// lingerLeft is how much longer the writer may hold what is queued: only
// lazy writes, fewer than a batch, the oldest queued less than linger ago.
func (w *stateWriter) lingerLeft() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 || len(w.queue) >= maxBatch || w.urgent > 0 {
		return 0
	}
	return w.linger - time.Since(w.queue[0].queued)
}

// land marks a batch's order keys as no longer in flight.
func (w *stateWriter) land(keys []string) {
	w.mu.Lock()
	w.inFlight--
	for _, k := range keys {
		if w.flying[k]--; w.flying[k] == 0 {
			delete(w.flying, k)
		}
	}
	w.mu.Unlock()
	w.changed.Broadcast()
}

func (w *stateWriter) commitBatch(ctx context.Context, b []fencedWrite) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	w.commit(ctx, b)
}

func fenceCompare(c fencing.Claim) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.LeaderKey), "=", int64(c.Token))
}

// commit commits a batch in one transaction. If that fails because some
// claims no longer hold, it reads which hold (one request), refuses the
// writes of the others with ErrFenced and commits the rest together.
func (w *stateWriter) commit(ctx context.Context, b []fencedWrite) {
	if w.commitAll(ctx, b) || len(b) == 1 {
		return
	}
	claims := map[fencing.Claim]bool{}
	var gets []clientv3.Op
	var order []fencing.Claim
	for _, fw := range b {
		if _, ok := claims[fw.claim]; !ok {
			claims[fw.claim] = false
			order = append(order, fw.claim)
			gets = append(gets, clientv3.OpGet(fw.claim.LeaderKey))
		}
	}
	resp, err := w.kv.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		for _, fw := range b {
			reply(fw, fmt.Errorf("scheduler: state write: %w", err))
		}
		return
	}
	for i, c := range order {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		claims[c] = len(kvs) == 1 && kvs[0].CreateRevision == int64(c.Token)
	}
	var holding []fencedWrite
	for _, fw := range b {
		if claims[fw.claim] {
			holding = append(holding, fw)
		} else {
			reply(fw, fmt.Errorf("%w: state write for %s", fencing.ErrFenced, fw.claim.LeaderKey))
		}
	}
	if len(holding) > 0 && !w.commitAll(ctx, holding) {
		for _, fw := range holding { // a claim ended in between: one by one
			w.commitAll(ctx, []fencedWrite{fw})
		}
	}
}

// commitAll commits b in one transaction if every claim holds, answering
// every write; it reports whether it did. A single write is always answered.
func (w *stateWriter) commitAll(ctx context.Context, b []fencedWrite) bool {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	seen := map[fencing.Claim]bool{}
	for _, fw := range b {
		if !seen[fw.claim] {
			seen[fw.claim] = true
			cmps = append(cmps, fenceCompare(fw.claim))
		}
		ops = append(ops, fw.ops...)
	}
	w.mu.Lock()
	w.seq++
	id := w.seq
	w.since[id] = time.Now()
	w.mu.Unlock()
	resp, err := w.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	w.mu.Lock()
	delete(w.since, id)
	if err == nil {
		w.landed = time.Now()
	}
	w.mu.Unlock()
	w.failing.Store(err != nil)
	switch {
	case err == nil && resp.Succeeded:
		for _, fw := range b {
			reply(fw, nil)
		}
		return true
	case len(b) > 1:
		return false
	case err != nil:
		reply(b[0], fmt.Errorf("scheduler: state write: %w", err))
	default:
		reply(b[0], fmt.Errorf("%w: state write for %s", fencing.ErrFenced, b[0].claim.LeaderKey))
	}
	return true
}

func reply(fw fencedWrite, err error) {
	if fw.done != nil {
		fw.done <- err
	}
}
