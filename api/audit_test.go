package api

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"
)

// syncBuffer is a log destination the test reads while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Every write is logged once answered: allowed ones at INFO with the
// caller and status, refused ones (no or wrong credentials, outside the
// scope, another site) at WARN with why; reads are not. No secret, right
// or wrong, is ever in the log.
func TestWritesAreLogged(t *testing.T) {
	var log syncBuffer
	_, srv := scopedServer(t, Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	c := srv.Client()
	call(t, c, "POST", srv.URL+"/v1/jobs/customer-a/pause", secretA, "", nil)
	call(t, c, "POST", srv.URL+"/v1/jobs/billing-run/pause", secretA, "", nil)
	call(t, c, "POST", srv.URL+"/v1/jobs/billing-run/pause", "wrong-0123456789abcdef", "", nil)
	call(t, c, "POST", srv.URL+"/v1/jobs/billing-run/trigger", legacyToken, "", nil)
	call(t, c, "GET", srv.URL+"/v1/jobs/billing-run", legacyToken, "", nil)
	send(t, c, "POST", srv.URL+"/v1/jobs/billing-run/pause", map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer " + legacyToken})
	want := []string{
		`level=INFO msg="api write" method=POST path=/v1/jobs/customer-a/pause status=200 caller="token \"customers\""`,
		`level=WARN msg="api write refused" method=POST path=/v1/jobs/billing-run/pause status=403 caller="token \"customers\"" why="token \"customers\" may not pause job billing-run: the name billing-run matches none`,
		`level=WARN msg="api write refused" method=POST path=/v1/jobs/billing-run/pause status=401 caller=none why="missing or wrong credentials"`,
		`level=INFO msg="api write" method=POST path=/v1/jobs/billing-run/trigger status=200 caller="token \"token\""`,
		`level=WARN msg="api write refused" method=POST path=/v1/jobs/billing-run/pause status=403 caller=none why="a browser sent it from another site"`,
	}
	kiratest.WaitUntil(t, "a log line for each write", 5*time.Second, func() bool {
		return strings.Count(log.String(), "api write") == len(want)
	})
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("log line %d: %s\nwant it to hold %s", i, lines[i], w)
		}
	}
	for _, secret := range []string{secretA, legacyToken, "wrong-0123456789abcdef", "admin-0123456789abcdef"} {
		if strings.Contains(log.String(), secret) {
			t.Fatalf("a secret is in the log:\n%s", log.String())
		}
	}
}
