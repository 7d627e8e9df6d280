package ops

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DetailPartitions is the most partitions a job may have for a timeline to
// list its slots one by one without being asked (TimelineQuery.Job); a job
// with more is answered per time bucket.
const DetailPartitions = 16

// TimelineQuery says which part of the history a timeline answers.
type TimelineQuery struct {
	// From and To bound the scheduled times of the executions answered.
	From, To time.Time
	// Bucket is the width of a time bucket of an aggregated job.
	Bucket time.Duration
	// Job, if set, is the only job answered, with every slot in detail.
	Job string
	// Offset and Limit page the rows: the jobs, or with Job its slots.
	Offset, Limit int
}

// Timeline is what the dashboard draws: per job of the stored catalog, the
// executions scheduled in [From, To] and who held each slot when. A job of
// at most DetailPartitions partitions (or the one the query names) has its
// slots in detail; any other has Buckets only, so that the answer grows
// with the jobs and the window, not with the slots. TestTimeline.
type Timeline struct {
	Cluster  string    `json:"cluster"`
	Revision int64     `json:"revision"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// BucketSeconds is the width of the Buckets of aggregated jobs.
	BucketSeconds float64 `json:"bucket_seconds"`
	// Members names the live members by id.
	Members map[string]string `json:"members"`
	// Rows is how many rows (jobs, or with a job asked for its slots) there
	// are in all; Jobs or Slots hold those from Offset on.
	Rows   int           `json:"rows"`
	Offset int           `json:"offset"`
	Jobs   []JobTimeline `json:"jobs"`
}

// JobTimeline is one job of a Timeline.
type JobTimeline struct {
	Job        string `json:"job"`
	Schedule   string `json:"schedule"`
	Partitions int    `json:"partitions"`
	Paused     bool   `json:"paused"`
	// Detail says whether Slots lists the job's slots; else Buckets sums them.
	Detail  bool           `json:"detail"`
	Slots   []SlotTimeline `json:"slots"`
	Buckets []Bucket       `json:"buckets"`
	// Led counts the slots answered (all, or the page of them asked for)
	// that have a leader now.
	Led int `json:"led"`
}

// SlotTimeline is one slot: its executions, oldest first, the holders its
// records show, and who holds it now.
type SlotTimeline struct {
	Partition  int         `json:"partition"`
	Owner      string      `json:"owner"`
	Token      int64       `json:"token"`
	Executions []Execution `json:"executions"`
	Holders    []Holding   `json:"holders"`
}

// Execution is one history record as the timeline shows it.
type Execution struct {
	ID        string    `json:"id"`
	Attempt   int       `json:"attempt"`
	Cause     string    `json:"trigger"`
	Member    string    `json:"member"`
	Token     int64     `json:"token"`
	Scheduled time.Time `json:"scheduled"`
	// Started is nil for a record of a fire that did not run (skipped, missed).
	Started *time.Time `json:"started"`
	// DurationMS and LatenessMS (start minus scheduled time) are 0 when it did not start.
	DurationMS int64  `json:"duration_ms"`
	LatenessMS int64  `json:"lateness_ms"`
	Outcome    string `json:"outcome"`
	ExitCode   *int   `json:"exit_code"`
	HTTPStatus *int   `json:"http_status"`
	// Repeats counts the later fires a skip record stands for.
	Repeats int `json:"repeats"`
	// TraceID is the execution's trace id, "" if its record keeps none
	// (history.Record.TraceID).
	TraceID string `json:"trace_id"`
}

// Holding is a stretch of time a slot's records show one holder (member and
// token) acting: from its first record's start to its last one's end, or to
// the query's To when it still holds the slot. Fenced records are left
// out: their writer no longer held the slot.
type Holding struct {
	Member string    `json:"member"`
	Token  int64     `json:"token"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
}

// Bucket sums an aggregated job's slots over one time bucket.
type Bucket struct {
	Start time.Time `json:"start"`
	// Outcomes counts the fires scheduled in the bucket by outcome.
	Outcomes map[string]int `json:"outcomes"`
	// MaxLatenessMS is the latest start in the bucket.
	MaxLatenessMS int64 `json:"max_lateness_ms"`
	// HolderChanges counts the slots whose holder changed in the bucket.
	HolderChanges int `json:"holder_changes"`
}

