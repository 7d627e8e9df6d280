package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

const snapshotCatalog = `cluster: snap
membership:
  lease_ttl: 2s
jobs:
  - name: tick
    schedule: "@every 1s"
    partitions: 6
    command: ["sh", "-c", "echo \"$KIRA_PARTITION $KIRA_FENCING_TOKEN $KIRA_EXECUTION_ID\" >> %s"]
`

// etcdTrio are the addresses of a three-member kira etcd cluster.
type etcdTrio struct{ clients, peers, initial []string }

func newEtcdTrio(t *testing.T) etcdTrio {
	t.Helper()
	addrs, err := etcdnode.FreeAddrs(6)
	if err != nil {
		t.Fatal(err)
	}
	var e etcdTrio
	for i := 0; i < 3; i++ {
		e.clients = append(e.clients, "http://"+addrs[2*i])
		e.peers = append(e.peers, "http://"+addrs[2*i+1])
		e.initial = append(e.initial, fmt.Sprintf("e%d=%s", i, e.peers[i]))
	}
	return e
}

// start runs the three members on the data directories dirs and waits
// until the cluster answers.
func (e etcdTrio) start(t *testing.T, dirs []string) []*proc {
	t.Helper()
	var procs []*proc
	for i := range 3 {
		procs = append(procs, start(t, "etcd", "--name", fmt.Sprintf("e%d", i), "--data-dir", dirs[i],
			"--listen-client-urls", e.clients[i], "--listen-peer-urls", e.peers[i], "--initial-advertise-peer-urls", e.peers[i],
			"--initial-cluster", strings.Join(e.initial, ",")))
	}
	cli := etcdtest.NewClient(t, e.clients...)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := etcdtest.WaitHealthy(ctx, cli); err != nil {
		t.Fatal(err)
	}
	return procs
}

// run is one line of the job's log: a fire of a partition under a token.
type run struct {
	partition int
	token     int64
	id        string
}

func readRuns(t *testing.T, path string) []run {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var runs []run
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		p, err1 := strconv.Atoi(f[0])
		tok, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("run log line %q", line)
		}
		runs = append(runs, run{p, tok, f[2]})
	}
	return runs
}

// everySlotRanAbove reports whether each of the 6 partitions has a run in
// runs under a token above floor.
func everySlotRanAbove(runs []run, floor int64) bool {
	seen := map[int]bool{}
	for _, r := range runs {
		if r.token > floor {
			seen[r.partition] = true
		}
	}
	return len(seen) == 6
}

func maxToken(runs []run) int64 {
	var m int64
	for _, r := range runs {
		m = max(m, r.token)
	}
	return m
}

// A snapshot saved while members run, restored into a three-member kira
// etcd cluster after more changes of holder, with the default bump: every
// token handed out after the restore is above every token handed out
// before it, every slot fires again, and no execution id runs twice but
// the in-doubt fires whose records the restore removed (once each).
func TestSnapshotRestoreKeepsTokensRising(t *testing.T) {
	dir := t.TempDir()
	trio := newEtcdTrio(t)
	etcds := trio.start(t, []string{filepath.Join(dir, "e0"), filepath.Join(dir, "e1"), filepath.Join(dir, "e2")})
	ep := strings.Join(trio.clients, ",")
	log := filepath.Join(dir, "runs.log")
	cat := writeFile(t, dir, "catalog.yaml", fmt.Sprintf(snapshotCatalog, log))
	addrs := []string{freePort(t), freePort(t)} // kept across restarts: the metrics at the end are of the members that lived through the restore
	member := func(i int) *proc {
		return startMember(t, "--catalog", cat, "--etcd", ep, "--name", fmt.Sprintf("m%d", i), "--http", addrs[i])
	}
	members := []*proc{member(0), member(1)}
	kiratest.WaitUntil(t, "every slot to fire", 30*time.Second, func() bool { return everySlotRanAbove(readRuns(t, log), 0) })

	snap := filepath.Join(dir, "backup.db")
	if out, code := runKira(t, "etcd", "snapshot", "save", snap, "--etcd", trio.clients[0]); code != 0 || !strings.Contains(out, "saved "+snap) {
		t.Fatalf("snapshot save: exit %d: %s", code, out)
	}
	atSnapshot := maxToken(readRuns(t, log))
	for round := range 2 { // changes of holder after the snapshot: tokens rise past it
		// The floor is read before the stops: a member restarted first can
		// take every slot and fire before the second one is back.
		floor := maxToken(readRuns(t, log))
		for i := range members {
			if code := members[i].Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
				t.Fatalf("SIGTERM of m%d: exit %d", i, code)
			}
			members[i] = member(i)
		}
		kiratest.WaitUntil(t, fmt.Sprintf("every slot to fire under a new token, round %d", round), 30*time.Second,
			func() bool { return everySlotRanAbove(readRuns(t, log), floor) })
	}
	for _, s := range statusOf(t, ep, "snap").Slots {
		if s.Token > maxToken(readRuns(t, log)) {
			t.Fatalf("slot %d holds token %d, above every run's", s.Partition, s.Token)
		}
	}

	for i, e := range etcds {
		if code := e.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("etcd e%d: exit %d on SIGTERM", i, code)
		}
	}
	before := readRuns(t, log)
	highest := maxToken(before)
	if highest <= atSnapshot {
		t.Fatalf("tokens did not rise after the snapshot (%d, then %d): the restore would prove nothing", atSnapshot, highest)
	}
	restoreTrio(t, trio, snap, dir)
	trio.start(t, []string{filepath.Join(dir, "r0"), filepath.Join(dir, "r1"), filepath.Join(dir, "r2")})
	restarted := time.Now()
	kiratest.WaitUntil(t, "every slot to fire under a token above every earlier one", 60*time.Second,
		func() bool { return everySlotRanAbove(readRuns(t, log)[len(before):], highest) })
	t.Logf("etcd restored (tokens before: up to %d, at the snapshot %d); every slot fired again %s after etcd started", highest, atSnapshot, time.Since(restarted).Round(time.Millisecond))
	for _, s := range statusOf(t, ep, "snap").Slots {
		if s.Token <= highest {
			t.Errorf("after the restore slot %d holds token %d, not above %d", s.Partition, s.Token, highest)
		}
	}
	checkRunsAfterRestore(t, before, readRuns(t, log)[len(before):], highest)
	for i, m := range members { // the bump leaves nothing to report
		_, scrape := get("http://" + addrs[i] + "/metrics")
		if v := metricValue(scrape, "kira_etcd_revision_rollbacks_total"); v != 0 || strings.Contains(m.Output(), "went back") {
			t.Errorf("m%d reported etcd's revision going back after a restore with the bump: kira_etcd_revision_rollbacks_total %v\n%s", i, v, m.Output())
		}
	}
}

