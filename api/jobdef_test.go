package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

// sendH is call for requests with headers, answering the status, the ETag
// and the body.
func sendH(t *testing.T, c *http.Client, method, url, token, body string, header map[string]string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("ETag"), data
}

// One job through the API: created (201, its revision the ETag), read
// (JSON in the catalog's schema, or YAML to edit), replaced on its revision
// (If-Match), refused on an old one (412 with the revision and what
// changed), created only once (If-None-Match: *), refused when invalid (422
// naming the field), deleted; a job kira apply manages is a 409 until
// force=true; anonymous readers see its secrets redacted; PUT /v1/catalog
// keeps the jobs made one by one (TestPutCatalogKeepsJobsMadeOneByOne).
func TestJobDefinitionRoutes(t *testing.T) {
	cli := storedCatalog(t)
	srv := newServer(t, Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("right-token")}})
	c, base := srv.Client(), srv.URL+"/v1/jobs/"
	const tok = "right-token"

	body := "schedule: '@every 1m'\ncommand: [sh, -c, 'echo $KEY']\nenv: {KEY: s3cret}\nlabels: {team: growth}\n"
	if code, _, data := sendH(t, c, "PUT", base+"signup-1", "", body, nil); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d %s", code, data)
	}
	code, etag, data := sendH(t, c, "PUT", base+"signup-1", tok, body, map[string]string{"If-None-Match": "*"})
	var w JobWritten
	if code != http.StatusCreated || json.Unmarshal(data, &w) != nil || !w.Created || w.Manager != "api:token" || etag != `"`+itoa(w.Revision)+`"` {
		t.Fatalf("create: %d %s %s", code, etag, data)
	}
	if code, _, data := sendH(t, c, "PUT", base+"signup-1", tok, body, map[string]string{"If-None-Match": "*"}); code != http.StatusPreconditionFailed {
		t.Fatalf("create again: %d %s", code, data)
	}

	var d JobDefinition
	code, etag2, data := sendH(t, c, "GET", base+"signup-1/definition", tok, "", nil)
	if code != 200 || json.Unmarshal(data, &d) != nil || d.Revision != w.Revision || etag2 != etag || d.Manager != "api:token" || !strings.Contains(string(d.Job), `"s3cret"`) {
		t.Fatalf("definition: %d %s %s", code, etag2, data)
	}
	var detail struct {
		Manager  string            `json:"manager"`
		Revision int64             `json:"revision"`
		Labels   map[string]string `json:"labels"`
	}
	if code, _, data := sendH(t, c, "GET", base+"signup-1", "", "", nil); code != 200 || json.Unmarshal(data, &detail) != nil || detail.Manager != "api:token" || detail.Revision != w.Revision || detail.Labels["team"] != "growth" {
		t.Fatalf("the job's detail names its manager and revision: %d %s", code, data)
	}
	if _, _, data := sendH(t, c, "GET", base+"signup-1/definition", "", "", nil); strings.Contains(string(data), "s3cret") || !strings.Contains(string(data), "redacted") {
		t.Fatalf("anonymous definition: %s", data)
	}
	code, _, yaml := sendH(t, c, "GET", base+"signup-1/definition?format=yaml", tok, "", nil)
	if code != 200 || !strings.Contains(string(yaml), "schedule: '@every 1m'") && !strings.Contains(string(yaml), `schedule: "@every 1m"`) {
		t.Fatalf("definition as YAML: %d %s", code, yaml)
	}

	edited := strings.Replace(string(yaml), "1m", "2m", 1)
	code, _, data = sendH(t, c, "PUT", base+"signup-1", tok, edited, map[string]string{"If-Match": etag})
	var w2 JobWritten
	if code != 200 || json.Unmarshal(data, &w2) != nil || w2.Created || w2.Revision <= w.Revision {
		t.Fatalf("replace on its revision: %d %s", code, data)
	}
	code, _, data = sendH(t, c, "PUT", base+"signup-1", tok, body, map[string]string{"If-Match": etag})
	var pre JobPreconditionFailed
	if code != http.StatusPreconditionFailed || json.Unmarshal(data, &pre) != nil || pre.Revision != w2.Revision || len(pre.Differs) == 0 {
		t.Fatalf("replace on an old revision: %d %s", code, data)
	}
	code, _, data = sendH(t, c, "PUT", base+"signup-1", tok, "schedule: 'every minute'\ncommand: [x]\n", nil)
	var refused CatalogRefused
	if code != http.StatusUnprocessableEntity || json.Unmarshal(data, &refused) != nil || len(refused.Problems) == 0 || refused.Problems[0].Line != 1 || !strings.Contains(refused.Problems[0].Field, "schedule") {
		t.Fatalf("an invalid job: %d %s", code, data)
	}
	if code, _, data := sendH(t, c, "PUT", base+"signup-1", tok, body, map[string]string{"If-Match": "yesterday"}); code != http.StatusBadRequest {
		t.Fatalf("a malformed If-Match: %d %s", code, data)
	}

	if code, _, data := sendH(t, c, "PUT", base+"tick", tok, body, nil); code != http.StatusConflict || !strings.Contains(string(data), "apply") {
		t.Fatalf("a job kira apply manages: %d %s", code, data)
	}
	if code, _, data := sendH(t, c, "PUT", base+"tick?force=true", tok, body, nil); code != 200 || !strings.Contains(string(data), `"previous_manager": "apply"`) {
		t.Fatalf("taken over with force: %d %s", code, data)
	}

	if code, _, data := sendH(t, c, "DELETE", base+"signup-1", tok, "", map[string]string{"If-Match": etag}); code != http.StatusPreconditionFailed {
		t.Fatalf("delete on an old revision: %d %s", code, data)
	}
	if code, _, data := sendH(t, c, "DELETE", base+"signup-1", tok, "", nil); code != 200 || !strings.Contains(string(data), `"deleted": true`) {
		t.Fatalf("delete: %d %s", code, data)
	}
	if code, _, data := sendH(t, c, "GET", base+"signup-1/definition", tok, "", nil); code != http.StatusNotFound {
		t.Fatalf("after the delete: %d %s", code, data)
	}
	if code, _, data := sendH(t, c, "DELETE", base+"signup-1", tok, "", nil); code != http.StatusNotFound {
		t.Fatalf("delete again: %d %s", code, data)
	}
}

