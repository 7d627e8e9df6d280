package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/notify"
)

// Failure webhooks, end to end with real receivers: a failing job with one
// retry notifies once per execution, for its final attempt, with the
// execution id as Idempotency-Key and a link the API answers; a receiver
// that takes seconds does not delay the next fires; a receiver that refuses
// is counted in kira_notifications_total; a job without rules of its own
// takes the catalog's.
func TestFailureWebhooks(t *testing.T) {
	var mu sync.Mutex
	type call struct {
		key string
		msg notify.Message
	}
	var calls []call
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m notify.Message
		json.NewDecoder(r.Body).Decode(&m)
		switch r.URL.Path {
		case "/hook":
			mu.Lock()
			calls = append(calls, call{r.Header.Get("Idempotency-Key"), m})
			mu.Unlock()
		case "/slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		case "/refuse":
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer hooks.Close()
	etcd := etcdtest.Start(t)
	catalog := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(catalog, []byte(fmt.Sprintf(`cluster: hooks
membership: {lease_ttl: 2s}
notify: [{on: [succeeded], webhook: "%[1]s/refuse"}]
jobs:
  - name: flaky
    schedule: "@every 1s"
    command: [sh, -c, "echo no luck; exit 3"]
    retries: {max: 1, backoff: 100ms}
    notify:
      - {on: [failed, timed_out], webhook: "%[1]s/hook"}
      - {on: [failed], webhook: "%[1]s/slow"}
  - {name: fine, schedule: "@every 1s", command: ["true"]}
`, hooks.URL)), 0o600)
	addr := freePort(t)
	start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--http", addr)

	var got []call
	kiratest.WaitUntil(t, "five notifications of flaky", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		got = append(got[:0], calls...)
		return len(got) >= 5
	})
	seen := map[string]bool{}
	for _, c := range got {
		m := c.msg
		if seen[m.ExecutionID] {
			t.Fatalf("execution %s notified twice", m.ExecutionID)
		}
		seen[m.ExecutionID] = true
		if c.key != m.ExecutionID || m.Job != "flaky" || m.Outcome != "failed" || m.Attempt != 2 || m.ExitCode == nil || *m.ExitCode != 3 ||
			m.OutputTail != "no luck\n" || m.Member == "" || m.Token == 0 || m.Cluster != "hooks" || !strings.HasPrefix(m.Link, "http://") {
			t.Fatalf("notification %+v (Idempotency-Key %q)", m, c.key)
		}
	}
	resp, err := http.Get(got[0].msg.Link)
	if err != nil {
		t.Fatal(err)
	}
	var linked history.Record
	json.NewDecoder(resp.Body).Decode(&linked)
	resp.Body.Close()
	if resp.StatusCode != 200 || linked.ExecutionID != got[0].msg.ExecutionID {
		t.Fatalf("the link %s: %d %+v", got[0].msg.Link, resp.StatusCode, linked)
	}

	// Each fire started on time while /slow held every notification for 3 s:
	// a notifier in the fire's way would make it seconds late, or skip it.
	out, code := runKira(t, "history", "flaky", "--etcd", etcd.Endpoints()[0], "--cluster", "hooks", "-n", "10", "-o", "json")
	var recs []history.Record
	if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs) < 6 {
		t.Fatalf("history: exit %d\n%s", code, out)
	}
	for _, r := range recs {
		if r.Attempt == 1 && r.StartedAt.Sub(r.ScheduledTime) > time.Second {
			t.Errorf("fire %s started %s late", r.ScheduledTime, r.StartedAt.Sub(r.ScheduledTime))
		}
	}
	kiratest.WaitUntil(t, "the refused and the delivered notifications counted", 20*time.Second, func() bool {
		_, metrics := get("http://" + addr + "/metrics")
		return strings.Contains(metrics, `kira_notifications_total{kira_job="fine",result="failed"}`) &&
			strings.Contains(metrics, `kira_notifications_total{kira_job="flaky",result="delivered"}`)
	})
}
