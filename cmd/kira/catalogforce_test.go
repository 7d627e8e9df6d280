package main

import (
	"context"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A stored catalog this version cannot read (here a job of a newer
// version): kira apply refuses to replace it and says --force does; kira
// apply --force replaces it, and says first what it replaced, unread.
func TestApplyForceReplacesAnUnreadableCatalog(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep, cli := etcd.Endpoints()[0], etcd.Client(t)
	dir := t.TempDir()
	if out, code := runKira(t, "apply", "-f", writeFile(t, dir, "a.yaml", catalogOf("newer", "a", "")), "--etcd", ep); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	ctx := context.Background()
	resp, err := cli.Get(ctx, keyspace.CatalogGenerationsRoot("newer"), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("the stored generation: %v", err)
	}
	g, _, _ := keyspace.ParseCatalogKey("newer", string(resp.Kvs[0].Key))
	if _, err := cli.Put(ctx, keyspace.CatalogJob("newer", g, "a"), `{"position":1,"job":{"name":"a"},"quota":{"cpu":"2"}}`); err != nil {
		t.Fatal(err)
	}
	b := writeFile(t, dir, "b.yaml", catalogOf("newer", "b", ""))
	if out, code := runKira(t, "apply", "-f", b, "--etcd", ep); code != 1 || !strings.Contains(out, "does not know") || !strings.Contains(out, "kira apply --force replaces it") || strings.Contains(out, "is etcd running") {
		t.Fatalf("apply over an unreadable catalog: exit %d\n%s", code, out)
	}
	out, code := runKira(t, "apply", "-f", b, "--force", "--etcd", ep)
	if code != 0 || !strings.HasPrefix(out, "! the stored catalog (revision ") || !strings.Contains(out, "+ job b") {
		t.Fatalf("apply --force over an unreadable catalog: exit %d\n%s", code, out)
	}
	if jobs := strings.Join(storedJobs(t, cli, "newer"), ","); jobs != "b" {
		t.Fatalf("stored after --force: %s", jobs)
	}
	if _, err := config.Read(ctx, cli, "newer", 0); err != nil {
		t.Fatal(err)
	}
}
