// Package sweep deletes the keys a deleted job leaves in etcd: its slots'
// state keys, their history rings and the job's control keys (its pause,
// its manual run requests). The scheduler decides which member sweeps and
// when (jobsweep.go); this package reads a job's keys and deletes them, in
// transactions whose guards keep every key of a live job:
//
//   - A job the catalog no longer has (config.JobPresence: its key absent
//     in the generation catalog-head names) is swept by prefix, in one
//     transaction that compares that it is still absent and that no slot of
//     it has a candidacy: a member that still holds a slot (one paused, or
//     behind on the catalog) may write its state, so the sweep waits for
//     its key to go; once it has, that member's fenced writes fail (they
//     compare its leader key), and it can leave nothing behind the sweep.
//   - A job created again since (its create revision newer than keys of
//     its predecessor) keeps what its own holders wrote: only the keys
//     written before its creation go, each compared at the mod revision it
//     was read at, once no candidacy older than the job stands (one that
//     stood would be the predecessor's holder, who may still write).
//
// A sweep racing a create of the job, or a new generation, fails its guard
// and answers Moved: read again. The guards, and the tests that hold them,
// are in docs/decisions/0048-a-deleted-job-is-swept.md.
package sweep

import (
	"context"
	"fmt"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Outcome is what a sweep of a job did, or why it did nothing.
type Outcome int

const (
	// Nothing: the job left no key to delete.
	Nothing Outcome = iota
	// Swept: its keys were deleted.
	Swept
	// Held: a slot of the job has a candidacy that may still write (its
	// holder releasing it, or paused): sweep it again later.
	Held
	// Moved: the catalog or a key changed between the read and the
	// delete, which deleted nothing it should not: sweep it again.
	Moved
	// Unknown: the stored catalog is not in the per-job layout, which
	// does not say when a job was created: nothing is swept.
	Unknown
)

func (o Outcome) String() string {
	return [...]string{"nothing", "swept", "held", "moved", "unknown"}[o]
}

// maxDeletes is how many keys one transaction of a job created again
// deletes, each with its compare: within etcd's default 128.
const maxDeletes = 100

// Plan is the sweep of one job as read: its transactions, each guarded.
type Plan struct {
	Job string
	// Outcome is the read's: Swept when there is something to commit.
	Outcome Outcome
	// Keys is how many keys the plan deletes, when it goes by key; -1
	// when it deletes the job's prefixes.
	Keys int
	txns []txn
}

type txn struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
}

// Read reads job's keys and the catalog's presence of it, and plans their
// sweep.
func Read(ctx context.Context, kv clientv3.KV, cluster, job string) (*Plan, error) {
	p, err := config.ReadJobPresence(ctx, kv, cluster, job)
	if err != nil {
		return nil, err
	}
	if !p.Known {
		return &Plan{Job: job, Outcome: Unknown}, nil
	}
	if p.CreateRevision == 0 {
		return readDeleted(ctx, kv, cluster, job, p)
	}
	return readRecreated(ctx, kv, cluster, job, p)
}

// prefixes are the prefixes of job's keys a sweep deletes.
func prefixes(cluster, job string) []string {
	return []string{keyspace.JobStates(cluster, job), keyspace.History(cluster, job), keyspace.JobControl(cluster, job)}
}

// readDeleted plans the sweep of a job the catalog does not have: every
// key under its prefixes, while it is still absent and none of its slots
// has a candidacy.
func readDeleted(ctx context.Context, kv clientv3.KV, cluster, job string, p config.JobPresence) (*Plan, error) {
	elections := keyspace.JobElections(cluster, job)
	ops := []clientv3.Op{clientv3.OpGet(elections, clientv3.WithPrefix(), clientv3.WithCountOnly())}
	for _, pre := range prefixes(cluster, job) {
		ops = append(ops, clientv3.OpGet(pre, clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("sweep: read job %s: %w", job, err)
	}
	plan := &Plan{Job: job, Keys: -1}
	if resp.Responses[0].GetResponseRange().Count > 0 {
		plan.Outcome = Held
		return plan, nil
	}
	left := int64(0)
	for _, r := range resp.Responses[1:] {
		left += r.GetResponseRange().Count
	}
	if left == 0 {
		plan.Outcome = Nothing
		return plan, nil
	}
	t := txn{cmps: append(append([]clientv3.Cmp(nil), p.Guard...), clientv3.Compare(clientv3.CreateRevision(elections), "=", 0).WithPrefix())}
	for _, pre := range prefixes(cluster, job) {
		t.ops = append(t.ops, clientv3.OpDelete(pre, clientv3.WithPrefix()))
	}
	plan.Outcome, plan.txns = Swept, []txn{t}
	return plan, nil
}

// readRecreated plans the sweep of the keys a job created again at
// p.CreateRevision has from its predecessor: those last written before,
// once no candidacy of before stands.
func readRecreated(ctx context.Context, kv clientv3.KV, cluster, job string, p config.JobPresence) (*Plan, error) {
	ops := []clientv3.Op{clientv3.OpGet(keyspace.JobElections(cluster, job), clientv3.WithPrefix(), clientv3.WithKeysOnly())}
	for _, pre := range prefixes(cluster, job) {
		ops = append(ops, clientv3.OpGet(pre, clientv3.WithPrefix(), clientv3.WithKeysOnly()))
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("sweep: read job %s: %w", job, err)
	}
	plan := &Plan{Job: job}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if kv.CreateRevision < p.CreateRevision {
			plan.Outcome = Held
			return plan, nil
		}
	}
	var older []*mvccpb.KeyValue
	for _, r := range resp.Responses[1:] {
		for _, kv := range r.GetResponseRange().Kvs {
			if kv.ModRevision < p.CreateRevision {
				older = append(older, kv)
			}
		}
	}
	plan.Keys = len(older)
	if len(older) == 0 {
		plan.Outcome = Nothing
		return plan, nil
	}
	for len(older) > 0 {
		n := min(len(older), maxDeletes)
		t := txn{cmps: append([]clientv3.Cmp(nil), p.Guard...)}
		for _, kv := range older[:n] {
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
			t.ops = append(t.ops, clientv3.OpDelete(string(kv.Key)))
		}
		plan.txns = append(plan.txns, t)
		older = older[n:]
	}
	plan.Outcome = Swept
	return plan, nil
}

// Commit deletes what p read, each transaction under its guard: Swept when
// every one committed, Moved when a guard failed (the transactions before
// it deleted their keys), p.Outcome when there was nothing to commit. An
// error may leave a transaction applied, as any etcd error.
func (p *Plan) Commit(ctx context.Context, kv clientv3.KV) (Outcome, error) {
	if p.Outcome != Swept {
		return p.Outcome, nil
	}
	for _, t := range p.txns {
		resp, err := kv.Txn(ctx).If(t.cmps...).Then(t.ops...).Commit()
		if err != nil {
			return 0, fmt.Errorf("sweep: job %s: %w", p.Job, err)
		}
		if !resp.Succeeded {
			return Moved, nil
		}
	}
	return Swept, nil
}

// Job sweeps job: Read, then Commit.
func Job(ctx context.Context, kv clientv3.KV, cluster, job string) (*Plan, Outcome, error) {
	p, err := Read(ctx, kv, cluster, job)
	if err != nil {
		return nil, 0, err
	}
	o, err := p.Commit(ctx, kv)
	return p, o, err
}
