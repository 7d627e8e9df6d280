package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// jobPage holds a job's page in TestDashboardInABrowser, after the kill -9
// of b (a and c lead tick 6/6): reached from the timeline by the keyboard,
// broken's page shows its schedule, its next fires, its manager (the
// --catalog file) and revision, its failures in the
// grid and its history with the output and exit code; tick's shows the
// share bar a 6, c 6, a grid row per slot, and a history filtered to one
// partition; pause and resume on solo's page are obeyed with the token;
// executions link to their traces (--trace-url) there and on the timeline.
// Its screenshot is kept in dir (and where KIRA_DASHBOARD_SCREENSHOT_JOB
// says: docs/dashboard-job.png comes from it).
func jobPage(ctx context.Context, t *testing.T, page func(string) string, cli *clientv3.Client, dir string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(`.job[data-job="broken"] a.job-link`)), chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "broken's page: schedule, next fires, failed cells, history with output", 20*time.Second, func() bool {
		return page(`location.hash`) == "#job/broken" &&
			strings.HasPrefix(page(`document.querySelector('[data-fact="schedule"]')?.textContent || ""`), "every 2s") &&
			page(`String(document.querySelectorAll('[data-fact="next fires"] .next').length)`) == "5" &&
			strings.HasPrefix(page(`document.querySelector('[data-fact="managed by"]')?.textContent || ""`), "file (revision ") &&
			page(`String(document.querySelectorAll('#job-grid a.cell[data-outcome="failed"]').length >= 2)`) == "true" &&
			strings.Contains(page(`document.querySelector('#job-history tbody tr[data-outcome="failed"]')?.textContent || ""`), "exit 1") &&
			strings.Contains(page(`document.querySelector('#job-history tbody tr[data-outcome="failed"] pre.output')?.textContent || ""`), "no space left on /data")
	})
	// Each execution links to its trace, as --trace-url says, on its page and on the timeline.
	id := page(`document.querySelector('#job-history tbody tr code').textContent`)
	want := strings.NewReplacer("{job}", "broken", "{partition}", "0", "{execution_id}", id).Replace(dashboardTraceURL)
	if link := page(`document.querySelector('#job-history tbody tr a.trace').href`); link != want {
		t.Fatalf("the trace link of execution %s: %q, want %q", id, link, want)
	}
	// The timeline, drawn before the page opened, has marks of older
	// executions: each links to its own.
	marks := page(`[...document.querySelectorAll('#timeline svg[data-job="broken"] rect.mark')].map((m) => m.dataset.trace).join(" ")`)
	prefix := strings.NewReplacer("{job}", "broken", "{partition}", "0", "{execution_id}", "").Replace(dashboardTraceURL)
	for _, m := range strings.Fields(marks) {
		if !strings.HasPrefix(m, prefix) || len(m) != len(prefix)+len(id) {
			t.Fatalf("a mark of broken on the timeline links to %q, want %s<its execution id>", m, prefix)
		}
	}
	if marks == "" {
		t.Fatal("no mark of broken on the timeline links to its trace")
	}
	page(`location.hash = "job/tick"`)
	const shares = `[...document.querySelectorAll('#job-shares span[data-member]')].map((s) => s.dataset.name + " " + s.dataset.slots).join(", ")`
	kiratest.WaitUntil(t, "tick's page: the share bar a 6, c 6 and a grid row of executions per slot", 20*time.Second, func() bool {
		return page(shares) == "a 6, c 6" && page(`String(document.querySelectorAll('#job-grid tr').length)`) == "12" &&
			page(`String([...document.querySelectorAll('#job-grid tr')].every((tr) => tr.querySelectorAll('a.cell[data-outcome="succeeded"]').length >= 2))`) == "true"
	})
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "dashboard-job.png"), shot, 0o600)
	if out := os.Getenv("KIRA_DASHBOARD_SCREENSHOT_JOB"); out != "" {
		os.WriteFile(out, shot, 0o644)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#job-partition"), "3")); err != nil {
		t.Fatal(err)
	}
	page(`String(document.getElementById("job-partition").dispatchEvent(new Event("change")))`)
	kiratest.WaitUntil(t, "tick's history filtered to partition 3", 20*time.Second, func() bool {
		return page(`(() => { const rs = [...document.querySelectorAll('#job-history tbody tr')]; return String(rs.length > 1 && rs.every((r) => r.dataset.partition === "3")); })()`) == "true"
	})

	// The buttons act with the token, on solo's page.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#token"), "dash-token")); err != nil {
		t.Fatal(err)
	}
	page(`String(document.getElementById("token").dispatchEvent(new Event("change")))`)
	page(`location.hash = "job/solo"`)
	click := func(action string) {
		t.Helper()
		kiratest.WaitUntil(t, "solo's "+action+" button enabled", 20*time.Second, func() bool {
			return page(`location.hash`) == "#job/solo" && page(`String(document.querySelector('#job-actions button[data-action="`+action+`"]')?.disabled === false)`) == "true"
		})
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#job-actions button[data-action="`+action+`"]`))); err != nil {
			t.Fatal(err)
		}
	}
	paused := func() bool {
		p, err := ops.IsPaused(context.Background(), cli, "dash", "solo")
		return err == nil && p
	}
	click("pause")
	kiratest.WaitUntil(t, "solo paused from its page", 15*time.Second, func() bool {
		return paused() && page(`document.getElementById("job-title").textContent`) == "solo (paused)"
	})
	click("resume")
	kiratest.WaitUntil(t, "solo resumed from its page", 15*time.Second, func() bool {
		return !paused() && page(`document.getElementById("job-title").textContent`) == "solo"
	})
}

// membersView holds the members view in TestDashboardInABrowser after the
// kill -9 of b: a and c, each with tick 6/12, its lease countdown of the
// catalog's 2 s lease, a last renewal, and its catalog revision.
func membersView(ctx context.Context, t *testing.T, page func(string) string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#tab-members`))); err != nil {
		t.Fatal(err)
	}
	const rows = `[...document.querySelectorAll('#member-list tbody tr')].map((tr) => tr.dataset.name + "|" + tr.querySelector(".per-job").textContent + "|" + tr.querySelector(".lease").textContent + "|" + tr.cells[4].textContent).sort().join("\n")`
	kiratest.WaitUntil(t, "the members view: a and c leading tick 6/12 each, with their leases", 20*time.Second, func() bool {
		rs := strings.Split(page(rows), "\n")
		if len(rs) != 2 || !strings.HasPrefix(rs[0], "a|") || !strings.HasPrefix(rs[1], "c|") {
			return false
		}
		for _, r := range rs {
			f := strings.Split(r, "|")
			if !strings.Contains(f[1], "tick 6/12") || !strings.HasSuffix(f[2], " s of 2 s") || f[3] == "-" {
				return false
			}
		}
		return page(`location.hash`) == "#members"
	})
}

// --trace-url must be an http(s) address with {trace_id} or
// {execution_id}.
func TestTraceURLIsChecked(t *testing.T) {
	for _, ok := range []string{"", dashboardTraceURL, "https://jaeger.example/search?service=kira&tags=%7B%22kira.execution_id%22%3A%22{execution_id}%22%7D",
		"https://jaeger.example/trace/{trace_id}", "http://127.0.0.1:16686/trace/{trace_id}?job={job}&p={partition}"} {
		if err := checkTraceURL(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, says := range map[string]string{
		"https://traces.example/trace/":   "needs {trace_id} or {execution_id}",
		"traces.example/{execution_id}":   "http or https",
		"traces.example/trace/{trace_id}": "http or https",
	} {
		if err := checkTraceURL(bad); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, says)
		}
	}
}
