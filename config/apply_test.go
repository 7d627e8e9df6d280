package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A stored catalog this version cannot read, in either layout (a job of a
// newer version, a job or catalog-head that is not JSON, a single key of a
// newer version), is replaced by an apply with force alone: without force
// the apply is refused and nothing is written; with it, its changes say
// first what it replaced, unread, and the new catalog is stored whole, the
// unreadable generation gone.
func TestForcedApplyReplacesAnUnreadableCatalog(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	cat := mustParse(t, "cluster: c\njobs:\n  - {name: a, schedule: \"@every 1h\", command: [\"true\"]}\n  - {name: b, schedule: \"@every 1h\", command: [\"true\"]}\n")
	next := mustParse(t, "cluster: c\njobs:\n  - {name: n, schedule: \"@every 1h\", command: [\"true\"]}\n")
	for _, c := range []struct {
		name  string
		spoil func(g int64) clientv3.Op
	}{
		{"a job of a newer version", func(g int64) clientv3.Op {
			return clientv3.OpPut(keyspace.CatalogJob("c", g, "b"), `{"position":2,"job":{"name":"b"},"quota":{"cpu":"2"}}`)
		}},
		{"a job that is not JSON", func(g int64) clientv3.Op { return clientv3.OpPut(keyspace.CatalogJob("c", g, "b"), `{not json`) }},
		{"a head that is not JSON", func(int64) clientv3.Op { return clientv3.OpPut(keyspace.CatalogHead("c"), `{not json`) }},
		{"the single key of a newer version", nil},
	} {
		if _, err := cli.Delete(ctx, keyspace.Cluster("c"), clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		if c.spoil == nil {
			storeSingle(t, cli, cat)
			if _, err := cli.Put(ctx, keyspace.Catalog("c"), `{"cluster":"c","jobs":[{"name":"a","quota":{}}]}`); err != nil {
				t.Fatal(err)
			}
		} else {
			if _, err := Put(ctx, cli, cat, Source{By: ByApply}, 0); err != nil {
				t.Fatal(err)
			}
			s, _ := Read(ctx, cli, "c", 0)
			if _, err := cli.Txn(ctx).Then(c.spoil(s.perJob.generation)).Commit(); err != nil {
				t.Fatal(err)
			}
		}
		spoiled, err := Read(ctx, cli, "c", 0)
		if !errors.Is(err, ErrUnreadableCatalog) {
			t.Fatalf("%s: read as %v", c.name, err)
		}
		if _, err := Apply(ctx, cli, next, Source{By: ByApply}, false, false); !errors.Is(err, ErrUnreadableCatalog) || !strings.Contains(err.Error(), "nothing written: only an apply with force replaces it") {
			t.Fatalf("%s: apply without force: %v", c.name, err)
		}
		if s, _ := Read(ctx, cli, "c", 0); s.Revision != spoiled.Revision {
			t.Fatalf("%s: apply without force wrote revision %d", c.name, s.Revision)
		}
		res, err := Apply(ctx, cli, next, Source{By: ByApply}, false, true)
		said := fmt.Sprintf("! the stored catalog (revision %d) is replaced whole, unread: %v", spoiled.Revision, ErrUnreadableCatalog)
		if err != nil || !res.Written || len(res.Changes) != 2 || !strings.HasPrefix(res.Changes[0], said) || res.Changes[1] != "+ job n" {
			t.Fatalf("%s: apply with force: %+v, %v", c.name, res, err)
		}
		if s, err := Read(ctx, cli, "c", 0); err != nil || !reflect.DeepEqual(definitions(s.Catalog), next) {
			t.Fatalf("%s: after the forced apply: %v", c.name, err)
		}
		generations(t, cli, 1)
	}
}
