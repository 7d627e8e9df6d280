package ops

import (
	"context"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MemberView is one live member as the dashboard's members view shows it:
// its record, the slots it leads (of the cluster and per job), and its
// lease as etcd counts it. Its JSON form is a contract: every field is
// always present.
type MemberView struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Host            string            `json:"host"`
	Version         string            `json:"version"`
	StartedAt       time.Time         `json:"started_at"`
	CatalogRevision int64             `json:"catalog_revision"`
	Labels          map[string]string `json:"labels"`
	// SlotsLed of the cluster's Slots.
	SlotsLed int `json:"slots_led"`
	Slots    int `json:"slots"`
	// Jobs are the jobs it leads a slot of: how many of each job's slots.
	Jobs []MemberJob `json:"jobs"`
	// LeaseTTLSeconds is the member's lease as granted; LeaseLeftSeconds
	// how long etcd keeps it without another renewal; LastSeen the last
	// renewal, as etcd's countdown implies (to the second). All null when
	// the lease could not be read (it expired as it was asked).
	LeaseTTLSeconds  *int64     `json:"lease_ttl_seconds"`
	LeaseLeftSeconds *int64     `json:"lease_left_seconds"`
	LastSeen         *time.Time `json:"last_seen"`
	// LastFailover is the member's part in the cluster's last failover:
	// null if it took over none of the departed member's slots
	// (AddLastFailover).
	LastFailover *Takeover `json:"last_failover"`
}

// MemberJob is how many of a job's slots a member leads.
type MemberJob struct {
	Job        string `json:"job"`
	Slots      int    `json:"slots"`
	Partitions int    `json:"partitions"`
}

// ReadMembers reads the cluster's live members with their slots from st
// (ReadStatus) and their leases from etcd (one TimeToLive each), as of
// now. TestMembersView.
func ReadMembers(ctx context.Context, kv clientv3.KV, leases clientv3.Lease, st *Status, now time.Time) ([]MemberView, error) {
	resp, err := kv.Get(ctx, keyspace.Members(st.Cluster), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	leaseOf := map[string]clientv3.LeaseID{}
	for _, rec := range resp.Kvs {
		leaseOf[string(rec.Key)] = clientv3.LeaseID(rec.Lease)
	}
	partitions := map[string]int{}
	for _, s := range st.Slots {
		partitions[s.Job]++
	}
	out := []MemberView{}
	for _, m := range st.Members {
		v := MemberView{ID: m.ID, Name: m.Name, Host: m.Host, Version: m.Version, StartedAt: m.StartedAt,
			CatalogRevision: m.CatalogRevision, Labels: m.Labels, Slots: len(st.Slots), Jobs: []MemberJob{}}
		if v.Labels == nil {
			v.Labels = map[string]string{}
		}
		for _, s := range st.Slots {
			if s.Owner != m.ID {
				continue
			}
			v.SlotsLed++
			if n := len(v.Jobs); n == 0 || v.Jobs[n-1].Job != s.Job { // st.Slots is sorted by job
				v.Jobs = append(v.Jobs, MemberJob{Job: s.Job, Partitions: partitions[s.Job]})
			}
			v.Jobs[len(v.Jobs)-1].Slots++
		}
		if id := leaseOf[keyspace.Member(st.Cluster, m.ID)]; id != 0 && leases != nil {
			if ttl, err := leases.TimeToLive(ctx, id); err == nil && ttl.TTL > 0 {
				seen := now.Add(-time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second).UTC().Truncate(time.Second)
				v.LeaseTTLSeconds, v.LeaseLeftSeconds, v.LastSeen = &ttl.GrantedTTL, &ttl.TTL, &seen
			}
		}
		out = append(out, v)
	}
	slices.SortStableFunc(out, func(a, b MemberView) int { return b.SlotsLed - a.SlotsLed })
	return out, nil
}
