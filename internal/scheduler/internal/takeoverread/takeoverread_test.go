package takeoverread

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The reads of 100 slots queued together go in three transactions (42,
// 42 and 16 slots), each slot answered with its own keys; a read queued
// alone afterwards goes in a fourth at once.
func TestTakeoverReadsShareTransactions(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slots = 100
	for p := range slots {
		s := shard.Slot{Job: "j", Partition: p}
		if _, err := cli.Put(ctx, keyspace.State("c", s), fmt.Sprint(p)); err != nil {
			t.Fatal(err)
		}
	}
	reads := New(cli, "c", journal.NewCache(cli, "c"), 30*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, slots+1)
	readOne := func(p int) {
		defer wg.Done()
		q, err := reads.Read(ctx, shard.Slot{Job: "j", Partition: p})
		if err == nil && (len(q.State) != 1 || string(q.State[0].Value) != fmt.Sprint(p)) {
			err = fmt.Errorf("partition %d read %v", p, q.State)
		}
		errs <- err
	}
	wg.Add(slots)
	for p := range slots {
		go readOne(p)
	}
	kiratest.WaitUntil(t, "every read queued", 10*time.Second, func() bool {
		return reads.queue.Queued() == slots
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { reads.Run(runCtx); close(done) }()
	wg.Wait()
	wg.Add(1)
	readOne(7)
	stop()
	kiratest.Receive(t, done, 10*time.Second, "the reads to stop")
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.queue.Batches(); n != 4 {
		t.Fatalf("%d transactions for 100 slots queued together and one alone; want 4", n)
	}
}
