package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/ops"
)

// kira next lists exactly the fires the scheduler makes, on the days a
// daylight-saving change moves them: a member whose clock is set just before
// the change (--clock-offset) fires, over the change, what kira next said
// it would, and the rules hold (a fixed-time job in the skipped hour runs
// once right after the jump and once only in the repeated hour; a wildcard
// job follows the wall clock).
func TestNextMatchesTheSchedulersFires(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	for _, tc := range []struct {
		name, schedule, from string
		must                 string // a fire the rule implies, in UTC
		never                string // a time kira next must not list, if any
	}{
		// 02:30 does not exist on 2027-03-14: the job runs at 03:00 EDT.
		{"spring-forward-fixed-time", "*/5 30 2 * * *", "2027-03-14T01:59:50-05:00", "2027-03-14T07:00:00Z", ""},
		// 01:59:58 EST, then 03:00:00 EDT two seconds later.
		{"spring-forward-wildcard", "*/2 * 1,3 * * *", "2027-03-14T01:59:50-05:00", "2027-03-14T07:00:00Z", ""},
		// 01:59:58 EDT, then 01:00:00 EST: the repeated hour runs again.
		{"fall-back-wildcard", "*/2 * 1 * * *", "2027-11-07T01:59:50-04:00", "2027-11-07T06:00:00Z", ""},
		// 01:59:xx EDT, and not again at 01:59 EST.
		{"fall-back-fixed-time", "*/2 59 1 * * *", "2027-11-07T01:59:44-04:00", "2027-11-07T05:59:58Z", "2027-11-07T06:59:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			from, _ := time.Parse(time.RFC3339, tc.from)
			must, _ := time.Parse(time.RFC3339, tc.must)
			cluster := fmt.Sprintf("dst-%d", len(tc.name)+len(tc.schedule))
			catalog := filepath.Join(t.TempDir(), "c.yaml")
			os.WriteFile(catalog, []byte(fmt.Sprintf("cluster: %s\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: tick, schedule: %q, timezone: America/New_York, command: [\"true\"]}\n",
				cluster, tc.schedule)), 0o600)
			offset := time.Until(from)
			member := start(t, "run", "--catalog", catalog, "--etcd", ep, "--clock-offset", offset.String())
			end := from.Add(17 * time.Second) // by the member's clock
			time.Sleep(time.Until(end.Add(-offset)))
			member.Stop(t, syscall.SIGTERM, 10*time.Second)
			settled := end.Add(-time.Second) // fires from here on may or may not have been recorded

			recs, err := ops.ReadHistory(context.Background(), etcd.Client(t), cluster, "tick", -1, -1)
			if err != nil {
				t.Fatal(err)
			}
			var fired []time.Time
			for _, r := range recs {
				if r.Cause == history.CauseSchedule && r.ScheduledTime.Before(settled) {
					fired = append(fired, r.ScheduledTime.UTC())
				}
			}
			slices.SortFunc(fired, time.Time.Compare)
			t.Logf("fired %v", fired)
			if !slices.ContainsFunc(fired, must.Equal) {
				t.Fatalf("fired %v: no fire at %s", fired, must)
			}
			out, code := runKira(t, "next", "tick", "--etcd", ep, "--cluster", cluster, "-o", "json", "-n", "20",
				"--from", fired[0].Add(-time.Millisecond).Format(time.RFC3339Nano))
			var listed []nextFire
			if code != 0 || json.Unmarshal([]byte(out), &listed) != nil {
				t.Fatalf("kira next: exit %d\n%s", code, out)
			}
			var want []time.Time
			for _, f := range listed {
				if f.UTC.Before(settled) {
					want = append(want, f.UTC)
				}
				if tc.never != "" && f.UTC.Format(time.RFC3339) == tc.never {
					t.Errorf("kira next lists %s", tc.never)
				}
			}
			if !slices.EqualFunc(fired, want, time.Time.Equal) {
				t.Fatalf("the member fired\n%v\nkira next listed\n%v", fired, want)
			}
		})
	}
}
