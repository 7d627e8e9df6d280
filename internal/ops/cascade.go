package ops

import (
	"context"
	"time"

	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RequestCascade is RequestRun of every slot of a job whose dependents
// (after:) fire after the run, as after a scheduled fire: its logical time
// is when it was requested, the same for every slot. It returns the
// execution ids the runs will have (jobs.CascadeExecutionID).
func RequestCascade(ctx context.Context, kv clientv3.KV, cluster string, slots []shard.Slot) ([]string, error) {
	return requestRun(ctx, kv, cluster, slots, triggerRequest{RequestedAt: time.Now().UTC(), Cascade: true})
}
