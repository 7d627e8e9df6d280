package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// readPage is how many keys one range request of a generation returns;
// every page is read at the same revision.
const readPage = 10000

// perJobState is a stored generation of the per-job layout, decoded.
// Each job's definition is kept in base, the jobs of the last catalog
// built whole (never changed: catalogs built share it), or, when put since,
// in over (resolved) or fresh (as stored, in the revision being applied): a
// member's collector marks what the watch keeps at every cycle, so over
// is folded into a new base once it holds half as many jobs as base
// (compact). A revision's puts and deletes change the state in proportion
// to the jobs they name; only a catalog built whole sorts every job
// (TestCatalogAfterChangesInPlaceIsTheWholeOne).
type perJobState struct {
	generation int64
	settings   []byte
	decoded    storedSettings
	// refs says the generation's reference keys are complete (head.Refs).
	refs bool
	// positions is every stored job's position, by name; managers its
	// manager (none recorded: apply's), revisions its key's mod revision;
	// created its storedJob.Created, for the jobs that have one.
	positions map[string]int64
	managers  map[string]Manager
	revisions map[string]int64
	created   map[string]int64

	base  []Job
	at    map[string]int // index in base, by name; stale for jobs put or deleted since
	over  map[string]Job
	stale int // jobs of base put or deleted since it was built
	// The changes of the revision being applied: fresh are the jobs put,
	// added names those that were not stored before, removed the jobs
	// deleted; a change of the settings sets whole.
	fresh   map[string]Job
	added   map[string]bool
	removed []string
	whole   bool
	// sets is the settings as a catalog without jobs (settingsCatalog).
	sets *Catalog
	// floor is how many changes over base a small catalog takes before
	// compact (compactFloor; tests lower it).
	floor int
}

// compactFloor keeps a small catalog from being built again every few
// changes.
const compactFloor = 64

func newPerJobState(generation int64) *perJobState {
	return &perJobState{generation: generation, positions: map[string]int64{}, managers: map[string]Manager{}, revisions: map[string]int64{}, created: map[string]int64{},
		at: map[string]int{}, over: map[string]Job{}, fresh: map[string]Job{}, added: map[string]bool{}, whole: true, floor: compactFloor}
}

// job is the stored job of that name.
func (s *perJobState) job(name string) (storedJob, bool) {
	pos, ok := s.positions[name]
	if !ok {
		return storedJob{}, false
	}
	j, ok := s.fresh[name]
	if !ok {
		if j, ok = s.over[name]; !ok {
			j = s.base[s.at[name]]
		}
	}
	return storedJob{Position: pos, Job: j, Manager: s.managers[name], Created: s.created[name]}, true
}

// catalog is the state as a Catalog built whole, its jobs in their order
// (byPosition): it sorts every job, and its jobs become the new base.
func (s *perJobState) catalog() (*Catalog, error) {
	order := make([]storedJob, 0, len(s.positions))
	for name := range s.positions {
		j, _ := s.job(name)
		order = append(order, j)
	}
	slices.SortFunc(order, byPosition)
	sets := s.settingsCatalog()
	cat := &Catalog{Cluster: sets.Cluster, Membership: sets.Membership, Notify: sets.Notify, Pools: sets.Pools, Jobs: make([]Job, len(order))}
	at := make(map[string]int, len(order))
	for i, j := range order {
		cat.Jobs[i] = s.resolved(j.Job)
		at[j.Job.Name] = i
	}
	if cat.Cluster == "" || len(cat.Jobs) == 0 {
		return nil, s.empty()
	}
	s.base, s.at, s.stale, s.whole, s.removed = cat.Jobs, at, 0, false, nil
	s.over, s.fresh, s.added = map[string]Job{}, map[string]Job{}, map[string]bool{}
	return cat, nil
}

func (s *perJobState) empty() error {
	return fmt.Errorf("%w: generation %d has no settings or no jobs (written by hand?)", ErrUnreadableCatalog, s.generation)
}

