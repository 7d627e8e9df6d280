package config

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// storedCatalog applies text as kira apply's and returns its revision.
func storedCatalog(t *testing.T, cli clientv3.KV, text string) int64 {
	t.Helper()
	res, err := Apply(context.Background(), cli, mustParse(t, text), Source{By: ByApply, At: time.Now().UTC()}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	return res.Revision
}

const twoJobs = "cluster: c\npools: {small: 2}\njobs:\n  - {name: a, schedule: '@hourly', handler: noop}\n  - {name: b, schedule: '@daily', handler: noop}\n"

var signup = ManagerAPI("signup")

// Create, replace, delete: each a new catalog revision that Read and a
// watching member see; the job's revision is its key's; CreateOnly and
// IfRevision are conditions; another manager's job is a conflict unless
// forced.
func TestSingleJobWrites(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	rev0 := storedCatalog(t, cli, twoJobs)
	s, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	w := watchJobs(t, cli, s)

	put, err := PutJob(ctx, cli, "c", []byte("schedule: '@every 1m'\nhandler: noop\npool: small\n"), "x", PutJobOptions{Manager: signup, CreateOnly: true})
	if err != nil || !put.Created || put.Revision <= rev0 {
		t.Fatalf("create: %+v %v", put, err)
	}
	got, err := GetJob(ctx, cli, "c", "x")
	if err != nil || got.Revision != put.Revision || got.CatalogRevision != put.Revision || got.Manager != signup || got.Job.Pool != "small" {
		t.Fatalf("GetJob after create: %+v %v", got, err)
	}
	s, err = Read(ctx, cli, "c", 0)
	if err != nil || s.Revision != put.Revision || len(s.Catalog.Jobs) != 3 || s.Catalog.Jobs[2].Name != "x" {
		t.Fatalf("Read after create: %+v %v", s, err)
	}
	if m, rev, ok := s.JobMeta("x"); !ok || m != signup || rev != put.Revision {
		t.Fatalf("JobMeta(x) = %s %d %v", m, rev, ok)
	}
	if m, _, _ := s.JobMeta("a"); m != ManagerApply {
		t.Fatalf("JobMeta(a) = %s", m)
	}
	if s.Change == nil || s.Change.Job != "x" || s.Change.By != signup || s.Change.Op != "created" {
		t.Fatalf("the change recorded: %+v", s.Change)
	}
	w.reaches(t, put.Revision, s.Catalog)

	var pre *PreconditionError
	if _, err := PutJob(ctx, cli, "c", []byte("{\"schedule\": \"@hourly\", \"handler\": \"noop\"}"), "x", PutJobOptions{Manager: signup, CreateOnly: true}); !errors.As(err, &pre) || pre.Stored != put.Revision {
		t.Fatalf("CreateOnly over an existing job: %v", err)
	}
	rep, err := PutJob(ctx, cli, "c", []byte("{\"name\": \"x\", \"schedule\": \"@hourly\", \"handler\": \"noop\"}"), "x", PutJobOptions{Manager: signup, IfRevision: put.Revision})
	if err != nil || rep.Created || rep.Revision <= put.Revision {
		t.Fatalf("replace: %+v %v", rep, err)
	}
	_, err = PutJob(ctx, cli, "c", []byte("schedule: '@daily'\nhandler: noop\n"), "x", PutJobOptions{Manager: signup, IfRevision: put.Revision})
	if !errors.As(err, &pre) || pre.Stored != rep.Revision || !strings.Contains(err.Error(), "schedule: @every 1m → @hourly") {
		t.Fatalf("IfRevision of a replaced revision: %v", err)
	}
	same, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), "x", PutJobOptions{Manager: signup})
	if err != nil || !same.Unchanged || same.Revision != rep.Revision {
		t.Fatalf("the same job again: %+v %v", same, err)
	}

	var managed *ManagerConflictError
	other := ManagerCLI("ops")
	if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@daily'\nhandler: noop\n"), "x", PutJobOptions{Manager: other}); !errors.As(err, &managed) || managed.Conflicts[0].Manager != signup {
		t.Fatalf("a put of another manager's job: %v", err)
	}
	if _, err := DeleteJob(ctx, cli, "c", "a", DeleteJobOptions{Manager: other}); !errors.As(err, &managed) || managed.Conflicts[0].Manager != ManagerApply {
		t.Fatalf("a delete of apply's job: %v", err)
	}
	taken, err := PutJob(ctx, cli, "c", []byte("schedule: '@daily'\nhandler: noop\n"), "x", PutJobOptions{Manager: other, Force: true})
	if err != nil || taken.Previous != signup || taken.Manager != other {
		t.Fatalf("a forced put: %+v %v", taken, err)
	}
	if _, err := DeleteJob(ctx, cli, "c", "x", DeleteJobOptions{Manager: other, IfRevision: rep.Revision}); !errors.As(err, &pre) {
		t.Fatalf("a delete at a replaced revision: %v", err)
	}
	del, err := DeleteJob(ctx, cli, "c", "x", DeleteJobOptions{Manager: other, IfRevision: taken.Revision})
	if err != nil || del <= taken.Revision {
		t.Fatalf("delete: %d %v", del, err)
	}
	if _, err := GetJob(ctx, cli, "c", "x"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("GetJob of a deleted job: %v", err)
	}
	if _, err := DeleteJob(ctx, cli, "c", "x", DeleteJobOptions{Manager: other}); !errors.Is(err, ErrNoJob) {
		t.Fatalf("a delete of no job: %v", err)
	}
	s = readJobs(t, cli, 0, mustParse(t, twoJobs))
	w.reaches(t, del, s.Catalog)
}

