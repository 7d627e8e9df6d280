package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"
)

// metricValue is the value of the unlabelled series name in a scrape, or -1.
func metricValue(scrape, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// rollbackMember is a kira run member with its HTTP port and data dir.
type rollbackMember struct {
	proc *proc
	addr string
}

func startRollbackMember(t *testing.T, cat, ep, name, dir string) rollbackMember {
	addr := freePort(t)
	return rollbackMember{startMember(t, "--catalog", cat, "--etcd", ep, "--name", name, "--http", addr, "--data-dir", dir), addr}
}

func (m rollbackMember) scrape(t *testing.T) string {
	t.Helper()
	code, body := get("http://" + m.addr + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics of %s: %d %s", m.addr, code, body)
	}
	return body
}

// watchReadyz polls the members' /readyz every 20 ms until stop is
// closed, and returns the reasons of the 503 answers each gave.
func watchReadyz(members []rollbackMember, stop <-chan struct{}) func() []map[string]bool {
	var mu sync.Mutex
	seen := make([]map[string]bool, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		seen[i] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if code, body := get("http://" + m.addr + "/readyz"); code == http.StatusServiceUnavailable {
					mu.Lock()
					seen[i][strings.TrimSpace(body)] = true
					mu.Unlock()
				}
			}
		}()
	}
	return func() []map[string]bool { wg.Wait(); return seen }
}

// A kira etcd restored without the revision bump: each member sees etcd's
// revision go back below its high-water mark, says so at ERROR (both
// revisions, the restore that bumps), answers /readyz 503 with the reason
// and counts it in kira_etcd_revision_rollbacks_total, and no execution
// starts under a token at or below its mark: the slots fire again once
// campaigns win tokens above it, by themselves.
func TestRestoreWithoutBumpIsDetected(t *testing.T) {
	dir := t.TempDir()
	client, peer := freeURLs(t)
	etcdArgs := func(data string) []string {
		return []string{"etcd", "--name", "e0", "--data-dir", data, "--listen-client-urls", client, "--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer, "--initial-cluster", "e0=" + peer}
	}
	etcd := start(t, etcdArgs(filepath.Join(dir, "e0"))...)
	log := filepath.Join(dir, "runs.log")
	cat := writeFile(t, dir, "catalog.yaml", fmt.Sprintf(snapshotCatalog, log))
	members := []rollbackMember{startRollbackMember(t, cat, client, "m0", filepath.Join(dir, "m0")), startRollbackMember(t, cat, client, "m1", filepath.Join(dir, "m1"))}
	kiratest.WaitUntil(t, "every slot to fire", 30*time.Second, func() bool { return everySlotRanAbove(readRuns(t, log), 0) })
	snap := filepath.Join(dir, "backup.db")
	if out, code := runKira(t, "etcd", "snapshot", "save", snap, "--etcd", client); code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", code, out)
	}
	// New leases after the snapshot, as after any rolling restart: the
	// restored etcd knows none of them.
	floor := maxToken(readRuns(t, log))
	for i := range members {
		if code := members[i].proc.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("SIGTERM of m%d: exit %d", i, code)
		}
		members[i] = startRollbackMember(t, cat, client, fmt.Sprintf("m%d", i), filepath.Join(dir, fmt.Sprintf("m%d", i)))
	}
	kiratest.WaitUntil(t, "every slot to fire under a new token", 30*time.Second, func() bool { return everySlotRanAbove(readRuns(t, log), floor) })
	time.Sleep(5 * time.Second) // fires raise the revision well past the snapshot's

	if code := etcd.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("etcd: exit %d on SIGTERM", code)
	}
	before := readRuns(t, log)
	lowestMark := int64(-1)
	for i, m := range members {
		s := m.scrape(t)
		mark := int64(metricValue(s, "kira_etcd_revision_high_water"))
		if mark < maxToken(before) || metricValue(s, "kira_etcd_revision_rollbacks_total") != 0 {
			t.Fatalf("m%d before the restore: high-water mark %d (tokens up to %d), rollbacks %v", i, mark, maxToken(before), metricValue(s, "kira_etcd_revision_rollbacks_total"))
		}
		if lowestMark < 0 || mark < lowestMark {
			lowestMark = mark
		}
	}
	if out, code := runKira(t, "etcd", "snapshot", "restore", snap, "--data-dir", filepath.Join(dir, "r0"), "--name", "e0",
		"--initial-advertise-peer-urls", peer, "--initial-cluster", "e0="+peer, "--no-bump"); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	stop := make(chan struct{})
	stopOnce := sync.OnceFunc(func() { close(stop) })
	readyz := watchReadyz(members, stop)
	t.Cleanup(func() { stopOnce(); readyz() }) // a test that fails first still stops the pollers
	start(t, etcdArgs(filepath.Join(dir, "r0"))...)
	restarted := time.Now()
	kiratest.WaitUntil(t, "every slot to fire again after the restore", 60*time.Second,
		func() bool { return everySlotRanAbove(readRuns(t, log)[len(before):], 0) })
	t.Logf("every slot fired again %s after etcd started (high-water marks from %d; tokens before up to %d)", time.Since(restarted).Round(time.Millisecond), lowestMark, maxToken(before))
	stopOnce()
	reasons := readyz()
	for i, m := range members {
		out := m.proc.Output()
		if !regexp.MustCompile(`level=ERROR msg="etcd's revision went back from \d+ to \d+.*kira etcd snapshot restore`).MatchString(out) {
			t.Errorf("m%d did not log the revision going back at ERROR:\n%s", i, out)
		}
		if v := metricValue(m.scrape(t), "kira_etcd_revision_rollbacks_total"); v < 1 {
			t.Errorf("m%d: kira_etcd_revision_rollbacks_total %v", i, v)
		}
		held := false
		for r := range reasons[i] {
			held = held || strings.Contains(r, "etcd's revision went back from")
		}
		if !held {
			t.Errorf("m%d never answered /readyz 503 for the revision going back; its 503s: %v", i, reasons[i])
		}
	}
	for _, r := range readRuns(t, log)[len(before):] {
		if r.token <= lowestMark {
			t.Errorf("after the restore partition %d ran under token %d, not above the high-water mark %d", r.partition, r.token, lowestMark)
		}
	}
}
