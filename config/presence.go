package config

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// JobPresence is whether a job is stored, as one read found it, with the
// comparisons that hold while it still is so: what a writer of keys outside
// the catalog puts in its transaction to act only on the job as it read it
// (the scheduler's sweep of a deleted job's keys). A job deleted, or
// created again, or a new generation stored, fails them.
type JobPresence struct {
	// Known is false when the catalog is not in the per-job layout (none is
	// stored, or the single key of an older version): nothing is known of
	// its jobs' creation, and Guard is nil.
	Known bool
	// CreateRevision is the stored job's (Job.CreateRevision); 0 when the
	// job is not stored.
	CreateRevision int64
	// Guard holds while catalog-head names the generation read and the
	// job's key there has the create revision read (0: none).
	Guard []clientv3.Cmp
}

// ReadJobPresence reads whether job name is stored in the cluster's
// catalog, and since when. Held by TestJobPresenceGuardsACreate.
func ReadJobPresence(ctx context.Context, kv clientv3.KV, cluster, name string) (JobPresence, error) {
	h, err := kv.Get(ctx, keyspace.CatalogHead(cluster))
	if err != nil {
		return JobPresence{}, fmt.Errorf("config: read job %s: %w", name, err)
	}
	if len(h.Kvs) == 0 {
		return JobPresence{}, nil
	}
	var hd head
	if err := json.Unmarshal(h.Kvs[0].Value, &hd); err != nil {
		return JobPresence{}, fmt.Errorf("%w: %s: %v", ErrUnreadableCatalog, keyspace.CatalogHead(cluster), err)
	}
	key := keyspace.CatalogJob(cluster, hd.Generation, name)
	j, err := kv.Get(ctx, key, clientv3.WithRev(h.Header.Revision))
	if err != nil {
		return JobPresence{}, fmt.Errorf("config: read job %s: %w", name, err)
	}
	p := JobPresence{Known: true}
	keyCreated := int64(0)
	if len(j.Kvs) > 0 {
		var sj struct {
			Created int64 `json:"created"`
		}
		if err := json.Unmarshal(j.Kvs[0].Value, &sj); err != nil {
			return JobPresence{}, fmt.Errorf("%w: %s: %v", ErrUnreadableCatalog, key, err)
		}
		keyCreated = j.Kvs[0].CreateRevision
		p.CreateRevision = (&storedJob{Created: sj.Created}).createRevision(j.Kvs[0])
	}
	p.Guard = []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(keyspace.CatalogHead(cluster)), "=", string(h.Kvs[0].Value)),
		clientv3.Compare(clientv3.CreateRevision(key), "=", keyCreated),
	}
	return p, nil
}