// The body is checked as a catalog's job is, its problems at its line and
// field; the name fills an absent name:, and one that differs is refused;
// the manager must be a single-job writer's.
func TestPutJobBody(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	opt := PutJobOptions{Manager: signup}
	for _, c := range []struct{ body, want string }{
		{"schedule: '@hourly'\nhandler: noop\nmisfire: sometimes\n", "job x:3:10: misfire: misfire \"sometimes\" is not one of"},
		{"name: y\nschedule: '@hourly'\nhandler: noop\n", "job x:1:7: name: the body names job \"y\""},
		{"schedule: '@hourly'\nhandler: noop\npool: big\n", "pool: unknown pool \"big\""},
		{"schedule: '@hourly'\nhandler: noop\nnope: 1\n", "job x:3:1: unknown field \"nope\""},
		{"{\"schedule\": \"@hourly\", \"handler\": \"noop\", \"partitions\": 0}", "partitions: partitions must be between 1 and"},
	} {
		_, err := PutJob(ctx, cli, "c", []byte(c.body), "x", opt)
		var invalid *Error
		if !errors.As(err, &invalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.body, err, c.want)
		}
	}
	for _, m := range []Manager{"", ManagerApply, "api:", "api:a b", Manager("cli:" + strings.Repeat("x", MaxManagerLength))} {
		if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), "x", PutJobOptions{Manager: m}); !errors.Is(err, ErrInvalidJob) {
			t.Errorf("manager %q: %v", m, err)
		}
	}
	if _, err := GetJob(ctx, cli, "c", "x"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("a refused put stored the job: %v", err)
	}
}

// Managers: a single-job writer is api:<name> or cli:<name>, printable and
// bounded; apply and file are the whole-catalog family.
func TestManagers(t *testing.T) {
	for _, m := range []Manager{ManagerAPI("signup"), ManagerCLI("ana@example.com")} {
		if err := m.ValidateSingle(); err != nil || m.Family() {
			t.Errorf("%s: %v, family %v", m, err, m.Family())
		}
	}
	for _, m := range []Manager{"", ManagerApply, ManagerFile} {
		if !m.Family() || m.ValidateSingle() == nil {
			t.Errorf("%q is not of the whole-catalog family", m)
		}
	}
	if Manager("").String() != "apply" {
		t.Error("no manager recorded reads as apply")
	}
	if err := Manager("api:\x01").ValidateSingle(); err == nil {
		t.Error("a control character was accepted")
	}
}

