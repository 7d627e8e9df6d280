package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// certCredentials lists the certificates CN=deployer (scoped to the jobs
// customer-*) and CN=root (unscoped) and the token customers (secretA),
// with unlisted, the file's unlisted_certificates line.
func certCredentials(t *testing.T, unlisted string) *Credentials {
	t.Helper()
	c, err := LoadCredentials(writeCredentials(t, unlisted+`
tokens:
  - {name: customers, secret_file: a.token, scope: {jobs: [customer-*]}}
certificates:
  - {subject: "CN=deployer", scope: {jobs: [customer-*]}}
  - {subject: "CN = root"}
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Behind require, a request's context names its caller: the token's name
// (the old token's is "token"), or the certificate's subject, with its
// scope; a bearer token the API accepts decides over a certificate.
func TestCallerIsInTheContext(t *testing.T) {
	auth := Auth{Token: []byte(legacyToken), ClientCerts: true, Credentials: certCredentials(t, "")}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := Caller(r.Context())
		fmt.Fprintf(w, "%v %s scoped=%v %s", ok, id, id.Scoped(), id.Manager())
	})
	srv, clients := clientCertServerFor(t, auth.require(echo), "deployer", "stranger")
	for _, tc := range []struct {
		c           *http.Client
		token, want string
	}{
		{srv.Client(), secretA, `true token "customers" scoped=true api:customers`},
		{srv.Client(), legacyToken, `true token "token" scoped=false api:token`},
		{clients["deployer"], "", `true certificate "CN=deployer" scoped=true api:CN=deployer`},
		{clients["stranger"], "", `true certificate "CN=stranger" scoped=false api:CN=stranger`},
		{clients["stranger"], secretA, `true token "customers" scoped=true api:customers`},
		{clients["deployer"], "wrong-token", `true certificate "CN=deployer" scoped=true api:CN=deployer`},
	} {
		headers := map[string]string{}
		if tc.token != "" {
			headers["Authorization"] = "Bearer " + tc.token
		}
		if code, body := send(t, tc.c, "POST", srv.URL, headers); code != 200 || body != tc.want {
			t.Errorf("%.6s: %d %q; want %q", tc.token, code, body, tc.want)
		}
	}
	if _, ok := Caller(t.Context()); ok {
		t.Error("a context without a request has a caller")
	}
}

// A listed certificate's subject has the scope listed; one not listed is
// unscoped, as without a credentials file, unless the file says
// unlisted_certificates: refused (then 403 naming
// its subject, unless a token says who it is).
func TestCertificateScopes(t *testing.T) {
	cli := storedYAML(t, scopedYAML)
	names := []string{"deployer", "root", "stranger"}
	srv, c := clientCertServerFor(t, Handler(Config{KV: cli, Cluster: "c", Auth: Auth{ClientCerts: true, Credentials: certCredentials(t, "")}}), names...)
	body := "cluster: c\njobs:\n  - {name: customer-a, schedule: \"@every 1h\", command: [\"true\"]}\n"
	for _, tc := range []struct {
		who, method, path, body string
		want                    int
		why                     string
	}{
		{"deployer", "POST", "/v1/jobs/customer-a/pause", "", 200, ""},
		{"deployer", "POST", "/v1/jobs/billing-run/pause", "", 403, `certificate "CN=deployer" may not pause job billing-run: the name billing-run matches none of its scope's jobs (customer-*)`},
		{"deployer", "PUT", "/v1/catalog?dry_run=true", body, 403, `certificate "CN=deployer" may not PUT /v1/catalog`},
		{"root", "PUT", "/v1/catalog?dry_run=true", body, 200, ""},
		{"root", "POST", "/v1/jobs/billing-run/pause", "", 200, ""},
		{"stranger", "POST", "/v1/jobs/billing-run/resume", "", 200, ""},
	} {
		var e Error
		if code := call(t, c[tc.who], tc.method, srv.URL+tc.path, "", tc.body, &e); code != tc.want || !strings.Contains(e.Error, tc.why) {
			t.Errorf("%s: %s %s: %d %q; want %d %q", tc.who, tc.method, tc.path, code, e.Error, tc.want, tc.why)
		}
	}
	if !paused(t, cli, "customer-a") || paused(t, cli, "billing-run") {
		t.Fatal("the pauses are not what was allowed")
	}

	auth := Auth{ClientCerts: true, Credentials: certCredentials(t, "unlisted_certificates: refused\n")}
	srv, c = clientCertServerFor(t, Handler(Config{KV: cli, Cluster: "c", Auth: auth}), names...)
	var e Error
	if code := call(t, c["stranger"], "POST", srv.URL+"/v1/jobs/billing-run/pause", "", "", &e); code != http.StatusForbidden ||
		!strings.Contains(e.Error, `certificate "CN=stranger" is not listed in the credentials file`) {
		t.Errorf("an unlisted certificate with unlisted_certificates: refused: %d %q, want 403 naming it", code, e.Error)
	}
	if code := call(t, c["stranger"], "POST", srv.URL+"/v1/jobs/customer-a/pause", secretA, "", nil); code != 200 {
		t.Errorf("an unlisted certificate with a token: %d, want 200", code)
	}
	if code := call(t, c["deployer"], "POST", srv.URL+"/v1/jobs/customer-a/resume", "", "", nil); code != 200 {
		t.Errorf("a listed certificate with unlisted_certificates: refused: %d, want 200", code)
	}
	if err := (Auth{Credentials: auth.Credentials}).Check(); err == nil || !strings.Contains(err.Error(), "--http-client-ca") {
		t.Errorf("certificates listed without client certificates verified: %v", err)
	}
}
