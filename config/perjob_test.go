package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The per-job layout with 5,000 jobs: it reads a catalog stored by the
// previous version (the single key), and its first store replaces that key
// with a marker the previous version refuses; a store of the whole catalog
// is staged and never seen half-written; a change of one job is one
// transaction that moves one job's bytes and reaches a watching member as
// that one change; a stale store conflicts; of two stores racing, one wins
// and one generation is left; the watcher ends on the stored catalog.
func TestPerJobLayout(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	old, err := Parse("old.yaml", manyJobs(3))
	if err != nil {
		t.Fatal(err)
	}
	legacyRev := storeSingle(t, cli, old)
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || s.Revision != legacyRev || !reflect.DeepEqual(definitions(s.Catalog), old) {
		t.Fatalf("the single key of the previous version read as %+v (%v)", s, err)
	}

	w := watchJobs(t, cli, s)
	big := unchecked(t, manyJobs(5000))
	rev1, err := PutJobs(ctx, cli, big, Source{By: ByApply, At: time.Now().UTC()}, legacyRev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeStored(get(t, cli, keyspace.Catalog("c"))); !errors.Is(err, ErrUnreadableCatalog) || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("the previous version reads the single key after a per-job store as: %v", err)
	}
	stored := readJobs(t, cli, 0, big)
	if stored.Revision != rev1 || stored.Source == nil || stored.Source.By != ByApply {
		t.Fatalf("stored at %d, read at %d, source %v", rev1, stored.Revision, stored.Source)
	}
	w.reaches(t, rev1, big)
	var conflict *ConflictError
	if _, err := PutJobs(ctx, cli, old, Source{By: ByApply}, legacyRev); !errors.As(err, &conflict) || conflict.Current.Revision != rev1 {
		t.Fatalf("a store against the replaced revision: %v", err)
	}

	one := clone(big)
	one.Jobs[42].Schedule = "@every 2m"
	rev2, err := PutJobs(ctx, cli, one, Source{By: ByApply}, rev1)
	if err != nil {
		t.Fatal(err)
	}
	evs := eventsAt(t, cli, rev2)
	moved := 0
	for _, ev := range evs {
		moved += len(ev.Kv.Value)
	}
	if len(evs) != 3 || moved > 1024 || !hasKey(evs, "/jobs/customer-00042") {
		t.Fatalf("a change of one job: %d events, %d bytes: %v", len(evs), moved, evs)
	}
	readJobs(t, cli, 0, one)
	w.reaches(t, rev2, one)
	if u := w.lastUpdate(); u.Since != rev1 || !slices.Equal(names(u.Replaced), []string{"customer-00042"}) || len(u.Added)+len(u.Removed) != 0 {
		t.Fatalf("a change of one job came to the watcher as replacing %v since %d, want customer-00042 since %d", names(u.Replaced), u.Since, rev1)
	}

	fewer := clone(one)
	fewer.Jobs = append(fewer.Jobs[:7:7], fewer.Jobs[8:]...)
	fewer.Jobs = append(fewer.Jobs, Job{Name: "zz-new", Schedule: "@hourly", Partitions: 1, Handler: "noop", Misfire: DefaultMisfire, CatchupWindow: DefaultCatchupWindow, HistoryLimit: DefaultHistoryLimit, Overlap: DefaultOverlap, Retries: Retries{Backoff: DefaultRetryBackoff, MaxBackoff: DefaultMaxBackoff}})
	rev3, err := PutJobs(ctx, cli, fewer, Source{By: ByApply}, rev2)
	if err != nil {
		t.Fatal(err)
	}
	if evs := eventsAt(t, cli, rev3); len(evs) != 4 {
		t.Fatalf("a job removed and one added: %d events: %v", len(evs), evs)
	}
	readJobs(t, cli, 0, fewer)
	w.reaches(t, rev3, fewer)
	if u := w.lastUpdate(); u.Since != rev2 || !slices.Equal(names(u.Added), []string{"zz-new"}) || !slices.Equal(u.Removed, []string{"customer-00007"}) || len(u.Replaced) != 0 {
		t.Fatalf("a job removed and one added came to the watcher as adding %v and removing %v since %d, want zz-new and customer-00007 since %d", names(u.Added), u.Removed, u.Since, rev2)
	}

	all := clone(fewer)
	for i := range all.Jobs {
		all.Jobs[i].Schedule = "@every 5m"
	}
	rev4, err := PutJobs(ctx, cli, all, Source{By: ByApply}, rev3)
	if err != nil {
		t.Fatal(err)
	}
	if evs := eventsAt(t, cli, rev4); len(evs) != 2 || rev4-rev3 < 40 {
		t.Fatalf("a store of every job is a stage, then one transaction of catalog-head and catalog-source: %d events at %d, %d revisions after %d", len(evs), rev4, rev4-rev3, rev3)
	}
	for _, r := range []int64{rev3 + 2, (rev3 + rev4) / 2, rev4 - 1} {
		if s := readJobs(t, cli, r, fewer); s.Revision != rev3 {
			t.Fatalf("at revision %d, mid-stage, the catalog read is of revision %d", r, s.Revision)
		}
	}
	readJobs(t, cli, 0, all)
	w.reaches(t, rev4, all)
	generations(t, cli, 1)

	a, b := clone(all), clone(all)
	a.Jobs[0].Schedule, b.Jobs[0].Schedule = "@every 7m", "@every 11m"
	for i := range a.Jobs[1:] {
		a.Jobs[i+1].Timezone, b.Jobs[i+1].Timezone = "Europe/Paris", "Asia/Tokyo"
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	revs := make([]int64, 2)
	for i, cat := range []*Catalog{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); revs[i], errs[i] = PutJobs(ctx, cli, cat, Source{By: ByApply}, rev4) }()
	}
	wg.Wait()
	winner := a
	switch {
	case errs[0] == nil && errors.As(errs[1], &conflict):
	case errs[1] == nil && errors.As(errs[0], &conflict):
		winner = b
	default:
		t.Fatalf("two stores racing from one revision: %v, %v", errs[0], errs[1])
	}
	final := readJobs(t, cli, 0, winner)
	generations(t, cli, 1)
	w.reaches(t, final.Revision, winner)
	if w.refused() != 0 {
		t.Fatalf("the watcher refused %d versions", w.refused())
	}

	// A job with a field this version does not know, as a newer version
	// would store it: refused, and the catalog running stays.
	g := final.perJob.generation
	newer := `{"name":"customer-00000","schedule":"@hourly","partitions":1,"handler":"noop","quota":{}}`
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(keyspace.CatalogJob("c", g, "customer-00000"), newer),
		clientv3.OpPut(keyspace.CatalogHead("c"), fmt.Sprintf(`{"generation":%d}`, g))).Commit(); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the watcher to refuse the newer job", 10*time.Second, func() bool { return w.refused() == 1 })
	w.reaches(t, final.Revision, winner)
	if _, err := Read(ctx, cli, "c", 0); !errors.Is(err, ErrUnreadableCatalog) || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("a job of a newer version read as: %v", err)
	}
}

