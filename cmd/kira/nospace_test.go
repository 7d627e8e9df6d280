package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// quotaForTests is the small etcd quota the NOSPACE tests fill.
const quotaForTests = 16 << 20

// fillUntilNoSpace writes megabyte values until etcd has refused them for
// want of space for two seconds, as a runaway writer sharing the etcd
// would. One refusal is not yet a full etcd: at the alarm kira etcd
// defragments, and disarms if that returned enough space.
func fillUntilNoSpace(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	junk := strings.Repeat("x", 1<<20)
	var refusedSince time.Time
	for puts, i := 0, 0; ; i++ {
		_, err := cli.Put(context.Background(), fmt.Sprintf("/junk/%04d", i), junk)
		switch {
		case err == nil:
			puts++
			refusedSince = time.Time{}
		case strings.Contains(err.Error(), "database space exceeded"):
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			}
			if time.Since(refusedSince) >= 2*time.Second {
				return
			}
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("filling etcd: %d puts, %v", puts, err)
		}
		if puts > 4*quotaForTests>>20 {
			t.Fatalf("filling etcd: %d puts of 1 MiB accepted under a quota of %d MiB", puts, quotaForTests>>20)
		}
	}
}

// noSpaceCatalog is a job that fires every second in four slots.
const noSpaceCatalog = "cluster: full\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 4, command: [\"true\"]}\n"

// expectLoudThenRecovered holds what a member does around a NOSPACE alarm:
// it says so (its log, kira_etcd_alarm, /readyz 503, the dashboard's
// health line from GET /v1/health) while recover (the
// operator, or kira etcd itself) frees space; then it fires again without a
// restart, and no execution ran twice.
func expectLoudThenRecovered(t *testing.T, cli *clientv3.Client, member *proc, addr string, recover func()) {
	t.Helper()
	countRecords := func() int {
		recs, err := ops.ReadHistory(context.Background(), cli, "full", "tick", -1, -1)
		if err != nil {
			return -1
		}
		return len(recs)
	}
	kiratest.WaitUntil(t, "the member to run the job", 30*time.Second, func() bool { return countRecords() >= 8 })
	fillUntilNoSpace(t, cli)
	kiratest.WaitUntil(t, "the member to say etcd is out of space", 20*time.Second, func() bool {
		code, body := get("http://" + addr + "/readyz")
		_, metrics := get("http://" + addr + "/metrics")
		_, health := get("http://" + addr + "/v1/health")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "NOSPACE") &&
			strings.Contains(metrics, `kira_etcd_alarm{alarm="NOSPACE"} 1`) && strings.Contains(member.Output(), "raised the NOSPACE alarm") &&
			strings.Contains(health, `"etcd_alarm"`) && strings.Contains(health, "etcd raised the NOSPACE alarm")
	})
	if code, _ := get("http://" + addr + "/livez"); code != 200 {
		t.Fatalf("/livez %d during NOSPACE: a liveness probe would restart the member", code)
	}
	kiratest.WaitUntil(t, "the refused fires counted in one line", 20*time.Second, func() bool {
		return strings.Contains(member.Output(), "fires not started: etcd is out of space")
	})
	if n := strings.Count(member.Output(), "database space exceeded"); n > 3 {
		t.Fatalf("%d log lines of refused starts: want them counted, not one line a fire", n)
	}
	recover()
	kiratest.WaitUntil(t, "the member ready again, the alarm gone", 60*time.Second, func() bool {
		code, _ := get("http://" + addr + "/readyz")
		_, metrics := get("http://" + addr + "/metrics")
		_, health := get("http://" + addr + "/v1/health")
		return code == 200 && strings.Contains(metrics, `kira_etcd_alarm{alarm="NOSPACE"} 0`) && !strings.Contains(health, "etcd_alarm")
	})
	after := time.Now()
	kiratest.WaitUntil(t, "executions after the recovery", 30*time.Second, func() bool {
		recs, _ := ops.ReadHistory(context.Background(), cli, "full", "tick", -1, -1)
		for _, r := range recs {
			if r.Outcome == "succeeded" && r.StartedAt.After(after) {
				return true
			}
		}
		return false
	})
	recs, err := ops.ReadHistory(context.Background(), cli, "full", "tick", -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]history.Record{}
	for _, r := range recs {
		if prev, twice := ran[r.ExecutionID]; twice && r.Outcome != "skipped" && prev.Outcome != "skipped" {
			t.Fatalf("execution %s ran twice: %+v and %+v", r.ExecutionID, prev, r)
		}
		ran[r.ExecutionID] = r
	}
}

// kira etcd recovers from NOSPACE by itself: once its periodic compaction
// has freed the space a runaway writer took (and deleted), it defragments
// and disarms, and the member fires again.
func TestNoSpaceRecoversByItself(t *testing.T) {
	dir := t.TempDir()
	client, peer := freeURLs(t)
	etcd := start(t, "etcd", "--name", "full", "--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", client,
		"--listen-peer-urls", peer, "--quota-backend-bytes", fmt.Sprint(quotaForTests), "--auto-compaction-retention", "2s")
	cli := etcdtest.NewClient(t, client)
	catalog := filepath.Join(dir, "c.yaml")
	os.WriteFile(catalog, []byte(noSpaceCatalog), 0o600)
	addr := freePort(t)
	member := start(t, "run", "--catalog", catalog, "--etcd", client, "--http", addr)
	expectLoudThenRecovered(t, cli, member, addr, func() {
		if _, err := cli.Delete(context.Background(), "/junk/", clientv3.WithPrefix()); err != nil {
			t.Fatalf("deleting the junk under NOSPACE: %v", err)
		}
	})
	if !strings.Contains(etcd.Output(), "NOSPACE alarm disarmed") {
		t.Fatalf("kira etcd did not say it disarmed:\n%s", etcd.Output())
	}
}

// With an etcd Kira does not run, the operator frees the space and
// disarms, as etcd's documentation says; the member fires again at once,
// without a restart.
func TestNoSpaceResumesWhenTheOperatorDisarms(t *testing.T) {
	dir := t.TempDir()
	client, peer := freeURLs(t)
	e, err := etcdnode.Start(etcdnode.Config{Name: "external", DataDir: filepath.Join(dir, "etcd"), ListenClientURLs: client,
		ListenPeerURLs: peer, QuotaBackendBytes: quotaForTests, AutoCompactionRetention: "0", Quiet: true, Tuning: etcdnode.Fast})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli := etcdtest.NewClient(t, client)
	catalog := filepath.Join(dir, "c.yaml")
	os.WriteFile(catalog, []byte(noSpaceCatalog), 0o600)
	addr := freePort(t)
	member := start(t, "run", "--catalog", catalog, "--etcd", client, "--http", addr)
	expectLoudThenRecovered(t, cli, member, addr, func() {
		ctx := context.Background()
		resp, err := cli.Delete(ctx, "/junk/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Defragment(ctx, client); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
			t.Fatal(err)
		}
	})
}