// ReadTimeline reads the timeline q asks for from one status snapshot and
// the history (rings and journals, as ReadHistoryWhere). rings, if not
// nil, serves the read of every ring (a query of one job reads its own).
func ReadTimeline(ctx context.Context, kv clientv3.KV, journals *journal.Cache, rings *Rings, catalogs *config.StoredCache, cluster string, q TimelineQuery) (*Timeline, error) {
	st, cat, err := readWithCatalog(ctx, kv, cluster, catalogs)
	if err != nil {
		return nil, err
	}
	tl := &Timeline{Cluster: cluster, Revision: st.Revision, From: q.From, To: q.To, BucketSeconds: q.Bucket.Seconds(),
		Members: map[string]string{}, Offset: q.Offset, Jobs: []JobTimeline{}}
	for _, m := range st.Members {
		tl.Members[m.ID] = nameOf(m.Name, m.ID)
	}
	var rows []config.Job
	if q.Job != "" {
		j, ok := cat.Job(q.Job)
		if !ok {
			return nil, ErrNoJob
		}
		rows = []config.Job{j}
		tl.Rows = j.Partitions
	} else {
		rows = page(cat.Jobs, q.Offset, q.Limit)
		tl.Rows = len(cat.Jobs)
	}
	recs, err := timelineRecords(ctx, kv, journals, rings, cluster, q.Job, rows)
	if err != nil {
		return nil, err
	}
	bySlot := recordsBySlot(recs)
	for _, j := range rows {
		tl.Jobs = append(tl.Jobs, jobTimeline(st, j, bySlot, q))
	}
	return tl, nil
}

// jobTimeline is job j's part of a timeline: its slots in detail (those
// the query's page holds, when it names the job), or summed per bucket.
func jobTimeline(st *Status, j config.Job, bySlot map[shard.Slot][]history.Record, q TimelineQuery) JobTimeline {
	jt := JobTimeline{Job: j.Name, Schedule: j.Schedule, Partitions: j.Partitions, Paused: slices.Contains(st.Paused, j.Name),
		Detail: q.Job != "" || j.Partitions <= DetailPartitions, Slots: []SlotTimeline{}, Buckets: []Bucket{}}
	partitions := make([]int, j.Partitions)
	for p := range partitions {
		partitions[p] = p
	}
	if q.Job != "" {
		partitions = page(partitions, q.Offset, q.Limit)
	}
	buckets := map[int64]*Bucket{}
	for _, p := range partitions {
		now, _ := st.Slot(j.Name, p)
		if now.Owner != "" {
			jt.Led++
		}
		slot := slotTimeline(p, now, bySlot[shard.Slot{Job: j.Name, Partition: p}], q)
		if jt.Detail {
			jt.Slots = append(jt.Slots, slot)
		} else {
			addToBuckets(buckets, slot, q)
		}
	}
	jt.Buckets = sortedBuckets(buckets)
	return jt
}

// ErrNoJob is returned for a query of a job the stored catalog does not have.
var ErrNoJob = errors.New("no such job in the stored catalog")

// page is items[offset:offset+limit], clamped; limit <= 0 means no limit.
func page[T any](items []T, offset, limit int) []T {
	offset = min(offset, len(items))
	items = items[offset:]
	if limit > 0 && limit < len(items) {
		items = items[:limit]
	}
	return items
}

