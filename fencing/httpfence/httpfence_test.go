package httpfence

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

type service struct {
	srv    *httptest.Server
	writes atomic.Int64
}

// newService mounts a write endpoint and a fence endpoint behind one Guard.
func newService(t *testing.T) *service {
	t.Helper()
	s := &service{}
	g := New(NewMemoryStore(), nil)
	mux := http.NewServeMux()
	mux.Handle("/write", g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.writes.Add(1) })))
	mux.Handle("/fence", g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) call(t *testing.T, path, token string) (int, Rejection) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+path, nil)
	req.Header.Set("Kira-Job", "billing")
	req.Header.Set("Kira-Partition", "3")
	if token != "" {
		req.Header.Set("Kira-Fencing-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rej Rejection
	json.NewDecoder(resp.Body).Decode(&rej)
	return resp.StatusCode, rej
}

func TestFreshResourceAcceptsFirstWrite(t *testing.T) {
	s := newService(t)
	if code, _ := s.call(t, "/write", "17"); code != http.StatusOK || s.writes.Load() != 1 {
		t.Fatalf("first write: %d", code)
	}
}

func TestPausedExLeaderIsRejected(t *testing.T) {
	s := newService(t)
	s.call(t, "/write", "17")              // old leader
	s.call(t, "/write", "42")              // new leader's first write
	code, rej := s.call(t, "/write", "17") // old leader wakes up
	if code != http.StatusConflict || rej.Error != "fenced" || rej.Highest != 42 || rej.Token != 17 || rej.Resource != "billing/3" {
		t.Fatalf("stale write: %d %+v", code, rej)
	}
	if s.writes.Load() != 2 {
		t.Fatalf("%d writes reached the handler; the stale one must not", s.writes.Load())
	}
	if code, _ := s.call(t, "/write", "42"); code != http.StatusOK {
		t.Fatalf("same leader's next write: %d", code)
	}
}

// Raising the fence on acquire closes the gap between the new leader winning
// and its first write. Without the raise the stale write gets through: the
// second half shows the gap is real.
func TestRaiseOnAcquireClosesTheGap(t *testing.T) {
	for _, raise := range []bool{true, false} {
		s := newService(t)
		s.call(t, "/write", "17") // the old leader's last write before it pauses
		if raise {
			if code, _ := s.call(t, "/fence", "42"); code != http.StatusNoContent {
				t.Fatalf("raise: %d", code)
			}
		}
		code, _ := s.call(t, "/write", "17") // the old leader, late, before the new leader's first write
		switch {
		case raise && code != http.StatusConflict:
			t.Fatalf("with the raise, the stale write got %d", code)
		case !raise && code != http.StatusOK:
			t.Fatalf("without the raise the gap should be open (the stale write accepted), got %d", code)
		}
	}
}

func TestBadRequests(t *testing.T) {
	s := newService(t)
	for _, tok := range []string{"", "abc", "0", "-5"} {
		if code, _ := s.call(t, "/write", tok); code != http.StatusBadRequest {
			t.Errorf("token %q: %d; want 400", tok, code)
		}
	}
}
