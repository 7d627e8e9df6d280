package config

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// createRevisions reads the stored catalog's jobs' create revisions.
func createRevisions(t *testing.T, kv clientv3.KV) map[string]int64 {
	t.Helper()
	s, err := Read(context.Background(), kv, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, j := range s.Catalog.Jobs {
		out[j.Name] = j.CreateRevision
	}
	return out
}

// A job's create revision is its key's when first stored, and stays its
// own: a replace (one job, or a whole store within one transaction) keeps
// it; a staged store, whose keys are all new, keeps it for the jobs it
// keeps and records it in their values (so a replace after it keeps it
// too); the jobs of the single key of an older version, whose creation is
// unknown, count as created at revision 1. A job deleted and created again
// has a new one, which GetJob and a watching member see.
func TestAJobKeepsItsCreateRevisionUntilDeleted(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	legacy := storeSingle(t, cli, mustParse(t, twoJobs))
	src := Source{By: ByApply, At: time.Now().UTC()}
	big := unchecked(t, append([]byte("pools: {small: 2}\n"), manyJobs(200)...))
	big.Jobs = append(big.Jobs, mustParse(t, twoJobs).Jobs...)
	first, err := PutJobs(ctx, cli, big, src, legacy) // staged: over the single key
	if err != nil {
		t.Fatal(err)
	}
	created := createRevisions(t, cli)
	if created["a"] != createdUnknown || created["customer-00007"] <= legacy || created["customer-00007"] > first {
		t.Fatalf("after the first per-job store: a (from the single key) at %d, want %d; a new job at %d, want in (%d, %d]", created["a"], createdUnknown, created["customer-00007"], legacy, first)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@every 2m'\nhandler: noop\n"), "customer-00007", PutJobOptions{Manager: signup, Force: true}); err != nil {
		t.Fatal(err)
	}
	all := clone(big)
	for i := range all.Jobs {
		all.Jobs[i].Schedule = "@every 5m"
	}
	if _, err := PutJobsWith(ctx, cli, all, src, Force, WholeOptions{ForceConflicts: true}); err != nil { // staged: every job changed
		t.Fatal(err)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@every 3m'\nhandler: noop\n"), "customer-00008", PutJobOptions{Manager: signup, Force: true}); err != nil {
		t.Fatal(err)
	}
	for name, rev := range createRevisions(t, cli) {
		if rev != created[name] {
			t.Fatalf("job %s: create revision %d after replaces and a staged store, want %d", name, rev, created[name])
		}
	}

	s, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	w := watchJobs(t, cli, s)
	del, err := DeleteJob(ctx, cli, "c", "customer-00009", DeleteJobOptions{Manager: signup, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := PutJob(ctx, cli, "c", []byte("schedule: '@every 1m'\nhandler: noop\n"), "customer-00009", PutJobOptions{Manager: signup})
	if err != nil || !again.Created {
		t.Fatalf("created again: %+v %v", again, err)
	}
	got, err := GetJob(ctx, cli, "c", "customer-00009")
	if err != nil || got.Job.CreateRevision != again.Revision || again.Revision <= del {
		t.Fatalf("a job created again at %d: GetJob reads its create revision as %d (%v)", again.Revision, got.Job.CreateRevision, err)
	}
	kiratest.WaitUntil(t, "the watcher to reach the job created again", 20*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.rev >= again.Revision
	})
	if u := w.lastUpdate(); len(u.Added) != 1 || u.Added[0].CreateRevision != again.Revision {
		t.Fatalf("the watcher was told of the job created again as %+v, want its create revision %d", u.Added, again.Revision)
	}
}

// A job's presence, as read, guards a transaction: it fails once the job
// is created, deleted and created again, or the catalog is staged anew;
// without a per-job catalog nothing is known.
func TestJobPresenceGuardsACreate(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if p, err := ReadJobPresence(ctx, cli, "c", "x"); err != nil || p.Known {
		t.Fatalf("without a catalog: %+v %v", p, err)
	}
	storedCatalog(t, cli, twoJobs)
	guarded := func(p JobPresence) bool {
		t.Helper()
		resp, err := cli.Txn(ctx).If(p.Guard...).Then(clientv3.OpPut("/guarded", "")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	read := func(job string) JobPresence {
		t.Helper()
		p, err := ReadJobPresence(ctx, cli, "c", job)
		if err != nil || !p.Known {
			t.Fatalf("presence of %s: %+v %v", job, p, err)
		}
		return p
	}
	absent := read("x")
	if absent.CreateRevision != 0 || !guarded(absent) {
		t.Fatalf("an absent job: %+v", absent)
	}
	put, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), "x", PutJobOptions{Manager: signup})
	if err != nil {
		t.Fatal(err)
	}
	if guarded(absent) {
		t.Fatal("the guard of an absent job held after its create")
	}
	present := read("x")
	if present.CreateRevision != put.Revision || !guarded(present) {
		t.Fatalf("a job created at %d: %+v", put.Revision, present)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@daily'\nhandler: noop\n"), "x", PutJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if !guarded(present) {
		t.Fatal("the guard of a job failed after a replace, which keeps the job")
	}
	if _, err := DeleteJob(ctx, cli, "c", "x", DeleteJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@daily'\nhandler: noop\n"), "x", PutJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if guarded(present) {
		t.Fatal("the guard of a job held after it was deleted and created again")
	}
	a := read("a")
	if _, err := cli.Put(ctx, keyspace.CatalogHead("c"), `{"generation":99,"refs":true}`); err != nil {
		t.Fatal(err)
	}
	if guarded(a) {
		t.Fatal("the guard of a job held after catalog-head named another generation")
	}
}
