package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/ops"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// chromium is the browser the dashboard test drives: Debian's, which
// .ci/run installs.
func chromium(t testing.TB) string {
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

// dashboardCatalog is three members' catalog in TestDashboardInABrowser: a
// job of 12 partitions, single jobs (one that always fails), and a job of
// more partitions than the timeline shows one by one without being asked.
const dashboardCatalog = `cluster: dash
membership: {lease_ttl: 2s}
jobs:
  - {name: tick, schedule: "@every 1s", partitions: 12, command: ["true"]}
  - {name: solo, schedule: "@every 2s", command: ["true"]}
  - {name: broken, schedule: "@every 2s", command: ["sh", "-c", "echo no space left on /data; exit 1"]}
  - {name: report, schedule: "@every 5s", partitions: 24, command: ["true"]}
`

// dashboardTraceURL is TestDashboardInABrowser's --trace-url.
const dashboardTraceURL = "http://127.0.0.1:9/trace?job={job}&p={partition}&id={execution_id}"

// The dashboard, in a real headless browser against three kira run
// members. The timeline shows every slot of tick with its holder (split
// 4/4/4) and the failed marks of broken; after a kill -9 of a member, each
// slot it held shows its band followed by the new holder's with a newer
// token; it turns dark with the browser's preference; the keyboard reaches
// a failed mark and shows its details; a job of 24 partitions, summed per
// time bucket, lists its slots once opened; a job's page and the members
// view show what jobPage and membersView say; a member record with nobody
// campaigning behind it raises the health banner's leaderless line, which
// clears when its lease goes; after a SIGTERM of a second member its slots
// show the handover under newer tokens; a click on pause in the tables is
// obeyed and the timeline says the job is paused. The screenshot of the
// timeline (after the kill -9) is kept in the test's temp dir (and where
// KIRA_DASHBOARD_SCREENSHOT says: docs/dashboard.png comes from it; the
// dark one where KIRA_DASHBOARD_SCREENSHOT_DARK says).
func TestDashboardInABrowser(t *testing.T) {
	browser := chromium(t)
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	catalog, tokenFile := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "token")
	os.WriteFile(catalog, []byte(dashboardCatalog), 0o600)
	os.WriteFile(tokenFile, []byte("dash-token\n"), 0o600)
	addr := freePort(t)
	members := map[string]*proc{}
	for _, n := range []string{"a", "b", "c"} {
		args := []string{"run", "--catalog", catalog, "--etcd", ep, "--name", n}
		if n == "a" {
			args = append(args, "--http", addr, "--http-token-file", tokenFile, "--trace-url", dashboardTraceURL)
		}
		members[n] = start(t, args...)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium")), chromedp.WindowSize(1200, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/#since=1m")); err != nil {
		t.Fatal(err)
	}
	page := func(js string) string {
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// owners counts the timeline's tick rows by their holder's name.
	owners := func() map[string]int {
		n := map[string]int{}
		for _, o := range strings.Fields(page(`[...document.querySelectorAll('#timeline svg[data-job="tick"]')].map((s) => s.dataset.ownerName || "-").join(" ")`)) {
			n[o]++
		}
		return n
	}
	// holders is one tick row's holder bands, oldest first: "name:token".
	holders := func(partition int) []string {
		return strings.Fields(page(fmt.Sprintf(`[...document.querySelectorAll('#timeline svg[data-job="tick"][data-partition="%d"] g.holder')].map((g) => g.dataset.name + ":" + g.dataset.token).join(" ")`, partition)))
	}
	marks := func(job, outcome string) int {
		n, _ := strconv.Atoi(page(fmt.Sprintf(`String(document.querySelectorAll('#timeline svg[data-job="%s"] rect.mark[data-outcome="%s"]').length)`, job, outcome)))
		return n
	}
	kiratest.WaitUntil(t, "the timeline to show tick split 4/4/4 with marks, and broken's failures", 45*time.Second, func() bool {
		o := owners()
		return o["a"] == 4 && o["b"] == 4 && o["c"] == 4 && marks("tick", "succeeded") >= 24 && marks("broken", "failed") >= 2 &&
			page(`String(document.querySelectorAll('#timeline svg[data-job="report"][data-aggregate] rect.bucket').length > 0)`) == "true"
	})
	if p := page(`document.getElementById("health").textContent`); p != "" {
		t.Fatalf("the health banner of a healthy cluster: %q", p)
	}
	// heldBy is the tick slots the member named holds, with their tokens.
	heldBy := func(name string) map[int]int64 {
		held := map[int]int64{}
		for _, r := range strings.Fields(page(fmt.Sprintf(`[...document.querySelectorAll('#timeline svg[data-job="tick"][data-owner-name="%s"]')].map((s) => s.dataset.partition + ":" + s.dataset.token).join(" ")`, name))) {
			var p int
			var tok int64
			fmt.Sscanf(r, "%d:%d", &p, &tok)
			held[p] = tok
		}
		return held
	}
	// waitTakenOver waits for the timeline to show each slot of held (those
	// from held, with their tokens) in from's band and then in the band of
	// another member under a newer token, and for the split want.
	waitTakenOver := func(from string, held map[int]int64, want map[string]int) {
		t.Helper()
		if !kiratest.Poll(45*time.Second, func() bool {
			o := owners()
			for name, n := range want {
				if o[name] != n {
					return false
				}
			}
			for p, old := range held {
				hs := holders(p)
				n := len(hs)
				if n < 2 || hs[n-2] != fmt.Sprintf("%s:%d", from, old) {
					return false
				}
				var name string
				var tok int64
				if _, err := fmt.Sscanf(strings.Replace(hs[n-1], ":", " ", 1), "%s %d", &name, &tok); err != nil || name == from || tok <= old {
					return false
				}
			}
			return true
		}) {
			var seen []string
			for p := range held {
				seen = append(seen, fmt.Sprintf("%d: %v", p, holders(p)))
			}
			t.Fatalf("the timeline did not show each of %s's slots %v taken over under a newer token: owners %v, holders %v", from, held, owners(), seen)
		}
	}
	held := heldBy("b")
	if len(held) != 4 {
		t.Fatalf("b holds %v of tick", held)
	}
	members["b"].Cmd.Process.Kill()
	waitTakenOver("b", held, map[string]int{"a": 6, "c": 6})

	// Three fires of each new holder, for the screenshot.
	kiratest.WaitUntil(t, "three marks of each new holder's token", 20*time.Second, func() bool {
		for p := range held {
			hs := holders(p)
			tok := hs[len(hs)-1][strings.Index(hs[len(hs)-1], ":")+1:]
			n, _ := strconv.Atoi(page(fmt.Sprintf(`String(document.querySelectorAll('#timeline svg[data-job="tick"][data-partition="%d"] rect.mark[data-token="%s"]').length)`, p, tok)))
			if n < 3 {
				return false
			}
		}
		return true
	})
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "dashboard.png"), shot, 0o600)
	if out := os.Getenv("KIRA_DASHBOARD_SCREENSHOT"); out != "" {
		os.WriteFile(out, shot, 0o644)
	}

	// Dark mode follows the browser's preference.
	darkMode := func(on bool) {
		features := []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}
		if on {
			features[0].Value = "dark"
		}
		if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features})
			return err
		})); err != nil {
			t.Fatal(err)
		}
	}
	background := func() string { return page(`getComputedStyle(document.body).backgroundColor`) }
	darkMode(true)
	if bg := background(); bg != "rgb(22, 23, 26)" {
		t.Fatalf("the page's background in dark mode: %s", bg)
	}
	if dark, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(dir, "dashboard-dark.png"), dark, 0o600)
		if out := os.Getenv("KIRA_DASHBOARD_SCREENSHOT_DARK"); out != "" {
			os.WriteFile(out, dark, 0o644)
		}
	}
	darkMode(false)
	if bg := background(); bg != "rgb(255, 255, 255)" {
		t.Fatalf("the page's background in light mode: %s", bg)
	}
	// The keyboard reaches a mark and shows its details.
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(`#timeline svg[data-job="broken"]`)), chromedp.KeyEvent(kb.ArrowLeft)); err != nil {
		t.Fatal(err)
	}
	if tip := page(`(() => { const t = document.getElementById("tip"); return t.hidden ? "" : t.textContent; })()`); !strings.Contains(tip, "failed") || !strings.Contains(tip, "exit code1") || !strings.Contains(tip, "UTC") {
		t.Fatalf("the details of a focused mark of broken: %q", tip)
	}
	// A job of more partitions than are shown one by one opens on a click.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.job[data-job="report"] > button`))); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "report's 24 slots listed once opened", 20*time.Second, func() bool {
		return page(`String(document.querySelectorAll('#timeline svg[data-job="report"][data-partition]').length)`) == "24"
	})
	jobPage(ctx, t, page, etcd.Client(t), dir)
	membersView(ctx, t, page)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#tab-timeline`))); err != nil {
		t.Fatal(err)
	}

	// A member record with no campaigning member behind it (what a member
	// whose scheduler hung would leave): the split gives it slots that
	// nobody then leads, and the banner must say so, until its lease is revoked.
	cli := etcd.Client(t)
	lease, err := cli.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	ghost, _ := json.Marshal(member.Record{ID: "ghost-1", Name: "ghost", Host: "ghost", StartedAt: time.Now().UTC()})
	if _, err := cli.Put(context.Background(), keyspace.Member("dash", "ghost-1"), string(ghost), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	banner := func() string { return page(`document.getElementById("health").textContent`) }
	kiratest.WaitUntil(t, "the banner to say which slots have no leader and what to do", 20*time.Second, func() bool {
		b := banner()
		return strings.Contains(b, "without a leader (") && strings.Contains(b, "kira status")
	})
	if _, err := cli.Revoke(context.Background(), lease.ID); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the banner gone once the slots are led again", 20*time.Second, func() bool { return banner() == "" })

	// A graceful stop: c's slots handed to a, under newer tokens.
	kiratest.WaitUntil(t, "tick split 6/6 again after the ghost", 20*time.Second, func() bool { o := owners(); return o["a"] == 6 && o["c"] == 6 })
	held = heldBy("c")
	kiratest.WaitUntil(t, "c's band on each slot it holds", 20*time.Second, func() bool {
		for p, tok := range held {
			if hs := holders(p); len(hs) == 0 || hs[len(hs)-1] != fmt.Sprintf("c:%d", tok) {
				return false
			}
		}
		return true
	})
	if code := members["c"].Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM of c: exit %d", code)
	}
	waitTakenOver("c", held, map[string]int{"a": 12})

	const table = `(id) => [...document.querySelectorAll("#" + id + " tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent).join("|")).join("\n")`
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#tab-tables`)),
		chromedp.Click(chromedp.CSS(`button[data-job="tick"][data-action="pause"]`))); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the click on pause obeyed", 15*time.Second, func() bool {
		paused, err := ops.IsPaused(context.Background(), etcd.Client(t), "dash", "tick")
		return err == nil && paused && strings.Contains(page(fmt.Sprintf("(%s)(%q)", table, "jobs")), "tick (paused)")
	})
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#tab-timeline`))); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the timeline to say tick is paused", 15*time.Second, func() bool {
		return page(`(() => { const p = document.querySelector('.job[data-job="tick"] .paused'); return p ? p.textContent : ""; })()`) == "paused"
	})
}
