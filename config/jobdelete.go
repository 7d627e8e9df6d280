package config

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DeleteJob deletes job name of the cluster's stored catalog as
// opt.Manager, under opt's conditions, and returns the new catalog
// revision: ErrNoJob when it is not stored, a *DependentsError while jobs
// run after it. What it reads and guards is job.go's
// (TestSingleJobWrites, TestSingleJobRulesAcrossJobs).
func DeleteJob(ctx context.Context, kv clientv3.KV, cluster, name string, opt DeleteJobOptions) (rev int64, err error) {
	if err := opt.Manager.ValidateSingle(); err != nil {
		return 0, err
	}
	var lost *lostWrite
	for range jobAttempts {
		v, err := readJobView(ctx, kv, cluster, name)
		if err != nil {
			return 0, err
		}
		switch ok, err := lost.applied(v); {
		case err != nil:
			return 0, err
		case ok:
			return v.headRev, nil
		case v.job == nil:
			return 0, fmt.Errorf("%w: %s (cluster %s)", ErrNoJob, name, cluster)
		}
		if err := v.allowed(ctx, kv, opt.Manager, opt.IfRevision, false, opt.Force); err != nil {
			return 0, err
		}
		if err := check(opt.Check, v, nil); err != nil {
			return 0, err
		}
		guard, err := v.noDependents(ctx, kv)
		if err != nil {
			return 0, err
		}
		ops := []clientv3.Op{clientv3.OpDelete(v.key())}
		if v.head.Refs {
			for _, u := range v.job.Job.After {
				ops = append(ops, clientv3.OpDelete(ref{up: u.Job, dep: name}.key(cluster, v.head.Generation)))
			}
		}
		resp, err := kv.Txn(ctx).If(append(v.guards(), guard)...).Then(append(ops, v.bump(opt.Manager, "deleted")...)...).Commit()
		switch {
		case err != nil:
			lost = &lostWrite{at: v.at, before: v.jobRev, err: err}
		case resp.Succeeded:
			return resp.Header.Revision, nil
		}
	}
	return 0, fmt.Errorf("%w (job %s)", ErrCatalogBusy, name)
}

// noDependents refuses the delete while a job runs after this one, and
// returns the guard that keeps it so until the commit: no reference key
// under the job (a range compare), or, in a generation an older version
// stored without them (head.Refs false), the generation's jobs read whole
// and catalog-head's mod revision unchanged since.
func (v *jobView) noDependents(ctx context.Context, kv clientv3.KV) (clientv3.Cmp, error) {
	if v.head.Refs {
		prefix := keyspace.CatalogRefs(v.cluster, v.head.Generation, v.name)
		resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(10))
		if err != nil {
			return clientv3.Cmp{}, fmt.Errorf("config: delete job %s: %w", v.name, err)
		}
		if len(resp.Kvs) > 0 {
			deps := make([]string, len(resp.Kvs))
			for i, kv := range resp.Kvs {
				deps[i] = strings.TrimPrefix(string(kv.Key), prefix)
			}
			return clientv3.Cmp{}, &DependentsError{Job: v.name, Dependents: deps}
		}
		return clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix(), nil
	}
	st, err := readGeneration(ctx, kv, v.cluster, v.head.Generation, v.at)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	var deps []string
	for name, j := range st.fresh {
		for _, u := range j.After {
			if u.Job == v.name {
				deps = append(deps, name)
			}
		}
	}
	if len(deps) > 0 {
		slices.Sort(deps)
		return clientv3.Cmp{}, &DependentsError{Job: v.name, Dependents: deps}
	}
	return clientv3.Compare(clientv3.ModRevision(keyspace.CatalogHead(v.cluster)), "=", v.headRev), nil
}
