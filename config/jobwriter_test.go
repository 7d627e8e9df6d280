package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// requestKV counts the requests made to etcd through it, and the counts
// of keys (walks of etcd's index) among them.
type requestKV struct {
	clientv3.KV
	n, walks atomic.Int64
}

func (k *requestKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.n.Add(1)
	if clientv3.OpGet(key, opts...).IsCountOnly() {
		k.walks.Add(1)
	}
	return k.KV.Get(ctx, key, opts...)
}

func (k *requestKV) Txn(ctx context.Context) clientv3.Txn {
	return &requestTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type requestTxn struct {
	clientv3.Txn
	kv *requestKV
}

func (t *requestTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *requestTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		if op.IsGet() && op.IsCountOnly() {
			t.kv.walks.Add(1)
		}
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *requestTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *requestTxn) Commit() (*clientv3.TxnResponse, error) {
	t.kv.n.Add(1)
	return t.Txn.Commit()
}

// requests is the number of requests f makes through k.
func (k *requestKV) requests(f func()) int64 {
	before := k.n.Load()
	f()
	return k.n.Load() - before
}

const hourly = "schedule: '@hourly'\nhandler: noop\n"

// A writer that kept catalog-head and the settings creates a job in one
// request, replaces or deletes a job it wrote or read in one, and walks
// after: as a fresh write does.
func TestJobWriterCreatesInOneRequest(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	kv := &requestKV{KV: cli}
	w := NewJobWriter(kv, "c")
	w.recount = time.Hour
	if n := kv.requests(func() { mustPut(t, w, "first", hourly, PutJobOptions{Manager: signup}) }); n != 4 {
		t.Fatalf("the first create made %d requests, want 4: catalog-head, the settings and the job; the count; the commit", n)
	}
	var put *JobWritten
	for i := range 5 {
		if n := kv.requests(func() {
			put = mustPut(t, w, fmt.Sprint("x", i), hourly, PutJobOptions{Manager: signup, CreateOnly: true})
		}); n != 1 || !put.Created {
			t.Fatalf("create %d made %d requests (%+v), want 1", i, n, put)
		}
	}
	if n := kv.requests(func() {
		put = mustPut(t, w, "x4", "schedule: '@daily'\nhandler: noop\n", PutJobOptions{Manager: signup, IfRevision: put.Revision})
	}); n != 1 || put.Created {
		t.Fatalf("a replace of a job the writer wrote made %d requests (%+v), want 1", n, put)
	}
	var got *StoredJob
	if n := kv.requests(func() {
		var err error
		if got, err = w.GetJob(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		put = mustPut(t, w, "a", "schedule: '@daily'\nhandler: noop\n", PutJobOptions{Manager: signup, Force: true, IfRevision: got.Revision})
	}); n != 2 || put.Previous != ManagerApply {
		t.Fatalf("a read and a replace made %d requests (%+v), want 2", n, put)
	}
	if n := kv.requests(func() { put = mustPut(t, w, "y", "after: [x1]\nhandler: noop\n", PutJobOptions{Manager: signup}) }); n != 2 {
		t.Fatalf("a create after one job made %d requests, want 2: its target, the commit", n)
	}
	if n := kv.requests(func() {
		if _, err := w.DeleteJob(ctx, "x3", DeleteJobOptions{Manager: signup}); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("a delete of a kept job made %d requests, want 1", n)
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || catalogNames(s.Catalog) != "a b first x0 x1 x2 x4 y" {
		t.Fatalf("stored: %v %v", catalogNames(s.Catalog), err)
	}
}

func mustPut(t *testing.T, w *JobWriter, name, body string, opt PutJobOptions) *JobWritten {
	t.Helper()
	res, err := w.PutJob(context.Background(), []byte(body), name, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The same writes through one writer and through the package functions
// (a new writer each, which reads everything first) answer the same and
// leave the same keys and values: jobs, reference keys, catalog-head,
// catalog-change.
func TestJobWriterWritesAsPutJob(t *testing.T) {
	ctx := context.Background()
	fresh, kept := etcdtest.Start(t).Client(t), etcdtest.Start(t).Client(t)
	storedCatalog(t, fresh, twoJobs)
	storedCatalog(t, kept, twoJobs)
	w := NewJobWriter(kept, "c")
	ops := ManagerCLI("ops")
	steps := []struct {
		name, body string
		opt        PutJobOptions // Manager "" deletes
	}{
		{"x", "schedule: '@every 1m'\nhandler: noop\npool: small\n", PutJobOptions{Manager: signup, CreateOnly: true}},
		{"y", "after: [x]\nhandler: noop\n", PutJobOptions{Manager: signup}},
		{"y", "after: [a, x]\nhandler: noop\n", PutJobOptions{Manager: signup}},
		{"y", "after: [a]\nhandler: noop\n", PutJobOptions{Manager: signup}},
		{"y", "after: [a]\nhandler: noop\n", PutJobOptions{Manager: signup}},
		{"z", "after: [y]\nhandler: noop\n", PutJobOptions{Manager: signup}},
		{"b", "schedule: '@weekly'\nhandler: noop\n", PutJobOptions{Manager: ops, Force: true}},
		{"x", "", PutJobOptions{}},
		{"z", "", PutJobOptions{}},
		{"x", hourly, PutJobOptions{Manager: ops}},
	}
	for i, s := range steps {
		var a, b any
		var errA, errB error
		if s.opt.Manager == "" {
			a, errA = DeleteJob(ctx, fresh, "c", s.name, DeleteJobOptions{Manager: signup})
			b, errB = w.DeleteJob(ctx, s.name, DeleteJobOptions{Manager: signup})
		} else {
			a, errA = PutJob(ctx, fresh, "c", []byte(s.body), s.name, s.opt)
			b, errB = w.PutJob(ctx, []byte(s.body), s.name, s.opt)
		}
		if errA != nil || errB != nil || fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
			t.Fatalf("step %d: fresh %+v %v, kept %+v %v", i, a, errA, b, errB)
		}
		if da, db := storedKeys(t, fresh), storedKeys(t, kept); !maps.Equal(da, db) {
			t.Fatalf("step %d: the keys differ:\nfresh %v\nkept  %v", i, da, db)
		}
	}
}

// storedKeys is the catalog's keys and values, catalog-change's time left
// out, catalog-source (the apply's) too.
func storedKeys(t *testing.T, cli *clientv3.Client) map[string]string {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.CatalogPrefix("c"), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		switch k := string(kv.Key); k {
		case keyspace.CatalogSource("c"):
		case keyspace.CatalogChange("c"):
			var c JobChange
			if err := json.Unmarshal(kv.Value, &c); err != nil {
				t.Fatal(err)
			}
			c.At = time.Time{}
			out[k] = c.String()
		default:
			out[k] = string(kv.Value)
		}
	}
	return out
}

// A writer whose catalog-head, settings or job went stale (a whole apply,
// a new generation, another writer) fails its guard, decides again on
// what the transaction answered, and writes or refuses as a fresh write
// would; a refusal decided on what it kept is asked of etcd first.
func TestJobWriterStaleCache(t *testing.T) {
	cli, cat, _ := storedJobs(t, 300)
	ctx := context.Background()
	kv := &requestKV{KV: cli}
	w := NewJobWriter(kv, "c")
	w.recount = time.Hour
	first := mustPut(t, w, "s1", hourly, PutJobOptions{Manager: signup})

	// The settings change under the writer: a pool it does not know.
	withPool := clone(cat)
	withPool.Pools = map[string]int{"big": 3}
	if res, err := ApplyWith(ctx, cli, withPool, Source{By: ByApply, At: time.Now().UTC()}, ApplyOptions{}); err != nil || res.Revision <= first.Revision {
		t.Fatalf("the apply with a pool: %+v %v", res, err)
	}
	var put *JobWritten
	if n := kv.requests(func() { put = mustPut(t, w, "s2", hourly+"pool: big\n", PutJobOptions{Manager: signup}) }); n != 3 || !put.Created {
		t.Fatalf("a create in a pool the writer did not know of: %d requests (%+v), want 3: refused on what it kept, so read; "+
			"counted again (the apply moved catalog-source); the commit", n, put)
	}
	withPool.Pools["big"] = 4
	if _, err := ApplyWith(ctx, cli, withPool, Source{By: ByApply, At: time.Now().UTC()}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := kv.requests(func() { put = mustPut(t, w, "s3", hourly, PutJobOptions{Manager: signup}) }); n != 3 || !put.Created {
		t.Fatalf("a create over settings changed: %d requests (%+v), want 3: the guard failed, counted again, the commit", n, put)
	}

	// Another writer replaces s1; this one still keeps its first revision.
	other := mustPut(t, NewJobWriter(cli, "c"), "s1", "schedule: '@daily'\nhandler: noop\n", PutJobOptions{Manager: signup})
	var pre *PreconditionError
	if _, err := w.PutJob(ctx, []byte(hourly), "s1", PutJobOptions{Manager: signup, IfRevision: first.Revision}); !errors.As(err, &pre) || pre.Stored != other.Revision || len(pre.Differs) == 0 {
		t.Fatalf("a replace at a revision another writer replaced: %v", err)
	}
	if _, err := w.PutJob(ctx, []byte(hourly), "s1", PutJobOptions{Manager: ManagerCLI("ops")}); !errors.As(err, new(*ManagerConflictError)) {
		t.Fatalf("another manager's replace: %v", err)
	}
	if _, err := DeleteJob(ctx, cli, "c", "s3", DeleteJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.DeleteJob(ctx, "s3", DeleteJobOptions{Manager: signup}); !errors.Is(err, ErrNoJob) {
		t.Fatalf("a delete of a job another writer deleted: %v", err)
	}
	if same, err := w.PutJob(ctx, []byte("schedule: '@daily'\nhandler: noop\n"), "s1", PutJobOptions{Manager: signup}); err != nil || !same.Unchanged || same.Revision != other.Revision {
		t.Fatalf("the job as another writer stored it: %+v %v", same, err)
	}

	// A new generation: every job changed, too many for one transaction.
	s, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	next := everyJobChanged(cat, 1)
	next.Pools = withPool.Pools
	if _, err := ApplyWith(ctx, cli, next, Source{By: ByApply, At: time.Now().UTC()}, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	after, err := Read(ctx, cli, "c", 0)
	if err != nil || after.perJob.generation == s.perJob.generation {
		t.Fatalf("no new generation: %v", err)
	}
	if put = mustPut(t, w, "s4", hourly, PutJobOptions{Manager: signup}); !put.Created {
		t.Fatalf("a create over a new generation: %+v", put)
	}
	if _, err := w.PutJob(ctx, []byte(hourly), "s2", PutJobOptions{Manager: signup, CreateOnly: true}); !errors.As(err, &pre) {
		t.Fatalf("a create of a job the new generation kept: %v", err)
	}
	got, err := GetJob(ctx, cli, "c", "s4")
	if err != nil || got.Revision != put.Revision || got.Manager != signup {
		t.Fatalf("s4 stored: %+v %v", got, err)
	}
}

// Two writers creating the same job at once: with CreateOnly one creates
// it and the other is refused naming its revision; without, the other
// replaces it; as another manager, the other conflicts. Never both create.
func TestJobWriterCreateRace(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	w1, w2 := NewJobWriter(cli, "c"), NewJobWriter(cli, "c")
	for _, w := range []*JobWriter{w1, w2} {
		if _, err := w.GetJob(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	race := func(name string, o1, o2 PutJobOptions) (res [2]*JobWritten, errs [2]error) {
		var wg sync.WaitGroup
		for i, w := range []*JobWriter{w1, w2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], errs[i] = w.PutJob(ctx, []byte(fmt.Sprintf("schedule: '@every %dm'\nhandler: noop\n", i+1)), name, []PutJobOptions{o1, o2}[i])
			}()
		}
		wg.Wait()
		return res, errs
	}
	for round := range 10 {
		res, errs := race(fmt.Sprint("only-", round), PutJobOptions{Manager: signup, CreateOnly: true}, PutJobOptions{Manager: signup, CreateOnly: true})
		win, lose := 0, 1
		if errs[0] != nil {
			win, lose = 1, 0
		}
		var pre *PreconditionError
		if errs[win] != nil || !res[win].Created || !errors.As(errs[lose], &pre) || pre.Stored != res[win].Revision {
			t.Fatalf("round %d, create only: %+v %v", round, res, errs)
		}

		res, errs = race(fmt.Sprint("put-", round), PutJobOptions{Manager: signup}, PutJobOptions{Manager: signup})
		if errs[0] != nil || errs[1] != nil || res[0].Created == res[1].Created {
			t.Fatalf("round %d, puts: %+v %v", round, res, errs)
		}
		last := res[0]
		if res[1].Revision > last.Revision {
			last = res[1]
		}
		if got, err := GetJob(ctx, cli, "c", fmt.Sprint("put-", round)); err != nil || got.Revision != last.Revision {
			t.Fatalf("round %d: stored %+v %v, the last put %+v", round, got, err, last)
		}

		res, errs = race(fmt.Sprint("managers-", round), PutJobOptions{Manager: signup}, PutJobOptions{Manager: ManagerCLI("ops")})
		var conflict *ManagerConflictError
		if (errs[0] == nil) == (errs[1] == nil) || !errors.As(errors.Join(errs[0], errs[1]), &conflict) {
			t.Fatalf("round %d, two managers: %+v %v", round, res, errs)
		}
	}
}

// Eight goroutines creating different jobs through one writer all succeed,
// and the writer's bound of the jobs follows its creates.
func TestJobWriterConcurrentCreates(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	w := NewJobWriter(cli, "c")
	w.recount = time.Hour
	var wg sync.WaitGroup
	errs := make(chan error, 8*20)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				_, err := w.PutJob(ctx, []byte(hourly), fmt.Sprintf("w%d-%02d", g, i), PutJobOptions{Manager: signup})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || len(s.Catalog.Jobs) != 162 {
		t.Fatalf("after 160 creates: %d jobs (%v)", len(s.Catalog.Jobs), err)
	}
	w.mu.Lock()
	n := w.n.bound()
	w.mu.Unlock()
	if n != 162 {
		t.Fatalf("the writer counts %d jobs, want 162", n)
	}
}

// A writer's write whose answer is lost is read back: a create etcd
// applied is reported created once; a create over a job the writer did
// not keep, whose guard failed, is not applied and becomes a replace; a
// lost delete is reported deleted.
func TestJobWriterLostAnswer(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	kv := &lostTxnKV{KV: cli}
	w := NewJobWriter(kv, "c")
	if _, err := w.GetJob(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	res, err := w.PutJob(ctx, []byte(hourly), "x", PutJobOptions{Manager: signup, CreateOnly: true})
	if err != nil || !kv.lost || !res.Created {
		t.Fatalf("a create whose answer was lost: %+v %v (lost %v)", res, err, kv.lost)
	}
	if got, err := GetJob(ctx, cli, "c", "x"); err != nil || got.Revision != res.Revision {
		t.Fatalf("x stored at %+v, reported at %d (%v)", got, res.Revision, err)
	}

	if _, err := PutJob(ctx, cli, "c", []byte(hourly), "y", PutJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.GetJob(ctx, "a"); err != nil { // the writer has seen y's revision, not y
		t.Fatal(err)
	}
	kv.lost = false
	res, err = w.PutJob(ctx, []byte("schedule: '@daily'\nhandler: noop\n"), "y", PutJobOptions{Manager: signup})
	if err != nil || !kv.lost || res.Created {
		t.Fatalf("a put guessed a create, its guard failed and its answer lost: %+v %v", res, err)
	}
	if got, err := GetJob(ctx, cli, "c", "y"); err != nil || got.Revision != res.Revision || got.Job.Schedule != "@daily" {
		t.Fatalf("y stored: %+v %v", got, err)
	}

	kv.lost = false
	if _, err := w.DeleteJob(ctx, "x", DeleteJobOptions{Manager: signup}); err != nil || !kv.lost {
		t.Fatalf("a delete whose answer was lost: %v (lost %v)", err, kv.lost)
	}
	if _, err := GetJob(ctx, cli, "c", "x"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("after the lost delete: %v", err)
	}
}

// A writer refuses a create at MaxJobs by its count, its own creates and
// deletes counted in between; a job another writer deletes frees room at
// the next count.
func TestJobWriterKeepsMaxJobs(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	kv := &requestKV{KV: cli}
	w := NewJobWriter(kv, "c")
	w.maxJobs, w.recount = 4, time.Hour
	mustPut(t, w, "x", hourly, PutJobOptions{Manager: signup})
	mustPut(t, w, "y", hourly, PutJobOptions{Manager: signup})
	var invalid *Error
	if _, err := w.PutJob(ctx, []byte(hourly), "z", PutJobOptions{Manager: signup}); !errors.As(err, &invalid) || !strings.Contains(err.Error(), "the catalog has 4 jobs, the limit") {
		t.Fatalf("a create at the limit: %v", err)
	}
	if _, err := w.DeleteJob(ctx, "y", DeleteJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, w, "z", hourly, PutJobOptions{Manager: signup})
	if _, err := w.PutJob(ctx, []byte(hourly), "y", PutJobOptions{Manager: signup}); !errors.As(err, &invalid) {
		t.Fatalf("a create at the limit after a delete and a create: %v", err)
	}
	if _, err := DeleteJob(ctx, cli, "c", "x", DeleteJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	w.recount = 0
	if n := kv.requests(func() { mustPut(t, w, "y", hourly, PutJobOptions{Manager: signup}) }); n != 2 {
		t.Fatalf("a create after another writer's delete made %d requests, want 2: the count, the commit", n)
	}
	fresh := NewJobWriter(cli, "c")
	fresh.maxJobs = 4
	if _, err := fresh.PutJob(ctx, []byte(hourly), "w", PutJobOptions{Manager: signup}); !errors.As(err, &invalid) {
		t.Fatalf("a create of a new writer at the limit: %v", err)
	}
}

// Two writers (two members' APIs) creating in turn each count the jobs
// once, learn the other's creates from catalog-head's version, and stop
// at MaxJobs together: not one job over, none refused under it.
func TestJobWriterLearnsOtherWritersCreates(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	kvs := []*requestKV{{KV: cli}, {KV: cli}}
	var ws []*JobWriter
	for _, kv := range kvs {
		w := NewJobWriter(kv, "c")
		w.maxJobs, w.recount = 12, time.Hour
		ws = append(ws, w)
	}
	created := 0
	for i := range 20 {
		_, err := ws[i%2].PutJob(ctx, []byte(hourly), fmt.Sprint("x", i), PutJobOptions{Manager: signup})
		switch {
		case err == nil:
			created++
		case !strings.Contains(fmt.Sprint(err), "the catalog has 12 jobs, the limit"):
			t.Fatalf("create %d: %v", i, err)
		}
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || len(s.Catalog.Jobs) != 12 || created != 10 {
		t.Fatalf("%d created, %d jobs stored (%v); want 10 and 12, the limit", created, len(s.Catalog.Jobs), err)
	}
	for i, kv := range kvs {
		if n := kv.walks.Load(); n != 1 {
			t.Errorf("writer %d counted the jobs %d times, want once", i, n)
		}
	}
}

// Sixteen goroutines through two writers, all creating at once up to
// MaxJobs: the catalog ends at the limit, never over it, and a create is
// refused only at the limit (or, conflicting at every attempt, busy).
func TestJobWritersKeepMaxJobsTogether(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	const limit = 30
	var wg sync.WaitGroup
	errs := make(chan error, 2*8*4)
	for i := range 2 {
		w := NewJobWriter(cli, "c")
		w.maxJobs, w.recount = limit, time.Hour
		for g := range 8 {
			wg.Go(func() {
				for k := range 4 {
					_, err := w.PutJob(ctx, []byte(hourly), fmt.Sprintf("w%d-%d-%d", i, g, k), PutJobOptions{Manager: signup})
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, ErrCatalogBusy) && !strings.Contains(err.Error(), fmt.Sprintf("the catalog has %d jobs, the limit", limit)) {
			t.Fatal(err)
		}
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || len(s.Catalog.Jobs) != limit {
		t.Fatalf("%d jobs stored (%v), want %d, the limit", len(s.Catalog.Jobs), err, limit)
	}
}

// A whole write can add many jobs in one revision of catalog-head: a
// writer's create after one fails its guard on catalog-source, counts the
// jobs again, and is refused at the limit.
func TestJobWriterCountsAgainAfterAWholeWrite(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	kv := &requestKV{KV: cli}
	w := NewJobWriter(kv, "c")
	w.maxJobs, w.recount = 6, time.Hour
	mustPut(t, w, "x", hourly, PutJobOptions{Manager: signup})
	storedCatalog(t, cli, twoJobs+"  - {name: c, schedule: '@daily', handler: noop}\n  - {name: d, schedule: '@daily', handler: noop}\n"+
		"  - {name: e, schedule: '@daily', handler: noop}\n")
	if _, err := w.PutJob(ctx, []byte(hourly), "y", PutJobOptions{Manager: signup}); !strings.Contains(fmt.Sprint(err), "the catalog has 6 jobs, the limit") {
		t.Fatalf("a create after an apply filled the catalog: %v", err)
	}
	if n := kv.walks.Load(); n != 2 {
		t.Fatalf("the writer counted the jobs %d times, want twice: at its first create, after the apply", n)
	}
}
