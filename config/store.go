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

	"github.com/kira-scheduler/kira/internal/keyspace"

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
	// Change is the single-job write that made this revision (PutJob,
	// DeleteJob); nil for a whole write, whose Source says who made it.
	Change *JobChange
	data   []byte
	// perJob is the catalog as the per-job layout stores it; nil for the
	// single key, and for a per-job catalog that cannot be read.
	perJob *perJobState
	// head says catalog-head exists: the per-job layout, read or not.
	head bool
	// at is the etcd revision it was read at.
	at int64
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

// Put stores cat and how it was stored (src) in the per-job layout
// (PutJobs), only if the stored catalog's revision is still expected (0:
// none is stored; Force: any), as Kubernetes' resourceVersion; otherwise it
// returns a *ConflictError and writes nothing (TestPutConflicts,
// TestPerJobLayout). It returns the new catalog revision.
func Put(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source, expected int64) (int64, error) {
	return PutJobs(ctx, kv, cat, src, expected)
}

// encode checks that cat can be stored, within the bounds of what is
// stored (storedValues), keeping no value; the validator refuses the same
// catalogs with the same message (stored, TestValidatorRefusesWhatStoreRefuses).
func encode(cat *Catalog) error {
	return storedValues(cat, nil, func(string, []byte) {})
}

// sameStored reports whether the stored catalog cur, in either layout, is
// cat: the same settings and the same jobs in the same order.
func sameStored(cur *Stored, cat *Catalog) bool {
	if cur.Catalog == nil || len(cur.Catalog.Jobs) != len(cat.Jobs) {
		return false
	}
	a, b := *cur.Catalog, *cat
	a.Jobs, b.Jobs = nil, nil
	if !reflect.DeepEqual(encodeJSON(a), encodeJSON(b)) {
		return false
	}
	for i := range cat.Jobs {
		if !bytes.Equal(encodeJSON(storedJob{Job: cur.Catalog.Jobs[i]}), encodeJSON(storedJob{Job: cat.Jobs[i]})) {
			return false
		}
	}
	return true
}

// encodeJSON is v's JSON; nil if it has none.
func encodeJSON(v any) []byte {
	data, _ := json.Marshal(v)
	return data
}

// stored refuses, as located problems, what the store would refuse of cat
// (encode), so that kira validate, kira apply --dry-run and
// PUT /v1/catalog?dry_run=true refuse what kira run and kira apply would
// (TestValidatorRefusesWhatStoreRefuses).
func (v *validator) stored(cat *Catalog) {
	var large *tooLargeError
	if err := encode(cat); errors.As(err, &large) {
		v.addf(large.path(), "%s", large.message())
	} else if err != nil {
		v.addf(root("jobs"), "%v", err)
	}
}

// Store writes cat as kira apply's unless the same catalog is stored
// already, whatever is stored, and returns the catalog revision and whether
// it wrote.
func Store(ctx context.Context, kv clientv3.KV, cat *Catalog) (rev int64, changed bool, err error) {
	if err := encode(cat); err != nil {
		return 0, false, err
	}
	src := Source{By: ByApply, At: time.Now().UTC()}
	if cur, err := Read(ctx, kv, cat.Cluster, 0); err == nil && storedAlready(cur, cat, src) {
		return cur.Revision, false, nil
	}
	rev, err = Put(ctx, kv, cat, src, Force)
	return rev, err == nil, err
}

// storedAlready reports whether cur is what a whole write of cat (as src)
// would store: cat and the jobs of other managers it keeps.
func storedAlready(cur *Stored, cat *Catalog, src Source) bool {
	wh, err := combine(cat, src, cur, WholeOptions{})
	return err == nil && len(wh.taken) == 0 && sameStored(cur, wh.cat)
}

// LoadStored reads a cluster's catalog and its revision.
func LoadStored(ctx context.Context, kv clientv3.KV, cluster string) (*Catalog, int64, error) {
	s, err := Read(ctx, kv, cluster, 0)
	if err != nil {
		return nil, 0, err
	}
	return s.Catalog, s.Revision, nil
}

