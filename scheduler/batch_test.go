package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/kiratest"
)

// runWhenQueued waits until n requests are queued in b, then runs b until
// the returned stop is called (which waits for it to return).
func runWhenQueued[T any](t *testing.T, b *batches[T], n int) (stop func()) {
	t.Helper()
	kiratest.WaitUntil(t, "every request queued", 10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == n
	})
	return runBatches(t, b)
}

// runBatches runs b until the returned stop is called (which waits for it
// to return).
func runBatches[T any](t *testing.T, b *batches[T]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.run(ctx); close(done) }()
	return func() { cancel(); kiratest.Receive(t, done, 10*time.Second, "the batches to stop") }
}
