// Package dashboard is the page every member serves at / (kira run
// --http): first a timeline of every slot's executions, coloured by
// outcome, over the holder and fencing token its records show
// (GET /v1/timeline), under a health banner saying what is wrong and what
// to do (GET /v1/health); a page per job (#job/NAME: its schedule, next
// fires, placement, share bar, a grid of each slot's latest executions and
// its history with output, with trigger, pause and resume); a members view
// (GET /v1/members); links from each execution to its trace (Config);
// and tables of the members, jobs, slots and recent
// executions. It is a client of the API (package api), embedded in the binary,
// and loads nothing from elsewhere. TestDashboardInABrowser in cmd/kira
// drives it in Chromium.
package dashboard

import (
	"bytes"
	_ "embed"
	"html"
	"net/http"
)

//go:embed index.html
var page []byte

// Config is what the page is served with.
type Config struct {
	// TraceURL, if set, is where each execution links to: its
	// {execution_id}, {job} and {partition} filled in (kira run
	// --trace-url).
	TraceURL string
}

// traceMeta is the element of the page that carries Config.TraceURL.
const traceMeta = `<meta name="kira-trace-url" content="">`

// Handler serves the page.
func Handler(cfg Config) http.Handler {
	page := page
	if cfg.TraceURL != "" {
		page = bytes.Replace(page, []byte(traceMeta), []byte(`<meta name="kira-trace-url" content="`+html.EscapeString(cfg.TraceURL)+`">`), 1)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
		w.Header().Set("X-Frame-Options", "DENY")
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
}

// contentSecurityPolicy lets the page load nothing from elsewhere and be
// framed by no page at all (frame-ancestors 'none', and X-Frame-Options
// DENY for browsers without it): another site cannot lay its buttons
// under a decoy (TestPageRefusesFraming).
const contentSecurityPolicy = "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'"
