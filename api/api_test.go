package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

func storedCatalog(t *testing.T) *clientv3.Client {
	return storedYAML(t, "cluster: c\njobs:\n  - {name: tick, schedule: \"@every 1s\", partitions: 2, command: [\"true\"]}\n")
}

// storedYAML is a client of a new etcd that stores the catalog yaml.
func storedYAML(t *testing.T, yaml string) *clientv3.Client {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	cat, err := config.Parse("c.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := config.Store(context.Background(), cli, cat); err != nil {
		t.Fatal(err)
	}
	return cli
}

// call makes one request and decodes its JSON answer into out (if set).
func call(t *testing.T, c *http.Client, method, url, token, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, body %s", method, url, ct, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, data)
		}
	}
	return resp.StatusCode
}

// Write actions need the token: none → 401, a wrong one → 401, the right
// one → 200 and the action done; reads are open by default. Malformed
// requests get 4xx with a JSON error.
func TestWriteActionsNeedTheToken(t *testing.T) {
	cli := storedCatalog(t)
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("right-token")}}))
	defer srv.Close()
	c := srv.Client()
	var e Error
	for _, token := range []string{"", "wrong-token", "right-tokenX", "right-toke"} {
		if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/pause", token, "", &e); code != http.StatusUnauthorized || e.Error == "" {
			t.Fatalf("pause with token %q: %d %+v; want 401 and an error", token, code, e)
		}
	}
	if paused, _ := ops.IsPaused(context.Background(), cli, "c", "tick"); paused {
		t.Fatal("an unauthenticated pause took effect")
	}
	var st JobState
	if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/pause", "right-token", "", &st); code != 200 || !st.Paused {
		t.Fatalf("pause: %d %+v", code, st)
	}
	if paused, _ := ops.IsPaused(context.Background(), cli, "c", "tick"); !paused {
		t.Fatal("the pause did not take effect")
	}
	if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/resume", "right-token", "", &st); code != 200 || st.Paused {
		t.Fatalf("resume: %d %+v", code, st)
	}
	var tr Triggered
	if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/trigger?partition=1", "right-token", "", &tr); code != 200 || len(tr.ExecutionIDs) != 1 || tr.Partitions[0] != 1 {
		t.Fatalf("trigger: %d %+v", code, tr)
	}
	if resp, _ := cli.Get(context.Background(), keyspace.Control("c")+"tick/trigger/1/", clientv3.WithPrefix(), clientv3.WithCountOnly()); resp.Count != 1 {
		t.Fatalf("%d trigger requests stored, want 1", resp.Count)
	}
	tr = Triggered{}
	if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/trigger?cascade=true", "right-token", "", &tr); code != 200 || len(tr.ExecutionIDs) != 2 || !jobs.Cascades(tr.ExecutionIDs[1]) {
		t.Fatalf("trigger with cascade: %d %+v; want both partitions, cascading ids", code, tr)
	}
	var status ops.Status
	if code := call(t, c, "GET", srv.URL+"/v1/status", "", "", &status); code != 200 || len(status.Slots) != 2 {
		t.Fatalf("status without a token: %d %+v", code, status)
	}
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/v1/jobs/tick/trigger?partition=2", "", 400},
		{"POST", "/v1/jobs/tick/trigger?partition=x", "", 400},
		{"POST", "/v1/jobs/tick/trigger?partition=1&cascade=true", "", 400},
		{"POST", "/v1/jobs/tick/trigger?cascade=yes", "", 400},
		{"GET", "/v1/jobs/tick/executions?limit=-1", "", 400},
		{"POST", "/v1/jobs/nope/pause", "", 404},
		{"GET", "/v1/nothing", "", 404},
		{"POST", "/v1/jobs/tick/pause", strings.Repeat("x", MaxBodyBytes+1), 413},
	} {
		e = Error{}
		if code := call(t, c, tc.method, srv.URL+tc.path, "right-token", tc.body, &e); code != tc.want || e.Error == "" {
			t.Errorf("%s %s: %d %+v; want %d and an error", tc.method, tc.path, code, e, tc.want)
		}
	}
	var recs []any
	if code := call(t, c, "GET", srv.URL+"/v1/jobs/tick/executions?partition=0&limit=5", "", "", &recs); code != 200 {
		t.Fatalf("executions: %d", code)
	}
}

// With no credentials configured, write actions are refused (403, naming
// the flags), never open; with ProtectReads, reads need them too.
func TestWritesAreNeverOpen(t *testing.T) {
	cli := storedCatalog(t)
	open := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c"}))
	defer open.Close()
	var e Error
	if code := call(t, open.Client(), "POST", open.URL+"/v1/jobs/tick/trigger", "", "", &e); code != http.StatusForbidden || !strings.Contains(e.Error, "--http-token-file") {
		t.Fatalf("trigger with no auth configured: %d %+v; want 403 naming the flag", code, e)
	}
	closed := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("t"), ProtectReads: true}}))
	defer closed.Close()
	if code := call(t, closed.Client(), "GET", closed.URL+"/v1/status", "", "", &e); code != http.StatusUnauthorized {
		t.Fatalf("a protected read without the token: %d", code)
	}
	if code := call(t, closed.Client(), "GET", closed.URL+"/v1/status", "t", "", nil); code != 200 {
		t.Fatalf("a protected read with the token: %d", code)
	}
}

// A client certificate the server verified may write; a client without one
// may not.
func TestClientCertificatesMayWrite(t *testing.T) {
	cli := storedCatalog(t)
	srv, authed := clientCertServer(t, Config{KV: cli, Cluster: "c", Auth: Auth{ClientCerts: true}})
	anon := srv.Client() // trusts the server's certificate, presents none
	if code := call(t, anon, "POST", srv.URL+"/v1/jobs/tick/pause", "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("pause without a client certificate: %d, want 401", code)
	}
	if code := call(t, authed, "POST", srv.URL+"/v1/jobs/tick/pause", "", "", nil); code != 200 {
		t.Fatalf("pause with a client certificate: %d, want 200", code)
	}
}
