package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The catalog is shared, not per process: it lives in etcd under
// /kira/<cluster>/catalog as the JSON of a validated Catalog, and the key's
// mod revision is the catalog revision. Members watch it and converge.

// ErrNoCatalog is returned when a cluster has no stored catalog.
var ErrNoCatalog = errors.New("config: no catalog stored for the cluster")

// Store writes cat unless the same catalog is stored already, and returns
// the catalog revision and whether it wrote.
func Store(ctx context.Context, kv clientv3.KV, cat *Catalog) (rev int64, changed bool, err error) {
	data, err := json.Marshal(cat)
	if err != nil {
		return 0, false, err
	}
	if len(data) > MaxCatalogBytes {
		return 0, false, fmt.Errorf("config: the catalog is %d bytes as stored, over the limit of %d (etcd refuses larger requests)", len(data), MaxCatalogBytes)
	}
	key := keyspace.Catalog(cat.Cluster)
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", string(data))).
		Then(clientv3.OpGet(key)).
		Else(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return 0, false, fmt.Errorf("config: store catalog: %w", err)
	}
	if resp.Succeeded {
		return resp.Responses[0].GetResponseRange().Kvs[0].ModRevision, false, nil
	}
	return resp.Header.Revision, true, nil
}

// LoadStored reads a cluster's catalog and its revision.
func LoadStored(ctx context.Context, kv clientv3.KV, cluster string) (*Catalog, int64, error) {
	resp, err := kv.Get(ctx, keyspace.Catalog(cluster))
	if err != nil {
		return nil, 0, fmt.Errorf("config: load catalog: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, fmt.Errorf("%w %q", ErrNoCatalog, cluster)
	}
	cat, err := decodeStored(resp.Kvs[0].Value)
	return cat, resp.Kvs[0].ModRevision, err
}

// decodeStored reads a stored catalog strictly: a field this version does
// not know (a catalog stored by a newer Kira) is an error, not silently
// dropped, since running a catalog without, say, a placement rule would run
// its jobs where they must not run.
func decodeStored(data []byte) (*Catalog, error) {
	var cat Catalog
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cat); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return nil, fmt.Errorf("%w: it has a field this version of Kira does not know (stored by a newer version?): %v", ErrUnreadableCatalog, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrUnreadableCatalog, err)
	}
	if cat.Cluster == "" || len(cat.Jobs) == 0 {
		return nil, fmt.Errorf("%w: it has no cluster or no jobs (written by hand?)", ErrUnreadableCatalog)
	}
	return &cat, nil
}

// ErrUnreadableCatalog is returned when the stored catalog cannot be read:
// corrupt, written by hand, or stored by a newer version of Kira.
var ErrUnreadableCatalog = errors.New("config: the stored catalog is unreadable")

// WatchStored calls apply with every new version of the cluster's catalog
// after revision from, until ctx ends, and unreadable with every version it
// cannot read (ErrUnreadableCatalog): the caller keeps the catalog it runs.
// A broken watch is re-established from the last revision seen.
func WatchStored(ctx context.Context, cli *clientv3.Client, cluster string, from int64, apply func(*Catalog, int64), unreadable func(int64, error)) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range cli.Watch(wctx, keyspace.Catalog(cluster), clientv3.WithRev(from+1), clientv3.WithFilterDelete()) {
			if wr.Err() != nil {
				if wr.CompactRevision > 0 {
					// Missed versions were compacted: the latest is what matters.
					if cat, rev, err := LoadStored(ctx, cli, cluster); err == nil && rev > from {
						from = rev
						apply(cat, rev)
					}
				}
				break
			}
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision <= from {
					continue
				}
				from = ev.Kv.ModRevision
				cat, err := decodeStored(ev.Kv.Value)
				if err != nil {
					unreadable(from, err)
					continue
				}
				apply(cat, from)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Change is one difference between two catalogs, for kira apply.
type Change struct {
	Job    string
	Kind   string   // added, removed, changed, settings
	Fields []string // for changed: "field: old → new"
}

func (c Change) String() string {
	switch c.Kind {
	case "added":
		return "+ job " + c.Job
	case "removed":
		return "- job " + c.Job
	case "settings":
		return "~ " + strings.Join(c.Fields, "; ")
	}
	return "~ job " + c.Job + ": " + strings.Join(c.Fields, "; ")
}

// Diff lists what applying next over prev changes; prev may be nil.
func Diff(prev, next *Catalog) []Change {
	var out []Change
	if prev == nil {
		prev = &Catalog{}
	} else if prev.Membership != next.Membership {
		out = append(out, Change{Kind: "settings", Fields: []string{fmt.Sprintf("membership.lease_ttl: %s → %s (members use it when they next join)", prev.Membership.LeaseTTL, next.Membership.LeaseTTL)}})
	}
	old := map[string]Job{}
	for _, j := range prev.Jobs {
		old[j.Name] = j
	}
	seen := map[string]bool{}
	for _, j := range next.Jobs {
		seen[j.Name] = true
		o, ok := old[j.Name]
		switch {
		case !ok:
			out = append(out, Change{Job: j.Name, Kind: "added"})
		case !reflect.DeepEqual(o, j):
			out = append(out, Change{Job: j.Name, Kind: "changed", Fields: fieldChanges(o, j)})
		}
	}
	for _, j := range prev.Jobs {
		if !seen[j.Name] {
			out = append(out, Change{Job: j.Name, Kind: "removed"})
		}
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].Job < out[k].Job })
	return out
}

func fieldChanges(a, b Job) []string {
	var out []string
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < av.NumField(); i++ {
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			name := av.Type().Field(i).Tag.Get("json")
			name = strings.Split(name, ",")[0]
			out = append(out, fmt.Sprintf("%s: %v → %v", name, show(av.Field(i).Interface()), show(bv.Field(i).Interface())))
		}
	}
	return out
}

func show(v any) string {
	switch v := v.(type) {
	case *HTTPSpec:
		if v == nil {
			return "none"
		}
		return v.Method + " " + v.URL
	case []string:
		if v == nil {
			return "none"
		}
		return fmt.Sprintf("%q", v)
	case string:
		if v == "" {
			return `""`
		}
		return v
	}
	return fmt.Sprint(v)
}