// timelineRecords are the records of the jobs in rows: one read of the
// job's rings when one job is asked for, else one of every ring. A job's
// records are its own holders', not those of a job of the same name
// deleted before it was created (readRecords).
func timelineRecords(ctx context.Context, kv clientv3.KV, journals *journal.Cache, rings *Rings, cluster, job string, rows []config.Job) ([]history.Record, error) {
	if job != "" {
		keep := func(s shard.Slot) bool { return s.Job == job }
		return readRecordsSince(ctx, kv, journals, cluster, keyspace.History(cluster, job), keep, rows[0].CreateRevision)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	want := map[string]int64{} // the create revision of each job
	for _, j := range rows {
		want[j.Name] = j.CreateRevision
	}
	var all []history.Record
	var err error
	if rings != nil {
		all, err = rings.Records(ctx, journals)
	} else {
		all, err = readRecordsUnder(ctx, kv, journals, cluster, keyspace.Cluster(cluster)+"history/", func(shard.Slot) bool { return true })
	}
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, r := range all {
		if created, ok := want[r.Job]; ok && !ofPredecessor(r, created) {
			out = append(out, r)
		}
	}
	return out, nil
}

// slotTimeline is one slot's executions scheduled in the query's window,
// oldest first, and its holders over them.
func slotTimeline(p int, now SlotStatus, recs []history.Record, q TimelineQuery) SlotTimeline {
	sort.Slice(recs, func(a, b int) bool {
		if !recs[a].ScheduledTime.Equal(recs[b].ScheduledTime) {
			return recs[a].ScheduledTime.Before(recs[b].ScheduledTime)
		}
		return recs[a].StartedAt.Before(recs[b].StartedAt)
	})
	out := SlotTimeline{Partition: p, Owner: now.Owner, Token: now.Token, Executions: []Execution{}, Holders: []Holding{}}
	for _, r := range recs {
		if r.ScheduledTime.Before(q.From) || r.ScheduledTime.After(q.To) {
			continue
		}
		out.Executions = append(out.Executions, executionOf(r))
		out.Holders = addHolding(out.Holders, r)
	}
	if n := len(out.Holders); n > 0 && out.Holders[n-1].Member == now.Owner && out.Holders[n-1].Token == now.Token {
		out.Holders[n-1].To = q.To
	}
	return out
}

// startOf is when record r's holder acted on it: its start, or its
// scheduled time for a record of a fire not started.
func startOf(r history.Record) time.Time {
	if r.StartedAt.IsZero() {
		return r.ScheduledTime
	}
	return r.StartedAt
}

// addHolding is holders, a slot's holders so far (oldest first), with
// the holder of record r, next in time, taken in: its stretch extended, or
// a new one. A fenced record is left out: its writer no longer held the
// slot.
func addHolding(holders []Holding, r history.Record) []Holding {
	if r.Outcome == string(jobs.Fenced) {
		return holders
	}
	from, to := startOf(r), r.FinishedAt
	if to.Before(from) {
		to = from
	}
	if n := len(holders); n > 0 && holders[n-1].Member == r.Member && holders[n-1].Token == int64(r.Token) {
		holders[n-1].To = maxTime(holders[n-1].To, to)
		return holders
	}
	return append(holders, Holding{Member: r.Member, Token: int64(r.Token), From: from, To: to})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func executionOf(r history.Record) Execution {
	e := Execution{ID: r.ExecutionID, Attempt: r.Attempt, Cause: string(r.Cause), Member: r.Member, Token: int64(r.Token),
		Scheduled: r.ScheduledTime, Outcome: r.Outcome, ExitCode: r.ExitCode, HTTPStatus: r.HTTPStatus, Repeats: r.Repeats, TraceID: r.TraceID}
	if r.Outcome != history.OutcomeSkipped && r.Outcome != history.OutcomeMissed && !r.StartedAt.IsZero() {
		started := r.StartedAt
		e.Started = &started
		e.LatenessMS = r.StartedAt.Sub(r.ScheduledTime).Milliseconds()
		if r.FinishedAt.After(r.StartedAt) {
			e.DurationMS = r.FinishedAt.Sub(r.StartedAt).Milliseconds()
		}
	}
	return e
}

// addToBuckets sums slot into the buckets of its job.
func addToBuckets(buckets map[int64]*Bucket, slot SlotTimeline, q TimelineQuery) {
	at := func(t time.Time) *Bucket {
		i := int64(t.Sub(q.From) / q.Bucket)
		b := buckets[i]
		if b == nil {
			b = &Bucket{Start: q.From.Add(time.Duration(i) * q.Bucket), Outcomes: map[string]int{}}
			buckets[i] = b
		}
		return b
	}
	for _, e := range slot.Executions {
		b := at(e.Scheduled)
		b.Outcomes[e.Outcome] += 1 + e.Repeats
		b.MaxLatenessMS = max(b.MaxLatenessMS, e.LatenessMS)
	}
	for i, h := range slot.Holders {
		if i > 0 && !h.From.Before(q.From) {
			at(h.From).HolderChanges++
		}
	}
}

func sortedBuckets(buckets map[int64]*Bucket) []Bucket {
	keys := make([]int64, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Bucket, 0, len(keys))
	for _, k := range keys {
		out = append(out, *buckets[k])
	}
	return out
}

// recordsBySlot groups recs by slot. A slot's records come in one run (as
// history.Gather answers them), which is kept in place rather than copied;
// a slot met again in a later run is appended to.
func recordsBySlot(recs []history.Record) map[shard.Slot][]history.Record {
	out := map[shard.Slot][]history.Record{}
	for i := 0; i < len(recs); {
		s := shard.Slot{Job: recs[i].Job, Partition: recs[i].Partition}
		j := i + 1
		for j < len(recs) && recs[j].Job == s.Job && recs[j].Partition == s.Partition {
			j++
		}
		if prev, ok := out[s]; ok {
			out[s] = append(prev, recs[i:j]...)
		} else {
			out[s] = recs[i:j:j]
		}
		i = j
	}
	return out
}
