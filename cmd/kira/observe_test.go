package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

const observedCatalog = `cluster: obs
membership:
  lease_ttl: 2s
jobs:
  - {name: ok, schedule: "@every 1s", partitions: 2, command: ["true"]}
  - {name: broken, schedule: "@every 1s", command: ["false"]}
`

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An operator's view of a member: /livez stays 200 while etcd is down and
// /readyz says 503; the metrics an alert needs are there, a slot's
// kira_slot_leader series goes when the slot does; --log-format json writes
// one JSON object a line, a failed execution at WARN with its execution id.
func TestProbesMetricsAndLogs(t *testing.T) {
	etcd := etcdtest.StartCluster(t, 1)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	catalog := filepath.Join(dir, "c.yaml")
	os.WriteFile(catalog, []byte(observedCatalog), 0o600)
	addr := freePort(t)
	m := start(t, "run", "--catalog", catalog, "--etcd", ep, "--http", addr, "--log-format", "json")
	base := "http://" + addr
	kiratest.WaitUntil(t, "/readyz 200", 20*time.Second, func() bool { code, _ := get(base + "/readyz"); return code == 200 })
	var metrics string
	kiratest.WaitUntil(t, "the metrics of a success and a failure", 20*time.Second, func() bool {
		_, metrics = get(base + "/metrics")
		return strings.Contains(metrics, `kira_job_last_success_timestamp_seconds{kira_job="ok"}`) &&
			strings.Contains(metrics, `kira_executions_total{kira_job="broken",outcome="failed"}`)
	})
	for _, want := range []string{
		`kira_build_info{goversion="go`, `kira_slots_led{kira_job="ok"} 2`, `kira_job_partitions{kira_job="ok"} 2`, `kira_slot_leader{kira_job="broken",partition="0"} 1`,
		`kira_execution_duration_seconds_bucket{kira_job="ok",outcome="succeeded"`, "kira_lease_trust_seconds ", "kira_lease_ttl_seconds 2\n", "kira_catalog_revision ", "kira_state_writes_queued ", "kira_state_write_wait_seconds ", "kira_slots_taking_over 0",
		"go_goroutines ", "process_cpu_seconds_total ", `kira_job_next_fire_timestamp_seconds{kira_job="ok"} `, "kira_job_period_seconds{kira_job=\"ok\"} 1\n",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if strings.Contains(metrics, "kira_catalog_revision 0\n") {
		t.Error("kira_catalog_revision is 0 while the member runs a stored catalog")
	}

	// The slot of a job that is removed is released: its series goes.
	os.WriteFile(catalog, []byte(strings.Split(observedCatalog, "  - {name: broken")[0]), 0o600)
	if out, code := runKira(t, "apply", "-f", catalog, "--etcd", ep); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	kiratest.WaitUntil(t, "the removed job's leader series deleted", 20*time.Second, func() bool {
		_, metrics = get(base + "/metrics")
		return !strings.Contains(metrics, `kira_slot_leader{kira_job="broken"`)
	})

	// etcd down: alive, not ready.
	etcd.Stop(0)
	kiratest.WaitUntil(t, "/readyz 503 with etcd down", 20*time.Second, func() bool { code, _ := get(base + "/readyz"); return code == 503 })
	if code, _ := get(base + "/livez"); code != 200 {
		t.Fatalf("/livez %d with etcd down; want 200 (a liveness probe must not restart the member)", code)
	}

	var warned bool
	sc := bufio.NewScanner(strings.NewReader(m.Output()))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue // etcd's or the Go runtime's own output
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %v: %s", err, line)
		}
		if rec["msg"] == "execution failed" {
			warned = warned || rec["level"] == "WARN" && rec["execution_id"] != "" && fmt.Sprint(rec["slot"]) == "broken/0"
		}
	}
	if !warned {
		t.Fatalf("no WARN line with the execution id for the failed job:\n%s", m.Output())
	}
}
