package ops

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status is a cluster's members and slots at one etcd revision: what kira
// status prints, and what tools (the bench, the tests) read to find a slot's
// owner. Its JSON form is a contract.
type Status struct {
	Cluster  string `json:"cluster"`
	Revision int64  `json:"revision"`
	// CatalogRevision is the stored catalog's; each member's record says which it runs.
	CatalogRevision int64 `json:"catalog_revision"`
	// CatalogSource says how and when the stored catalog was stored; null
	// when not recorded (stored by an older version of Kira) or none is.
	CatalogSource *config.Source  `json:"catalog_source"`
	Paused        []string        `json:"paused"`
	Members       []member.Record `json:"members"`
	Slots         []SlotStatus    `json:"slots"`
	// Unplaced are the jobs whose placement matches no member: nobody
	// runs them until a member with their labels joins.
	Unplaced []string `json:"unplaced"`
	// Shares are, per job of the catalog, how many of its slots each
	// member leads (jobShares).
	Shares []JobShares `json:"shares"`
	// catalog is the stored catalog read with the rest (nil if none could
	// be), and catalogErr why not.
	catalog    *config.Catalog
	catalogErr error
	// stored is what was read with it: each job's manager and revision.
	stored *config.Stored
}

// JobShares is one job's split over the members.
type JobShares struct {
	Job    string  `json:"job"`
	Shares []Share `json:"shares"`
}

// SlotStatus is one slot: its owner is the member whose election key is
// oldest; its token is that key's create revision. Owner is "" and token 0
// when nobody holds it.
type SlotStatus struct {
	Job       string `json:"job"`
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
}

// Slot returns the status of the slot job/partition, and whether the
// catalog or an election has it.
func (st *Status) Slot(job string, partition int) (SlotStatus, bool) {
	i, ok := sort.Find(len(st.Slots), func(i int) int {
		if c := strings.Compare(job, st.Slots[i].Job); c != 0 {
			return c
		}
		return partition - st.Slots[i].Partition
	})
	if !ok {
		return SlotStatus{}, false
	}
	return st.Slots[i], true
}

// ReadStatus reads members, elections and the catalog in one transaction,
// so the answer is one consistent snapshot at one revision. Slots are
// sorted by job, then partition.
func ReadStatus(ctx context.Context, kv clientv3.KV, cluster string) (*Status, error) {
	return ReadStatusCached(ctx, kv, cluster, nil)
}

// ReadStatusCached is ReadStatus with the catalog read through catalogs
// (nil: read whole), as the API reads it at every request.
func ReadStatusCached(ctx context.Context, kv clientv3.KV, cluster string, catalogs *config.StoredCache) (*Status, error) {
	resp, err := kv.Txn(ctx).Then(
		clientv3.OpGet(keyspace.Members(cluster), clientv3.WithPrefix()),
		clientv3.OpGet(keyspace.Elections(cluster), clientv3.WithPrefix()),
		clientv3.OpGet(keyspace.Control(cluster), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, err
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().Kvs }
	st := &Status{Cluster: cluster, Revision: resp.Header.Revision, Members: []member.Record{}, Slots: []SlotStatus{}, Paused: []string{}, Unplaced: []string{}, Shares: []JobShares{}}
	st.Paused = pausedJobs(cluster, kvs(2))
	st.Members = memberRecords(cluster, kvs(0))
	slots := map[shard.Slot]*SlotStatus{}
	var jobs []config.Job
	// The catalog at the same revision, in either layout; one this version
	// cannot read counts its revision and no slots.
	stored, err := catalogs.Read(ctx, kv, cluster, resp.Header.Revision)
	if err != nil && stored == nil && !errors.Is(err, config.ErrNoCatalog) {
		return nil, err
	}
	st.catalogErr = err
	if stored != nil {
		st.catalog, st.stored = stored.Catalog, stored
		st.CatalogRevision, st.CatalogSource = stored.Revision, stored.Source
		jobs = catalogSlots(stored.Catalog, slots)
		for _, j := range jobs {
			if j.Placement != nil && EligibleMembers(st.Members, j) == 0 {
				st.Unplaced = append(st.Unplaced, j.Name)
			}
		}
	}
	electionOwners(cluster, kvs(1), slots)
	for _, s := range slots {
		st.Slots = append(st.Slots, *s)
	}
	sort.Slice(st.Slots, func(i, j int) bool {
		a, b := st.Slots[i], st.Slots[j]
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		return a.Partition < b.Partition
	})
	for _, j := range jobs {
		st.Shares = append(st.Shares, JobShares{Job: j.Name, Shares: jobShares(st, j)})
	}
	return st, nil
}

// pausedJobs are the jobs whose paused key exists.
func pausedJobs(cluster string, kvs []*mvccpb.KeyValue) []string {
	out := []string{}
	for _, kv := range kvs {
		if ck, ok := keyspace.ParseControl(cluster, string(kv.Key)); ok && !ck.Trigger {
			out = append(out, ck.Job)
		}
	}
	return out
}

// memberRecords decodes the member records; one that cannot be read is
// listed by its key's id.
func memberRecords(cluster string, kvs []*mvccpb.KeyValue) []member.Record {
	out := []member.Record{}
	for _, kv := range kvs {
		var rec member.Record
		if json.Unmarshal(kv.Value, &rec) != nil || rec.ID == "" {
			rec.ID = strings.TrimPrefix(string(kv.Key), keyspace.Members(cluster))
		}
		out = append(out, rec)
	}
	return out
}

// slotStatus returns the entry of slot s, made if new.
func slotStatus(slots map[shard.Slot]*SlotStatus, s shard.Slot) *SlotStatus {
	if st, ok := slots[s]; ok {
		return st
	}
	st := &SlotStatus{Job: s.Job, Partition: s.Partition}
	slots[s] = st
	return st
}

// catalogSlots adds every slot of the stored catalog, led or not.
func catalogSlots(cat *config.Catalog, slots map[shard.Slot]*SlotStatus) []config.Job {
	if cat == nil {
		return nil
	}
	for _, j := range cat.Jobs {
		for p := 0; p < j.Partitions; p++ {
			slotStatus(slots, shard.Slot{Job: j.Name, Partition: p})
		}
	}
	return cat.Jobs
}

// EligibleMembers counts the members whose labels the job's placement
// admits (all of them for a job without one).
func EligibleMembers(members []member.Record, j config.Job) int {
	n := 0
	for _, m := range members {
		if member.Matches(m.Labels, j.Selector()) {
			n++
		}
	}
	return n
}

// electionOwners sets each slot's owner and token: the oldest key of its
// election leads, and its create revision is the token.
func electionOwners(cluster string, kvs []*mvccpb.KeyValue, slots map[shard.Slot]*SlotStatus) {
	for _, kv := range kvs {
		id, _, ok := keyspace.ParseCandidacy(cluster, string(kv.Key))
		if !ok {
			continue
		}
		s := slotStatus(slots, id)
		if s.Token == 0 || kv.CreateRevision < s.Token {
			s.Owner, s.Token = string(kv.Value), kv.CreateRevision
		}
	}
}
