package operator

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cascadeRequest is a trigger key's value for a run whose dependents fire
// after it.
type cascadeRequest struct {
	RequestedAt time.Time `json:"requested_at"`
	Cascade     bool      `json:"cascade"`
}

// RequestCascade is RequestRun of every slot of a job whose dependents
// (after:) fire after the run, as after a scheduled fire: its logical time
// is when it was requested, the same for every slot. It returns the
// execution ids the runs will have (jobs.CascadeExecutionID).
func RequestCascade(ctx context.Context, kv clientv3.KV, cluster string, slots []shard.Slot) ([]string, error) {
	data, _ := json.Marshal(cascadeRequest{RequestedAt: time.Now().UTC(), Cascade: true})
	var ops []clientv3.Op
	for _, s := range slots {
		ops = append(ops, clientv3.OpPut(keyspace.Triggers(cluster, s)+uuid.NewString(), string(data)))
	}
	resp, err := kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(slots))
	for i, s := range slots {
		ids[i] = jobs.CascadeExecutionID(s.Job, s.Partition, resp.Header.Revision)
	}
	return ids, nil
}
