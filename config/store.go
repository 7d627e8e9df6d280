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

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The catalog is shared, not per process: it lives in etcd under
// /kira/<cluster>/catalog as the JSON of a validated Catalog, and the key's
// mod revision is the catalog revision. Members watch it and converge.

// ErrNoCatalog is returned when a cluster has no stored catalog.
var ErrNoCatalog = errors.New("config: no catalog stored for the cluster")

// Stored is the stored catalog at one revision and how it was stored.
type Stored struct {
	// Catalog is nil when it cannot be read (ErrUnreadableCatalog).
	Catalog  *Catalog
	Revision int64
	// Source is nil when not recorded: stored by an older version of Kira,
	// which wrote no source, or by hand.
	Source *Source
	data   []byte
	// perJob is the catalog as the per-job layout stores it; nil for the
	// single key.
	perJob *perJobState
}

// Force is the expected revision of a Put that stores whatever is stored.
const Force int64 = -1

// ConflictError is Put's answer when the stored catalog is no longer at
// the revision the caller compared against.
type ConflictError struct {
	Expected int64
	// Current is the catalog stored now; nil when none is.
	Current *Stored
}

func (e *ConflictError) Error() string {
	switch {
	case e.Current == nil:
		return fmt.Sprintf("config: conflict: the catalog of revision %d is no longer stored (deleted)", e.Expected)
	case e.Expected == 0:
		return fmt.Sprintf("config: conflict: a catalog was stored meanwhile, at revision %d (source: %s)", e.Current.Revision, e.Current.Source)
	}
	return fmt.Sprintf("config: conflict: the stored catalog is at revision %d (source: %s), no longer at revision %d, which this change was made against", e.Current.Revision, e.Current.Source, e.Expected)
}

