package scheduler

import (
	"context"
	"sync"
)

// batches queues requests that share transactions: each transaction takes
// the requests queued when it goes, up to size, with at most inFlight
// transactions at once. Under load a request waits for the transactions
// ahead of it; alone it goes at once. The takeover reads and the first
// attempts of campaigns use it.
type batches[T any] struct {
	size, inFlight int
	commit         func(context.Context, []T)
	bell           chan struct{}

	// hold, if set (by tests, before run), keeps the requests queued until
	// it is closed.
	hold chan struct{}

	mu    sync.Mutex
	queue []T
	txns  int // transactions committed, for tests
}

func newBatches[T any](size, inFlight int, commit func(context.Context, []T)) *batches[T] {
	return &batches[T]{size: size, inFlight: inFlight, commit: commit, bell: make(chan struct{}, 1)}
}

// add queues q for the next transaction.
func (b *batches[T]) add(q T) {
	b.mu.Lock()
	b.queue = append(b.queue, q)
	b.mu.Unlock()
	ringBell(b.bell)
}

// run commits the queued requests until ctx ends, waiting for the
// transactions in flight before it returns.
func (b *batches[T]) run(ctx context.Context) {
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	if b.hold != nil {
		select {
		case <-b.hold:
		case <-ctx.Done():
			return
		}
	}
	free := make(chan struct{}, b.inFlight)
	for {
		select {
		case free <- struct{}{}: // a transaction may go: it takes what is queued now
		case <-ctx.Done():
			return
		}
		batch := b.take()
		if len(batch) == 0 {
			<-free
			select {
			case <-b.bell:
			case <-ctx.Done():
				return
			}
			continue
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			b.commit(ctx, batch)
			b.mu.Lock()
			b.txns++
			b.mu.Unlock()
			<-free
		}()
	}
}

// take takes up to size requests off the queue, oldest first.
func (b *batches[T]) take() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.queue), b.size)
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	return batch
}
