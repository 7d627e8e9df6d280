package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const fuzzCatalog = "cluster: c\njobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 2, command: [\"true\"]}\n"

// FuzzWriteRoutes sends the API, on a real etcd, requests of any method,
// path under /v1/, headers (lines "Name: value") and body, with the token
// unless the headers replace it. Whatever they are, it does not panic,
// answers no 5xx, answers each error as a JSON {"error"}, and the stored
// catalog still reads back; a catalog a PUT stored is replaced by the seed
// catalog before the next input, so each starts from the same one.
func FuzzWriteRoutes(f *testing.F) {
	f.Add("POST", "jobs/tick/pause", "", []byte(nil))
	f.Add("POST", "jobs/tick/trigger?partition=1&in=2h", "", []byte(nil))
	f.Add("POST", "jobs/tick/trigger?cascade=true&at=2020-01-01T00:00:00Z", "", []byte(nil))
	f.Add("DELETE", "jobs/tick/trigger/manual-0123", "", []byte(nil))
	f.Add("PUT", "catalog?dry_run=true", "Content-Type: application/yaml", []byte(fuzzCatalog))
	f.Add("PUT", "catalog?force=true", "", []byte("cluster: c\njobs:\n  - {name: tock, schedule: \"@hourly\", command: [\"true\"]}\n"))
	f.Add("PUT", "catalog", "", []byte("jobs: [{name: \"\"}]\n:::"))
	f.Add("POST", "jobs/tick/resume", "Origin: https://evil.example\nSec-Fetch-Site: cross-site", []byte("a=1"))
	f.Add("PATCH", "jobs/../catalog", "Authorization: Bearer wrong", []byte("{}"))
	cli := etcdtest.Start(f).Client(f)
	ctx := context.Background()
	seed, err := config.Parse("c.yaml", []byte(fuzzCatalog))
	if err != nil {
		f.Fatal(err)
	}
	rev, _, err := config.Store(ctx, cli, seed)
	if err != nil {
		f.Fatal(err)
	}
	h := Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("tok")}})
	f.Fuzz(func(t *testing.T, method, path, headers string, body []byte) {
		req, err := http.NewRequest(method, "http://kira/v1/"+path, bytes.NewReader(body))
		if err != nil {
			return // no client can send it
		}
		req.Header.Set("Authorization", "Bearer tok")
		for _, line := range strings.Split(headers, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				req.Header.Set(k, strings.TrimSpace(v))
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, req, rec)
		var changed bool
		if rev, changed = restore(t, cli, seed, rev); changed && rec.Code != http.StatusOK {
			t.Fatalf("%s %s answered %d, yet the catalog changed", method, path, rec.Code)
		}
	})
}

// checkAnswer fails t if rec is a 5xx, or an error not answered as JSON.
func checkAnswer(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body)
	}
	if rec.Code < 400 {
		return
	}
	var e Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
		t.Fatalf("%s %s: %d with no JSON error: %q", req.Method, req.URL, rec.Code, rec.Body)
	}
}

// restore reads the stored catalog back, failing t if it cannot, and, if
// it is no longer at revision rev, stores seed again; it returns the
// revision stored and whether the catalog had changed.
func restore(t *testing.T, cli clientv3.KV, seed *config.Catalog, rev int64) (int64, bool) {
	t.Helper()
	ctx := context.Background()
	_, now, err := config.LoadStored(ctx, cli, "c")
	if err != nil {
		t.Fatalf("the stored catalog does not read back: %v", err)
	}
	if now == rev {
		return rev, false
	}
	now, _, err = config.Store(ctx, cli, seed)
	if err != nil {
		t.Fatal(err)
	}
	return now, true
}
