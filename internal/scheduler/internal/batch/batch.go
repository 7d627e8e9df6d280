// Package batch gathers the requests a member makes at about the same time
// into shared etcd transactions: a request queued alone goes at once, and
// under load each waits at most for the transactions ahead of it. The
// scheduler batches its takeover reads and its first campaigns this way
// (docs/benchmarks.md, "Many jobs").
package batch

import (
	"context"
	"slices"
	"sync"
)

// Queue commits the requests put in it, up to max a batch, with at most
// inFlight batches committing at once. Held by TestQueueBatchesWhatWaits
// and TestWithdrawnRequestIsNeverCommitted.
type Queue[R comparable] struct {
	max, inFlight int
	commit        func(ctx context.Context, b []R)
	bell          chan struct{}

	// Hold, if set (by tests, before Run), keeps the requests queued until
	// it is closed.
	Hold chan struct{}

	mu      sync.Mutex
	queue   []R
	batches int
}

// New returns a queue whose batches commit calls; commit answers every
// request of its batch, and returns once it did.
func New[R comparable](max, inFlight int, commit func(ctx context.Context, b []R)) *Queue[R] {
	return &Queue[R]{max: max, inFlight: inFlight, commit: commit, bell: make(chan struct{}, 1)}
}

// Put queues r for the next batch.
func (q *Queue[R]) Put(r R) {
	q.mu.Lock()
	q.queue = append(q.queue, r)
	q.mu.Unlock()
	select {
	case q.bell <- struct{}{}:
	default:
	}
}

// Withdraw takes r off the queue, and reports whether it was still there:
// false means a batch took it, and commit answers it.
func (q *Queue[R]) Withdraw(r R) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.queue, r)
	if i < 0 {
		return false
	}
	q.queue = slices.Delete(q.queue, i, i+1)
	return true
}

// Queued is how many requests wait for a batch.
func (q *Queue[R]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Batches is how many batches were committed.
func (q *Queue[R]) Batches() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.batches
}

// Run commits the queued requests until ctx ends, waiting for the batches
// in flight before it returns. Requests still queued then are not
// answered: their callers wait on their own contexts.
func (q *Queue[R]) Run(ctx context.Context) {
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	if q.Hold != nil {
		select {
		case <-q.Hold:
		case <-ctx.Done():
			return
		}
	}
	free := make(chan struct{}, q.inFlight)
	for {
		select {
		case free <- struct{}{}: // a batch may go: it takes what is queued now
		case <-ctx.Done():
			return
		}
		b := q.take()
		if len(b) == 0 {
			<-free
			select {
			case <-q.bell:
			case <-ctx.Done():
				return
			}
			continue
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			q.commit(ctx, b)
			<-free
		}()
	}
}

// take takes up to max requests off the queue, oldest first.
func (q *Queue[R]) take() []R {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.queue), q.max)
	if n == 0 {
		return nil
	}
	b := q.queue[:n:n] // its own capacity: the queue's appends and withdrawals never reach it
	q.queue = q.queue[n:]
	q.batches++
	return b
}
