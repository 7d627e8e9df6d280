package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/ops"
)

const secretsYAML = `cluster: c
jobs:
  - name: backup
    schedule: "@daily"
    command: ["true"]
    env: {DB_PASSWORD: "s3cret-env"}
    notify:
      - {on: [failed], webhook: "https://hooks.example/s3cret-hook", headers: {Authorization: "Bearer s3cret-notify"}}
  - name: ping
    schedule: "@hourly"
    http: {url: "http://127.0.0.1:8080/ping", headers: {X-Api-Key: "s3cret-http"}}
`

// GET /v1/jobs/{job} shows an anonymous reader each env variable, header
// and notify rule by name, their values and webhook URLs as Redacted; a
// reader with the token sees them as stored. The stored catalog keeps them.
func TestAnonymousReadsAreRedacted(t *testing.T) {
	cli := storedYAML(t, secretsYAML)
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("tok")}}))
	defer srv.Close()
	for _, job := range []string{"backup", "ping"} {
		if body := rawGet(t, srv.URL+"/v1/jobs/"+job, ""); strings.Contains(body, "s3cret") {
			t.Errorf("an anonymous GET /v1/jobs/%s shows a secret:\n%s", job, body)
		}
	}
	var backup, ping ops.JobDetail
	call(t, srv.Client(), "GET", srv.URL+"/v1/jobs/backup", "", "", &backup)
	call(t, srv.Client(), "GET", srv.URL+"/v1/jobs/ping", "", "", &ping)
	if n := backup.Spec.Notify; backup.Spec.Env["DB_PASSWORD"] != Redacted || len(n) != 1 || n[0].Webhook != Redacted ||
		n[0].Headers["Authorization"] != Redacted || n[0].On[0] != "failed" || ping.Spec.HTTP.Headers["X-Api-Key"] != Redacted {
		t.Fatalf("anonymous: backup %+v, ping %+v; want every name kept, every value %s", backup.Spec, ping.Spec.HTTP, Redacted)
	}
	for job, secret := range map[string]string{"backup": "s3cret-env", "ping": "s3cret-http"} {
		if body := rawGet(t, srv.URL+"/v1/jobs/"+job, "tok"); !strings.Contains(body, secret) {
			t.Errorf("GET /v1/jobs/%s with the token has no %s:\n%s", job, secret, body)
		}
	}
	if stored, _, err := config.LoadStored(context.Background(), cli, "c"); err != nil || stored.Jobs[0].Env["DB_PASSWORD"] != "s3cret-env" {
		t.Fatalf("the stored catalog after the reads: %+v (%v)", stored, err)
	}
}

// rawGet answers GET url's body, with the bearer token if set.
func rawGet(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body)
}
