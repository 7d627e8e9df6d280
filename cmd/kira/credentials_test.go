package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
)

// kira run --http-credentials FILE beside --http-token-file: the file's
// scoped token may pause its jobs and not another (403 naming it), the
// old token may still do everything, each write is logged with its
// caller, and no secret is in the member's log. A credentials file with a
// mistake stops kira run at start, naming its file, line and field.
func TestHTTPCredentialsThroughKiraRun(t *testing.T) {
	etcd := etcdtest.Start(t)
	ep := etcd.Endpoints()[0]
	dir := t.TempDir()
	catalog, tokenFile, creds := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "token"), filepath.Join(dir, "credentials.yaml")
	os.WriteFile(catalog, []byte("cluster: web\njobs:\n  - {name: customer-a, schedule: \"@every 1h\", command: [\"true\"]}\n  - {name: billing-run, schedule: \"@every 1h\", command: [\"true\"]}\n"), 0o600)
	os.WriteFile(tokenFile, []byte("old-tok-3f9a\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "customers.token"), []byte("customers-7b1c0123456789\n"), 0o600)
	os.WriteFile(creds, []byte("tokens:\n  - name: customers\n    secret_file: customers.token\n    scope: {jobs: [customer-*], verbs: [pause]}\n"), 0o600)

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("tokens:\n  - name: customers\n    secret_file: customers.token\n    scope: {verbs: [pause, delete]}\n"), 0o600)
	if out, code := runKira(t, "run", "--catalog", catalog, "--etcd", ep, "--http", freePort(t), "--http-credentials", bad); code != 1 ||
		!strings.Contains(out, bad+`:4:28: tokens[0].scope.verbs[1]: "delete": want write`) {
		t.Fatalf("kira run with a bad credentials file: exit %d\n%s", code, out)
	}

	_, port, _ := strings.Cut(freePort(t), ":")
	member := start(t, "run", "--catalog", catalog, "--etcd", ep, "--http", port, "--http-token-file", tokenFile, "--http-credentials", creds)
	base := "http://127.0.0.1:" + port
	kiratest.WaitUntil(t, "the member's /healthz", 20*time.Second, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	post := func(path, token string) int {
		req, _ := http.NewRequest("POST", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/v1/jobs/customer-a/pause", "customers-7b1c0123456789", 200},
		{"/v1/jobs/billing-run/pause", "customers-7b1c0123456789", 403},
		{"/v1/jobs/customer-a/trigger", "customers-7b1c0123456789", 403},
		{"/v1/jobs/billing-run/pause", "old-tok-3f9a", 200},
	} {
		if code := post(tc.path, tc.token); code != tc.want {
			t.Errorf("POST %s with %.6s…: %d, want %d", tc.path, tc.token, code, tc.want)
		}
	}
	if st := statusOf(t, ep, "web"); len(st.Paused) != 2 {
		t.Fatalf("paused jobs %v; want both", st.Paused)
	}
	kiratest.WaitUntil(t, "the refused write in the member's log", 10*time.Second, func() bool {
		return strings.Contains(member.Output(), `caller="token \"customers\"" why="token \"customers\" may not pause job billing-run`)
	})
	for _, secret := range []string{"customers-7b1c0123456789", "old-tok-3f9a"} {
		if strings.Contains(member.Output(), secret) {
			t.Fatalf("a token is in the member's log:\n%s", member.Output())
		}
	}
}
