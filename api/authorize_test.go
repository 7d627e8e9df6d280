package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// scopedYAML is a catalog of customer jobs and a billing job, two of them
// with labels.
const scopedYAML = `cluster: c
jobs:
  - {name: customer-a, schedule: "@every 1h", command: ["true"]}
  - {name: customer-b, schedule: "@every 1h", command: ["true"], labels: {team: growth}}
  - {name: billing-run, schedule: "@every 1h", command: ["true"], labels: {team: billing}}
`

// legacyToken is the tests' --http-token-file token.
const legacyToken = "legacy-0123456789abcdef"

// scopedServer is the API on the scoped catalog with the tokens
// customers (secretA: jobs customer-*), growth (labels team=growth, verb
// trigger), pauser (job customer-a, verb pause), admin (unscoped) and
// the legacy token.
func scopedServer(t *testing.T, cfg Config) (*clientv3.Client, *httptest.Server) {
	t.Helper()
	t.Setenv("KIRA_TEST_GROWTH", "growth-0123456789abcdef")
	t.Setenv("KIRA_TEST_PAUSER", "pauser-0123456789abcdef")
	t.Setenv("KIRA_TEST_ADMIN", "admin-0123456789abcdef")
	creds, err := LoadCredentials(writeCredentials(t, `
tokens:
  - {name: customers, secret_file: a.token, scope: {jobs: [customer-*]}}
  - {name: growth, secret_env: KIRA_TEST_GROWTH, scope: {labels: {team: growth}, verbs: [trigger]}}
  - {name: pauser, secret_env: KIRA_TEST_PAUSER, scope: {jobs: [customer-a], verbs: [pause]}}
  - {name: admin, secret_env: KIRA_TEST_ADMIN}
`))
	if err != nil {
		t.Fatal(err)
	}
	cli := storedYAML(t, scopedYAML)
	cfg.KV, cfg.Cluster = cli, "c"
	cfg.Auth = Auth{Token: []byte(legacyToken), Credentials: creds}
	if err := cfg.Auth.Check(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(cfg))
	t.Cleanup(srv.Close)
	return cli, srv
}

// A scoped token may trigger, cancel, pause and resume the jobs its scope
// selects, by name or by label, with its verbs; anything else is a 403
// JSON error naming the token and what it lacks, and changes nothing. A
// job not stored is decided by its name alone (then 404). Only an
// unscoped credential, a named one or the old token, may PUT the whole
// catalog.
func TestScopedTokens(t *testing.T) {
	cli, srv := scopedServer(t, Config{})
	c := srv.Client()
	for _, tc := range []struct {
		token, method, path string
		want                int
		why                 string
	}{
		{secretA, "POST", "/v1/jobs/customer-a/trigger", 200, ""},
		{secretA, "POST", "/v1/jobs/customer-b/pause", 200, ""},
		{secretA, "POST", "/v1/jobs/customer-b/resume", 200, ""},
		{secretA, "DELETE", "/v1/jobs/customer-a/trigger/manual-x", 409, ""},
		{secretA, "POST", "/v1/jobs/customer-zzz/pause", 404, ""},
		{secretA, "POST", "/v1/jobs/billing-run/trigger", 403, `token "customers" may not trigger job billing-run: the name billing-run matches none of its scope's jobs (customer-*)`},
		{secretA, "POST", "/v1/jobs/billing-run/pause", 403, `token "customers" may not pause job billing-run`},
		{secretA, "DELETE", "/v1/jobs/billing-run/trigger/manual-x", 403, `token "customers" may not trigger job billing-run`},
		{secretA, "POST", "/v1/jobs/other-zzz/pause", 403, `token "customers" may not pause job other-zzz`},
		{"growth-0123456789abcdef", "POST", "/v1/jobs/customer-b/trigger", 200, ""},
		{"growth-0123456789abcdef", "POST", "/v1/jobs/nope/trigger", 404, ""},
		{"growth-0123456789abcdef", "POST", "/v1/jobs/customer-a/trigger", 403, `token "growth" may not trigger job customer-a: the job's labels ({}) lack team=growth`},
		{"growth-0123456789abcdef", "POST", "/v1/jobs/billing-run/trigger", 403, `the job's labels ({team=billing}) lack team=growth`},
		{"growth-0123456789abcdef", "POST", "/v1/jobs/customer-b/pause", 403, `token "growth" may not pause job customer-b: its scope allows the verbs trigger, not pause`},
		{"pauser-0123456789abcdef", "POST", "/v1/jobs/customer-a/pause", 200, ""},
		{"pauser-0123456789abcdef", "POST", "/v1/jobs/customer-a/resume", 200, ""},
		{"pauser-0123456789abcdef", "POST", "/v1/jobs/customer-a/trigger", 403, `token "pauser" may not trigger job customer-a: its scope allows the verbs pause, not trigger`},
		{"pauser-0123456789abcdef", "POST", "/v1/jobs/customer-b/pause", 403, `token "pauser" may not pause job customer-b`},
		{"admin-0123456789abcdef", "POST", "/v1/jobs/billing-run/trigger?partition=0", 200, ""},
		{legacyToken, "POST", "/v1/jobs/customer-a/pause", 200, ""},
		{legacyToken, "POST", "/v1/jobs/customer-a/resume", 200, ""},
	} {
		var e Error
		code := call(t, c, tc.method, srv.URL+tc.path, tc.token, "", &e)
		if code != tc.want || !strings.Contains(e.Error, tc.why) {
			t.Errorf("%s %s with %.6s…: %d %q; want %d %q", tc.method, tc.path, tc.token, code, e.Error, tc.want, tc.why)
		}
	}
	if paused(t, cli, "billing-run") || paused(t, cli, "customer-a") || waiting(t, cli, "customer-a") != 1 || waiting(t, cli, "billing-run") != 1 {
		t.Fatal("a refused write took effect, or an allowed one did not")
	}

	body := "cluster: c\njobs:\n  - {name: customer-a, schedule: \"@every 1h\", command: [\"true\"]}\n"
	before := catalogRevision(t, cli)
	for _, token := range []string{secretA, "growth-0123456789abcdef", "pauser-0123456789abcdef"} {
		var e Error
		if code := call(t, c, "PUT", srv.URL+"/v1/catalog", token, body, &e); code != http.StatusForbidden ||
			!strings.Contains(e.Error, "may not PUT /v1/catalog: a whole-catalog write needs an unscoped credential") {
			t.Errorf("PUT /v1/catalog with a scoped token: %d %q; want 403", code, e.Error)
		}
	}
	if catalogRevision(t, cli) != before {
		t.Fatal("a scoped token replaced the catalog")
	}
	for _, token := range []string{"admin-0123456789abcdef", legacyToken} {
		var res CatalogApplied
		if code := call(t, c, "PUT", srv.URL+"/v1/catalog?dry_run=true", token, body, &res); code != 200 || len(res.Changes) != 2 {
			t.Errorf("PUT /v1/catalog with an unscoped token: %d %+v; want 200", code, res)
		}
	}
}

