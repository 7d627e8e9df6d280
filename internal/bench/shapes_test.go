package bench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
)

// The write shapes a member could commit its records in, on the production
// shape's etcd (three kira etcd processes, fsync on): what etcd pays per
// 1,000 records of a usual size. Each iteration is one transaction of a
// writer's batch, four in flight as the writer sends them. The first shape
// is the one Kira wrote before members' journals (every record fenced by its
// own slot's leader key, in its own history key); the third is what it
// writes now (all of a batch's records in one key, each still fenced); the
// prices are in docs/decisions/0013-records-share-a-key.md.
//
//	go test ./internal/bench -run '^$' -bench FencedWriteShapes -benchtime 1600x
func BenchmarkFencedWriteShapes(b *testing.B) {
	const slots, limit, batch, recordBytes = 10000, 10, 128, 113
	bin := buildKira(b)
	cluster, err := StartEtcdCluster(bin, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Stop()
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: cluster.Endpoints})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	f, err := newShapeFixture(b.Context(), cli, slots, limit)
	if err != nil {
		b.Fatal(err)
	}
	record, shared := strings.Repeat("r", recordBytes), strings.Repeat("r", recordBytes*batch)
	// Each shape builds the transaction of batch number i.
	shapes := []struct {
		name string
		txn  func(i int) ([]clientv3.Cmp, []clientv3.Op)
	}{
		{"per-slot fence and key", func(i int) (cmps []clientv3.Cmp, ops []clientv3.Op) {
			for _, s := range f.batch(i, batch) {
				cmps = append(cmps, f.fence(s))
				ops = append(ops, clientv3.OpPut(f.entry(s, i), record))
			}
			return cmps, ops
		}},
		{"per-slot key, no fence", func(i int) (cmps []clientv3.Cmp, ops []clientv3.Op) {
			for _, s := range f.batch(i, batch) {
				ops = append(ops, clientv3.OpPut(f.entry(s, i), record))
			}
			return nil, ops
		}},
		{"per-slot fence, one key a batch", func(i int) (cmps []clientv3.Cmp, ops []clientv3.Op) {
			for _, s := range f.batch(i, batch) {
				cmps = append(cmps, f.fence(s))
			}
			return cmps, []clientv3.Op{clientv3.OpPut(f.batchKey(i, batch), shared)}
		}},
		{"one fence and one key a batch", func(i int) (cmps []clientv3.Cmp, ops []clientv3.Op) {
			s := f.batch(i, batch)[0]
			return []clientv3.Cmp{f.fence(s)}, []clientv3.Op{clientv3.OpPut(f.batchKey(i, batch), shared)}
		}},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			before := cluster.read()
			if err := commitBatches(b.Context(), cli, b.N, shape.txn); err != nil {
				b.Fatal(err)
			}
			after := cluster.read()
			per := 1000 / float64(b.N*batch)
			b.ReportMetric((after.cpu-before.cpu)*per, "etcd-CPU-s/1000rec")
			b.ReportMetric((after.disk-before.disk)*per/1e6, "disk-MB/1000rec")
			b.ReportMetric((after.wal-before.wal)*per/1e6, "WAL-MB/1000rec")
		})
	}
}

// shapeFixture is a cluster's keys as a member leading every slot of one
// job sees them: a leader key per slot (under one lease) and a full
// history ring per slot, so etcd's index is the size it is in use.
type shapeFixture struct {
	slots  []shard.Slot
	tokens []int64 // the leader keys' create revisions
	lease  clientv3.LeaseID
	limit  int
}

func newShapeFixture(ctx context.Context, cli *clientv3.Client, slots, limit int) (*shapeFixture, error) {
	lease, err := cli.Grant(ctx, 3600)
	if err != nil {
		return nil, err
	}
	f := &shapeFixture{lease: lease.ID, limit: limit}
	for p := 0; p < slots; p++ {
		s := shard.Slot{Job: "load", Partition: p}
		resp, err := cli.Put(ctx, keyspace.Candidacy("shapes", s, int64(lease.ID)), "", clientv3.WithLease(lease.ID))
		if err != nil {
			return nil, err
		}
		f.slots, f.tokens = append(f.slots, s), append(f.tokens, resp.Header.Revision)
		var ring []clientv3.Op
		for seq := 0; seq < limit; seq++ {
			ring = append(ring, clientv3.OpPut(keyspace.HistoryEntry("shapes", s, int64(seq), limit), "r"))
		}
		if _, err := cli.Txn(ctx).Then(ring...).Commit(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// batch is the slots of batch number i, n of them, in turn over all slots.
func (f *shapeFixture) batch(i, n int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = (i*n + j) % len(f.slots)
	}
	return out
}

// fence is the compare a fenced write of slot s carries.
func (f *shapeFixture) fence(s int) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(keyspace.Candidacy("shapes", f.slots[s], int64(f.lease))), "=", f.tokens[s])
}

// entry is the history key the record of slot s in batch i goes to.
func (f *shapeFixture) entry(s, i int) string {
	return keyspace.HistoryEntry("shapes", f.slots[s], int64(i), f.limit)
}

// batchKey is the shared key of batch i (of n records), in a ring that
// keeps as many records as the per-slot rings do.
func (f *shapeFixture) batchKey(i, n int) string {
	return keyspace.HistoryEntry("shapes", shard.Slot{Job: "batches", Partition: i % (len(f.slots) * f.limit / n)}, 0, 1)
}

var errFenceFailed = errors.New("bench: a fenced write's compare failed")

// commitBatches commits n transactions built by txn, four at a time.
func commitBatches(ctx context.Context, cli *clientv3.Client, n int, txn func(i int) ([]clientv3.Cmp, []clientv3.Op)) error {
	next := make(chan int)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cmps, ops := txn(i)
				resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
				if err == nil && !resp.Succeeded {
					err = errFenceFailed
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}