// readSingle reads the catalog stored in the single key of the previous
// layout at etcd revision rev (0: the latest) and its source.
func readSingle(ctx context.Context, kv clientv3.KV, cluster string, rev int64) (*Stored, error) {
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
	at := rev
	if at == 0 {
		at = resp.Header.Revision
	}
	s := &Stored{Revision: resp.Kvs[0].ModRevision, data: resp.Kvs[0].Value, at: at}
	if s.Source, err = readSource(ctx, kv, cluster, at, s.Revision); err != nil {
		return nil, err
	}
	s.Catalog, err = decodeStored(s.data)
	return s, err
}

// readSource reads the source key at revision at, for the catalog of
// revision rev (SourceOf; 0: whatever revision the key has).
func readSource(ctx context.Context, kv clientv3.KV, cluster string, at, rev int64) (*Source, error) {
	src, err := kv.Get(ctx, keyspace.CatalogSource(cluster), clientv3.WithRev(at))
	if err != nil {
		return nil, fmt.Errorf("config: load catalog source: %w", err)
	}
	if rev == 0 && len(src.Kvs) > 0 {
		rev = src.Kvs[0].ModRevision
	}
	return SourceOf(src.Kvs, rev), nil
}

// readChange reads the catalog-change key at revision at: the single-job
// write that made the catalog of revision rev, nil if none did.
func readChange(ctx context.Context, kv clientv3.KV, cluster string, at, rev int64) (*JobChange, error) {
	resp, err := kv.Get(ctx, keyspace.CatalogChange(cluster), clientv3.WithRev(at))
	if err != nil {
		return nil, fmt.Errorf("config: load catalog change: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
		return nil, nil
	}
	var c JobChange
	if json.Unmarshal(resp.Kvs[0].Value, &c) != nil || c.Job == "" {
		return nil, nil
	}
	return &c, nil
}

// JobMeta is what the store records of one job of s beside it: its
// manager and revision (its key's mod revision); false when s has no such
// job or is not in the per-job layout.
func (s *Stored) JobMeta(name string) (m Manager, rev int64, ok bool) {
	if s.perJob == nil {
		return "", 0, false
	}
	if _, ok := s.perJob.positions[name]; !ok {
		return "", 0, false
	}
	return Manager(s.perJob.managers[name].String()), s.perJob.revisions[name], true
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
// store made meanwhile is re-read and decided again, never overwritten. It
// keeps the jobs of other managers and never takes one over: a job of the
// file that another manager holds refuses the file, with the conflict
// (TestStoreFileRefusesAJobOfAnotherManager).
func StoreFile(ctx context.Context, kv clientv3.KV, cat *Catalog, src Source) (FileOutcome, error) {
	if err := encode(cat); err != nil {
		return FileOutcome{}, err
	}
	for range 10 {
		cur, err := Read(ctx, kv, cat.Cluster, 0)
		expected := int64(0)
		switch {
		case errors.Is(err, ErrNoCatalog):
		case err != nil:
			return FileOutcome{}, err
		case storedAlready(cur, cat, src):
			return FileOutcome{Unchanged: true, Revision: cur.Revision, Current: cur}, nil
		default:
			if why := FileVerdict(cur.Source, src); why != "" {
				return FileOutcome{Refused: why, Revision: cur.Revision, Current: cur}, nil
			}
			expected = cur.Revision
		}
		rev, err := Put(ctx, kv, cat, src, expected)
		var conflict *ConflictError
		var managed *ManagerConflictError
		var located *Error
		switch {
		case errors.As(err, &conflict):
			continue
		case errors.As(err, &managed), errors.As(err, &located):
			return FileOutcome{Refused: err.Error(), Revision: expected, Current: cur}, nil
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
	for i := range cat.Jobs {
		resolveNotify(&cat.Jobs[i], cat.Notify, false)
	}
	return &cat, nil
}

// ErrUnreadableCatalog is returned when the stored catalog cannot be read:
// corrupt, written by hand, or stored by a newer version of Kira.
var ErrUnreadableCatalog = errors.New("config: the stored catalog is unreadable")

// Change is one difference between two catalogs, for kira apply.
type Change struct {
	Job    string
	Kind   string   // added, removed, changed, settings, order
	Fields []string // for changed: "field: old → new"
}

func (c Change) String() string {
	switch c.Kind {
	case "added":
		return "+ job " + c.Job
	case "removed":
		return "- job " + c.Job
	case "settings", "order":
		return "~ " + strings.Join(c.Fields, "; ")
	}
	return "~ job " + c.Job + ": " + strings.Join(c.Fields, "; ")
}

// Diff lists what applying next over prev changes; prev may be nil: every
// setting the store keeps (membership, the notify default, pools), the
// jobs' order, and each job as stored. A change of the notify default is
// listed once, not as a change of each job that has it
// (TestDiffListsEveryStoredChange).
func Diff(prev, next *Catalog) []Change {
	out := settingsChanges(prev, next)
	if prev == nil {
		prev = &Catalog{}
	}
	old := map[string]Job{}
	for _, j := range prev.Jobs {
		old[j.Name] = ownJob(j)
	}
	seen := map[string]bool{}
	for _, j := range next.Jobs {
		seen[j.Name] = true
		o, ok := old[j.Name]
		switch j = ownJob(j); {
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
	if reordered(prev.Jobs, next.Jobs, seen) {
		out = append(out, Change{Kind: "order", Fields: []string{"the jobs' order: as the new catalog lists them"}})
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].Job < out[k].Job })
	return out
}

// settingsChanges lists the changes of the settings; prev may be nil.
func settingsChanges(prev, next *Catalog) []Change {
	var out []Change
	if prev == nil {
		prev = &Catalog{}
	} else if prev.Membership != next.Membership {
		out = append(out, Change{Kind: "settings", Fields: []string{fmt.Sprintf("membership.lease_ttl: %s → %s (members use it when they next join)", prev.Membership.LeaseTTL, next.Membership.LeaseTTL)}})
	}
	if t := limitsText(prev.Pools, next.Pools); t != "" {
		out = append(out, Change{Kind: "settings", Fields: []string{t}})
	}
	if !reflect.DeepEqual(prev.Notify, next.Notify) {
		out = append(out, Change{Kind: "settings", Fields: []string{"notify: " + notifyChange(notifyText(prev.Notify), notifyText(next.Notify)) + " (the jobs without a notify: of their own)"}})
	}
	return out
}

// reordered reports whether the jobs in both prev and next (seen: next's
// names) are in another order in next.
func reordered(prev, next []Job, seen map[string]bool) bool {
	kept := map[string]bool{}
	var before []string
	for _, j := range prev {
		if seen[j.Name] {
			before, kept[j.Name] = append(before, j.Name), true
		}
	}
	i := 0
	for _, j := range next {
		if kept[j.Name] {
			if before[i] != j.Name {
				return true
			}
			i++
		}
	}
	return false
}

// ownJob is j as Diff compares it: without the rules of the catalog's
// notify default, whose change settingsChanges lists, nor its create
// revision.
func ownJob(j Job) Job {
	if j.NotifyDefault {
		j.Notify = nil
	}
	j.CreateRevision = 0 // the store's, not the definition's
	return j
}

func fieldChanges(a, b Job) []string {
	var out []string
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < av.NumField(); i++ {
		name := strings.Split(av.Type().Field(i).Tag.Get("json"), ",")[0]
		switch {
		case name == "notify":
			if a.NotifyDefault != b.NotifyDefault || !reflect.DeepEqual(a.Notify, b.Notify) {
				out = append(out, "notify: "+notifyChange(jobNotify(a), jobNotify(b)))
			}
		case name == "-":
		case !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()):
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
	case []Upstream:
		if v == nil {
			return "none"
		}
		return fmt.Sprint(v) // each as Upstream.String

	case string:
		if v == "" {
			return `""`
		}
		return v
	}
	return fmt.Sprint(v)
}
