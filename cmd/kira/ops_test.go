package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
)

const opsCatalog = `cluster: ops
membership:
  lease_ttl: 2s
jobs:
  - name: tick
    schedule: "@every 1s"
    partitions: 2
    command: ["true"]
%s`

func TestOperatorWorkflow(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	file := filepath.Join(dir, "catalog.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(opsCatalog, "")), 0o600)

	out, code := runKira(t, "apply", "-f", file, "--etcd", ep, "--dry-run")
	if code != 0 || !strings.Contains(out, "+ job tick") || !strings.Contains(out, "nothing written") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	if out, code := runKira(t, "run", "--cluster", "ops", "--etcd", ep); code != 1 || !strings.Contains(out, "kira apply") {
		t.Fatalf("run with nothing stored: exit %d\n%s", code, out)
	}
	out, code = runKira(t, "apply", "-f", file, "--etcd", ep)
	if code != 0 || !strings.Contains(out, "catalog applied at revision") {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if out, _ := runKira(t, "apply", "-f", file, "--etcd", ep); !strings.Contains(out, "unchanged") {
		t.Fatalf("re-apply of the same file: %s", out)
	}
	// A member with no --catalog runs what is stored.
	start(t, "run", "--cluster", "ops", "--etcd", ep)
	var st ops.Status
	kiratest.WaitUntil(t, "both slots owned", 20*time.Second, func() bool {
		st = statusOf(t, ep, "ops")
		return len(st.Slots) == 2 && st.Slots[0].Owner != "" && st.Slots[1].Owner != ""
	})
	if st.CatalogRevision == 0 || st.Members[0].CatalogRevision != st.CatalogRevision {
		t.Fatalf("catalog revision: stored %d, member runs %d", st.CatalogRevision, st.Members[0].CatalogRevision)
	}

	if out, code := runKira(t, "pause", "tick", "--etcd", ep, "--cluster", "ops"); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("pause: exit %d\n%s", code, out)
	}
	if st := statusOf(t, ep, "ops"); len(st.Paused) != 1 || st.Paused[0] != "tick" {
		t.Fatalf("status paused = %v", st.Paused)
	}
	if out, code := runKira(t, "pause", "nope", "--etcd", ep, "--cluster", "ops"); code != 1 || !strings.Contains(out, `no job "nope"`) {
		t.Fatalf("pause of a missing job: exit %d\n%s", code, out)
	}
	out, code = runKira(t, "trigger", "tick", "--partition", "1", "--etcd", ep, "--cluster", "ops")
	if code != 0 || !strings.Contains(out, "execution_id manual-") {
		t.Fatalf("trigger: exit %d\n%s", code, out)
	}
	id := strings.Fields(out)[len(strings.Fields(out))-1]
	// The manual run happens although the job is paused, and lands in the history.
	var recs []map[string]any
	kiratest.WaitUntil(t, "the manual run in the history", 20*time.Second, func() bool {
		out, code := runKira(t, "history", "tick", "-o", "json", "--etcd", ep, "--cluster", "ops")
		if code != 0 || json.Unmarshal([]byte(out), &recs) != nil {
			return false
		}
		for _, r := range recs {
			if r["execution_id"] == id {
				return true
			}
		}
		return false
	})
	for _, field := range []string{"job", "partition", "execution_id", "member", "token", "scheduled_time", "started_at", "finished_at", "outcome", "attempt", "trigger"} {
		if _, ok := recs[0][field]; !ok {
			t.Fatalf("history record lacks %q: %v", field, recs[0])
		}
	}
	runKira(t, "resume", "tick", "--etcd", ep, "--cluster", "ops")

	// A new catalog reaches the running member without a restart.
	os.WriteFile(file, []byte(fmt.Sprintf(opsCatalog, `  - name: added
    schedule: "@every 1s"
    command: ["true"]
`)), 0o600)
	out, _ = runKira(t, "apply", "-f", file, "--etcd", ep, "--dry-run")
	if !strings.Contains(out, "+ job added") {
		t.Fatalf("dry run diff: %s", out)
	}
	runKira(t, "apply", "-f", file, "--etcd", ep)
	kiratest.WaitUntil(t, "the member to run the new catalog", 20*time.Second, func() bool {
		st = statusOf(t, ep, "ops")
		return len(st.Slots) == 3 && st.Slots[0].Owner != "" && st.Members[0].CatalogRevision == st.CatalogRevision
	})
}

func statusOf(t *testing.T, ep, cluster string) ops.Status {
	t.Helper()
	out, code := runKira(t, "status", "--etcd", ep, "--cluster", cluster, "-o", "json")
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, out)
	}
	var st ops.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return st
}

