package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The page is served at / only, as HTML that loads nothing from elsewhere
// (TestDashboardInABrowser in cmd/kira drives it in a browser).
func TestServesThePage(t *testing.T) {
	srv := httptest.NewServer(Handler(Config{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "/v1/status") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, external := range []string{"http://", "https://", "//cdn"} {
		if strings.Contains(string(body), external) {
			t.Errorf("the page refers to %q: it must load nothing from elsewhere", external)
		}
	}
	if resp, err := http.Get(srv.URL + "/other"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("GET /other: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// A trace URL is carried in the page's meta element, escaped.
func TestCarriesTheTraceURL(t *testing.T) {
	srv := httptest.NewServer(Handler(Config{TraceURL: `https://t.example/s?a={execution_id}&b="x"`}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `<meta name="kira-trace-url" content="https://t.example/s?a={execution_id}&amp;b=&#34;x&#34;">`; !strings.Contains(string(body), want) {
		t.Fatalf("the page has no %s", want)
	}
}

// The page, and the dashboard's 404, may be framed by no site: its
// Content-Security-Policy keeps loading nothing from elsewhere and adds
// frame-ancestors 'none'; X-Frame-Options says DENY for older browsers.
func TestPageRefusesFraming(t *testing.T) {
	for _, path := range []string{"/", "/other"} {
		rec := httptest.NewRecorder()
		Handler(Config{}).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		csp := rec.Header().Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q has no %s", path, csp, want)
			}
		}
		if got := rec.Header().Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q, want DENY", path, got)
		}
	}
}
