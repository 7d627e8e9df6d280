package ops

import (
	"context"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// JobStatus is one job of the stored catalog as an operator sees it. Its
// JSON form is a contract: every field is always present.
type JobStatus struct {
	Name       string `json:"name"`
	Schedule   string `json:"schedule"`
	Timezone   string `json:"timezone"`
	Partitions int    `json:"partitions"`
	Paused     bool   `json:"paused"`
	SlotsLed   int    `json:"slots_led"`
	// Shares is how many slots each member leads: each member the
	// placement admits, then any other owner.
	Shares []Share `json:"shares"`
	// Placement is the labels a member needs to run the job, key=value
	// pairs ("" for any member); EligibleMembers counts the live members
	// that have them (0: nobody runs the job).
	Placement       string `json:"placement"`
	EligibleMembers int    `json:"eligible_members"`
	// Manager is who writes the job (config.Manager: apply, file,
	// api:<identity>, cli:<name>), Revision the catalog revision of its
	// last write; empty and 0 for a catalog stored in the single-key
	// layout of an older version.
	Manager  string `json:"manager"`
	Revision int64  `json:"revision"`
	// Labels are the job's labels: (config.Job.Labels), or nil.
	Labels map[string]string `json:"labels"`
	// LastFire is the newest execution record of any of its slots, or nil.
	LastFire *Fire `json:"last_fire"`
	// NextFire is the next scheduled time after now (the slots' jitter
	// comes on top), or nil for a schedule that never fires again.
	NextFire *time.Time `json:"next_fire"`
	// After names the jobs it runs after (after:), Dependents the jobs that
	// run after it; Waiting is where a dependent stands (nil otherwise, or
	// when it has fired every logical time its upstreams have).
	After      []string `json:"after"`
	Dependents []string `json:"dependents"`
	Waiting    *Waiting `json:"waiting"`
}

// Fire is one execution as the job views show it.
type Fire struct {
	ScheduledTime time.Time `json:"scheduled_time"`
	Outcome       string    `json:"outcome"`
	Member        string    `json:"member"`
	ExecutionID   string    `json:"execution_id"`
}

// JobDetail is a job with its spec and each of its slots.
type JobDetail struct {
	JobStatus
	Spec  config.Job   `json:"spec"`
	Slots []JobSlotRow `json:"slots"`
	// Upcoming is the next UpcomingFires scheduled times after now, in
	// UTC, as kira next lists them (config.Job.Upcoming); fewer when the
	// schedule ends.
	Upcoming []time.Time `json:"upcoming"`
	// WaitingRuns are the job's manual runs not started yet, one-off runs
	// (kira trigger --at) by their time (WaitingRuns).
	WaitingRuns []WaitingRun `json:"waiting_runs"`
}

// UpcomingFires is how many next fires a JobDetail lists.
const UpcomingFires = 5

// JobSlotRow is one slot of a job.
type JobSlotRow struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
	LastFire  *Fire  `json:"last_fire"`
	// NextFire is when the slot fires next: the job's next scheduled time
	// plus the slot's jitter offset; nil when the schedule has ended.
	NextFire *time.Time `json:"next_fire"`
}

// ReadJobs reads every job of the cluster's stored catalog, with who leads
// its slots, its last fire and its next (after now). journals is as for
// ReadHistoryWhere; catalogs, if not nil, serves the catalog's read.
func ReadJobs(ctx context.Context, kv clientv3.KV, journals *journal.Cache, catalogs *config.StoredCache, cluster string, now time.Time) ([]JobStatus, error) {
	st, cat, err := readWithCatalog(ctx, kv, cluster, catalogs)
	if err != nil {
		return nil, err
	}
	newest := make(map[string]*history.Slotted, len(cat.Jobs))
	var rev int64
	for _, j := range cat.Jobs {
		inRing, r, err := newestInRing(ctx, kv, cluster, j.Name)
		if err != nil {
			return nil, err
		}
		newest[j.Name], rev = inRing, max(rev, r)
	}
	if journals == nil {
		journals = journal.NewCache(kv, cluster)
	}
	// One read of the journals, as of every ring read or later, serves all
	// jobs.
	inJournals, err := journals.Records(ctx, rev, func(s shard.Slot) bool { _, ok := newest[s.Job]; return ok })
	if err != nil {
		return nil, err
	}
	for i, r := range inJournals {
		if n := newest[r.Slot.Job]; n == nil || r.Revision > n.Revision ||
			r.Revision == n.Revision && r.Stored.StartedAt.After(n.Stored.StartedAt) {
			newest[r.Slot.Job] = &inJournals[i]
		}
	}
	out := []JobStatus{}
	for _, j := range cat.Jobs {
		var last *history.Record
		if n := newest[j.Name]; n != nil {
			last = lastOf(n)
		}
		js := jobStatus(st, j, last, now)
		graph(&js, cat, j)
		if js.Waiting, err = readWaiting(ctx, kv, journals, cluster, cat, j); err != nil {
			return nil, err
		}
		out = append(out, js)
	}
	return out, nil
}

