package config

import (
	"context"
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A create keeps the generation's jobs at most MaxJobs without counting
// them each time (etcd counts by walking its index, O(jobs), holding off
// its writes meanwhile). Every catalog write puts catalog-head once, so
// its version counts the writes: a JobWriter's bound of the jobs is one
// count, plus its own creates less its deletes since, plus one for every
// other write since, learned from catalog-head's version in what etcd
// answers it (its own commits answer the version before them). A create
// is guarded on catalog-head's version leaving room for the writes not yet
// learned, one job each, and on catalog-source unmoved (a whole write adds
// many at once), so the creates of every writer at once never pass MaxJobs
// (TestJobWritersKeepMaxJobsTogether, TestJobWriterLearnsOtherWritersCreates,
// TestJobWriterCountsAgainAfterAWholeWrite).
//
// Trade-off: other writers' deletes and replaces count as creates, so near
// the limit the bound can refuse a create that would fit; the writer then
// counts again, at most once per recountEvery, as it does after a whole
// write. What it learned of the version is read again once older than
// recountEvery.

// keptCount is a bound of generation gen's jobs: n counted at revision
// rev, when catalog-head's version was ver and catalog-source's mod
// revision src, at time taken; the writer's own writes since, and the
// highest version of catalog-head learned.
type keptCount struct {
	gen, n, rev int64
	ver, src    int64
	taken       time.Time
	// own is the writer's creates less its deletes committed after rev,
	// and mine how many writes of its own after rev it learned.
	own, mine int64
	learned   int64
	learnedAt time.Time
	// whole: catalog-source moved since rev, a whole write: count again.
	whole bool
}

// bound is the most jobs generation gen can hold at version learned.
func (c *keptCount) bound() int64 { return c.n + c.own + c.learned - c.ver - c.mine }

// wrote counts a write of the writer committed at revision rev, which
// added d jobs (1, 0 or -1) to generation gen and found catalog-head at
// version prev.
func (c *keptCount) wrote(gen, rev, d, prev int64) {
	if c.gen == gen && rev > c.rev {
		c.own += d
		c.mine++
		c.learn(gen, prev+1, c.src)
	}
}

// learn takes in that generation gen's catalog-head was at version ver
// and catalog-source at mod revision src, a moment ago.
func (c *keptCount) learn(gen, ver, src int64) {
	if c.gen != gen || ver < c.learned {
		return
	}
	c.learned, c.learnedAt = ver, time.Now()
	if src != c.src {
		c.whole = true
	}
}

// room refuses a create in v's generation when the writer's bound of its
// jobs is at maxJobs, and returns the guards that keep the bound to the
// commit: catalog-head's version leaves room for the writes not learned,
// and catalog-source is unmoved.
func (w *JobWriter) room(ctx context.Context, v *jobView) ([]clientv3.Cmp, error) {
	c, err := w.counted(ctx, v)
	if err != nil {
		return nil, err
	}
	b := c.bound()
	if b >= w.maxJobs {
		return nil, &Error{Problems: []Problem{{File: "job " + v.name, Message: fmt.Sprintf("the catalog has %d jobs, the limit: delete one first", b)}}}
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Version(keyspace.CatalogHead(w.cluster)), "<", c.learned+w.maxJobs-b),
		clientv3.Compare(clientv3.ModRevision(keyspace.CatalogSource(w.cluster)), "=", c.src),
	}, nil
}

// counted is the writer's count of v's generation: counted again, or its
// version read again, as the comment above says.
func (w *JobWriter) counted(ctx context.Context, v *jobView) (keptCount, error) {
	w.mu.Lock()
	c := w.n
	w.mu.Unlock()
	switch {
	case c.gen != v.head.Generation || c.taken.IsZero() || c.whole,
		c.bound() >= w.maxJobs && time.Since(c.taken) >= w.recount:
		return w.count(ctx, v, true)
	case time.Since(c.learnedAt) >= w.recount:
		return w.count(ctx, v, false)
	}
	return c, nil
}

// count reads catalog-head's version and catalog-source's mod revision,
// with a count of v's generation's jobs when walk, and keeps what it read;
// a read that shows a whole write since the count counts again.
func (w *JobWriter) count(ctx context.Context, v *jobView, walk bool) (keptCount, error) {
	gen := v.head.Generation
	ops := []clientv3.Op{clientv3.OpGet(keyspace.CatalogHead(w.cluster)), clientv3.OpGet(keyspace.CatalogSource(w.cluster), clientv3.WithKeysOnly())}
	if walk {
		ops = append(ops, clientv3.OpGet(keyspace.CatalogJobs(w.cluster, gen), clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	resp, err := w.kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return keptCount{}, fmt.Errorf("config: put job %s: %w", v.name, err)
	}
	ver, src := headVersion(resp.Responses[0].GetResponseRange().Kvs), modRevision(resp.Responses[1].GetResponseRange().Kvs)
	w.mu.Lock()
	if !walk {
		w.n.learn(gen, ver, src)
	} else if w.n.gen != gen || resp.Header.Revision > w.n.rev {
		now := time.Now()
		w.n = keptCount{gen: gen, n: resp.Responses[2].GetResponseRange().Count, rev: resp.Header.Revision,
			ver: ver, src: src, taken: now, learned: ver, learnedAt: now}
	}
	c := w.n
	w.mu.Unlock()
	if c.whole && !walk {
		return w.count(ctx, v, true)
	}
	return c, nil
}

// headVersion is catalog-head's version in kvs (0: absent), and
// modRevision a key's mod revision.
func headVersion(kvs []*mvccpb.KeyValue) int64 {
	if len(kvs) == 0 {
		return 0
	}
	return kvs[0].Version
}

func modRevision(kvs []*mvccpb.KeyValue) int64 {
	if len(kvs) == 0 {
		return 0
	}
	return kvs[0].ModRevision
}
