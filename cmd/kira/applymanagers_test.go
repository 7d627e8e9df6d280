package main

import (
	"context"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// kira apply keeps the jobs written one by one (api:signup's) and says
// so; a file that names one conflicts, naming its file:line and manager;
// --force-conflicts takes it over; --prune-others deletes the others; kira
// catalog shows the manager and revision of such a job, and --history who
// wrote it.
func TestApplyKeepsJobsOfOtherManagersFromTheCLI(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep, cli := etcd.Endpoints()[0], etcd.Client(t)
	dir := t.TempDir()
	ctx := context.Background()
	a := writeFile(t, dir, "a.yaml", catalogOf("m", "a", ""))
	if out, code := runKira(t, "apply", "-f", a, "--etcd", ep); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	put, err := config.PutJob(ctx, cli, "m", []byte("schedule: '@hourly'\ncommand: [\"true\"]\n"), "s1", config.PutJobOptions{Manager: config.ManagerAPI("signup")})
	if err != nil {
		t.Fatal(err)
	}
	out, code := runKira(t, "catalog", "--etcd", ep, "--cluster", "m")
	if code != 0 || !strings.Contains(out, "# job s1: managed by api:signup, revision ") {
		t.Fatalf("kira catalog: exit %d\n%s", code, out)
	}
	if out, code := runKira(t, "catalog", "--history", "--etcd", ep, "--cluster", "m"); code != 0 || !strings.Contains(out, "created job s1 by api:signup") {
		t.Fatalf("kira catalog --history: exit %d\n%s", code, out)
	}
	b := writeFile(t, dir, "b.yaml", catalogOf("m", "b", "")+"  - {name: d, after: [s1], command: [\"true\"]}\n")
	if out, code := runKira(t, "apply", "-f", b, "--etcd", ep); code != 0 || !strings.Contains(out, "= kept 1 job managed by api:signup") {
		t.Fatalf("apply without s1, after it: exit %d\n%s", code, out)
	}
	c := writeFile(t, dir, "c.yaml", catalogOf("m", "s1", ""))
	if out, code := runKira(t, "apply", "-f", c, "--etcd", ep); code != 1 || !strings.Contains(out, "job s1 ("+c+":4) is managed by api:signup") {
		t.Fatalf("apply naming s1: exit %d\n%s", code, out)
	}
	if got, _ := config.GetJob(ctx, cli, "m", "s1"); got.Revision != put.Revision {
		t.Fatal("a conflicting apply wrote s1")
	}
	c2 := writeFile(t, dir, "c2.yaml", catalogOf("m", "s1", "")+"  - {name: d, after: [s1], command: [\"true\"]}\n")
	if out, code := runKira(t, "apply", "-f", c2, "--force-conflicts", "--etcd", ep); code != 0 || !strings.Contains(out, "! job s1 taken over from api:signup") {
		t.Fatalf("apply --force-conflicts: exit %d\n%s", code, out)
	}
	if _, err := config.PutJob(ctx, cli, "m", []byte("schedule: '@hourly'\ncommand: [\"true\"]\n"), "s2", config.PutJobOptions{Manager: config.ManagerCLI("ana")}); err != nil {
		t.Fatal(err)
	}
	if out, code := runKira(t, "apply", "-f", c2, "--prune-others", "--etcd", ep); code != 0 || !strings.Contains(out, "- job s2") {
		t.Fatalf("apply --prune-others: exit %d\n%s", code, out)
	}
	if jobs := strings.Join(storedJobs(t, cli, "m"), ","); jobs != "s1,d" {
		t.Fatalf("stored after --prune-others: %s", jobs)
	}
}