// ReadJob reads one job, with its spec and every slot's owner, token and
// last fire. ok is false when the catalog has no such job.
func ReadJob(ctx context.Context, kv clientv3.KV, journals *journal.Cache, catalogs *config.StoredCache, cluster, name string, now time.Time) (*JobDetail, bool, error) {
	st, cat, err := readWithCatalog(ctx, kv, cluster, catalogs)
	if err != nil {
		return nil, false, err
	}
	j, ok := cat.Job(name)
	if !ok {
		return nil, false, nil
	}
	recs, err := ReadHistoryWhere(ctx, kv, journals, cluster, name, -1, -1, nil)
	if err != nil {
		return nil, false, err
	}
	lastOf := map[int]*Fire{}
	for _, r := range recs { // newest first
		if _, seen := lastOf[r.Partition]; !seen {
			lastOf[r.Partition] = fireOf(r)
		}
	}
	var newest *history.Record
	if len(recs) > 0 {
		newest = &recs[0]
	}
	d := &JobDetail{JobStatus: jobStatus(st, j, newest, now), Spec: j, Slots: []JobSlotRow{}}
	graph(&d.JobStatus, cat, j)
	if d.Waiting, err = readWaiting(ctx, kv, journals, cluster, cat, j); err != nil {
		return nil, false, err
	}
	if d.Upcoming, err = j.Upcoming(now, UpcomingFires); err != nil {
		d.Upcoming = []time.Time{}
	}
	if d.WaitingRuns, err = WaitingRuns(ctx, kv, cluster, name); err != nil {
		return nil, false, err
	}
	for p := range j.Partitions {
		s, _ := st.Slot(j.Name, p)
		row := JobSlotRow{Partition: p, Owner: s.Owner, Token: s.Token, LastFire: lastOf[p]}
		if d.NextFire != nil {
			due := d.NextFire.Add(j.JitterOffset(shard.Slot{Job: j.Name, Partition: p}))
			row.NextFire = &due
		}
		d.Slots = append(d.Slots, row)
	}
	return d, true, nil
}

// readWithCatalog reads the status and the stored catalog of the same
// snapshot, the catalog through catalogs if not nil.
func readWithCatalog(ctx context.Context, kv clientv3.KV, cluster string, catalogs *config.StoredCache) (*Status, *config.Catalog, error) {
	st, err := ReadStatusCached(ctx, kv, cluster, catalogs)
	if err != nil {
		return nil, nil, err
	}
	if st.catalogErr != nil {
		return nil, nil, st.catalogErr
	}
	return st, st.catalog, nil
}

func jobStatus(st *Status, j config.Job, last *history.Record, now time.Time) JobStatus {
	js := JobStatus{Name: j.Name, Schedule: j.Schedule, Timezone: j.Timezone, Partitions: j.Partitions,
		Paused: slices.Contains(st.Paused, j.Name), Placement: j.Placement.String(), EligibleMembers: EligibleMembers(st.Members, j),
		Shares: jobShares(st, j), Labels: j.Labels}
	if st.stored != nil {
		if m, rev, ok := st.stored.JobMeta(j.Name); ok {
			js.Manager, js.Revision = m.String(), rev
		}
	}
	for _, s := range st.Slots {
		if s.Job == j.Name && s.Owner != "" {
			js.SlotsLed++
		}
	}
	if last != nil {
		js.LastFire = fireOf(*last)
	}
	if sched, err := j.ParsedSchedule(); err == nil {
		if next := sched.Next(now.UTC()); !next.IsZero() {
			js.NextFire = &next
		}
	}
	return js
}

func fireOf(r history.Record) *Fire {
	return &Fire{ScheduledTime: r.ScheduledTime, Outcome: r.Outcome, Member: r.Member, ExecutionID: r.ExecutionID}
}

// newestInRing is job's most recently written record in its rings (the
// newest key by revision), or nil, and the revision it was read at.
func newestInRing(ctx context.Context, kv clientv3.KV, cluster, job string) (*history.Slotted, int64, error) {
	prefix := keyspace.History(cluster, job)
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return nil, 0, err
	}
	for _, kv := range resp.Kvs {
		if st, s, ok := decodeRing(cluster, prefix, kv); ok {
			return &history.Slotted{Slot: s, Stored: st, Revision: kv.ModRevision}, resp.Header.Revision, nil
		}
	}
	return nil, resp.Header.Revision, nil
}