// PUT /v1/catalog keeps the jobs made one by one, answers 409 for one it
// names, takes it over with force_conflicts=true, and deletes the others
// with prune_others=true.
func TestPutCatalogKeepsJobsMadeOneByOne(t *testing.T) {
	cli := storedCatalog(t)
	srv := newServer(t, Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("right-token")}})
	c, tok := srv.Client(), "right-token"
	for _, name := range []string{"one", "two"} {
		if code, _, data := sendH(t, c, "PUT", srv.URL+"/v1/jobs/"+name, tok, "schedule: '@hourly'\ncommand: ['true']\n", nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, code, data)
		}
	}
	jobs := func() string {
		s, err := config.Read(context.Background(), cli, "c", 0)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range s.Catalog.Jobs {
			names = append(names, j.Name)
		}
		return strings.Join(names, " ")
	}
	cat := "cluster: c\njobs:\n  - {name: other, schedule: '@daily', command: ['true']}\n"
	if code, _, data := sendH(t, c, "PUT", srv.URL+"/v1/catalog", tok, cat, nil); code != 200 || jobs() != "other one two" {
		t.Fatalf("kept: %d %s; stored %s", code, data, jobs())
	}
	named := cat + "  - {name: one, schedule: '@daily', command: ['true']}\n"
	if code, _, data := sendH(t, c, "PUT", srv.URL+"/v1/catalog", tok, named, nil); code != http.StatusConflict || !strings.Contains(string(data), "api:token") {
		t.Fatalf("naming a job made one by one: %d %s", code, data)
	}
	if code, _, data := sendH(t, c, "PUT", srv.URL+"/v1/catalog?force_conflicts=true", tok, named, nil); code != 200 || jobs() != "other one two" {
		t.Fatalf("taken over: %d %s; stored %s", code, data, jobs())
	}
	if code, _, data := sendH(t, c, "PUT", srv.URL+"/v1/catalog?prune_others=true", tok, named, nil); code != 200 || jobs() != "other one" {
		t.Fatalf("pruned: %d %s; stored %s", code, data, jobs())
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// newServer is the API of cfg on a test server closed with the test.
func newServer(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(cfg))
	t.Cleanup(srv.Close)
	return srv
}