// storeSingle stores cat as the previous version did: the single key,
// written with its source.
func storeSingle(t *testing.T, cli *clientv3.Client, cat *Catalog) int64 {
	t.Helper()
	data, err := json.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Txn(context.Background()).Then(clientv3.OpPut(keyspace.Catalog(cat.Cluster), string(data)),
		clientv3.OpPut(keyspace.CatalogSource(cat.Cluster), `{"by":"apply","at":"2026-01-02T03:04:05Z"}`)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// catalogWatch is a member's view through WatchStored: it applies every
// Update as a scheduler does, a whole catalog or the changes it names to
// the catalog of the revision it says it follows, and checks each change
// against what it runs (a job added is new, one replaced or removed is
// there, the settings stay).
type catalogWatch struct {
	mu      sync.Mutex
	sets    *Catalog
	jobs    map[string]Job
	rev     int64
	last    Update
	refusal int
}

func watchJobs(t *testing.T, cli *clientv3.Client, s *Stored) *catalogWatch {
	w := &catalogWatch{rev: s.Revision}
	w.sets, w.jobs = byName(s.Catalog)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchStored(ctx, cli, "c", s, func(u Update) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if u.Revision <= w.rev {
				t.Errorf("revision %d applied after %d", u.Revision, w.rev)
			}
			if err := w.take(u); err != nil {
				t.Errorf("revision %d: %v", u.Revision, err)
			}
			w.rev, w.last = u.Revision, u
		}, func(int64, error) { w.mu.Lock(); w.refusal++; w.mu.Unlock() })
	}()
	t.Cleanup(func() { cancel(); kiratest.Receive(t, done, 10*time.Second, "WatchStored to return") })
	return w
}

