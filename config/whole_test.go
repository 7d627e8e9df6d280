package config

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// An apply of a catalog from files keeps the jobs of other managers it
// lacks and says so; one that names another manager's job conflicts and
// writes nothing, naming the job, its manager and where the file has it;
// ForceConflicts takes it over; PruneOthers deletes the others' jobs.
func TestApplyKeepsJobsOfOtherManagers(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	for _, name := range []string{"s1", "s2"} {
		if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), name, PutJobOptions{Manager: signup}); err != nil {
			t.Fatal(err)
		}
	}
	src := Source{By: ByApply, At: time.Now().UTC()}
	res, err := Apply(ctx, cli, mustParse(t, "cluster: c\njobs:\n  - {name: a, schedule: '@hourly', handler: noop}\n"), src, false, false)
	if err != nil || !res.Written || !strings.Contains(strings.Join(res.Changes, "\n"), "= kept 2 jobs managed by api:signup") || !strings.Contains(strings.Join(res.Changes, "\n"), "- job b") {
		t.Fatalf("an apply without the API's jobs: %+v %v", res, err)
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || catalogNames(s.Catalog) != "a s1 s2" {
		t.Fatalf("stored after the apply: %s %v", catalogNames(s.Catalog), err)
	}
	named := mustParse(t, "cluster: c\njobs:\n  - {name: a, schedule: '@hourly', handler: noop}\n  - {name: s1, schedule: '@daily', handler: noop}\n")
	var managed *ManagerConflictError
	_, err = ApplyWith(ctx, cli, named, src, ApplyOptions{WholeOptions: WholeOptions{Where: func(job string) string { return "c.yaml:5:5" }}})
	if !errors.As(err, &managed) || !strings.Contains(err.Error(), "job s1 (c.yaml:5:5) is managed by api:signup") {
		t.Fatalf("an apply that names the API's job: %v", err)
	}
	if now, _ := Read(ctx, cli, "c", 0); now.Revision != s.Revision {
		t.Fatal("a conflicting apply wrote")
	}
	res, err = ApplyWith(ctx, cli, named, src, ApplyOptions{WholeOptions: WholeOptions{ForceConflicts: true}})
	if err != nil || !strings.Contains(strings.Join(res.Changes, "\n"), "! job s1 taken over from api:signup") {
		t.Fatalf("a forced apply: %+v %v", res, err)
	}
	if got, err := GetJob(ctx, cli, "c", "s1"); err != nil || got.Manager != ManagerApply || got.Job.Schedule != "@daily" {
		t.Fatalf("s1 after the takeover: %+v %v", got, err)
	}
	res, err = ApplyWith(ctx, cli, named, src, ApplyOptions{WholeOptions: WholeOptions{PruneOthers: true}})
	if err != nil || !strings.Contains(strings.Join(res.Changes, "\n"), "- job s2") {
		t.Fatalf("an apply with PruneOthers: %+v %v", res, err)
	}
	if s, _ := Read(ctx, cli, "c", 0); catalogNames(s.Catalog) != "a s1" {
		t.Fatalf("stored after pruning: %s", catalogNames(s.Catalog))
	}
}

func catalogNames(cat *Catalog) string {
	if cat == nil {
		return "<none>"
	}
	var out []string
	for _, j := range cat.Jobs {
		out = append(out, j.Name)
	}
	return strings.Join(out, " ")
}

