package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
)

// TestSkipsAreCountedInTheLog: a job whose runs outlast its period skips
// fire after fire, in two slots. The member says so at once, then counts
// (one line per job and reason every countedLogEvery, not a line a fire),
// while the history still records each skip.
func TestSkipsAreCountedInTheLog(t *testing.T) {
	etcd := etcdtest.Start(t)
	catalog := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(catalog, []byte("cluster: skips\nmembership: {lease_ttl: 2s}\njobs:\n"+
		"  - {name: slow, schedule: \"@every 1s\", partitions: 2, overlap: skip, command: [\"sleep\", \"30\"]}\n"), 0o600)
	member := start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--grace", "100ms")
	skipped := 0
	if !kiratest.Poll(30*time.Second, func() bool {
		recs, err := ops.ReadHistory(context.Background(), etcd.Client(t), "skips", "slow", -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		skipped = 0
		for _, r := range recs {
			if r.Outcome == history.OutcomeSkipped {
				skipped += r.Fires()
			}
		}
		return skipped >= 8
	}) {
		t.Fatalf("%d skips recorded after 30 s; want 8:\n%s", skipped, member.Output())
	}
	member.Stop(t, syscall.SIGTERM, 10*time.Second)
	lines := strings.Count(member.Output(), `msg="fires skipped"`)
	if lines != 1 || !strings.Contains(member.Output(), `reason="previous run still running" fires=1`) {
		t.Fatalf("%d skips recorded, %d log lines about them; want the first logged at once and the rest counted:\n%s", skipped, lines, member.Output())
	}
}
