// Package dashboard is the page every member serves at / (kira run
// --http): members and the slots each leads, every job with its slots'
// owners and tokens, a warning for slots without a leader, paused jobs,
// recent executions with their lateness, and buttons for trigger, pause and
// resume. It is a client of the API (package api) and refreshes every
// second; it is embedded in the binary and loads nothing from elsewhere.
package dashboard

import (
	_ "embed"
	"net/http"
)

//go:embed index.html
var page []byte

// Handler serves the page.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		w.Write(page)
	})
}
