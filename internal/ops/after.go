package ops

import (
	"context"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/history/upstream"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Waiting is where a dependent job (after:) stands: the oldest logical
// time of its upstreams after its own newest fire, and how many partitions
// of each upstream have not ended their fire at that time ("waiting for 12
// of 64 partitions"). All pending counts at 0: every upstream ended, and
// the dependent's holder is about to fire (or record the skip).
type Waiting struct {
	LogicalTime time.Time      `json:"logical_time"`
	Upstreams   []UpstreamWait `json:"upstreams"`
}

// UpstreamWait is one upstream of a Waiting.
type UpstreamWait struct {
	Job        string `json:"job"`
	Partitions int    `json:"partitions"`
	Pending    int    `json:"pending"`
}

// graph fills js's upstreams and dependents from the catalog.
func graph(js *JobStatus, cat *config.Catalog, j config.Job) {
	js.After, js.Dependents = []string{}, []string{}
	for _, u := range j.After {
		js.After = append(js.After, u.Job)
	}
	if d := cat.Dependents()[j.Name]; d != nil {
		js.Dependents = d
	}
}

// readWaiting is where dependent j stands (nil when it is not a dependent,
// or has fired every logical time its upstreams have): its own records
// and its upstreams' are read as kira history reads them.
func readWaiting(ctx context.Context, kv clientv3.KV, journals *journal.Cache, cluster string, cat *config.Catalog, j config.Job) (*Waiting, error) {
	if !j.Dependent() {
		return nil, nil
	}
	own, err := ReadHistoryWhere(ctx, kv, journals, cluster, j.Name, -1, -1, nil)
	if err != nil {
		return nil, err
	}
	var watermark time.Time
	for _, r := range own {
		if r.ExecutionID == jobs.ExecutionID(r.Job, r.Partition, r.ScheduledTime) && r.ScheduledTime.After(watermark) {
			watermark = r.ScheduledTime
		}
	}
	fires := map[string]*upstream.Fires{}
	for _, u := range j.After {
		up, ok := cat.Job(u.Job)
		if !ok {
			continue
		}
		recs, err := ReadHistoryWhere(ctx, kv, journals, cluster, u.Job, -1, -1, nil)
		if err != nil {
			return nil, err
		}
		f := upstream.NewFires(up)
		for _, r := range recs {
			f.Add(r)
		}
		f.Sort()
		fires[u.Job] = f
	}
	times := upstream.Times(j.After, fires, watermark)
	if len(times) == 0 {
		return nil, nil
	}
	st := upstream.Decide(j.After, fires, times[0])
	w := &Waiting{LogicalTime: times[0], Upstreams: []UpstreamWait{}}
	for _, u := range j.After {
		if up, ok := cat.Job(u.Job); ok {
			w.Upstreams = append(w.Upstreams, UpstreamWait{Job: u.Job, Partitions: up.Partitions, Pending: st.Pending[u.Job]})
		}
	}
	return w, nil
}

// lastOf is r's record, written after the skip it carries.
func lastOf(s *history.Slotted) *history.Record {
	rs := s.Stored.Records()
	return &rs[len(rs)-1]
}
