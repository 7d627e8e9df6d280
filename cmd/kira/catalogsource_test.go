package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// catalogOf is a catalog of cluster with one job, job, and the header
// lines given (generation: 2).
func catalogOf(cluster, job, header string) string {
	return header + "cluster: " + cluster + "\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: " + job + ", schedule: \"@every 1h\", command: [\"true\"]}\n"
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startMember starts kira run and waits until it has joined.
func startMember(t *testing.T, args ...string) *proc {
	t.Helper()
	p := start(t, append([]string{"run"}, args...)...)
	kiratest.WaitUntil(t, "the member to join", 30*time.Second, func() bool { return strings.Contains(p.Output(), "msg=joined") || p.Exited() })
	if p.Exited() {
		t.Fatalf("kira run exited:\n%s", p.Output())
	}
	return p
}

// storedJobs are the job names of the stored catalog.
func storedJobs(t *testing.T, cli *clientv3.Client, cluster string) []string {
	t.Helper()
	s, err := config.Read(context.Background(), cli, cluster, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range s.Catalog.Jobs {
		names = append(names, j.Name)
	}
	return names
}

// A member started with --catalog a.yaml, then kira apply of b.yaml, then
// the member restarted with the same command line: the stored catalog
// stays b; the member warns, and kira status says its file differs.
func TestRestartDoesNotRevertAnAppliedCatalog(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep, cli := etcd.Endpoints()[0], etcd.Client(t)
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", catalogOf("restart", "a", ""))
	b := writeFile(t, dir, "b.yaml", catalogOf("restart", "b", ""))
	m := startMember(t, "--catalog", a, "--etcd", ep, "--name", "m0")
	if out, code := runKira(t, "apply", "-f", b, "--etcd", ep); code != 0 {
		t.Fatalf("apply b: exit %d\n%s", code, out)
	}
	if code := m.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	m = startMember(t, "--catalog", a, "--etcd", ep, "--name", "m0")
	if jobs := storedJobs(t, cli, "restart"); len(jobs) != 1 || jobs[0] != "b" {
		t.Fatalf("after the restart with a.yaml the stored catalog has %v; want [b]", jobs)
	}
	if !lineWith(m.Output(), "level=WARN", "was not stored", "kira apply -f "+a) {
		t.Fatalf("no WARN that the file was not stored:\n%s", m.Output())
	}
	out, code := runKira(t, "status", "--cluster", "restart", "--etcd", ep)
	if code != 0 || !strings.Contains(out, "catalog source: kira apply at") || !strings.Contains(out, "WARNING member m0") || !strings.Contains(out, "stored by kira apply") {
		t.Fatalf("kira status: exit %d\n%s", code, out)
	}
	out, code = runKira(t, "catalog", "--history", "--cluster", "restart", "--etcd", ep)
	if code != 0 || !strings.Contains(out, "kira apply at") || !strings.Contains(out, "- job a") || !strings.Contains(out, "(the first stored)") || !strings.Contains(out, "member m0 from its --catalog file "+a) {
		t.Fatalf("kira catalog --history: exit %d\n%s", code, out)
	}
}

// lineWith reports whether some line of out contains every one of want.
func lineWith(out string, want ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, w := range want {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// Two operators read the catalog once (kira catalog -o yaml), each adds a
// job and applies at the same time: one is stored, the other conflicts with
// what changed meanwhile and writes nothing; applied again from a new read,
// both jobs are stored. --force stores a stale file anyway.
func TestConcurrentAppliesFromOneReadConflict(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep, cli := etcd.Endpoints()[0], etcd.Client(t)
	dir := t.TempDir()
	if out, code := runKira(t, "apply", "-f", writeFile(t, dir, "base.yaml", catalogOf("race", "a", "")), "--etcd", ep); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	read, code := runKira(t, "catalog", "-o", "yaml", "--cluster", "race", "--etcd", ep)
	if code != 0 || !lineWith(read, "revision: ") {
		t.Fatalf("kira catalog -o yaml: exit %d, no revision:\n%s", code, read)
	}
	withJob := func(name string) string {
		return strings.Replace(read, "jobs:\n", "jobs:\n  - {name: "+name+", schedule: \"@every 1h\", command: [\"true\"]}\n", 1)
	}
	files := []string{writeFile(t, dir, "x.yaml", withJob("x")), writeFile(t, dir, "y.yaml", withJob("y"))}
	outs, codes := make([]string, 2), make([]int, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.CommandContext(ctx, kiraBin, "apply", "-f", f, "--etcd", ep).CombinedOutput()
			outs[i], codes[i] = string(out), 0
			if ee, ok := err.(*exec.ExitError); ok {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				codes[i] = -1
			}
		}()
	}
	wg.Wait()
	won, lost := 0, 1
	if codes[0] != 0 {
		won, lost = 1, 0
	}
	winner, loser := []string{"x", "y"}[won], []string{"x", "y"}[lost]
	if codes[won] != 0 || codes[lost] != 1 || !strings.Contains(outs[lost], "conflict") || !strings.Contains(outs[lost], "+ job "+winner) {
		t.Fatalf("concurrent applies: exits %v; want one 0 and one 1 with the other's change\n%s\n%s", codes, outs[0], outs[1])
	}
	if jobs := storedJobs(t, cli, "race"); strings.Join(jobs, ",") != winner+",a" {
		t.Fatalf("stored after the race: %v; want %s and a", jobs, winner)
	}
	// The loser reads again, redoes its change, and applies.
	read, _ = runKira(t, "catalog", "-o", "yaml", "--cluster", "race", "--etcd", ep)
	redone := writeFile(t, dir, "redone.yaml", withJob(loser))
	if out, code := runKira(t, "apply", "-f", redone, "--etcd", ep); code != 0 {
		t.Fatalf("apply from a new read: exit %d\n%s", code, out)
	}
	if jobs := strings.Join(storedJobs(t, cli, "race"), ","); !strings.Contains(jobs, "x") || !strings.Contains(jobs, "y") {
		t.Fatalf("stored: %s; want both x and y", jobs)
	}
	// --force stores the stale file over both.
	if out, code := runKira(t, "apply", "-f", files[lost], "--etcd", ep); code != 1 || !strings.Contains(out, "--force") {
		t.Fatalf("stale file again: exit %d; want a conflict\n%s", code, out)
	}
	if out, code := runKira(t, "apply", "-f", files[lost], "--force", "--etcd", ep); code != 0 {
		t.Fatalf("apply --force: exit %d\n%s", code, out)
	}
	if jobs := strings.Join(storedJobs(t, cli, "race"), ","); jobs != "a,"+loser && jobs != loser+",a" {
		t.Fatalf("stored after --force: %s", jobs)
	}
}

// A rollout of file v1 (generation 1) to v2 (generation 2) over three
// members, one of them restarted twice with v1 in the middle: every version
// of the stored catalog, watched from the start, is v1 then v2, never v1
// again.
func TestRollingRestartNeverGoesBack(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep, cli := etcd.Endpoints()[0], etcd.Client(t)
	dir := t.TempDir()
	v1 := writeFile(t, dir, "v1.yaml", catalogOf("roll", "v1", "generation: 1\n"))
	v2 := writeFile(t, dir, "v2.yaml", catalogOf("roll", "v2", "generation: 2\n"))
	ctx, cancel := context.WithCancel(context.Background())
	from, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var versions []string // the job of each stored version, in revision order
	var last int64
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for wr := range cli.Watch(ctx, keyspace.CatalogHead("roll"), clientv3.WithRev(from.Header.Revision+1)) {
			for _, ev := range wr.Events {
				s, err := config.Read(context.Background(), cli, "roll", ev.Kv.ModRevision)
				mu.Lock()
				if err != nil {
					versions = append(versions, "unreadable: "+err.Error())
				} else {
					versions = append(versions, s.Catalog.Jobs[0].Name)
				}
				last = ev.Kv.ModRevision
				mu.Unlock()
			}
		}
	}()
	defer func() { cancel(); kiratest.Receive(t, watched, 10*time.Second, "the watch to end") }()
	members := make([]*proc, 3)
	for i := range members {
		members[i] = startMember(t, "--catalog", v1, "--etcd", ep, "--name", "m"+string(rune('0'+i)))
	}
	restart := func(i int, file string) {
		t.Helper()
		if code := members[i].Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("SIGTERM of m%d: exit %d", i, code)
		}
		members[i] = startMember(t, "--catalog", file, "--etcd", ep, "--name", "m"+string(rune('0'+i)))
	}
	restart(0, v2)
	restart(1, v1) // an old pod restarted mid-rollout, twice
	if !strings.Contains(members[1].Output(), "the file is older: generation 1, the stored catalog's is 2") {
		t.Fatalf("m1 restarted with v1 does not say its file is older:\n%s", members[1].Output())
	}
	restart(1, v1)
	restart(1, v2)
	restart(2, v2)
	s, err := config.Read(context.Background(), cli, "roll", 0)
	if err != nil || s.Catalog.Jobs[0].Name != "v2" || s.Source.Generation != 2 {
		t.Fatalf("stored at the end: %+v, %v; want v2", s, err)
	}
	kiratest.WaitUntil(t, "the watch to see the last version", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return last == s.Revision })
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(versions, ",") != "v1,v2" {
		t.Fatalf("stored versions in order: %v; want v1 then v2, once each", versions)
	}
}
