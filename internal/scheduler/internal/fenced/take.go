package fenced

import (
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
)

// orderKeys are the keys that order fw against other writes: its slot's
// leader key and every key it writes.
func orderKeys(fw Write) []string {
	keys := []string{fw.Claim.LeaderKey}
	for _, op := range slices.Concat(fw.Ops, fw.state) {
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
// history.NewestState needs to tell them apart. So each slot's writes commit in the
// order they were queued, each at a revision of its own, and
// the others need not wait for them: consecutive batches often share a few
// slots, and waiting on those would make the writer serial with tiny
// batches. Held by TestWriterLetsOtherSlotsPastAWaitingWrite.
func (w *Writer) next() ([]Write, *taken) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for w.inFlight >= maxInFlight {
			w.changed.Wait()
		}
		if len(w.queue) == 0 {
			return nil, nil
		}
		var blocked bool // records wait for the copies of the entry they would reuse
		if w.index != nil {
			needed := w.index.reuse()
			blocked = len(needed) > 0
			if b, keys := w.index.copyBatch(needed, func(k string) bool { return w.flying[k] > 0 }); b != nil {
				t := &taken{plan: &plan{entry: -1, copy: true}, keys: keys}
				w.inFlight++
				for _, k := range t.keys {
					w.flying[k]++
				}
				return b, t
			}
		}
		if b, keys, handover := w.takeLocked(blocked); len(b) > 0 {
			t := &taken{keys: keys}
			if w.index != nil {
				t.plan = w.index.take(b, handover)
			}
			w.inFlight++
			for _, k := range t.keys {
				w.flying[k]++
			}
			return b, t
		}
		w.changed.Wait() // everything queued waits for a batch in flight
	}
}

// taken is what a batch holds while in flight: its order keys, and its
// journal plan (nil without a journal).
type taken struct {
	keys []string
	plan *plan
}

// takeLocked takes the next batch off the queue (see next), with the
// copies each handing-over write in it makes (by its claim), which count
// against the transaction's operations.
func (w *Writer) takeLocked(blocked bool) (b []Write, keys []string, handover map[fencing.Claim][]copyOf) {
	held := map[string]bool{}  // order keys of writes left in the queue
	taken := map[string]bool{} // order keys of the writes in the batch
	var left []Write
	i, ops, budget := 0, 0, maxTxnOps
	if w.index != nil {
		budget-- // the entry
	}
	for ; i < len(w.queue) && i < maxScan && len(b) < maxBatch; i++ {
		fw := w.queue[i]
		n := len(fw.Ops) + len(fw.state)
		var copies []copyOf
		if fw.Handover && w.index != nil {
			copies = w.index.handoverCopies(fw)
			n += len(copies)
		}
		if ops+n > budget && len(b) > 0 {
			break // it leads the next batch
		}
		ok := !blocked || len(fw.Records) == 0
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
		if len(copies) > 0 {
			if handover == nil {
				handover = map[fencing.Claim][]copyOf{}
			}
			handover[fw.Claim] = copies
		}
		if !fw.Lazy {
			w.urgent--
		}
		ops += n
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
	return b, keys, handover
}

// lingerLeft is how much longer the writer may hold what is queued: only
// lazy writes, fewer than maxInFlight batches, until the first instant
// after the oldest was queued that is a multiple of linger on the wall
// clock. Every member's writer then sends at the same instants, and etcd
// commits transactions that arrive together in fewer raft rounds than the
// same transactions spread over time
// (docs/decisions/0011-writers-send-together.md). It decides only when a write is sent, never whether it
// holds: that is the fence's. Held by
// TestWriterHoldsLazyWritesUntilLingerOrAnUrgentWrite.
func (w *Writer) lingerLeft() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 || len(w.queue) >= maxInFlight*maxBatch || w.urgent > 0 {
		return 0
	}
	now := w.now()
	phase := now.Truncate(w.linger)
	if w.queue[0].queued.Before(phase) {
		return 0
	}
	return phase.Add(w.linger).Sub(now)
}

// land marks a batch's order keys as no longer in flight.
func (w *Writer) land(b []Write, t *taken) {
	w.mu.Lock()
	switch p := t.plan; {
	case p == nil:
	case p.copy:
		w.index.copiedOut(b)
	default:
		w.index.landed(p)
	}
	w.inFlight--
	for _, k := range t.keys {
		if w.flying[k]--; w.flying[k] == 0 {
			delete(w.flying, k)
		}
	}
	w.mu.Unlock()
	w.changed.Broadcast()
}