// delta ends the revision being applied when it changed no settings: the
// jobs it added, replaced (put anew, at their position or another) and
// removed, each resolved once, in no order.
func (s *perJobState) delta() (added, replaced []Job, removed []string, err error) {
	if s.settingsCatalog().Cluster == "" || len(s.positions) == 0 {
		return nil, nil, nil, s.empty()
	}
	for name, raw := range s.fresh {
		j := s.resolved(raw)
		if _, ok := s.at[name]; ok {
			if _, ok := s.over[name]; !ok {
				s.stale++
			}
		}
		s.over[name] = j
		if s.added[name] {
			added = append(added, j)
		} else {
			replaced = append(replaced, j)
		}
	}
	removed = s.removed
	s.removed = nil
	// New maps, not clear: a map keeps the buckets of its largest size
	// (every job, as read at the start), and clearing or ranging over it
	// costs them all, at every revision (BenchmarkDeltaOfOneJob).
	s.fresh, s.added = map[string]Job{}, map[string]bool{}
	if len(s.over)+s.stale > len(s.base)/2+s.floor {
		s.compact()
	}
	return added, replaced, removed, nil
}

// compact folds over into a new base: the cost of a sort, once every half
// catalog's worth of changes (TestCatalogAfterChangesInPlaceIsTheWholeOne).
func (s *perJobState) compact() {
	if _, err := s.catalog(); err != nil {
		s.whole = true // cannot happen after delta's check; build whole next
	}
}

// settingsCatalog is the stored settings as a catalog without jobs.
func (s *perJobState) settingsCatalog() *Catalog {
	if s.sets == nil {
		d := s.decoded
		s.sets = &Catalog{Cluster: d.Cluster, Membership: d.Membership, Notify: d.Notify, Pools: d.Pools}
	}
	return s.sets
}

// resolved is j with its notify rules in force under the stored settings
// (resolveNotify).
func (s *perJobState) resolved(j Job) Job {
	resolveNotify(&j, s.decoded.Notify, s.decoded.NotifyOnce)
	return j
}

// copied reports whether j, a stored job read as having the notify default,
// holds a copy of it, as an older version stored it: its value is
// rewritten with the next store, which the settings it writes no longer
// read as a copy (TestStoredNotifyCopiesReadAsTheDefault).
func (s *perJobState) copied(j Job) bool {
	return j.NotifyDefault && !s.decoded.NotifyOnce
}

// remove deletes job from the state.
func (s *perJobState) remove(job string) {
	if _, ok := s.positions[job]; !ok {
		return
	}
	if _, ok := s.at[job]; ok {
		if _, ok := s.over[job]; !ok {
			s.stale++
		}
	}
	delete(s.positions, job)
	delete(s.managers, job)
	delete(s.revisions, job)
	delete(s.created, job)
	delete(s.fresh, job)
	delete(s.over, job)
	delete(s.at, job)
	if s.added[job] {
		delete(s.added, job) // put and deleted before delivered: never seen
		return
	}
	s.removed = append(s.removed, job)
}

// strict decodes data into v, refusing fields this version does not know
// (stored by a newer version), as decodeStored does for the single key.
func strict(key string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return fmt.Errorf("%w: %s has a field this version of Kira does not know (stored by a newer version?): %v", ErrUnreadableCatalog, key, err)
		}
		return fmt.Errorf("%w: %s: %v", ErrUnreadableCatalog, key, err)
	}
	return nil
}

