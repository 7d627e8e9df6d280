package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/kiratest"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/operator"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// chromium is the browser the dashboard test drives: Debian's, which
// .ci/run installs.
func chromium(t *testing.T) string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium: .ci/run installs Debian's chromium")
	}
	t.Skip("no Chromium (apt-get install chromium)")
	return ""
}

// The dashboard, in a real headless browser against three kira run
// members: it shows the cluster's members, slots (split 10/10/10, each
// member's share on the job's row) and recent executions, a kill -9 of a
// member shows its slots move to the others (15/15), slots without a
// leader raise the warning, and a click on pause is obeyed. The screenshot is kept in the test's temp dir (and where
// KIRA_DASHBOARD_SCREENSHOT says: docs/dashboard.png comes from it).
func TestDashboardInABrowser(t *testing.T) {
	browser := chromium(t)
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	catalog, tokenFile := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "token")
	os.WriteFile(catalog, []byte("cluster: dash\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 30, command: [\"true\"]}\n"), 0o600)
	os.WriteFile(tokenFile, []byte("dash-token\n"), 0o600)
	addr := freePort(t)
	members := map[string]*proc{}
	for _, n := range []string{"a", "b", "c"} {
		args := []string{"run", "--catalog", catalog, "--etcd", ep, "--name", n}
		if n == "a" {
			args = append(args, "--http", addr, "--http-token-file", tokenFile)
		}
		members[n] = start(t, args...)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium")), chromedp.WindowSize(1200, 1400))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	page := func(js string) string {
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	const table = `(id) => [...document.querySelectorAll("#" + id + " tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent).join("|")).join("\n")`
	rowsOf := func(id string) []string {
		out := page(fmt.Sprintf("(%s)(%q)", table, id))
		if out == "" {
			return nil
		}
		return strings.Split(out, "\n")
	}
	// owners is the owner column of the page's slots table, by name.
	owners := func() map[string]int {
		n := map[string]int{}
		for _, r := range rowsOf("slots") {
			n[strings.Split(r, "|")[2]]++
		}
		return n
	}
	// shares is the jobs table's column of slots led by each member.
	shares := func() string {
		if r := rowsOf("jobs"); len(r) == 1 {
			return strings.Split(r[0], "|")[3]
		}
		return ""
	}
	kiratest.WaitUntil(t, "the page to show three members splitting every slot evenly", 30*time.Second, func() bool {
		o := owners()
		return len(rowsOf("members")) == 3 && o["a"] == 10 && o["b"] == 10 && o["c"] == 10 && len(rowsOf("executions")) >= 6 &&
			shares() == "a 10, b 10, c 10"
	})
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "dashboard.png"), shot, 0o600)
	if out := os.Getenv("KIRA_DASHBOARD_SCREENSHOT"); out != "" {
		os.WriteFile(out, shot, 0o644)
	}

	members["b"].Cmd.Process.Kill()
	kiratest.WaitUntil(t, "the page to show b's slots split between a and c", 30*time.Second, func() bool {
		o := owners()
		return len(rowsOf("members")) == 2 && o["a"] == 15 && o["c"] == 15 && shares() == "a 15, c 15"
	})

	// A member record with no campaigning member behind it (what a member
	// whose scheduler hung would leave): the ring gives it slots that nobody
	// then leads, and the page must say so, until its lease is revoked.
	cli := etcd.Client(t)
	lease, err := cli.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	ghost, _ := json.Marshal(membership.Record{ID: "ghost-1", Name: "ghost", Host: "ghost", StartedAt: time.Now().UTC()})
	if _, err := cli.Put(context.Background(), keyspace.Member("dash", "ghost-1"), string(ghost), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	leaderless := func() string {
		return page(`(() => { const w = document.getElementById("leaderless"); return w.hidden ? "" : w.textContent; })()`)
	}
	kiratest.WaitUntil(t, "the page to warn of the slots the hung member does not lead", 20*time.Second, func() bool {
		w := leaderless()
		return strings.Contains(w, "without a leader: tick/") && owners()["no leader"] > 0
	})
	if _, err := cli.Revoke(context.Background(), lease.ID); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the warning gone once the slots are led again", 20*time.Second, func() bool {
		return leaderless() == "" && owners()["no leader"] == 0
	})

	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#token"), "dash-token"),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`document.getElementById("token").dispatchEvent(new Event("change"))`)(ctx, t)
			return err
		}),
		chromedp.Click(chromedp.CSS(`button[data-job="tick"][data-action="pause"]`))); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the click on pause obeyed", 15*time.Second, func() bool {
		paused, err := operator.IsPaused(context.Background(), etcd.Client(t), "dash", "tick")
		return err == nil && paused && strings.Contains(strings.Join(rowsOf("jobs"), "\n"), "tick (paused)")
	})
}
