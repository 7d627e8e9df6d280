package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// HistoryPerSlot bounds the execution records kept per slot: record n goes to
// key n mod HistoryPerSlot, so the oldest is overwritten, never accumulated.
const HistoryPerSlot = 100

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
	MissedDropped  int64     `json:"missed_dropped,omitempty"` // fires dropped for being older than catchup_window
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

func historyKey(cluster string, s shard.Slot, seq int64) string {
	return fmt.Sprintf("%s%d/%03d", HistoryPrefix(cluster, s.Job), s.Partition, seq%HistoryPerSlot)
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

// readState loads a slot's state; a slot never run has the zero state.
func readState(ctx context.Context, kv clientv3.KV, cluster string, s shard.Slot) (SlotState, error) {
	var st SlotState
	resp, err := kv.Get(ctx, StateKey(cluster, s))
	if err != nil || len(resp.Kvs) == 0 {
		return st, err
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		return SlotState{}, fmt.Errorf("scheduler: state of %s is unreadable: %w", s, err)
	}
	return st, nil
}

// fencedWrite is a set of operations to commit only while claim holds.
type fencedWrite struct {
	claim fencing.Claim
	ops   []clientv3.Op
	done  chan error // buffered; nil when nobody waits
}

// maxBatch bounds the writes committed in one transaction: etcd allows 128
// operations (and 128 comparisons) per transaction by default, and a write
// has at most two operations and one comparison.
const maxBatch = 64

// stateWriter commits fenced writes in order, batching those that are queued
// together into one transaction: slots that fire together cost one round trip.
type stateWriter struct {
	kv    clientv3.KV
	queue chan fencedWrite
	// failing is set while etcd answers the writer's transactions with
	// errors; committingSince (Unix ns, 0 when idle) shows one that hangs.
	failing         atomic.Bool
	committingSince atomic.Int64
}

// stalledAfter is how long a transaction may hang before the writer counts
// as stalled (etcd electing a leader or unreachable) rather than slow: far
// above a loaded etcd's commit latency, well below a missed fire.
const stalledAfter = 500 * time.Millisecond

// stalled reports whether etcd is failing the writer's transactions, or one
// has hung for stalledAfter.
func (w *stateWriter) stalled() bool {
	if w.failing.Load() {
		return true
	}
	since := w.committingSince.Load()
	return since != 0 && time.Since(time.Unix(0, since)) > stalledAfter
}

func newStateWriter(kv clientv3.KV) *stateWriter {
	return &stateWriter{kv: kv, queue: make(chan fencedWrite, 4096)}
}

// errWriterBehind is returned for a write refused because the writer's queue
// is full: etcd is slow or unreachable.
var errWriterBehind = errors.New("scheduler: state writer is behind (etcd slow or unreachable)")

// enqueue hands fw to the writer without ever blocking the loop: when the
// queue is full, fw is refused at once (a start waiting for it does not run;
// a record is lost and counted by its caller's logs). A loop blocked here
// could not notice that its lease is gone.
func (w *stateWriter) enqueue(fw fencedWrite) {
	select {
	case w.queue <- fw:
	default:
		reply(fw, errWriterBehind)
	}
}

// commitTimeout bounds one transaction of the writer; lease expiry and the
// fence make a late commit harmless, a hung one would only delay the rest.
const commitTimeout = 5 * time.Second

// run commits writes until stop is closed, then commits what is already
// queued, so the last results of a graceful stop are kept. Cancelling ctx
// abandons the rest: the commit in flight is cut short and every write still
// queued is answered errWritesAbandoned. A member that lost its lease does
// that: its fenced writes could only fail, or wait out commitTimeout each on
// an etcd that cannot answer, while its successor waits for it to leave.
func (w *stateWriter) run(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case fw := <-w.queue:
			w.commitBatch(ctx, w.batch(fw))
		case <-stop:
			for {
				select {
				case fw := <-w.queue:
					if ctx.Err() != nil {
						reply(fw, errWritesAbandoned)
						continue
					}
					w.commitBatch(ctx, w.batch(fw))
				default:
					return
				}
			}
		}
	}
}

// errWritesAbandoned answers the writes a member gave up when it lost its lease.
var errWritesAbandoned = errors.New("scheduler: state write abandoned: the lease was lost")

func (w *stateWriter) commitBatch(ctx context.Context, b []fencedWrite) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	w.commit(ctx, b)
}

func (w *stateWriter) batch(first fencedWrite) []fencedWrite {
	b := []fencedWrite{first}
	keys := map[string]bool{}
	for _, op := range first.ops {
		keys[string(op.KeyBytes())] = true
	}
	for len(b) < maxBatch {
		select {
		case fw := <-w.queue:
			b = append(b, fw)
			for _, op := range fw.ops {
				k := string(op.KeyBytes())
				if keys[k] {
					// etcd refuses a transaction that writes a key twice: this
					// write ends the batch (it is committed alone, after).
					return b
				}
				keys[k] = true
			}
		default:
			return b
		}
	}
	return b
}

func fenceCompare(c fencing.Claim) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.LeaderKey), "=", int64(c.Token))
}

// commit commits a batch in one transaction. If that fails because some
// claims no longer hold, it reads which hold (one request), refuses the
// writes of the others with ErrFenced and commits the rest together.
func (w *stateWriter) commit(ctx context.Context, b []fencedWrite) {
	last := b[len(b)-1]
	if len(b) > 1 && w.repeatsKey(b) {
		// The batch ended on a key written twice: commit it after the rest.
		w.commit(ctx, b[:len(b)-1])
		w.commit(ctx, []fencedWrite{last})
		return
	}
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

func (w *stateWriter) repeatsKey(b []fencedWrite) bool {
	keys := map[string]bool{}
	for _, fw := range b[:len(b)-1] {
		for _, op := range fw.ops {
			keys[string(op.KeyBytes())] = true
		}
	}
	for _, op := range b[len(b)-1].ops {
		if keys[string(op.KeyBytes())] {
			return true
		}
	}
	return false
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
	w.committingSince.Store(time.Now().UnixNano())
	resp, err := w.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	w.committingSince.Store(0)
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
