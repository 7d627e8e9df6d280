package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/kiratest"
	"github.com/kira-scheduler/kira/operator"
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
	var st operator.Status
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

func statusOf(t *testing.T, ep, cluster string) operator.Status {
	t.Helper()
	out, code := runKira(t, "status", "--etcd", ep, "--cluster", cluster, "-o", "json")
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, out)
	}
	var st operator.Status
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
