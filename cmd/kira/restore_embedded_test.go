package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/highwater"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

// The runbook's restore of kira run's embedded etcd: stop kira run, restore
// into a new data directory with the member name kira and its peer URL,
// copy the high-water mark over, start kira run on it. With the default
// bump every token after the restore is above every token before and
// nothing is reported. Restored instead (from the same snapshot and mark)
// with --no-bump, the member, a new process whose mark comes from the file,
// says the revision went back and starts nothing under a token at or below
// the mark.
func TestEmbeddedEtcdRestore(t *testing.T) {
	dir := t.TempDir()
	client, peer := freeURLs(t)
	log := filepath.Join(dir, "runs.log")
	cat := writeFile(t, dir, "catalog.yaml", fmt.Sprintf(snapshotCatalog, log))
	addr := freePort(t)
	run := func(data string) *proc {
		return startMember(t, "--catalog", cat, "--data-dir", filepath.Join(dir, data), "--embedded-client-url", client, "--embedded-peer-url", peer, "--http", addr)
	}
	stop := func(p *proc) {
		if code := p.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("kira run: exit %d on SIGTERM:\n%s", code, p.Output())
		}
	}
	member := run("d0")
	kiratest.WaitUntil(t, "every slot to fire", 30*time.Second, func() bool { return everySlotRanAbove(readRuns(t, log), 0) })
	snap := filepath.Join(dir, "backup.db")
	if out, code := runKira(t, "etcd", "snapshot", "save", snap, "--etcd", client); code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", code, out)
	}
	stop(member) // a restart after the snapshot: new lease, new tokens
	floor := maxToken(readRuns(t, log))
	member = run("d0")
	kiratest.WaitUntil(t, "every slot to fire under a new token", 30*time.Second, func() bool { return everySlotRanAbove(readRuns(t, log), floor) })
	stop(member)
	mark, err := os.ReadFile(filepath.Join(dir, "d0", highwater.FileName))
	if err != nil {
		t.Fatalf("the high-water mark was not kept in --data-dir: %v", err)
	}
	var kept struct{ Revision int64 }
	if err := json.Unmarshal(mark, &kept); err != nil || kept.Revision < maxToken(readRuns(t, log)) {
		t.Fatalf("the kept high-water mark %s is below the tokens handed out (up to %d): %v", mark, maxToken(readRuns(t, log)), err)
	}

	restore := func(data string, extra ...string) {
		args := append([]string{"etcd", "snapshot", "restore", snap, "--name", "kira", "--data-dir", filepath.Join(dir, data),
			"--initial-advertise-peer-urls", peer}, extra...)
		if out, code := runKira(t, args...); code != 0 {
			t.Fatalf("restore into %s: exit %d: %s", data, code, out)
		}
		if err := os.WriteFile(filepath.Join(dir, data, highwater.FileName), mark, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := readRuns(t, log)
	highest := maxToken(before)
	restore("d1")
	member = run("d1")
	kiratest.WaitUntil(t, "every slot to fire after the restore", 60*time.Second,
		func() bool { return everySlotRanAbove(readRuns(t, log)[len(before):], highest) })
	checkRunsAfterRestore(t, before, readRuns(t, log)[len(before):], highest)
	_, scrape := get("http://" + addr + "/metrics")
	if v := metricValue(scrape, "kira_etcd_revision_rollbacks_total"); v != 0 || strings.Contains(member.Output(), "went back") {
		t.Fatalf("a restore with the bump reported: kira_etcd_revision_rollbacks_total %v\n%s", v, member.Output())
	}
	stop(member)

	before = readRuns(t, log)
	restore("d2", "--no-bump")
	member = run("d2")
	kiratest.WaitUntil(t, "every slot to fire after the restore without the bump", 60*time.Second,
		func() bool { return everySlotRanAbove(readRuns(t, log)[len(before):], 0) })
	if !strings.Contains(member.Output(), fmt.Sprintf("level=ERROR msg=\"etcd's revision went back from %d to ", kept.Revision)) {
		t.Fatalf("a restore without the bump, behind a kept high-water mark, was not reported:\n%s", member.Output())
	}
	_, scrape = get("http://" + addr + "/metrics")
	markNow := int64(metricValue(scrape, "kira_etcd_revision_high_water"))
	for _, r := range readRuns(t, log)[len(before):] {
		if r.token <= kept.Revision {
			t.Errorf("after the restore without the bump partition %d ran under token %d, not above the kept mark %d", r.partition, r.token, kept.Revision)
		}
	}
	t.Logf("tokens before the restores up to %d, the kept mark %d; high-water mark at the end %d", highest, kept.Revision, markNow)
}
