package api

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/incarnation"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
)

const timelineCatalog = `cluster: tl
membership: {lease_ttl: 2s}
jobs:
  - {name: tick, schedule: "@every 1s", partitions: 2, command: ["true"]}
  - {name: broken, schedule: "@every 1s", command: ["false"]}
  - {name: wide, schedule: "@every 1s", partitions: 20, command: ["true"]}
`

// startMember starts an in-process member (what kira run runs) on a client
// of its own; crash drops its client without revoking its lease, as a kill
// -9 would, and waits for its goroutines to end.
func startMember(t *testing.T, endpoints []string, name string) (inc *incarnation.Incarnation, crash func()) {
	t.Helper()
	cat, err := config.Parse("tl.yaml", []byte(timelineCatalog))
	if err != nil {
		t.Fatal(err)
	}
	cfg := etcdclient.Config{Endpoints: endpoints}
	cli, err := etcdclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inc, err = incarnation.Start(context.Background(), cli, incarnation.Config{Etcd: cfg, Catalog: cat, Name: name, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	crashed := false
	crash = func() {
		if crashed {
			return
		}
		crashed = true
		cli.Close()
		inc.Stop()
		kiratest.Receive(t, inc.Done(), 30*time.Second, "the crashed member's scheduler to stop")
	}
	t.Cleanup(crash)
	return inc, crash
}

// GET /v1/timeline against two real members: a small job's slots in
// detail with their executions (a failing command's marked failed with its
// exit code) and holders; a job of more than DetailPartitions partitions
// summed per time bucket unless asked for, then paged; after a member
// crashes, its slot's holders end with the survivor under a newer token.
func TestTimeline(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	_, crashA := startMember(t, etcd.Endpoints(), "a")
	startMember(t, etcd.Endpoints(), "b")
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "tl"}))
	defer srv.Close()
	c := srv.Client()
	get := func(query string) *ops.Timeline {
		var tl ops.Timeline
		if code := call(t, c, "GET", srv.URL+"/v1/timeline"+query, "", "", &tl); code != 200 {
			t.Fatalf("GET /v1/timeline%s: %d", query, code)
		}
		return &tl
	}
	job := func(tl *ops.Timeline, name string) ops.JobTimeline {
		for _, j := range tl.Jobs {
			if j.Job == name {
				return j
			}
		}
		t.Fatalf("no job %s in the timeline", name)
		return ops.JobTimeline{}
	}

	kiratest.WaitUntil(t, "executions of every job, a failure among them, in the timeline", 30*time.Second, func() bool {
		tl := get("?since=5m")
		tick, broken, wide := job(tl, "tick"), job(tl, "broken"), job(tl, "wide")
		if len(tl.Members) != 2 || !tick.Detail || len(tick.Slots) != 2 || wide.Detail || len(wide.Slots) != 0 || len(wide.Buckets) == 0 {
			return false
		}
		for _, s := range tick.Slots {
			if len(s.Executions) < 2 || len(s.Holders) == 0 || s.Holders[len(s.Holders)-1].Member != s.Owner {
				return false
			}
		}
		b := broken.Slots[0].Executions
		return len(b) > 0 && b[0].Outcome == "failed" && b[0].ExitCode != nil && *b[0].ExitCode == 1 && b[0].Started != nil &&
			wide.Buckets[len(wide.Buckets)-1].Outcomes["succeeded"] > 0
	})

	wide := get("?job=wide&offset=5&limit=5")
	if wide.Rows != 20 || len(wide.Jobs) != 1 || !wide.Jobs[0].Detail || len(wide.Jobs[0].Slots) != 5 || wide.Jobs[0].Slots[0].Partition != 5 {
		t.Fatalf("one job, paged: rows %d, %+v", wide.Rows, wide.Jobs)
	}
	if paged := get("?offset=1&limit=1"); paged.Rows != 3 || len(paged.Jobs) != 1 || paged.Jobs[0].Job != "broken" {
		t.Fatalf("jobs paged: rows %d, %+v", paged.Rows, paged.Jobs)
	}
	var problems []ops.Problem
	if code := call(t, c, "GET", srv.URL+"/v1/health", "", "", &problems); code != 200 || len(problems) != 0 {
		t.Fatalf("health of a healthy cluster: %d %+v", code, problems)
	}

	// The slot of tick that a leads once the split has settled (one each),
	// and a's band on it: after a's crash, b takes it under a newer token.
	var aID string
	slot := -1
	var oldToken int64
	kiratest.WaitUntil(t, "tick split one slot each, a's band on its slot", 30*time.Second, func() bool {
		st, err := ops.ReadStatus(context.Background(), cli, "tl")
		if err != nil {
			return false
		}
		for _, m := range st.Members {
			if m.Name == "a" {
				aID = m.ID
			}
		}
		slot = -1
		for _, s := range st.Slots {
			if s.Job == "tick" && s.Owner == aID {
				if slot >= 0 {
					return false // a leads both
				}
				slot, oldToken = s.Partition, s.Token
			}
		}
		if slot < 0 {
			return false
		}
		hs := job(get("?since=5m"), "tick").Slots[slot].Holders
		return len(hs) > 0 && hs[len(hs)-1].Member == aID && hs[len(hs)-1].Token == oldToken
	})
	crashA()
	kiratest.WaitUntil(t, "a's slot held by b under a newer token, after a, in the timeline", 30*time.Second, func() bool {
		hs := job(get("?since=5m"), "tick").Slots[slot].Holders
		n := len(hs)
		return n >= 2 && hs[n-2].Member == aID && hs[n-2].Token == oldToken && hs[n-1].Member != aID && hs[n-1].Token > oldToken &&
			!hs[n-1].From.Before(hs[n-2].To)
	})

	for _, tc := range []struct {
		query string
		want  int
	}{
		{"?since=1s", 400}, {"?since=x", 400}, {"?since=48h", 400}, {"?since=24h&bucket=1s", 400},
		{"?limit=0", 400}, {"?offset=-1", 400}, {"?job=nope", 404},
	} {
		var e Error
		if code := call(t, c, "GET", srv.URL+"/v1/timeline"+tc.query, "", "", &e); code != tc.want || e.Error == "" {
			t.Errorf("GET /v1/timeline%s: %d %+v; want %d and an error", tc.query, code, e, tc.want)
		}
	}
}

// An answer over 1 KB goes gzipped to a client that accepts gzip, and
// plain to one that does not.
func TestTimelineIsGzipped(t *testing.T) {
	cli := storedYAML(t, "cluster: c\njobs:\n  - {name: wide, schedule: \"@every 1s\", partitions: 60, command: [\"true\"]}\n")
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c"}))
	defer srv.Close()
	raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer raw.CloseIdleConnections()
	for _, accept := range []string{"gzip", ""} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/timeline?job=wide", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := io.Reader(resp.Body)
		if accept != "" {
			if resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("Accept-Encoding: gzip answered with Content-Encoding %q", resp.Header.Get("Content-Encoding"))
			}
			if body, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		} else if resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("no Accept-Encoding answered with Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		var tl ops.Timeline
		err = json.NewDecoder(body).Decode(&tl)
		resp.Body.Close()
		if err != nil || len(tl.Jobs) != 1 || len(tl.Jobs[0].Slots) != 60 {
			t.Fatalf("Accept-Encoding %q: %v %+v", accept, err, tl.Jobs)
		}
	}
}
