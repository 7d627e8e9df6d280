package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

const afterCatalog = `cluster: after
membership: {lease_ttl: 2s}
jobs:
  - name: extract
    schedule: "@every 1s"
    partitions: 2
    command: ["true"]
  - name: transform
    after: [extract]
    command: ["true"]
`

// A dependent through the binary: kira validate refuses a cycle with its
// file and line; a member runs the dependent once per fire of its upstream,
// at the upstream's scheduled time; kira jobs and kira next show the graph.
func TestDependentThroughTheCLI(t *testing.T) {
	cycle := filepath.Join(t.TempDir(), "cycle.yaml")
	os.WriteFile(cycle, []byte("jobs:\n  - name: a\n    after: [b]\n    command: [\"true\"]\n  - name: b\n    after: [a]\n    command: [\"true\"]\n"), 0o600)
	if _, stderr, code := kiraWith(t, "", nil, "validate", cycle); code == 0 || !strings.Contains(stderr, "cycle.yaml:6:13: jobs[1].after[0]: after: makes a cycle (a → b → a)") {
		t.Fatalf("kira validate of a cycle: exit %d\n%s", code, stderr)
	}
	etcd := etcdtest.Start(t)
	env := []string{"KIRA_ETCD_ENDPOINTS=" + etcd.Endpoints()[0], "KIRA_CLUSTER=after"}
	if _, stderr, code := kiraWith(t, afterCatalog, env, "apply", "-f", "-"); code != 0 {
		t.Fatalf("apply: exit %d: %s", code, stderr)
	}
	start(t, "run", "--etcd", etcd.Endpoints()[0], "--cluster", "after")
	type rec struct {
		ExecutionID   string    `json:"execution_id"`
		ScheduledTime time.Time `json:"scheduled_time"`
		Outcome       string    `json:"outcome"`
		Partition     int       `json:"partition"`
		StartedAt     time.Time `json:"started_at"`
		FinishedAt    time.Time `json:"finished_at"`
	}
	history := func(job string) []rec {
		out, stderr, code := kiraWith(t, "", env, "history", job, "-n", "1000", "-o", "json")
		var recs []rec
		if code != 0 || json.Unmarshal([]byte(out), &recs) != nil {
			t.Fatalf("kira history %s: exit %d: %s", job, code, stderr)
		}
		return recs
	}
	var transform []rec
	kiratest.WaitUntil(t, "transform ran 3 times", 30*time.Second, func() bool {
		transform = history("transform")
		return len(transform) >= 3
	})
	extract, ended := map[time.Time]int{}, map[time.Time]time.Time{}
	for _, r := range history("extract") {
		if r.Outcome == "succeeded" {
			extract[r.ScheduledTime]++
			if r.FinishedAt.After(ended[r.ScheduledTime]) {
				ended[r.ScheduledTime] = r.FinishedAt
			}
		}
	}
	seen := map[time.Time]bool{}
	for _, r := range transform {
		if seen[r.ScheduledTime] {
			t.Fatalf("transform ran twice at %v", r.ScheduledTime)
		}
		seen[r.ScheduledTime] = true
		if r.Outcome != "succeeded" || extract[r.ScheduledTime] != 2 {
			t.Fatalf("transform %s at %v, after %d of extract's 2 partitions succeeded", r.Outcome, r.ScheduledTime, extract[r.ScheduledTime])
		}
		// How long after its upstream's last partition ended it started:
		// the record's commit, the watch, the paced read, the start's write.
		t.Logf("transform at %s started %s after extract's last partition ended", r.ScheduledTime.Format(time.TimeOnly), r.StartedAt.Sub(ended[r.ScheduledTime]).Round(time.Millisecond))
	}
	out, _, code := kiraWith(t, "", env, "jobs", "transform")
	if code != 0 || !strings.Contains(out, "after extract") || !strings.Contains(out, "runs after: extract") {
		t.Fatalf("kira jobs transform: exit %d\n%s", code, out)
	}
	out, _, _ = kiraWith(t, "", env, "jobs", "extract")
	if !strings.Contains(out, "runs before: transform") {
		t.Fatalf("kira jobs extract:\n%s", out)
	}
	out, _, _ = kiraWith(t, "", env, "next", "transform")
	if !strings.Contains(out, "transform has no schedule: it fires once per fire of extract") {
		t.Fatalf("kira next transform:\n%s", out)
	}
}