// kira run and kira bench use extraProcs processors more than the runtime's
// default, unless GOMAXPROCS says how many.
func TestSchedulerProcs(t *testing.T) {
	if got := schedulerProcs("", 2); got != 2+extraProcs {
		t.Fatalf("default on 2 CPUs: %d processors; want %d", got, 2+extraProcs)
	}
	if got := schedulerProcs("3", 3); got != 3 {
		t.Fatalf("GOMAXPROCS=3: %d processors; want 3", got)
	}
}

// kira run and kira bench collect garbage at GOGC=gcPercent when they host
// an embedded etcd, unless GOGC says otherwise.
func TestHostingEtcdGCPercent(t *testing.T) {
	if got, ok := hostingEtcdGCPercent(""); !ok || got != 200 {
		t.Fatalf("default: %d, %v; want 200, set", got, ok)
	}
	if _, ok := hostingEtcdGCPercent("100"); ok {
		t.Fatal("GOGC=100 is overridden; want it left to the runtime")
	}
}

// kira apply of a broken catalog changes nothing: the stored one and its
// revision stay, and the error names the file, line and field.
func TestApplyOfABrokenCatalogLeavesTheStoredOne(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("cluster: keep\njobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n"), 0o600)
	os.WriteFile(bad, []byte("cluster: keep\njobs:\n  - name: a\n    schedule: \"not cron\"\n    command: [\"true\"]\n"), 0o600)
	if out, code := runKira(t, "apply", "-f", good, "--etcd", ep); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	before := statusOf(t, ep, "keep").CatalogRevision
	out, code := runKira(t, "apply", "-f", bad, "--etcd", ep)
	if code != 1 || !strings.Contains(out, bad+":4:") || !strings.Contains(out, "jobs[0].schedule") {
		t.Fatalf("apply of a broken catalog: exit %d, want 1 and the place of the problem:\n%s", code, out)
	}
	if after := statusOf(t, ep, "keep").CatalogRevision; after != before || before == 0 {
		t.Fatalf("stored catalog revision %d → %d; want it unchanged", before, after)
	}
}

// kira run with an embedded etcd whose data directory cannot be written
// exits 1 at start and names the flag.
func TestUnwritableDataDirFailsAtStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	os.WriteFile(file, nil, 0o600)
	catalog := filepath.Join(dir, "c.yaml")
	os.WriteFile(catalog, []byte("cluster: d\njobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n"), 0o600)
	out, code := runKira(t, "run", "--catalog", catalog, "--data-dir", filepath.Join(file, "data"),
		"--embedded-client-url", "http://"+freePort(t), "--embedded-peer-url", "http://"+freePort(t))
	if code != 1 || !strings.Contains(out, "--data-dir "+filepath.Join(file, "data")+" is not writable") {
		t.Fatalf("exit %d, want 1 and the data dir named:\n%s", code, out)
	}
}

// kira run serves the API on --http: a bare port binds loopback; its write
// actions need the token of --http-token-file, which never shows in the
// member's log.
func TestHTTPAPIThroughKiraRun(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	catalog, tokenFile := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "token")
	os.WriteFile(catalog, []byte("cluster: web\njobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n"), 0o600)
	os.WriteFile(tokenFile, []byte("tok-3f9a\n"), 0o600)
	_, port, _ := strings.Cut(freePort(t), ":")
	member := start(t, "run", "--catalog", catalog, "--etcd", ep, "--http", port, "--http-token-file", tokenFile)
	base := "http://127.0.0.1:" + port
	kiratest.WaitUntil(t, "the member's /healthz", 20*time.Second, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	post := func(token string) int {
		req, _ := http.NewRequest("POST", base+"/v1/jobs/a/pause", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Fatalf("pause without the token: %d", code)
	}
	if code := post("tok-3f9a"); code != http.StatusOK {
		t.Fatalf("pause with the token: %d", code)
	}
	if st := statusOf(t, ep, "web"); len(st.Paused) != 1 || st.Paused[0] != "a" {
		t.Fatalf("paused jobs %v after the API's pause", st.Paused)
	}
	if strings.Contains(member.Output(), "tok-3f9a") {
		t.Fatalf("the token is in the member's log:\n%s", member.Output())
	}
}