// A catalog from files may run after a job of another manager, which it
// lacks: Parse refuses it alone, the write resolves it against the jobs it
// keeps, and refuses it with the file's located problem when the job is
// not there.
func TestAfterIntoAJobOfAnotherManager(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	text := "cluster: c\njobs:\n  - {name: a, schedule: '@hourly', handler: noop}\n  - {name: d, after: [s1], handler: noop}\n"
	_, _, err := Lint("c.yaml", []byte(text))
	cat, ok := UnresolvedCatalog(err)
	if !ok {
		t.Fatalf("a catalog after a job it lacks: %v", err)
	}
	src := Source{By: ByApply, At: time.Now().UTC()}
	if _, err := Apply(ctx, cli, cat, src, false, false); err == nil || !strings.Contains(err.Error(), `c.yaml:4:23: jobs[1].after[0]: job "d" runs after "s1"`) {
		t.Fatalf("an apply after a job no one stores: %v", err)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), "s1", PutJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, cli, cat, src, false, false); err != nil {
		t.Fatalf("an apply after the API's job: %v", err)
	}
	var deps *DependentsError
	if _, err := DeleteJob(ctx, cli, "c", "s1", DeleteJobOptions{Manager: signup}); !errors.As(err, &deps) || deps.Dependents[0] != "d" {
		t.Fatalf("a delete of the API's job d runs after: %v", err)
	}
	if _, _, err := Lint("c.yaml", []byte(text+"  - {name: e, schedule: nope, handler: noop}\n")); func() bool { _, ok := UnresolvedCatalog(err); return ok }() {
		t.Fatal("a catalog with other problems is not one to resolve")
	}
}

// StoreFile never takes over a job: a file that names another manager's
// job is refused with the conflict, and the stored catalog runs on.
func TestStoreFileRefusesAJobOfAnotherManager(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	first := mustParse(t, "generation: 1\ncluster: c\njobs:\n  - {name: a, schedule: '@hourly', handler: noop}\n")
	if out, err := StoreFile(ctx, cli, first, FileSource("f.yaml", nil, first)); err != nil || !out.Stored {
		t.Fatalf("first file: %+v %v", out, err)
	}
	if got, _ := GetJob(ctx, cli, "c", "a"); got.Manager != ManagerFile {
		t.Fatalf("a file's job is managed by %s", got.Manager)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), "s1", PutJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	second := mustParse(t, "generation: 2\ncluster: c\njobs:\n  - {name: a, schedule: '@hourly', handler: noop}\n  - {name: s1, schedule: '@daily', handler: noop}\n")
	out, err := StoreFile(ctx, cli, second, FileSource("f.yaml", nil, second))
	if err != nil || out.Stored || !strings.Contains(out.Refused, "job s1") || !strings.Contains(out.Refused, "api:signup") {
		t.Fatalf("a file naming the API's job: %+v %v", out, err)
	}
	third := mustParse(t, "generation: 3\ncluster: c\njobs:\n  - {name: b, schedule: '@hourly', handler: noop}\n")
	if out, err := StoreFile(ctx, cli, third, FileSource("f.yaml", nil, third)); err != nil || !out.Stored {
		t.Fatalf("a newer file: %+v %v", out, err)
	}
	if s, _ := Read(ctx, cli, "c", 0); catalogNames(s.Catalog) != "b s1" {
		t.Fatalf("after a newer file: %s", catalogNames(s.Catalog))
	}
}

// A single-job write racing a whole apply: one of them retries or
// conflicts, and neither's change is lost.
func TestSingleJobWriteRacesAWholeApply(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	for round := range 10 {
		name := "api-" + string(rune('a'+round))
		done := make(chan error, 1)
		go func() {
			_, err := PutJob(ctx, cli, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), name, PutJobOptions{Manager: signup})
			done <- err
		}()
		sched := []string{"'@hourly'", "'@daily'"}[round%2]
		_, applyErr := Apply(ctx, cli, mustParse(t, "cluster: c\npools: {small: 2}\njobs:\n  - {name: a, schedule: "+sched+", handler: noop}\n  - {name: b, schedule: '@daily', handler: noop}\n"), Source{By: ByApply, At: time.Now().UTC()}, false, false)
		var conflict *ConflictError
		if applyErr != nil && !errors.As(applyErr, &conflict) {
			t.Fatal(applyErr)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("PutJob did not return")
		}
		s, err := Read(ctx, cli, "c", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Catalog.Job(name); !ok {
			t.Fatalf("round %d: the API's job was lost by the apply (%v)", round, applyErr)
		}
		if a, _ := s.Catalog.Job("a"); applyErr == nil && a.Schedule != strings.Trim(sched, "'") {
			t.Fatalf("round %d: the apply's change was lost", round)
		}
	}
}

