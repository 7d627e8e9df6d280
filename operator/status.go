package operator

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/membership"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status is a cluster's members and slots at one etcd revision: what kira
// status prints, and what tools (the bench, the tests) read to find a slot's
// owner. Its JSON form is a contract.
type Status struct {
	Cluster  string `json:"cluster"`
	Revision int64  `json:"revision"`
	// CatalogRevision is the stored catalog's; each member's record says which it runs.
	CatalogRevision int64               `json:"catalog_revision"`
	Paused          []string            `json:"paused"`
	Members         []membership.Record `json:"members"`
	Slots           []SlotStatus        `json:"slots"`
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
	resp, err := kv.Txn(ctx).Then(
		clientv3.OpGet(keyspace.Members(cluster), clientv3.WithPrefix()),
		clientv3.OpGet(keyspace.Elections(cluster), clientv3.WithPrefix()),
		clientv3.OpGet(keyspace.Catalog(cluster)),
		clientv3.OpGet(keyspace.Control(cluster), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, err
	}
	st := &Status{Cluster: cluster, Revision: resp.Header.Revision, Members: []membership.Record{}, Slots: []SlotStatus{}, Paused: []string{}}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		if job, ok := strings.CutSuffix(strings.TrimPrefix(string(kv.Key), keyspace.Control(cluster)), "/paused"); ok {
			st.Paused = append(st.Paused, job)
		}
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var rec membership.Record
		if json.Unmarshal(kv.Value, &rec) != nil || rec.ID == "" {
			rec.ID = strings.TrimPrefix(string(kv.Key), keyspace.Members(cluster))
		}
		st.Members = append(st.Members, rec)
	}
	slots := map[[2]string]*SlotStatus{}
	slot := func(job string, partition int) *SlotStatus {
		k := [2]string{job, strconv.Itoa(partition)}
		if s, ok := slots[k]; ok {
			return s
		}
		s := &SlotStatus{Job: job, Partition: partition}
		slots[k] = s
		return s
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 1 {
		st.CatalogRevision = kvs[0].ModRevision
		var cat config.Catalog
		if err := json.Unmarshal(kvs[0].Value, &cat); err == nil {
			for _, j := range cat.Jobs {
				for p := 0; p < j.Partitions; p++ {
					slot(j.Name, p)
				}
			}
		}
	}
	// Election keys: election/<job>/<partition>/<lease>; the oldest key leads.
	prefix := keyspace.Elections(cluster)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), prefix), "/")
		if len(parts) != 3 {
			continue
		}
		p, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		s := slot(parts[0], p)
		if s.Token == 0 || kv.CreateRevision < s.Token {
			s.Owner, s.Token = string(kv.Value), kv.CreateRevision
		}
	}
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
	return st, nil
}