// A scoped caller writes only the jobs its scope selects, as stored and as
// they would be: it cannot create, replace or delete a job outside its
// names or labels, nor move one of its jobs out of its labels; the verb
// write is needed, and a refused write changes nothing.
func TestJobDefinitionScopes(t *testing.T) {
	t.Setenv("KIRA_TEST_LABELED", "labeled-0123456789abcdef")
	creds, err := LoadCredentials(writeCredentials(t, `
tokens:
  - {name: customers, secret_file: a.token, scope: {jobs: [customer-*], verbs: [write]}}
  - {name: labeled, secret_env: KIRA_TEST_LABELED, scope: {labels: {team: growth}, verbs: [write, trigger]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cli := storedYAML(t, scopedYAML)
	srv := newServer(t, Config{KV: cli, Cluster: "c", Auth: Auth{Credentials: creds}})
	c, base, labeled := srv.Client(), srv.URL+"/v1/jobs/", "labeled-0123456789abcdef"
	growth := "schedule: '@hourly'\ncommand: ['true']\nlabels: {team: growth}\n"
	plain := "schedule: '@hourly'\ncommand: ['true']\n"
	for _, tc := range []struct {
		token, method, job, body string
		want                     int
		why                      string
	}{
		{secretA, "PUT", "customer-new", plain, http.StatusCreated, ""},
		{secretA, "PUT", "billing-new", plain, http.StatusForbidden, "may not write job billing-new: the name"},
		{secretA, "DELETE", "billing-run", "", http.StatusForbidden, "may not write job billing-run: the name"},
		{secretA, "POST", "customer-a/pause", "", http.StatusForbidden, "verbs write, not pause"},
		{labeled, "PUT", "growth-new", growth, http.StatusCreated, ""},
		{labeled, "PUT", "growth-plain", plain, http.StatusForbidden, "lack team=growth"},
		{labeled, "PUT", "customer-b?force=true", plain, http.StatusForbidden, "lack team=growth"},
		{labeled, "PUT", "billing-run?force=true", growth, http.StatusForbidden, "lack team=growth"},
		{labeled, "DELETE", "customer-b?force=true", "", http.StatusOK, ""},
		{labeled, "PUT", "growth-new", plain, http.StatusForbidden, "lack team=growth"},
	} {
		code, _, data := sendH(t, c, tc.method, base+tc.job, tc.token, tc.body, nil)
		if code != tc.want || !strings.Contains(string(data), tc.why) {
			t.Errorf("%s %s with %.6s…: %d %s; want %d %q", tc.method, tc.job, tc.token, code, data, tc.want, tc.why)
		}
	}
	s, err := config.Read(context.Background(), cli, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range s.Catalog.Jobs {
		names = append(names, j.Name)
	}
	if got := strings.Join(names, " "); got != "customer-a billing-run customer-new growth-new" {
		t.Fatalf("stored after the writes: %s", got)
	}
	if j, _ := s.Catalog.Job("growth-new"); j.Labels["team"] != "growth" {
		t.Fatalf("growth-new moved out of its scope: %+v", j.Labels)
	}
}

// The server's writer decides on the jobs it wrote or read, and again on
// the job as stored when another writer changed it since: a write its
// scope allows on the job as the server kept it, but not as stored, is a
// 403; one refused on the job as kept, but allowed as stored, is written,
// and logged as written, not as refused.
func TestJobDefinitionOverAJobChangedElsewhere(t *testing.T) {
	t.Setenv("KIRA_TEST_LABELED", "labeled-0123456789abcdef")
	creds, err := LoadCredentials(writeCredentials(t, `
tokens:
  - {name: labeled, secret_env: KIRA_TEST_LABELED, scope: {labels: {team: growth}, verbs: [write]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	cli := storedYAML(t, scopedYAML)
	srv := newServer(t, Config{KV: cli, Cluster: "c", Auth: Auth{Credentials: creds}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	c, base, labeled := srv.Client(), srv.URL+"/v1/jobs/", "labeled-0123456789abcdef"
	growth := "schedule: '@hourly'\ncommand: ['true']\nlabels: {team: growth}\n"
	plain := "schedule: '@daily'\ncommand: ['true']\n"
	elsewhere := func(name, body string) {
		t.Helper()
		if _, err := config.PutJob(context.Background(), cli, "c", []byte(body), name, config.PutJobOptions{Manager: config.ManagerAPI("labeled")}); err != nil {
			t.Fatal(err)
		}
	}

	if code, _, data := sendH(t, c, "PUT", base+"moved-out", labeled, growth, nil); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, data)
	}
	elsewhere("moved-out", plain)
	if code, _, data := sendH(t, c, "PUT", base+"moved-out", labeled, strings.Replace(growth, "@hourly", "@weekly", 1), nil); code != http.StatusForbidden || !strings.Contains(string(data), "lack team=growth") {
		t.Fatalf("a job moved out of the scope since the server wrote it: %d %s", code, data)
	}

	elsewhere("moved-in", plain)
	if code, _, data := sendH(t, c, "GET", base+"moved-in/definition", labeled, "", nil); code != http.StatusOK {
		t.Fatalf("definition: %d %s", code, data)
	}
	elsewhere("moved-in", growth)
	code, _, data := sendH(t, c, "PUT", base+"moved-in", labeled, strings.Replace(growth, "@hourly", "@weekly", 1), nil)
	if code != http.StatusOK {
		t.Fatalf("a job moved into the scope since the server read it: %d %s", code, data)
	}
	if j, err := config.GetJob(context.Background(), cli, "c", "moved-in"); err != nil || j.Job.Schedule != "@weekly" {
		t.Fatalf("stored: %+v %v", j, err)
	}
	kiratest.WaitUntil(t, "a log line for each write", 5*time.Second, func() bool { return strings.Count(log.String(), "api write") == 3 })
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if !strings.Contains(lines[1], "api write refused") || !strings.Contains(lines[2], `msg="api write" method=PUT path=/v1/jobs/moved-in status=200`) {
		t.Fatalf("the log:\n%s", log.String())
	}
}