// put records one key of generation s.generation in s. Keys under the
// generation's refs/ are not the catalog's: they are skipped.
func (s *perJobState) put(cluster string, kv *mvccpb.KeyValue) error {
	_, job, ok := keyspace.ParseCatalogKey(cluster, string(kv.Key))
	switch {
	case !ok && keyspace.IsCatalogRef(cluster, string(kv.Key)):
		// An index for writers (DeleteJob), not part of the catalog.
	case !ok:
		return fmt.Errorf("%w: %s is not a key of the catalog (written by hand?)", ErrUnreadableCatalog, kv.Key)
	case job == "":
		var d storedSettings
		if err := strict(string(kv.Key), kv.Value, &d); err != nil {
			return err
		}
		s.settings, s.decoded, s.sets, s.whole = kv.Value, d, nil, true
	default:
		var j storedJob
		if err := strict(string(kv.Key), kv.Value, &j); err != nil {
			return err
		}
		if j.Job.Name != job {
			return fmt.Errorf("%w: %s holds job %q (written by hand?)", ErrUnreadableCatalog, kv.Key, j.Job.Name)
		}
		j.Job.NotifyDefault = j.NotifyDefault
		j.Job.CreateRevision = j.createRevision(kv)
		if j.Created != 0 {
			s.created[job] = j.Created
		} else {
			delete(s.created, job)
		}
		if _, ok := s.positions[job]; !ok {
			s.added[job] = true
		}
		s.positions[job], s.fresh[job] = j.Position, j.Job
		s.managers[job], s.revisions[job] = intern(j.Manager), kv.ModRevision
	}
	return nil
}

// Read reads the catalog stored at etcd revision rev (0: the latest) and
// its source, in either layout: the per-job one when catalog-head exists,
// else the single key of the previous version (readSingle). A per-job
// catalog is catalog-head and one range read of its generation at the same
// revision. A catalog it cannot read comes with ErrUnreadableCatalog and a
// Stored without Catalog; a compacted rev with rpctypes.ErrCompacted.
func Read(ctx context.Context, kv clientv3.KV, cluster string, rev int64) (*Stored, error) {
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := kv.Get(ctx, keyspace.CatalogHead(cluster), opts...)
	if err != nil {
		return nil, fmt.Errorf("config: load catalog: %w", err)
	}
	at := rev
	if at == 0 {
		at = resp.Header.Revision
	}
	if len(resp.Kvs) == 0 {
		// At the same revision: a per-job store landing in between
		// replaces the single key with its marker (TestConcurrentFilesConverge).
		return readSingle(ctx, kv, cluster, at)
	}
	s := &Stored{Revision: resp.Kvs[0].ModRevision, at: at, head: true}
	var h head
	if err := strict(keyspace.CatalogHead(cluster), resp.Kvs[0].Value, &h); err != nil {
		return s, err
	}
	if s.Change, err = readChange(ctx, kv, cluster, at, s.Revision); err != nil {
		return nil, err
	}
	// A single-job write leaves catalog-source to the whole write before
	// it, whose source the catalog still has (FileVerdict reads it).
	srcRev := s.Revision
	if s.Change != nil {
		srcRev = 0
	}
	if s.Source, err = readSource(ctx, kv, cluster, at, srcRev); err != nil {
		return nil, err
	}
	if s.perJob, err = readGeneration(ctx, kv, cluster, h.Generation, at); err != nil {
		return s, err
	}
	s.perJob.refs = h.Refs
	s.Catalog, err = s.perJob.catalog()
	return s, err
}