// restoreTrio restores snap into dir/r0..r2 with the default bump.
func restoreTrio(t *testing.T, trio etcdTrio, snap, dir string) {
	t.Helper()
	for i := range 3 {
		out, code := runKira(t, "etcd", "snapshot", "restore", snap, "--data-dir", filepath.Join(dir, fmt.Sprintf("r%d", i)),
			"--name", fmt.Sprintf("e%d", i), "--initial-advertise-peer-urls", trio.peers[i], "--initial-cluster", strings.Join(trio.initial, ","))
		if code != 0 || !strings.Contains(out, fmt.Sprintf("revision raised by %d", uint64(DefaultRevisionBump))) {
			t.Fatalf("restore of e%d: exit %d: %s", i, code, out)
		}
	}
}

// checkRunsAfterRestore: every run after the restore is under a token above
// highest; an execution id runs again only if it ran before the restore
// (a fire whose record the restore removed), once, at most one per slot.
func checkRunsAfterRestore(t *testing.T, before, after []run, highest int64) {
	t.Helper()
	ranBefore := map[string]bool{}
	for _, r := range before {
		if ranBefore[r.id] {
			t.Errorf("execution %s ran twice before the restore", r.id)
		}
		ranBefore[r.id] = true
	}
	ranAfter, againPerSlot := map[string]bool{}, map[int]int{}
	for _, r := range after {
		if r.token <= highest {
			t.Errorf("after the restore partition %d ran under token %d, not above %d", r.partition, r.token, highest)
		}
		if ranAfter[r.id] {
			t.Errorf("execution %s ran twice after the restore", r.id)
		}
		ranAfter[r.id] = true
		if ranBefore[r.id] {
			againPerSlot[r.partition]++
		}
	}
	for p, n := range againPerSlot {
		if n > 1 {
			t.Errorf("partition %d ran %d fires again that had run before the restore; at most the one in doubt", p, n)
		}
	}
	t.Logf("runs: %d before the restore, %d after; fires run again (their records lost with the restore): %v", len(before), len(after), againPerSlot)
}

// The restore refuses a bump of 0 unless --no-bump says so, and then warns.
func TestSnapshotRestoreRefusesNoBumpUnlessAsked(t *testing.T) {
	dir := t.TempDir()
	out, code := runKira(t, "etcd", "snapshot", "restore", filepath.Join(dir, "none.db"), "--data-dir", filepath.Join(dir, "d"), "--bump-revision", "0")
	if code == 0 || !strings.Contains(out, "--bump-revision 0 would let fencing tokens go back") {
		t.Fatalf("--bump-revision 0: exit %d: %s", code, out)
	}
	out, code = runKira(t, "etcd", "snapshot", "restore", filepath.Join(dir, "none.db"), "--data-dir", filepath.Join(dir, "d"), "--no-bump", "--bump-revision", "5")
	if code == 0 || !strings.Contains(out, "contradict") {
		t.Fatalf("--no-bump --bump-revision 5: exit %d: %s", code, out)
	}
	out, code = runKira(t, "etcd", "snapshot", "restore", filepath.Join(dir, "none.db"), "--data-dir", filepath.Join(dir, "d"), "--no-bump")
	if code == 0 || !strings.Contains(out, "WARNING: --no-bump") || !strings.Contains(out, "none.db") {
		t.Fatalf("--no-bump of a missing file: exit %d: %s", code, out)
	}
}
