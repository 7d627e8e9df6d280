package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
)

const spreadCatalog = `cluster: spread
membership: {lease_ttl: 2s}
jobs:
  - {name: split, schedule: "* * * * * *", partitions: 12, command: ["true"]}
`

// ledBy counts, by member name, the led slots of job in st, and how many
// slots are led in all.
func ledBy(st ops.Status, job string) (map[string]int, int) {
	names := map[string]string{}
	for _, m := range st.Members {
		names[m.ID] = m.Name
	}
	n, led := map[string]int{}, 0
	for _, s := range st.Slots {
		if s.Job == job && s.Owner != "" {
			n[names[s.Owner]]++
			led++
		}
	}
	return n, led
}

// A 12-partition job over three kira run processes on one kira etcd is led
// 4 / 4 / 4; after a kill -9 of one, 6 / 6. kira status and kira jobs JOB
// show each member's share.
func TestTwelvePartitionsSplitEvenlyOverRealMembers(t *testing.T) {
	dir := t.TempDir()
	client, peer := freeURLs(t)
	start(t, "etcd", "--name", "spread", "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", client, "--listen-peer-urls", peer)
	catalog := filepath.Join(dir, "c.yaml")
	os.WriteFile(catalog, []byte(spreadCatalog), 0o600)
	members := map[string]*proc{}
	for _, name := range []string{"a", "b", "c"} {
		members[name] = start(t, "run", "--catalog", catalog, "--etcd", client, "--name", name)
	}
	var led map[string]int
	kiratest.WaitUntil(t, "three members leading 4 slots each", 60*time.Second, func() bool {
		out, code := runKira(t, "status", "--etcd", client, "--cluster", "spread", "-o", "json")
		if code != 0 {
			return false
		}
		var st ops.Status
		if json.Unmarshal([]byte(out), &st) != nil {
			return false
		}
		var n int
		led, n = ledBy(st, "split")
		return len(st.Members) == 3 && n == 12 && led["a"] == 4 && led["b"] == 4 && led["c"] == 4
	})
	out, code := runKira(t, "status", "--etcd", client, "--cluster", "spread")
	if code != 0 || !hasLine(out, "split a 4, b 4, c 4") {
		t.Fatalf("kira status does not show the split a 4, b 4, c 4 (exit %d):\n%s", code, out)
	}
	out, code = runKira(t, "jobs", "split", "--etcd", client, "--cluster", "spread")
	if code != 0 || !strings.Contains(out, "slots led by each member: a 4, b 4, c 4") {
		t.Fatalf("kira jobs split does not show the split (exit %d):\n%s", code, out)
	}

	if err := members["b"].Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "a and c leading 6 slots each after b's kill -9", 60*time.Second, func() bool {
		st := statusOf(t, client, "spread")
		var n int
		led, n = ledBy(st, "split")
		return len(st.Members) == 2 && n == 12 && led["a"] == 6 && led["c"] == 6
	})
	out, code = runKira(t, "jobs", "split", "--etcd", client, "--cluster", "spread", "-o", "json")
	var d ops.JobDetail
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || ops.FormatShares(d.Shares) != "a 6, c 6" {
		t.Fatalf("kira jobs split -o json: shares %+v (exit %d):\n%s", d.Shares, code, out)
	}
}

// hasLine reports whether out has a line that is want, spaces aside.
func hasLine(out, want string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == want {
			return true
		}
	}
	return false
}