// readGeneration reads generation g at revision at, in pages.
func readGeneration(ctx context.Context, kv clientv3.KV, cluster string, g, at int64) (*perJobState, error) {
	s := newPerJobState(g)
	key := keyspace.CatalogGeneration(cluster, g)
	end := clientv3.GetPrefixRangeEnd(key)
	for {
		resp, err := kv.Get(ctx, key, clientv3.WithRange(end), clientv3.WithRev(at), clientv3.WithLimit(readPage))
		if err != nil {
			return nil, fmt.Errorf("config: load catalog: %w", err)
		}
		for _, kv := range resp.Kvs {
			if err := s.put(cluster, kv); err != nil {
				return nil, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return s, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// An Update is a version of the catalog WatchStored delivers: the catalog
// stored at Revision. When Since is 0 it is Catalog, whole. Otherwise it is
// the catalog of revision Since with the jobs Added, the jobs Replaced
// defined anew (at their position or another) and the jobs Removed
// deleted, under the same Settings (the catalog without its jobs), so a
// reader that runs the catalog of Since need look at those alone
// (scheduler.SetCatalogUpdate); WatchStored leaves its Catalog nil, and
// Whole builds it.
type Update struct {
	Catalog  *Catalog
	Revision int64
	Since    int64
	Settings *Catalog
	Added    []Job
	Replaced []Job
	Removed  []string
	// state is the watch's, for Whole: it changes with the next revision.
	state *perJobState
}

// Whole is the catalog stored at u.Revision: Catalog, or, for an update
// that names its changes, the catalog built from the watch's state, every
// job sorted. It may be called only from within the apply that received u.
func (u Update) Whole() (*Catalog, error) {
	if u.Catalog != nil || u.state == nil {
		return u.Catalog, nil
	}
	return u.state.catalog()
}

// WatchStored calls apply with every new version of the cluster's catalog
// after s, a catalog of cluster that Read returned, in either layout, until
// ctx ends, and unreadable with every version it cannot read
// (ErrUnreadableCatalog): the caller keeps the catalog it runs. It follows
// from the revision s was read at, with s's state, so a member's start reads
// the catalog once and its jobs are not kept twice: within the per-job
// generation it runs, a revision's events change its jobs one by one (a
// change of one job moves one job's bytes), and the revision comes as an
// Update naming the jobs it added, replaced and removed, Since the version
// before it, at a cost in proportion to those jobs; a change of the
// settings, or a new generation, is read and delivered whole, as Read
// does. etcd delivers one
// revision's events together, so no half-applied revision is seen. A broken
// watch is re-established from the last revision seen; one etcd has
// compacted reads the latest catalog whole (TestPerJobLayout,
// TestWatchFromAStoredCatalog, TestWatchFollowsFromTheReadRevision,
// TestWatchFromACompactedRevision, TestUnreadableStoredCatalogIsRefused).
func WatchStored(ctx context.Context, cli *clientv3.Client, cluster string, s *Stored, apply func(Update), unreadable func(int64, error)) {
	w := &jobsWatch{cli: cli, cluster: cluster, from: s.Revision, seen: s.at, state: s.perJob, apply: apply, unreadable: unreadable}
	w.follow(ctx)
}

// follow applies every change after w.seen until ctx ends.
func (w *jobsWatch) follow(ctx context.Context) {
	for ctx.Err() == nil {
		w.watch(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// watch applies the changes after w.seen until the watch breaks, or until
// a revision cannot be read (etcd did not answer): the next watch starts
// from that revision again, so no change is skipped
// (TestWatchRetriesARevisionItCouldNotRead).
func (w *jobsWatch) watch(ctx context.Context) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range w.cli.Watch(wctx, keyspace.CatalogPrefix(w.cluster), clientv3.WithPrefix(), clientv3.WithRev(w.seen+1)) {
		if wr.Err() != nil {
			if wr.CompactRevision > 0 {
				w.reload(ctx, 0)
			}
			return
		}
		for i := 0; i < len(wr.Events); {
			r := wr.Events[i].Kv.ModRevision
			k := i
			for k < len(wr.Events) && wr.Events[k].Kv.ModRevision == r {
				k++
			}
			if r > w.seen {
				if !w.revision(ctx, r, wr.Events[i:k]) {
					return
				}
				w.seen = r
			}
			i = k
		}
	}
}

// jobsWatch is WatchStored's state: the generation it runs (nil while the
// single key is stored) and the last revision seen.
type jobsWatch struct {
	cli        *clientv3.Client
	cluster    string
	state      *perJobState
	from       int64 // the catalog revision it runs
	seen       int64 // the etcd revision up to which it has seen every change
	stale      bool  // a change could not be read: read the next generation whole
	apply      func(Update)
	unreadable func(int64, error)
}

// reload reads the catalog at rev (0: the latest) whole, and applies it.
// False when etcd did not answer: nothing was read, and the caller reads it
// again.
func (w *jobsWatch) reload(ctx context.Context, rev int64) bool {
	s, err := Read(ctx, w.cli, w.cluster, rev)
	switch {
	case errors.Is(err, ErrUnreadableCatalog):
		w.seen = max(w.seen, s.at)
		w.stale = true
		w.unreadable(s.Revision, err)
	case errors.Is(err, ErrNoCatalog):
	case err != nil:
		return false
	default:
		w.seen = max(w.seen, s.at)
		if s.Revision > w.from {
			w.state, w.stale, w.from = s.perJob, false, s.Revision
			w.apply(Update{Catalog: s.Catalog, Revision: s.Revision})
		}
	}
	return true
}

// revision applies the events of revision r; false when a catalog it had
// to read could not be read (reload).
func (w *jobsWatch) revision(ctx context.Context, r int64, evs []*clientv3.Event) bool {
	var headEv, legacyEv *clientv3.Event
	for _, ev := range evs {
		switch string(ev.Kv.Key) {
		case keyspace.CatalogHead(w.cluster):
			headEv = ev
		case keyspace.Catalog(w.cluster):
			legacyEv = ev
		}
	}
	switch {
	case headEv != nil && headEv.Type == clientv3.EventTypePut:
		var h head
		if err := strict(keyspace.CatalogHead(w.cluster), headEv.Kv.Value, &h); err != nil {
			w.from, w.stale = r, true
			w.unreadable(r, err)
			return true
		}
		if w.state == nil || w.stale || h.Generation != w.state.generation {
			return w.reload(ctx, r)
		}
		w.state.refs = h.Refs
		since := w.from
		w.from = r
		if err := w.changes(r, evs); err != nil {
			w.stale = true
			w.unreadable(r, err)
			return true
		}
		if u, ok := w.update(r, since); ok {
			w.apply(u)
		}
	case w.state == nil && legacyEv != nil && legacyEv.Type == clientv3.EventTypePut:
		w.from = r
		cat, err := decodeStored(legacyEv.Kv.Value)
		if err != nil {
			w.unreadable(r, err)
			return true
		}
		w.apply(Update{Catalog: cat, Revision: r})
	}
	return true
}

// update is the Update of revision r of the generation it runs, whose
// changes are applied: named, Since the version before it, unless it
// changed the settings; whole then. False, after unreadable, when it
// cannot be read.
func (w *jobsWatch) update(r, since int64) (Update, bool) {
	if !w.state.whole {
		added, replaced, removed, err := w.state.delta()
		if err == nil {
			return Update{Revision: r, Since: since, Settings: w.state.settingsCatalog(), Added: added, Replaced: replaced, Removed: removed, state: w.state}, true
		}
	}
	cat, err := w.state.catalog()
	if err != nil {
		w.stale = true
		w.unreadable(r, err)
		return Update{}, false
	}
	return Update{Catalog: cat, Revision: r}, true
}

// changes applies the puts and deletes of the generation it runs; keys of
// other generations (stages, the deletion of old ones) are not its.
func (w *jobsWatch) changes(r int64, evs []*clientv3.Event) error {
	for _, ev := range evs {
		g, job, ok := keyspace.ParseCatalogKey(w.cluster, string(ev.Kv.Key))
		switch {
		case !ok || g != w.state.generation:
		case ev.Type == clientv3.EventTypeDelete && job != "":
			w.state.remove(job)
		case ev.Type == clientv3.EventTypePut:
			if err := w.state.put(w.cluster, ev.Kv); err != nil {
				return err
			}
		}
	}
	return nil
}