// The rules across jobs hold after single-job writes: an after: target
// must exist, a cycle is refused, and a delete of a job others run after
// is refused naming them; the reference keys follow every write path.
func TestSingleJobRulesAcrossJobs(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	first, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	w := watchJobs(t, cli, first)
	opt := PutJobOptions{Manager: signup}
	var invalid *Error
	if _, err := PutJob(ctx, cli, "c", []byte("after: [nope]\nhandler: noop\n"), "x", opt); !errors.As(err, &invalid) || !strings.Contains(err.Error(), `runs after "nope", which is not a job of the catalog`) {
		t.Fatalf("after a missing job: %v", err)
	}
	for _, j := range []string{"x: after: [a]", "y: after: [x]", "z: after: [y, b]"} {
		name, body, _ := strings.Cut(j, ": ")
		if _, err := PutJob(ctx, cli, "c", []byte(body+"\nhandler: noop\n"), name, opt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := PutJob(ctx, cli, "c", []byte("after: [z]\nhandler: noop\n"), "x", opt); !errors.As(err, &invalid) || !strings.Contains(err.Error(), "cycle (x → z → y → x)") {
		t.Fatalf("a cycle: %v", err)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("after: [x]\nhandler: noop\n"), "x", opt); !errors.As(err, &invalid) || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a job after itself: %v", err)
	}
	var deps *DependentsError
	if _, err := DeleteJob(ctx, cli, "c", "y", DeleteJobOptions{Manager: signup}); !errors.As(err, &deps) || strings.Join(deps.Dependents, ",") != "z" {
		t.Fatalf("a delete of an upstream: %v", err)
	}
	refs := func() []string {
		t.Helper()
		s, err := Read(ctx, cli, "c", 0)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(ctx, keyspace.CatalogGeneration("c", s.perJob.generation)+"refs/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			out = append(out, strings.TrimPrefix(string(kv.Key), keyspace.CatalogGeneration("c", s.perJob.generation)+"refs/"))
		}
		return out
	}
	if got := strings.Join(refs(), " "); got != "a/x b/z x/y y/z" {
		t.Fatalf("refs after puts: %s", got)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("after: [b]\nhandler: noop\n"), "z", opt); err != nil {
		t.Fatal(err)
	}
	if _, err := DeleteJob(ctx, cli, "c", "y", DeleteJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(refs(), " "); got != "a/x b/z" {
		t.Fatalf("refs after a replace and a delete: %s", got)
	}
	// A whole write keeps them: a's dependent x is kept; the apply makes b
	// run after a.
	storedCatalog(t, cli, "cluster: c\npools: {small: 2}\njobs:\n  - {name: a, schedule: '@hourly', handler: noop}\n  - {name: b, after: [a], handler: noop}\n")
	if got := strings.Join(refs(), " "); got != "a/b a/x b/z" {
		t.Fatalf("refs after a whole write: %s", got)
	}
	if _, err := DeleteJob(ctx, cli, "c", "b", DeleteJobOptions{Manager: signup, Force: true}); !errors.As(err, &deps) {
		t.Fatalf("a delete of b, which z runs after: %v", err)
	}
	// The members' watch sees the reference keys go by and ignores them.
	last, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	w.reaches(t, last.Revision, last.Catalog)
	if w.refused() != 0 {
		t.Fatal("the watch refused a revision with reference keys")
	}
}

// Eight writers creating different jobs at once all succeed, with no
// conflict: their guards are their own jobs', and catalog-head's value.
func TestConcurrentPutsOfDifferentJobs(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	var wg sync.WaitGroup
	errs := make(chan error, 8*10)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				_, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), fmt.Sprintf("w%d-%d", g, i), PutJobOptions{Manager: signup})
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
	if err != nil || len(s.Catalog.Jobs) != 82 {
		t.Fatalf("after 80 creates: %v jobs (%v)", len(s.Catalog.Jobs), err)
	}
	if s.Catalog.Jobs[2].Name != "w0-0" || s.Catalog.Jobs[81].Name != "w7-9" {
		t.Fatalf("jobs created one by one order after the file's, by name: %s … %s", s.Catalog.Jobs[2].Name, s.Catalog.Jobs[81].Name)
	}
}
