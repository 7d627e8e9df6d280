package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// kira apply -f DIR stores the directory's files as one catalog; a job
// defined in two of them is refused with both places and nothing is written.
func TestApplyOfADirectory(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	writeFile(t, dir, "00-cluster.yaml", "cluster: dirs\nmembership:\n  lease_ttl: 4s\n")
	writeFile(t, dir, "billing.yaml", "jobs:\n  - {name: reconcile, schedule: \"@every 1s\", partitions: 3, command: [\"true\"]}\n")
	writeFile(t, dir, "health.yml", "jobs:\n  - {name: health, schedule: \"@hourly\", command: [\"true\"]}\n")

	if out, code := runKira(t, "validate", dir); code != 0 || !strings.Contains(out, `ok: cluster "dirs", 2 jobs, 4 slots, lease_ttl 4s`) {
		t.Fatalf("validate DIR: exit %d\n%s", code, out)
	}
	if out, code := runKira(t, "apply", "-f", dir, "--etcd", ep); code != 0 || !strings.Contains(out, "+ job reconcile") || !strings.Contains(out, "+ job health") {
		t.Fatalf("apply -f DIR: exit %d\n%s", code, out)
	}
	cli := etcd.Client(t)
	stored, rev, err := config.LoadStored(context.Background(), cli, "dirs")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := config.LintDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(config.Diff(stored, want)) != 0 || len(stored.Jobs) != 2 || stored.Membership.LeaseTTL != want.Membership.LeaseTTL {
		t.Fatalf("stored catalog %+v; want the directory's %+v", stored, want)
	}

	dup := writeFile(t, dir, "reports.yaml", "jobs:\n  - name: report\n    schedule: \"@daily\"\n    command: [\"true\"]\n  - name: reconcile\n    schedule: \"@daily\"\n    command: [\"true\"]\n")
	out, code := runKira(t, "apply", "-f", dir, "--etcd", ep)
	first := filepath.Join(dir, "billing.yaml") + ":2:12"
	if code != 1 || !strings.Contains(out, dup+":5:11: jobs[1].name: duplicate job name \"reconcile\"") || !strings.Contains(out, first) {
		t.Fatalf("apply of a directory defining a job twice: exit %d, want 1 naming %s:5 and %s:\n%s", code, dup, first, out)
	}
	if out, code := runKira(t, "validate", dir); code != 1 || !strings.Contains(out, dup+":5:11") {
		t.Fatalf("validate of it: exit %d\n%s", code, out)
	}
	if _, after, err := config.LoadStored(context.Background(), cli, "dirs"); err != nil || after != rev {
		t.Fatalf("stored revision %d → %d (%v); want it unchanged", rev, after, err)
	}
	os.Remove(dup)
	if out, code := runKira(t, "apply", "-f", dir, "--etcd", ep); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("re-apply of the stored directory: exit %d\n%s", code, out)
	}
}
