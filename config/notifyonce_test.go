package config

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// notifyCatalog is a catalog whose notify default carries a header of pad
// bytes, with n jobs that have it, one with rules of its own and one with
// none (notify: []).
func notifyCatalog(n, pad int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: c\nnotify:\n  - on: [failed]\n    webhook: https://hooks.example/x\n    headers: {X-Pad: %q}\njobs:\n", strings.Repeat("a", pad))
	for i := range n {
		fmt.Fprintf(&b, "  - {name: j%05d, schedule: \"@every 1h\", command: [\"true\"]}\n", i)
	}
	b.WriteString("  - {name: own, schedule: \"@every 1h\", command: [\"true\"], notify: [{on: [timed_out], webhook: \"https://own.example/\"}]}\n")
	b.WriteString("  - {name: silent, schedule: \"@every 1h\", command: [\"true\"], notify: []}\n")
	return b.String()
}

// storedBytes is the keys and values of the catalog's current generation.
func storedBytes(t *testing.T, cli *clientv3.Client) (total int, values map[string][]byte) {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.CatalogGenerationsRoot("c"), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	values = map[string][]byte{}
	for _, kv := range resp.Kvs {
		_, job, _ := keyspace.ParseCatalogKey("c", string(kv.Key))
		values[job] = kv.Value
		total += len(kv.Key) + len(kv.Value)
	}
	return total, values
}