// allowJob, the check of the job-definition routes: a create is decided
// by the new definition, a delete by the stored one, a replace by both,
// so a scoped caller can neither reach a job outside its scope nor move
// one out of it.
func TestAllowJob(t *testing.T) {
	s := &server{}
	growth := &scope{jobs: []string{"customer-*"}, labels: map[string]string{"team": "growth"}, verbs: []verb{verbWrite}}
	ctx := context.WithValue(context.Background(), callerKey{}, Identity{Name: "svc", scope: growth})
	job := func(name, team string) *config.Job {
		return &config.Job{Name: name, Labels: map[string]string{"team": team}}
	}
	for _, tc := range []struct {
		name         string
		stored, next *config.Job
		want         string
	}{
		{"customer-a", nil, job("customer-a", "growth"), ""},                               // create
		{"customer-a", job("customer-a", "growth"), nil, ""},                               // delete
		{"customer-a", job("customer-a", "growth"), job("customer-a", "growth"), ""},       // replace
		{"customer-a", job("customer-a", "growth"), job("customer-a", "billing"), "new"},   // moved out
		{"customer-a", job("customer-a", "billing"), job("customer-a", "growth"), "job's"}, // taken in
		{"customer-a", nil, job("customer-a", "billing"), "lack team=growth"},
		{"customer-a", job("customer-a", "billing"), nil, "lack team=growth"},
		{"customer-a", nil, &config.Job{Name: "customer-a"}, "lack team=growth"},
		{"billing-run", nil, job("billing-run", "growth"), "matches none"},
	} {
		err := s.allowJob(ctx, verbWrite, tc.name, tc.stored, tc.next)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `token "svc" may not write job `+tc.name)) {
			t.Errorf("%s, stored %v, new %v: %v; want %q", tc.name, tc.stored, tc.next, err, tc.want)
		}
		var se *statusError
		if err != nil && (!errors.As(err, &se) || se.code != http.StatusForbidden) {
			t.Errorf("%v: not a 403", err)
		}
	}
	if err := s.allowJob(ctx, verbTrigger, "customer-a", nil, nil); err == nil || !strings.Contains(err.Error(), "verbs write, not trigger") {
		t.Errorf("trigger with a write-only scope: %v", err)
	}
	if err := s.allowJob(context.Background(), verbWrite, "customer-a", nil, nil); err == nil {
		t.Error("a request without a caller was allowed")
	}
	unscoped := context.WithValue(context.Background(), callerKey{}, Identity{Name: "admin"})
	if err := s.allowJob(unscoped, verbWrite, "billing-run", job("billing-run", "billing"), job("billing-run", "x")); err != nil {
		t.Errorf("an unscoped caller: %v", err)
	}
}
