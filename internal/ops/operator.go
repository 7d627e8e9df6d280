package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Pause stops a job's scheduled and catch-up fires on every member until
// Resume; runs in flight finish, manual triggers still run.
func Pause(ctx context.Context, kv clientv3.KV, cluster, job string) error {
	_, err := kv.Put(ctx, keyspace.Paused(cluster, job), time.Now().UTC().Format(time.RFC3339))
	return err
}

// Resume lets a paused job fire again from its next scheduled time.
func Resume(ctx context.Context, kv clientv3.KV, cluster, job string) error {
	_, err := kv.Delete(ctx, keyspace.Paused(cluster, job))
	return err
}

// IsPaused reports whether a job is paused.
func IsPaused(ctx context.Context, kv clientv3.KV, cluster, job string) (bool, error) {
	resp, err := kv.Get(ctx, keyspace.Paused(cluster, job), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}

type triggerRequest struct {
	RequestedAt time.Time  `json:"requested_at"`
	At          *time.Time `json:"at,omitempty"` // a one-off run's time (RequestRunAt)
	// Cascade: the run's dependents (after:) fire after it (RequestCascade).
	Cascade bool `json:"cascade,omitempty"`
	// StartedAttempt is set by the run's holder when the run starts (the
	// scheduler's startedValue): the request is then no longer waiting.
	StartedAttempt int `json:"started_attempt,omitempty"`
}

// RequestRun requests one manual run of each given slot now, by whichever
// member holds it, and returns the execution ids the runs will have.
func RequestRun(ctx context.Context, kv clientv3.KV, cluster string, slots []shard.Slot) ([]string, error) {
	return requestRun(ctx, kv, cluster, slots, triggerRequest{RequestedAt: time.Now().UTC()})
}

func requestRun(ctx context.Context, kv clientv3.KV, cluster string, slots []shard.Slot, req triggerRequest) ([]string, error) {
	data, _ := json.Marshal(req)
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
		ids[i] = jobs.ManualExecutionID(s.Job, s.Partition, resp.Header.Revision)
		if req.Cascade {
			ids[i] = jobs.CascadeExecutionID(s.Job, s.Partition, resp.Header.Revision)
		}
	}
	return ids, nil
}

// ReadHistory returns up to n records of job (all partitions, or one when
// partition >= 0), newest first.
func ReadHistory(ctx context.Context, kv clientv3.KV, cluster, job string, partition, n int) ([]history.Record, error) {
	return ReadHistoryWhere(ctx, kv, nil, cluster, job, partition, n, nil)
}

// ReadHistoryWhere is ReadHistory of the records keep accepts (all when
// keep is nil): the n newest of those. A slot's records are in its ring
// and in its holders' journals; journals, when not nil, is a cache of
// those kept by the caller (a server answering often), else they are read
// afresh.
func ReadHistoryWhere(ctx context.Context, kv clientv3.KV, journals *journal.Cache, cluster, job string, partition, n int, keep func(history.Record) bool) ([]history.Record, error) {
	all, err := readRecords(ctx, kv, journals, cluster, job, partition)
	if err != nil {
		return nil, err
	}
	out := []history.Record{}
	for _, r := range all {
		if keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.StartedAt.Equal(b.StartedAt) {
			return a.StartedAt.After(b.StartedAt)
		}
		return a.ScheduledTime.After(b.ScheduledTime)
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// readRecords are the records of job (one partition, or all when
// partition < 0) in its rings and in journals (history.Gather). The
// records of a job of the same name deleted before the job was created
// (their token older than its create revision) are not its own: the
// members' journals keep them until their entries are reused
// (TestARecreatedJobShowsNoneOfItsPredecessorsRecords).
func readRecords(ctx context.Context, kv clientv3.KV, journals *journal.Cache, cluster, job string, partition int) ([]history.Record, error) {
	prefix := keyspace.History(cluster, job)
	if partition >= 0 {
		prefix = keyspace.SlotHistory(cluster, shard.Slot{Job: job, Partition: partition})
	}
	p, _ := config.ReadJobPresence(ctx, kv, cluster, job) // an unreadable catalog: every record
	return readRecordsSince(ctx, kv, journals, cluster, prefix, func(s shard.Slot) bool {
		return s.Job == job && (partition < 0 || s.Partition == partition)
	}, p.CreateRevision)
}

// readRecordsUnder are the records in the rings under prefix and those of
// the slots keep accepts in journals: keep must accept exactly the slots
// whose rings are under prefix.
func readRecordsUnder(ctx context.Context, kv clientv3.KV, journals *journal.Cache, cluster, prefix string, keep func(shard.Slot) bool) ([]history.Record, error) {
	return readRecordsSince(ctx, kv, journals, cluster, prefix, keep, 0)
}

// ofPredecessor reports whether r was written under a token older than
// created, the create revision of r's job: by a holder of a job of the
// same name deleted before it. A record without a token (written by hand)
// is no holder's.
func ofPredecessor(r history.Record, created int64) bool {
	return r.Token.Valid() && int64(r.Token) < created
}

// readRecordsSince is readRecordsUnder of the records written under a
// token not older than created.
func readRecordsSince(ctx context.Context, kv clientv3.KV, journals *journal.Cache, cluster, prefix string, keep func(shard.Slot) bool, created int64) ([]history.Record, error) {
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	ring := make([]history.Slotted, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if st, s, ok := decodeRing(cluster, prefix, kv); ok {
			ring = append(ring, history.Slotted{Slot: s, Stored: st, Revision: kv.ModRevision})
		}
	}
	if journals == nil {
		journals = journal.NewCache(kv, cluster)
	}
	inJournals, err := journals.Records(ctx, resp.Header.Revision, keep)
	if err != nil {
		return nil, err
	}
	older := func(r history.Slotted) bool { return ofPredecessor(r.Stored.Record, created) }
	return history.Gather(slices.DeleteFunc(ring, older), slices.DeleteFunc(inJournals, older)), nil
}

// Outcomes are the outcomes a history record can have.
var Outcomes = []string{string(jobs.Succeeded), string(jobs.Failed), string(jobs.TimedOut), string(jobs.Cancelled), string(jobs.Fenced),
	history.OutcomeSkipped, history.OutcomeMissed, history.OutcomeReset}

// OutcomeFilter keeps the records that ended with outcome (all when it is
// ""), for ReadHistoryWhere; an outcome no record can have is an error.
func OutcomeFilter(outcome string) (func(history.Record) bool, error) {
	if outcome == "" {
		return nil, nil
	}
	if !slices.Contains(Outcomes, outcome) {
		return nil, fmt.Errorf("outcome %q: must be one of %s", outcome, strings.Join(Outcomes, ", "))
	}
	return func(r history.Record) bool { return r.Outcome == outcome }, nil
}

// decodeRing reads the record stored at kv, in any format
// (history.DecodeEntry), if kv is a readable record under prefix.
func decodeRing(cluster, prefix string, kv *mvccpb.KeyValue) (history.Stored, shard.Slot, bool) {
	if !strings.HasPrefix(string(kv.Key), prefix) {
		return history.Stored{}, shard.Slot{}, false
	}
	s, ok := keyspace.ParseHistoryEntry(cluster, string(kv.Key))
	if !ok {
		return history.Stored{}, shard.Slot{}, false
	}
	st, err := history.Decode(s, kv.Value)
	return st, s, err == nil
}