// take applies u to the catalog the watcher runs.
func (w *catalogWatch) take(u Update) error {
	if u.Since == 0 {
		w.sets, w.jobs = byName(u.Catalog)
		return nil
	}
	if u.Since != w.rev || !reflect.DeepEqual(u.Settings, w.sets) {
		return fmt.Errorf("it names its changes since %d under settings %+v; the watcher ran %d under %+v", u.Since, u.Settings, w.rev, w.sets)
	}
	for _, name := range u.Removed {
		if _, ok := w.jobs[name]; !ok {
			return fmt.Errorf("it removes job %s, which the watcher does not run", name)
		}
		delete(w.jobs, name)
	}
	for _, j := range u.Added {
		if _, ok := w.jobs[j.Name]; ok {
			return fmt.Errorf("it adds job %s, which the watcher runs", j.Name)
		}
		j.CreateRevision = 0 // as byName keeps them
		w.jobs[j.Name] = j
	}
	for _, j := range u.Replaced {
		if _, ok := w.jobs[j.Name]; !ok {
			return fmt.Errorf("it replaces job %s, which the watcher does not run", j.Name)
		}
		j.CreateRevision = 0
		w.jobs[j.Name] = j
	}
	return nil
}

// byName is cat's settings (cat without jobs) and its jobs by name.
func byName(cat *Catalog) (*Catalog, map[string]Job) {
	sets := *cat
	sets.Jobs = nil
	jobs := make(map[string]Job, len(cat.Jobs))
	for _, j := range cat.Jobs {
		j.CreateRevision = 0 // the store's: not in what was stored
		jobs[j.Name] = j
	}
	return &sets, jobs
}

// definitions is cat without what the store records of its jobs beside
// them (their create revisions): to compare a catalog read with the one
// stored.
func definitions(cat *Catalog) *Catalog {
	if cat == nil {
		return nil
	}
	out := *cat
	out.Jobs = slices.Clone(cat.Jobs)
	for i := range out.Jobs {
		out.Jobs[i].CreateRevision = 0
	}
	return &out
}

// reaches waits until the watcher runs cat at revision rev.
func (w *catalogWatch) reaches(t *testing.T, rev int64, cat *Catalog) {
	t.Helper()
	kiratest.WaitUntil(t, "the watcher to reach the stored revision", 20*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.rev >= rev
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	sets, jobs := byName(cat)
	if w.rev != rev || !reflect.DeepEqual(w.sets, sets) || !reflect.DeepEqual(w.jobs, jobs) {
		t.Fatalf("the watcher runs revision %d, want %d, and its catalog is the stored one: %v", w.rev, rev, reflect.DeepEqual(w.sets, sets) && reflect.DeepEqual(w.jobs, jobs))
	}
}

// names are the names of jobs, sorted.
func names(jobs []Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Name
	}
	slices.Sort(out)
	return out
}

// lastUpdate is the Update the watcher ran last.
func (w *catalogWatch) lastUpdate() Update { w.mu.Lock(); defer w.mu.Unlock(); return w.last }

func (w *catalogWatch) refused() int { w.mu.Lock(); defer w.mu.Unlock(); return w.refusal }

// readJobs reads the catalog at rev and checks it is want.
func readJobs(t *testing.T, cli *clientv3.Client, rev int64, want *Catalog) *Stored {
	t.Helper()
	s, err := Read(context.Background(), cli, "c", rev)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(definitions(s.Catalog), want) {
		t.Fatalf("the catalog read at %d (revision %d) is not the one stored", rev, s.Revision)
	}
	return s
}

