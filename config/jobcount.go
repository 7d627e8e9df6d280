package config

import (
	"context"
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A create keeps the generation's jobs under MaxJobs without counting them
// each time, which costs etcd a walk of its index, O(jobs): a JobWriter
// counts them at most once per recountEvery and in between adds its own
// creates and takes off its own deletes, those committed after the count.
// The bound is not guarded, so the count can be off by the jobs other
// writers (other members' APIs, kira apply) created or deleted since it
// was taken, at most recountEvery ago, and by the creates in flight
// through the writer at once: at 1,000 creates a second from elsewhere,
// about 1,000 either way, 1% of MaxJobs. A writer made for one call counts
// once (TestJobWriterKeepsMaxJobs).

// keptCount is a count of generation gen's jobs taken at revision rev, at
// time taken, with the writer's own writes since.
type keptCount struct {
	gen, n, rev int64
	taken       time.Time
}

// add counts a create (+1) or a delete (-1) of generation gen committed at
// revision rev, if the count is of gen and was taken before rev.
func (c *keptCount) add(gen, rev, d int64) {
	if c.gen == gen && rev > c.rev {
		c.n += d
	}
}

// room refuses a create in v's generation when it holds maxJobs jobs, by a
// count at most w.recount old, as above.
func (w *JobWriter) room(ctx context.Context, v *jobView) error {
	gen := v.head.Generation
	w.mu.Lock()
	n, ok := w.n.n, w.n.gen == gen && !w.n.taken.IsZero() && time.Since(w.n.taken) < w.recount
	w.mu.Unlock()
	if !ok {
		resp, err := w.kv.Get(ctx, keyspace.CatalogJobs(w.cluster, gen), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("config: put job %s: %w", v.name, err)
		}
		n = resp.Count
		w.mu.Lock()
		if w.n.gen != gen || resp.Header.Revision > w.n.rev {
			w.n = keptCount{gen: gen, n: n, rev: resp.Header.Revision, taken: time.Now()}
		}
		w.mu.Unlock()
	}
	if n >= w.maxJobs {
		return &Error{Problems: []Problem{{File: "job " + v.name, Message: fmt.Sprintf("the catalog has %d jobs, the limit: delete one first", n)}}}
	}
	return nil
}
