package batch

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// request is answered with the batch it went in.
type request struct {
	n     int
	batch []int
	done  chan struct{}
}

func newRequest(n int) *request { return &request{n: n, done: make(chan struct{})} }

// recorder commits batches by recording them, each held until release is
// closed, and counts the batches committing at once.
type recorder struct {
	release chan struct{}

	mu                     sync.Mutex
	batches                [][]int
	committing, mostAtOnce int
}

func (r *recorder) commit(_ context.Context, b []*request) {
	var ns []int
	for _, q := range b {
		ns = append(ns, q.n)
	}
	r.mu.Lock()
	r.batches = append(r.batches, ns)
	r.committing++
	r.mostAtOnce = max(r.mostAtOnce, r.committing)
	r.mu.Unlock()
	<-r.release
	r.mu.Lock()
	r.committing--
	r.mu.Unlock()
	for _, q := range b {
		q.batch = ns
		close(q.done)
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

// 100 requests queued together go in batches of 42, 42 and 16, oldest
// first, at most two committing at once; one queued alone afterwards goes
// in a batch of its own at once.
func TestQueueBatchesWhatWaits(t *testing.T) {
	rec := &recorder{release: make(chan struct{})}
	q := New(42, 2, rec.commit)
	q.Hold = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	reqs := make([]*request, 100)
	for i := range reqs {
		reqs[i] = newRequest(i)
		q.Put(reqs[i])
	}
	close(q.Hold)
	kiratest.WaitUntil(t, "two batches committing", 10*time.Second, func() bool { return rec.count() == 2 })
	time.Sleep(100 * time.Millisecond) // a third would have gone by now
	if n := rec.count(); n != 2 {
		t.Fatalf("%d batches committing at once; want at most 2", n)
	}
	close(rec.release)
	for _, r := range reqs {
		kiratest.Receive(t, r.done, 10*time.Second, "a request answered")
	}
	alone := newRequest(100)
	q.Put(alone)
	kiratest.Receive(t, alone.done, 10*time.Second, "the request queued alone answered")
	cancel()
	kiratest.Receive(t, done, 10*time.Second, "Run to return")

	want := []int{42, 42, 16, 1}
	if len(rec.batches) != len(want) || rec.mostAtOnce > 2 || q.Batches() != len(want) {
		t.Fatalf("batches %v (%d counted), %d at once; want sizes %v, at most 2 at once", rec.batches, q.Batches(), rec.mostAtOnce, want)
	}
	slices.SortFunc(rec.batches, func(x, y []int) int { return x[0] - y[0] }) // two commit at once
	next := 0
	for i, b := range rec.batches {
		if len(b) != want[i] {
			t.Fatalf("batch %d has %d requests; want %d", i, len(b), want[i])
		}
		for _, n := range b {
			if n != next {
				t.Fatalf("batch %d holds request %d where %d was next: not oldest first", i, n, next)
			}
			next++
		}
	}
}

// A request withdrawn while it waits is never committed, and the others
// still are; one already taken by a batch cannot be withdrawn.
func TestWithdrawnRequestIsNeverCommitted(t *testing.T) {
	rec := &recorder{release: make(chan struct{})}
	close(rec.release)
	q := New(10, 1, rec.commit)
	q.Hold = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	a, b, c := newRequest(0), newRequest(1), newRequest(2)
	q.Put(a)
	q.Put(b)
	q.Put(c)
	if !q.Withdraw(b) || q.Withdraw(b) || q.Queued() != 2 {
		t.Fatalf("withdrawing a queued request: %d left queued; want it withdrawn once, 2 left", q.Queued())
	}
	close(q.Hold)
	kiratest.Receive(t, c.done, 10*time.Second, "the last request answered")
	if q.Withdraw(a) {
		t.Fatal("a request already committed was withdrawn")
	}
	cancel()
	kiratest.Receive(t, done, 10*time.Second, "Run to return")
	if len(rec.batches) != 1 || len(rec.batches[0]) != 2 || rec.batches[0][0] != 0 || rec.batches[0][1] != 2 {
		t.Fatalf("batches %v; want one of requests 0 and 2", rec.batches)
	}
}