// generations checks how many generations are stored, and that the current
// one holds every job.
func generations(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.CatalogGenerationsRoot("c"), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, kv := range resp.Kvs {
		g, _, ok := keyspace.ParseCatalogKey("c", string(kv.Key))
		if !ok {
			t.Fatalf("a key not of the layout: %s", kv.Key)
		}
		seen[g] = true
	}
	if len(seen) != n {
		t.Fatalf("%d generations stored, want %d", len(seen), n)
	}
}

// eventsAt is the events of revision rev of the catalog's keys.
func eventsAt(t *testing.T, cli *clientv3.Client, rev int64) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for wr := range cli.Watch(ctx, keyspace.CatalogPrefix("c"), clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		var out []*clientv3.Event
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision == rev {
				out = append(out, ev)
			}
		}
		if len(wr.Events) > 0 || wr.Err() != nil {
			return out
		}
	}
	t.Fatalf("no events of revision %d", rev)
	return nil
}

func hasKey(evs []*clientv3.Event, suffix string) bool {
	for _, ev := range evs {
		if strings.HasSuffix(string(ev.Kv.Key), suffix) {
			return true
		}
	}
	return false
}

func get(t *testing.T, cli *clientv3.Client, key string) []byte {
	t.Helper()
	resp, err := cli.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v", key, err)
	}
	return resp.Kvs[0].Value
}

// clone is a copy of cat whose jobs can be changed.
func clone(cat *Catalog) *Catalog {
	c := *cat
	c.Jobs = append([]Job(nil), cat.Jobs...)
	return &c
}

// A job keeps its stored position wherever that keeps the order, so a
// change, an append, a removal or a move of one job rewrites one job; an
// insert takes a position between its neighbours; with no room left,
// every job is renumbered in order.
func TestJobPositions(t *testing.T) {
	jobs := func(names ...string) []Job {
		out := make([]Job, len(names))
		for i, n := range names {
			out[i] = Job{Name: n}
		}
		return out
	}
	const s = positionStride
	stored := map[string]int64{"a": s, "b": 2 * s, "c": 3 * s}
	for _, tc := range []struct {
		names []string
		want  []int64
	}{
		{[]string{"a", "b", "c"}, []int64{s, 2 * s, 3 * s}},
		{[]string{"a", "c"}, []int64{s, 3 * s}},
		{[]string{"a", "b", "c", "d"}, []int64{s, 2 * s, 3 * s, 4 * s}},
		{[]string{"x", "a", "b", "c"}, []int64{s / 2, s, 2 * s, 3 * s}},
		{[]string{"a", "x", "y", "b", "c"}, []int64{s, s + s/3, s + 2*(s/3), 2 * s, 3 * s}},
		{[]string{"b", "c", "a"}, []int64{2 * s, 3 * s, 4 * s}},
	} {
		if got := positions(jobs(tc.names...), stored); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v over %v: %v, want %v", tc.names, stored, got, tc.want)
		}
	}
	tight := map[string]int64{"a": 1, "b": 2}
	if got := positions(jobs("a", "x", "b"), tight); !reflect.DeepEqual(got, []int64{s, 2 * s, 3 * s}) {
		t.Errorf("no room between 1 and 2: %v, want every job renumbered", got)
	}
}

