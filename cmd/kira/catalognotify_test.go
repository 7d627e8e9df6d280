package main

import (
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// kira catalog -o yaml writes the notify default once, and no notify: in
// the jobs that have it: applied again, the file changes nothing.
func TestCatalogWritesTheNotifyDefaultOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	text := "cluster: hooks\nnotify:\n  - {on: [failed], webhook: \"https://hooks.example/x\"}\njobs:\n" +
		"  - {name: a, schedule: \"@every 1h\", command: [\"true\"]}\n  - {name: b, schedule: \"@every 1h\", command: [\"true\"]}\n"
	if out, code := runKira(t, "apply", "-f", writeFile(t, dir, "a.yaml", text), "--etcd", ep); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	read, code := runKira(t, "catalog", "-o", "yaml", "--cluster", "hooks", "--etcd", ep)
	if code != 0 || strings.Count(read, "hooks.example") != 1 {
		t.Fatalf("kira catalog -o yaml: exit %d, want the default once:\n%s", code, read)
	}
	if out, code := runKira(t, "apply", "-f", writeFile(t, dir, "read.yaml", read), "--etcd", ep); code != 0 || !strings.Contains(out, "catalog unchanged") {
		t.Fatalf("apply of what kira catalog wrote: exit %d\n%s", code, out)
	}
}