// A generation stored by an older version (no managers, no reference
// keys, catalog-head without refs) takes single-job writes: its jobs are
// apply's, and a delete finds dependents by reading the generation.
func TestSingleJobWriteOnAnOlderCatalog(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	g := int64(5)
	job := func(name, body string, pos int) string {
		return `{"position":` + string(rune('0'+pos)) + `,"job":{"name":"` + name + `",` + body + `"partitions":1,"handler":"noop","misfire":"fire-once","catchup_window":600000000000,"history_limit":10,"overlap":"skip","retries":{"max":0,"backoff":1000000000,"max_backoff":60000000000}}}`
	}
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(keyspace.CatalogSettings("c", g), `{"cluster":"c","membership":{"lease_ttl":6000000000}}`),
		clientv3.OpPut(keyspace.CatalogJob("c", g, "a"), job("a", `"schedule":"@hourly",`, 1)),
		clientv3.OpPut(keyspace.CatalogJob("c", g, "b"), job("b", `"schedule":"","after":[{"job":"a"}],`, 2)),
		clientv3.OpPut(keyspace.CatalogHead("c"), `{"generation":5}`),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := GetJob(ctx, cli, "c", "b"); err != nil || got.Manager != ManagerApply || got.Job.After[0].Job != "a" {
		t.Fatalf("an older version's job: %+v %v", got, err)
	}
	var deps *DependentsError
	if _, err := DeleteJob(ctx, cli, "c", "a", DeleteJobOptions{Manager: signup, Force: true}); !errors.As(err, &deps) || deps.Dependents[0] != "b" {
		t.Fatalf("a delete of an upstream without reference keys: %v", err)
	}
	if _, err := PutJob(ctx, cli, "c", []byte("after: [b]\nhandler: noop\n"), "x", PutJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if _, err := DeleteJob(ctx, cli, "c", "x", DeleteJobOptions{Manager: signup}); err != nil {
		t.Fatal(err)
	}
	if s, err := Read(ctx, cli, "c", 0); err != nil || catalogNames(s.Catalog) != "a b" || s.perJob.refs {
		t.Fatalf("after single-job writes: %s %v", catalogNames(s.Catalog), err)
	}
}

// lostTxnKV applies the first transaction that writes a job's key, then
// answers it with an error, as etcd does when the answer is lost.
type lostTxnKV struct {
	clientv3.KV
	lost bool
}

func (k *lostTxnKV) Txn(ctx context.Context) clientv3.Txn {
	return &lostTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type lostTxn struct {
	clientv3.Txn
	kv    *lostTxnKV
	write bool
}

func (t *lostTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *lostTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		t.write = t.write || op.IsPut() && strings.Contains(string(op.KeyBytes()), "/jobs/") || op.IsDelete() && strings.Contains(string(op.KeyBytes()), "/jobs/")
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *lostTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *lostTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil && t.write && !t.kv.lost {
		t.kv.lost = true
		return nil, errors.New("etcdserver: request timed out")
	}
	return resp, err
}

// A single-job write whose answer is lost after etcd applied it is read
// back: a create-only put reports it created, once, not a precondition
// failure; a delete reports it deleted, not ErrNoJob.
func TestPutJobWhoseAnswerIsLost(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storedCatalog(t, cli, twoJobs)
	kv := &lostTxnKV{KV: cli}
	res, err := PutJob(ctx, kv, "c", []byte("schedule: '@hourly'\nhandler: noop\n"), "x", PutJobOptions{Manager: signup, CreateOnly: true})
	if err != nil || !kv.lost || !res.Created {
		t.Fatalf("a create whose answer was lost: %+v %v (lost %v)", res, err, kv.lost)
	}
	got, err := GetJob(ctx, cli, "c", "x")
	if err != nil || got.Revision != res.Revision {
		t.Fatalf("the job stored at %d, reported at %d (%v)", got.Revision, res.Revision, err)
	}
	kv.lost = false
	if _, err := DeleteJob(ctx, kv, "c", "x", DeleteJobOptions{Manager: signup, IfRevision: res.Revision}); err != nil || !kv.lost {
		t.Fatalf("a delete whose answer was lost: %v", err)
	}
	if _, err := GetJob(ctx, cli, "c", "x"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("after the lost delete: %v", err)
	}
}