// Put stores cat and how it was stored (src) in one transaction, only if the
// stored catalog's revision is still expected (0: none is stored; Force:
// any), as Kubernetes' resourceVersion; otherwise it returns a
// *ConflictError and writes nothing (TestPutConflicts). It returns the new
// catalog revision.
func Put(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, expected int64) (int64, error) {
	data, err := encode(cat)
	if err != nil {
		return 0, err
	}
	source, err := json.Marshal(src)
	if err != nil {
		return 0, err
	}
	key := keyspace.Catalog(cat.Cluster)
	txn := kv.Txn(ctx)
	if expected != Force {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(key), "=", expected))
	}
	resp, err := txn.Then(clientv3.OpPut(key, string(data)), clientv3.OpPut(keyspace.CatalogSource(cat.Cluster), string(source))).Commit()
	if err != nil {
		return 0, fmt.Errorf("config: store catalog: %w", err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	cur, err := Read(ctx, kv, cat.Cluster, 0)
	if errors.Is(err, ErrNoCatalog) {
		cur = nil
	} else if err != nil && cur == nil {
		return 0, err
	}
	return 0, &ConflictError{Expected: expected, Current: cur}
}

// encode is cat as stored; a catalog over the stored limit is refused with
// storedOverLimit's message, the one the validator gives (TestValidatorRefusesWhatStoreRefuses).
func encode(cat *Catalog) ([]byte, error) {
	data, err := json.Marshal(cat)
	if err != nil {
		return nil, err
	}
	if msg := storedOverLimit(len(data)); msg != "" {
		return nil, errors.New("config: " + msg)
	}
	return data, nil
}

// storedOverLimit says why a catalog of n bytes as stored cannot be stored;
// "" when it can.
func storedOverLimit(n int) string {
	if n <= MaxCatalogBytes {
		return ""
	}
	return fmt.Sprintf("the catalog is %d bytes as stored, over the limit of %d (etcd refuses larger requests)", n, MaxCatalogBytes)
}

// storedProblems is the store's refusal of cat (encode) as a validation
// problem of file, so that kira validate, kira apply --dry-run and
// PUT /v1/catalog?dry_run=true refuse what kira run and kira apply would
// (TestValidatorRefusesWhatStoreRefuses).
func storedProblems(file string, cat *Catalog) []Problem {
	if _, err := encode(cat); err != nil {
		return []Problem{{File: file, Message: strings.TrimPrefix(err.Error(), "config: ")}}
	}
	return nil
}

// Store writes cat as kira apply's unless the same catalog is stored
// already, whatever is stored, and returns the catalog revision and whether
// it wrote.
func Store(ctx context.Context, kv clientv3.KV, cat *Catalog) (rev int64, changed bool, err error) {
	data, err := encode(cat)
	if err != nil {
		return 0, false, err
	}
	if cur, err := Read(ctx, kv, cat.Cluster, 0); err == nil && bytes.Equal(cur.data, data) {
		return cur.Revision, false, nil
	}
	rev, err = Put(ctx, kv, cat, Source{By: ByApply, At: time.Now().UTC()}, Force)
	return rev, err == nil, err
}

// LoadStored reads a cluster's catalog and its revision.
func LoadStored(ctx context.Context, kv clientv3.KV, cluster string) (*Catalog, int64, error) {
	s, err := Read(ctx, kv, cluster, 0)
	if err != nil {
		return nil, 0, err
	}
	return s.Catalog, s.Revision, nil
}

// Read reads the catalog stored at etcd revision rev (0: the latest) and
// its source. A catalog it cannot read comes with ErrUnreadableCatalog and
// a Stored without Catalog; a compacted rev with rpctypes.ErrCompacted.
func Read(ctx context.Context, kv clientv3.KV, cluster string, rev int64) (*Stored, error) {
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := kv.Get(ctx, keyspace.Catalog(cluster), opts...)
	if err != nil {
		return nil, fmt.Errorf("config: load catalog: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w %q", ErrNoCatalog, cluster)
	}
	s := &Stored{Revision: resp.Kvs[0].ModRevision, data: resp.Kvs[0].Value}
	at := rev
	if at == 0 {
		at = resp.Header.Revision
	}
	src, err := kv.Get(ctx, keyspace.CatalogSource(cluster), clientv3.WithRev(at))
	if err != nil {
		return nil, fmt.Errorf("config: load catalog source: %w", err)
	}
	s.Source = SourceOf(src.Kvs, s.Revision)
	s.Catalog, err = decodeStored(s.data)
	return s, err
}

// SourceOf decodes the source key if the catalog of revision rev was
// written with it; nil otherwise (an older version wrote the catalog).
func SourceOf(kvs []*mvccpb.KeyValue, rev int64) *Source {
	if len(kvs) == 0 || kvs[0].ModRevision != rev {
		return nil
	}
	var src Source
	if json.Unmarshal(kvs[0].Value, &src) != nil || src.By == "" {
		return nil
	}
	return &src
}

// History returns up to n stored catalogs, newest first, read back through
// the key's older revisions (WithRev) while etcd still holds them;
// compacted says older ones were compacted away (TestHistoryReadsBack).
func History(ctx context.Context, kv clientv3.KV, cluster string, n int) (out []*Stored, compacted bool, err error) {
	rev := int64(0)
	for len(out) < n {
		s, err := Read(ctx, kv, cluster, rev)
		switch {
		case errors.Is(err, ErrNoCatalog):
			return out, false, nil
		case errors.Is(err, rpctypes.ErrCompacted):
			return out, true, nil
		case err != nil && s == nil:
			return out, false, err
		}
		out = append(out, s)
		if rev = s.Revision - 1; rev < 1 {
			break
		}
	}
	return out, false, nil
}

// FileOutcome is what StoreFile did with a member's --catalog file.
type FileOutcome struct {
	// Stored: the file is now the stored catalog, at Revision.
	Stored   bool
	Revision int64
	// Unchanged: the stored catalog already is the file's.
	Unchanged bool
	// Refused says why the file was not stored (FileVerdict); Current is
	// the stored catalog that runs instead.
	Refused string
	Current *Stored
}

// StoreFile stores a member's --catalog file (cat, read as src) when no
// catalog is stored, or when FileVerdict allows it over the stored one; a
// store made meanwhile is re-read and decided again, never overwritten.
func StoreFile(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source) (FileOutcome, error) {
	data, err := encode(cat)
	if err != nil {
		return FileOutcome{}, err
	}
	for range 10 {
		cur, err := Read(ctx, kv, cat.Cluster, 0)
		expected := int64(0)
		switch {
		case errors.Is(err, ErrNoCatalog):
		case err != nil:
			return FileOutcome{}, err
		case bytes.Equal(cur.data, data):
			return FileOutcome{Unchanged: true, Revision: cur.Revision, Current: cur}, nil
		default:
			if why := FileVerdict(cur.Source, src); why != "" {
				return FileOutcome{Refused: why, Revision: cur.Revision, Current: cur}, nil
			}
			expected = cur.Revision
		}
		rev, err := Put(ctx, kv, cat, src, expected)
		var conflict *ConflictError
		if errors.As(err, &conflict) {
			continue
		}
		if err != nil {
			return FileOutcome{}, err
		}
		return FileOutcome{Stored: true, Revision: rev}, nil
	}
	return FileOutcome{}, errors.New("config: the stored catalog changed ten times while this member decided whether to store its --catalog file; start it again")
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
