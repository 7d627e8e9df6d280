package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// View is the member set of a cluster at an etcd revision.
type View struct {
	Revision int64
	Members  []string // sorted member ids
	// Labels are the labels of the members that have any, by member id.
	Labels map[string]map[string]string
	// HistoryFormat is the newest history record format that every member
	// of the view reads (the least of their Record.HistoryFormat, a member
	// that publishes none counting as 1): what a member may write.
	HistoryFormat int
}

// Matching returns the members whose labels include every pair of
// selector, sorted; every member for an empty selector.
func (v View) Matching(selector map[string]string) []string {
	if len(selector) == 0 {
		return v.Members
	}
	var out []string
	for _, id := range v.Members {
		if Matches(v.Labels[id], selector) {
			out = append(out, id)
		}
	}
	return out
}

// Matches reports whether labels include every pair of selector.
func Matches(labels, selector map[string]string) bool {
	for k, want := range selector {
		if got, ok := labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// Contains reports whether id is in the view.
func (v View) Contains(id string) bool {
	_, ok := slices.BinarySearch(v.Members, id)
	return ok
}

// Views publishes the latest view of a cluster's member set. Run owns the
// watch; any number of readers call Changed and Latest.
type Views struct {
	cli     *clientv3.Client
	prefix  string
	changed chan struct{}
	// Logger, if set before Run, is told once of each key under the
	// members' prefix that is not a member (no lease: written by hand).
	Logger *slog.Logger
	junk   map[string]bool // keys already logged; Run's

	mu      sync.Mutex
	latest  View
	records map[string]Record
}

// NewViews returns a Views for cluster; nothing happens until Run.
func NewViews(cli *clientv3.Client, cluster string) *Views {
	return &Views{cli: cli, prefix: keyspace.Members(cluster), changed: make(chan struct{}, 1)}
}

// Changed receives a value whenever a newer view is available. Readers that
// fall behind see only the latest.
func (v *Views) Changed() <-chan struct{} { return v.changed }

// Latest returns the newest view; its Revision is 0 before the first read.
func (v *Views) Latest() View {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.latest
}

// Records returns the member records of the latest view.
func (v *Views) Records() map[string]Record {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]Record, len(v.records))
	for k, r := range v.records {
		out[k] = r
	}
	return out
}

// Run lists the members, then follows changes until ctx ends. A watch that
// fails (compaction, lost etcd leader) is replaced by a fresh list and watch.
func (v *Views) Run(ctx context.Context) error {
	for {
		err := v.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			// Back off a little so an unreachable etcd is not hammered.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

func (v *Views) follow(ctx context.Context) error {
	resp, err := v.cli.Get(ctx, v.prefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	records := make(map[string]Record, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		v.apply(records, kv, false)
	}
	v.publish(resp.Header.Revision, records)
	// Requiring a leader makes a watch on a partitioned etcd member fail
	// instead of silently going quiet.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range v.cli.Watch(wctx, v.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			v.apply(records, ev.Kv, ev.Type == mvccpb.DELETE)
		}
		if len(wr.Events) > 0 {
			v.publish(wr.Events[len(wr.Events)-1].Kv.ModRevision, records)
		}
	}
	return fmt.Errorf("membership: watch on %s closed", v.prefix)
}

// apply takes one member record into records. Every member writes its
// record under its lease, so a key without one is not a member (it was
// written by hand) and is left out: counted, it would take slots nobody
// runs. Held by TestJunkInEtcdLeavesEverySlotFiring (scheduler).
func (v *Views) apply(records map[string]Record, kv *mvccpb.KeyValue, deleted bool) {
	id := strings.TrimPrefix(string(kv.Key), v.prefix)
	if deleted {
		delete(records, id)
		return
	}
	if kv.Lease == 0 {
		delete(records, id)
		v.logJunk(string(kv.Key))
		return
	}
	var r Record
	if err := json.Unmarshal(kv.Value, &r); err != nil || r.ID == "" {
		r = Record{ID: id} // a record we cannot read still counts as a member
	}
	records[id] = r
}

func (v *Views) logJunk(key string) {
	if v.Logger == nil || v.junk[key] {
		return
	}
	if v.junk == nil {
		v.junk = map[string]bool{}
	}
	v.junk[key] = true
	v.Logger.Warn("ignoring a member record without a lease (not written by a member)", "key", key)
}

func (v *Views) publish(rev int64, records map[string]Record) {
	ids := make([]string, 0, len(records))
	copied := make(map[string]Record, len(records))
	labels := map[string]map[string]string{}
	format := 0
	for id, r := range records {
		ids = append(ids, id)
		copied[id] = r
		if len(r.Labels) > 0 {
			labels[id] = r.Labels
		}
		if f := max(r.HistoryFormat, 1); format == 0 || f < format {
			format = f
		}
	}
	slices.Sort(ids)
	v.mu.Lock()
	if rev <= v.latest.Revision {
		v.mu.Unlock()
		return
	}
	same := slices.Equal(ids, v.latest.Members)
	v.latest = View{Revision: rev, Members: ids, Labels: labels, HistoryFormat: max(format, 1)}
	v.records = copied
	v.mu.Unlock()
	if same && rev > 0 && len(ids) > 0 {
		// A record changed but the member set did not: no new view.
		return
	}
	select {
	case v.changed <- struct{}{}:
	default:
	}
}