// A watch whose read etcd has compacted before it started (a member
// that took long to start) reads the latest catalog whole, and follows
// later changes from there: each arrives once, the one-job change as one
// job.
func TestWatchFromACompactedRevision(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	cat, err := Parse("c.yaml", manyJobs(300))
	if err != nil {
		t.Fatal(err)
	}
	rev, err := Put(ctx, cli, cat, Source{By: ByApply}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := readJobs(t, cli, 0, cat)
	compactPast(t, cli, rev)
	w := watchJobs(t, cli, s)
	one := clone(cat)
	one.Jobs[7].Schedule = "@every 9m"
	rev2, err := Put(ctx, cli, one, Source{By: ByApply}, rev)
	if err != nil {
		t.Fatal(err)
	}
	if evs := eventsAt(t, cli, rev2); len(evs) != 3 {
		t.Fatalf("a change of one job: %d events", len(evs))
	}
	w.reaches(t, rev2, one)
	if w.refused() != 0 {
		t.Fatalf("refused %d", w.refused())
	}
}

// A watch follows from the revision its catalog was read at, not from the
// catalog's own revision: a catalog stored long ago (older than etcd's
// compaction, the usual case at a member's start) is not read again, and a
// one-job change then costs no read at all.
func TestWatchFollowsFromTheReadRevision(t *testing.T) {
	cli, cat, rev := storedJobs(t, 50)
	ctx := context.Background()
	compactPast(t, cli, rev)
	s := readJobs(t, cli, 0, cat)
	// The watch's own client counts its reads, as etcd's namespace
	// package wraps a client's KV.
	watching := etcdtest.NewClient(t, cli.Endpoints()...)
	reads := etcdtest.CountRequests(watching)
	w := watchJobs(t, watching, s)
	one := clone(cat)
	one.Jobs[7].Schedule = "@every 9m"
	rev2, err := PutJobs(ctx, cli, one, Source{By: ByApply}, rev)
	if err != nil {
		t.Fatal(err)
	}
	w.reaches(t, rev2, one)
	if u := w.lastUpdate(); u.Since != rev || !slices.Equal(names(u.Replaced), []string{"customer-00007"}) {
		t.Fatalf("the change came replacing %v since %d; want customer-00007 since %d", names(u.Replaced), u.Since, rev)
	}
	if n := reads.Gets.Load(); n != 0 {
		t.Fatalf("the watch read etcd %d times; want none: it follows from the revision its catalog was read at", n)
	}
}

// A watch that could not read a new generation (etcd did not answer the
// read) reads it again: the change is not skipped until the next one.
func TestWatchRetriesARevisionItCouldNotRead(t *testing.T) {
	cli, first, rev := storedJobs(t, 300)
	ctx := context.Background()
	s := readJobs(t, cli, 0, first)
	watching := etcdtest.NewClient(t, cli.Endpoints()...)
	reads := etcdtest.CountRequests(watching)
	reads.FailGets.Store(1) // the watch reads nothing else: its read of the new generation fails once
	w := watchJobs(t, watching, s)
	next := everyJobChanged(first, 0)
	rev2, err := PutJobs(ctx, cli, next, Source{By: ByApply}, rev)
	if err != nil {
		t.Fatal(err)
	}
	w.reaches(t, rev2, next)
	if n := reads.FailGets.Load(); n != 0 {
		t.Fatalf("%d failures left to inject; the watch never read the new generation", n)
	}
	if u := w.lastUpdate(); u.Since != 0 {
		t.Fatalf("the new generation came as jobs %v replaced since %d; want it read whole", u.Replaced, u.Since)
	}
}

// storedJobs starts etcd and stores n jobs there in the per-job layout.
func storedJobs(t *testing.T, n int) (*clientv3.Client, *Catalog, int64) {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	cat := unchecked(t, manyJobs(n))
	rev, err := PutJobs(context.Background(), cli, cat, Source{By: ByApply}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cli, cat, rev
}

// everyJobChanged is cat with every job's schedule changed (round tells
// one change from another): too many changes for one transaction, so it is
// stored in a new generation.
func everyJobChanged(cat *Catalog, round int) *Catalog {
	next := clone(cat)
	for i := range next.Jobs {
		next.Jobs[i].Schedule = fmt.Sprintf("@every %dm", 2+(i+round)%7)
	}
	return next
}

// compactPast writes elsewhere, then has etcd compact its history past
// rev: a watch from rev is then refused.
func compactPast(t *testing.T, cli *clientv3.Client, rev int64) {
	t.Helper()
	for i := range 5 {
		if _, err := cli.Put(context.Background(), "/elsewhere", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(context.Background(), rev+5, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}

// The changes a revision names, applied to the catalog of the revision
// before, are the catalog built whole from the same state, whatever mix of
// changes came before: random puts in place, moves, additions (some
// without a position), deletions and settings changes (those deliver the
// catalog whole), checked after each revision; and a catalog built whole
// after any of them, its base compacted or not, is the one built from
// scratch, in the same order.
func TestCatalogAfterChangesInPlaceIsTheWholeOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 1))
	const cluster, g = "inplace", int64(7)
	s := newPerJobState(g)
	s.floor = 4
	put := func(key string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.put(cluster, &mvccpb.KeyValue{Key: []byte(key), Value: data}); err != nil {
			t.Fatal(err)
		}
	}
	put(keyspace.CatalogSettings(cluster, g), storedSettings{Cluster: cluster})
	for i := range 50 {
		name := fmt.Sprintf("job-%02d", i)
		put(keyspace.CatalogJob(cluster, g, name), storedJob{Position: int64(i + 1), Job: Job{Name: name, Schedule: "@daily", Handler: "noop", Partitions: 1}})
	}
	cat, err := s.catalog()
	if err != nil {
		t.Fatal(err)
	}
	w := &catalogWatch{rev: 1} // every revision follows "revision 1"
	w.sets, w.jobs = byName(cat)
	named, compacted := 0, 0
	for rev := range 400 {
		for range 1 + rng.IntN(3) {
			name := fmt.Sprintf("job-%02d", rng.IntN(60))
			old, exists := s.job(name)
			switch r := rng.IntN(20); {
			case r < 10 && exists: // in place
				old.Job.Schedule = fmt.Sprintf("@every %ds", 1+rng.IntN(100))
				put(keyspace.CatalogJob(cluster, g, name), old)
			case r < 14 && exists && len(s.positions) > 1:
				s.remove(name)
			case r < 19:
				put(keyspace.CatalogJob(cluster, g, name), storedJob{Position: rng.Int64N(100), Job: Job{Name: name, Schedule: "@hourly", Handler: "noop", Partitions: 1}})
			default:
				put(keyspace.CatalogSettings(cluster, g), storedSettings{Cluster: cluster, Pools: map[string]int{"p": 1 + rng.IntN(5)}})
			}
		}
		whole, base := s.whole, len(s.base)
		var got *Catalog
		if whole {
			if got, err = s.catalog(); err != nil {
				t.Fatal(err)
			}
			w.sets, w.jobs = byName(got)
		} else {
			named++
			added, replaced, removed, err := s.delta()
			if err != nil {
				t.Fatal(err)
			}
			if err := w.take(Update{Since: w.rev, Settings: s.settingsCatalog(), Added: added, Replaced: replaced, Removed: removed}); err != nil {
				t.Fatalf("revision %d: %v", rev, err)
			}
			if s.stale == 0 && len(s.over) == 0 && base > 0 {
				compacted++
			}
		}
		want := fromScratch(t, s)
		sets, jobs := byName(want)
		if !reflect.DeepEqual(w.sets, sets) || !reflect.DeepEqual(w.jobs, jobs) {
			t.Fatalf("revision %d (whole %v): the catalog after its changes differs from the one built whole", rev, whole)
		}
		if rev%25 == 0 || got != nil {
			if got == nil {
				if got, err = s.catalog(); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("revision %d: the catalog built from the state differs from the one built from scratch", rev)
			}
		}
	}
	if named < 300 || compacted == 0 {
		t.Fatalf("%d of 400 revisions named their changes, %d compacted the state; want both paths exercised", named, compacted)
	}
}

// fromScratch is the catalog of s built whole from a state of its own.
func fromScratch(t *testing.T, s *perJobState) *Catalog {
	t.Helper()
	fresh := newPerJobState(s.generation)
	fresh.decoded = s.decoded
	for name := range s.positions {
		j, _ := s.job(name)
		fresh.positions[name], fresh.fresh[name] = j.Position, j.Job
	}
	want, err := fresh.catalog()
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// Jobs without a position (created one by one, not from a file) come
// after the positioned ones, by name.
func TestJobsWithoutAPositionComeLast(t *testing.T) {
	const cluster, g = "unpositioned", int64(3)
	s := newPerJobState(g)
	s.decoded = storedSettings{Cluster: cluster}
	for name, pos := range map[string]int64{"b": 0, "a": 0, "z": 5, "y": 9} {
		s.positions[name], s.fresh[name] = pos, Job{Name: name}
	}
	cat, err := s.catalog()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range cat.Jobs {
		got = append(got, j.Name)
	}
	if !slices.Equal(got, []string{"z", "y", "a", "b"}) {
		t.Fatalf("jobs in the order %v, want z y a b", got)
	}
}

// A staged store whose last transaction's answer is lost (the connection
// drops as etcd commits it, or before) returns an error and leaves either
// catalog whole: when the flip was committed, the new catalog is stored and
// the watcher reaches it; when it was not, the old one stays. Either way
// the generations left behind (the replaced one, or the stage no one made
// current) go with the next staged store, which leaves one generation.
func TestStagedStoreWhoseAnswerIsLost(t *testing.T) {
	cli, first, rev := storedJobs(t, 300)
	ctx := context.Background()
	w := watchJobs(t, cli, readJobs(t, cli, 0, first))
	for round, applied := range []bool{true, false} {
		next := everyJobChanged(first, round)
		lossy := &lostFlipKV{KV: cli, applied: applied}
		if _, err := PutJobs(ctx, lossy, next, Source{By: ByApply}, rev); err == nil || !lossy.lost {
			t.Fatalf("applied %v: a store whose last answer is lost returned %v (answer lost: %v); want an error", applied, err, lossy.lost)
		}
		want := first
		if applied {
			want = next
		}
		stored := readJobs(t, cli, 0, want)
		w.reaches(t, stored.Revision, want)
		generations(t, cli, 2) // the replaced generation, or the stage
		third := clone(want)
		third.Jobs = third.Jobs[:250]
		var err error
		if rev, err = PutJobs(ctx, cli, third, Source{By: ByApply}, stored.Revision); err != nil {
			t.Fatal(err)
		}
		readJobs(t, cli, 0, third)
		w.reaches(t, rev, third)
		generations(t, cli, 1)
		first = third
	}
}

// lostFlipKV loses the answer of the transaction that makes a generation
// current (it puts catalog-head): after etcd committed it when applied,
// without sending it otherwise.
type lostFlipKV struct {
	clientv3.KV
	applied bool
	lost    bool
}

func (k *lostFlipKV) Txn(ctx context.Context) clientv3.Txn {
	return &lostFlipTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type lostFlipTxn struct {
	clientv3.Txn
	kv   *lostFlipKV
	flip bool
}

func (t *lostFlipTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *lostFlipTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		t.flip = t.flip || (op.IsPut() && string(op.KeyBytes()) == keyspace.CatalogHead("c"))
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *lostFlipTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *lostFlipTxn) Commit() (*clientv3.TxnResponse, error) {
	if !t.flip {
		return t.Txn.Commit()
	}
	t.kv.lost = true
	if t.kv.applied {
		if _, err := t.Txn.Commit(); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("the connection dropped before the answer came")
}

// A change of about etcd's 128 operations in jobs is stored, in one
// transaction or staged, whatever the operations the store adds to it.
func TestChangeNearTheTransactionLimitIsStored(t *testing.T) {
	cli, cat, rev := storedJobs(t, 300)
	ctx := context.Background()
	for n := MaxTxnOps - 6; n <= MaxTxnOps+1; n++ {
		next := clone(cat)
		for i := range n {
			next.Jobs[i].Schedule = fmt.Sprintf("@every %dm", 2+n%50)
		}
		var err error
		if rev, err = PutJobs(ctx, cli, next, Source{By: ByApply}, rev); err != nil {
			t.Fatalf("a change of %d jobs: %v", n, err)
		}
		readJobs(t, cli, 0, next)
		cat = next
	}
	generations(t, cli, 1)
}

// TestStageInLargeTransactionsWhereEtcdTakesThem: a staged store uses
// transactions of StageTxnOps against an etcd that takes them (kira etcd's
// default), and of MaxTxnOps against one that refuses them (etcd's own
// default, as etcdtest's); the catalog reads back whole from both.
func TestStageInLargeTransactionsWhereEtcdTakesThem(t *testing.T) {
	big, err := etcdnode.StartLocal(t.TempDir(), etcdnode.Fast)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	cat := unchecked(t, manyJobs(3*StageTxnOps))
	for _, tc := range []struct {
		name      string
		endpoints []string
		txns      int64 // the stage's transactions
	}{
		{"etcd's default limit", etcdtest.Start(t).Endpoints(), int64(len(cat.Jobs)/MaxTxnOps + 1)},
		{"kira etcd's limit", etcdnode.ClientURLs(big), int64(len(cat.Jobs)/StageTxnOps + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := etcdtest.NewClient(t, tc.endpoints...)
			rev, err := PutJobs(t.Context(), cli, cat, Source{By: ByApply}, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Every transaction takes one revision: the generation's, the
			// stage's, and the one that makes it current.
			if used := rev - 1; used != tc.txns+2 {
				t.Errorf("the store took %d revisions, want %d (%d transactions of the stage)", used, tc.txns+2, tc.txns)
			}
			got, err := Read(t.Context(), cli, cat.Cluster, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Catalog.Jobs) != len(cat.Jobs) || got.Catalog.Jobs[len(cat.Jobs)-1].Name != cat.Jobs[len(cat.Jobs)-1].Name {
				t.Fatalf("read back %d jobs, stored %d", len(got.Catalog.Jobs), len(cat.Jobs))
			}
		})
	}
}

// WatchStored follows from a catalog Read returned, with its state: a
// change of one job comes as that job replaced since the revision read,
// and once it came, the catalog read is no longer held by the watch.
func TestWatchFromAStoredCatalog(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); kiratest.Receive(t, done, 10*time.Second, "WatchStored to return") })
	cat := unchecked(t, manyJobs(50))
	rev1, err := PutJobs(ctx, cli, cat, Source{By: ByApply}, 0)
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan Update, 1)
	first := watchFrom(t, ctx, cli, rev1, updates, done)
	one := clone(cat)
	one.Jobs[7].Schedule = "@every 2m"
	rev2, err := PutJobs(ctx, cli, one, Source{By: ByApply}, rev1)
	if err != nil {
		t.Fatal(err)
	}
	u := kiratest.Receive(t, updates, 10*time.Second, "the change to come")
	if u.Revision != rev2 || u.Since != rev1 || len(u.Replaced) != 1 || !reflect.DeepEqual(definitions(&Catalog{Jobs: u.Replaced}).Jobs[0], one.Jobs[7]) {
		t.Fatalf("the change came as revision %d replacing %v since %d; want customer-00007 replaced since %d, at %d",
			u.Revision, names(u.Replaced), u.Since, rev1, rev2)
	}
	kiratest.WaitUntil(t, "the catalog read to be collected", 10*time.Second, func() bool {
		runtime.GC()
		return first.Value() == nil
	})
}

// watchFrom reads the catalog at rev and follows it with WatchStored,
// sending each update; it returns a weak pointer to the catalog read.
func watchFrom(t *testing.T, ctx context.Context, cli *clientv3.Client, rev int64, updates chan<- Update, done chan<- struct{}) weak.Pointer[Catalog] {
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || s.Revision != rev {
		t.Fatalf("read revision %d (%v), want %d", s.Revision, err, rev)
	}
	go func(s *Stored) {
		defer close(done)
		WatchStored(ctx, cli, "c", s, func(u Update) { updates <- u }, func(r int64, err error) { t.Errorf("revision %d refused: %v", r, err) })
	}(s)
	return weak.Make(s.Catalog)
}

// BenchmarkDeltaOfOneJob is a watch's work for a revision that adds one
// job, over a generation of n jobs read whole first: it must not grow with
// n (the maps a revision's changes pass through are made anew, not kept at
// the size of the first read).
func BenchmarkDeltaOfOneJob(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			const cluster, g = "delta", int64(3)
			s := newPerJobState(g)
			put := func(key string, v any) {
				data, _ := json.Marshal(v)
				if err := s.put(cluster, &mvccpb.KeyValue{Key: []byte(key), Value: data}); err != nil {
					b.Fatal(err)
				}
			}
			put(keyspace.CatalogSettings(cluster, g), storedSettings{Cluster: cluster})
			for i := range n {
				name := fmt.Sprintf("job-%06d", i)
				put(keyspace.CatalogJob(cluster, g, name), storedJob{Position: int64(i + 1), Job: Job{Name: name, Schedule: "@daily", Handler: "noop", Partitions: 1}})
			}
			if _, err := s.catalog(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				name := fmt.Sprintf("new-%07d", i)
				put(keyspace.CatalogJob(cluster, g, name), storedJob{Job: Job{Name: name, Schedule: "@daily", Handler: "noop", Partitions: 1}})
				if _, _, _, err := s.delta(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