// The catalog's notify default is stored once, in the settings: a job that
// has it is stored with a mark, not a copy, so 1,000 jobs under a 100 KiB
// default store in about the file's size, not 1,000 times it. Read gives
// each such job the rules in force, and Marshal writes it back without a
// notify: of its own; own rules and notify: [] stay as written.
func TestNotifyDefaultIsStoredOnce(t *testing.T) {
	text := notifyCatalog(1000, 100<<10)
	cat, _, err := Lint("c.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if _, err := Put(ctx, cli, cat, Source{By: ByApply}, 0); err != nil {
		t.Fatal(err)
	}
	total, values := storedBytes(t, cli)
	copies := 0
	for _, v := range values {
		copies += strings.Count(string(v), "hooks.example")
	}
	if copies != 1 || total > 3*len(text) {
		t.Fatalf("a %d-byte file stored as %d bytes, the default %d times", len(text), total, copies)
	}
	var sets storedSettings
	if err := strict("settings", values[""], &sets); err != nil || !sets.NotifyOnce || !reflect.DeepEqual(sets.Notify, cat.Notify) {
		t.Fatalf("settings stored as %+v (%v)", sets, err)
	}
	if v := string(values["j00000"]); !strings.Contains(v, `"notify_default":true`) || strings.Contains(v, "hooks.example") {
		t.Fatalf("a job with the default stored as %s", v)
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(definitions(s.Catalog), cat) {
		t.Fatal("the catalog read back is not the one stored")
	}
	if j := s.Catalog.Jobs[0]; !j.NotifyDefault || !reflect.DeepEqual(j.Notify, cat.Notify) {
		t.Fatalf("a job with the default read back with %+v", j.Notify)
	}
	out, err := Marshal(s.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "hooks.example"); n != 1 {
		t.Fatalf("kira catalog -o yaml writes the default %d times", n)
	}
	back, err := Parse("out.yaml", out)
	if err != nil || !reflect.DeepEqual(back, cat) {
		t.Fatalf("written back and read again: %v", err)
	}
	if got := back.Jobs[1001]; got.Name != "silent" || got.Notify != nil || got.NotifyDefault {
		t.Fatalf("notify: [] came back as %+v", got)
	}
}

// A catalog stored by an older version copied the default into each job
// that had it, in either layout: such a copy reads as the default (Marshal
// writes no notify: for it), a job's other rules as its own, and the
// catalog applied again from its Marshal output is stored without copies.
func TestStoredNotifyCopiesReadAsTheDefault(t *testing.T) {
	cat := mustParse(t, notifyCatalog(2, 10))
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	storeSingle(t, cli, cat)
	if s, err := Read(ctx, cli, "c", 0); err != nil || !reflect.DeepEqual(definitions(s.Catalog), cat) {
		t.Fatalf("the single key of an older version: %v", err)
	}
	// The per-job layout as the older version stored it: copies, and
	// settings without notify_once.
	g := int64(1)
	sets, _ := json.Marshal(storedSettings{Cluster: "c", Membership: cat.Membership, Notify: cat.Notify})
	ops := []clientv3.Op{clientv3.OpPut(keyspace.CatalogHead("c"), `{"generation":1}`), clientv3.OpPut(keyspace.CatalogSettings("c", g), string(sets))}
	for i, j := range cat.Jobs {
		copied, _ := json.Marshal(struct {
			Position int64 `json:"position"`
			Job      Job   `json:"job"`
		}{int64(i+1) * positionStride, j})
		ops = append(ops, clientv3.OpPut(keyspace.CatalogJob("c", g, j.Name), string(copied)))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	s, err := Read(ctx, cli, "c", 0)
	if err != nil || !reflect.DeepEqual(definitions(s.Catalog), cat) {
		t.Fatalf("the per-job layout of an older version: %v", err)
	}
	out, _ := Marshal(s.Catalog)
	if n := strings.Count(string(out), "hooks.example"); n != 1 {
		t.Fatalf("kira catalog -o yaml writes the default %d times:\n%s", n, out)
	}
	res, err := Apply(ctx, cli, mustParse(t, string(out)), Source{By: ByApply}, false, false)
	if err != nil || len(res.Changes) != 0 {
		t.Fatalf("applied again: %+v, %v; want no changes", res, err)
	}
	changed := mustParse(t, strings.Replace(string(out), "https://hooks.example/x", "https://hooks.example/new", 1))
	if _, err := Put(ctx, cli, changed, Source{By: ByApply}, s.Revision); err != nil {
		t.Fatal(err)
	}
	if _, values := storedBytes(t, cli); strings.Contains(string(values["j00000"]), "hooks.example") {
		t.Fatalf("stored again with the copy: %s", values["j00000"])
	}
	if s, err := Read(ctx, cli, "c", 0); err != nil || s.Catalog.Jobs[0].Notify[0].Webhook != "https://hooks.example/new" {
		t.Fatalf("a job with the default after the default's change: %v", err)
	}
}

// Diff lists every change the store keeps: a change of the notify default
// alone (once, not as a change of each job that has it, and the header
// values not shown), a job's own rules against the default, and a new
// order of the same jobs. Apply stores each, and reports it; a member's
// watch gives each job the rules in force.
func TestDiffListsEveryStoredChange(t *testing.T) {
	base := "cluster: c\nnotify:\n  - {on: [failed], webhook: \"%s\", headers: {Authorization: \"%s\"}}\njobs:\n%s"
	a := "  - {name: a, schedule: \"@every 1h\", command: [\"true\"]}\n"
	b := "  - {name: b, schedule: \"@every 1h\", command: [\"true\"], notify: [{on: [failed], webhook: \"https://own.example/\"}]}\n"
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if _, err := Apply(ctx, cli, mustParse(t, fmt.Sprintf(base, "https://old.example/", "secret-1", a+b)), Source{By: ByApply}, false, false); err != nil {
		t.Fatal(err)
	}
	first, err := Read(ctx, cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	member := watchJobs(t, cli, first)
	for _, step := range []struct {
		hook, auth, jobs string
		want             []string
	}{
		{"https://new.example/", "secret-1", a + b, []string{"~ notify: [on [failed] → https://old.example/ (headers Authorization)] → [on [failed] → https://new.example/ (headers Authorization)] (the jobs without a notify: of their own)"}},
		{"https://new.example/", "secret-2", a + b, []string{"~ notify: [on [failed] → https://new.example/ (headers Authorization)] (header values changed) (the jobs without a notify: of their own)"}},
		{"https://new.example/", "secret-2", b + a, []string{"~ the jobs' order: as the new catalog lists them"}},
		{"https://new.example/", "secret-2", strings.Replace(b, ", notify: [{on: [failed], webhook: \"https://own.example/\"}]", "", 1) + a,
			[]string{"~ job b: notify: [on [failed] → https://own.example/] → the catalog's default"}},
	} {
		next := mustParse(t, fmt.Sprintf(base, step.hook, step.auth, step.jobs))
		res, err := Apply(ctx, cli, next, Source{By: ByApply}, false, false)
		if err != nil || !res.Written || !reflect.DeepEqual(res.Changes, step.want) {
			t.Fatalf("apply: %+v, %v; want written with %q", res, err, step.want)
		}
		if s, err := Read(ctx, cli, "c", 0); err != nil || !reflect.DeepEqual(definitions(s.Catalog), next) {
			t.Fatalf("the change was not stored: %v", err)
		}
		member.reaches(t, res.Revision, next)
	}
}
