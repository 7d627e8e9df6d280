package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// clientCertServer is the API over TLS that lets a verified client
// certificate write, and a client that presents the operator's certificate,
// as a browser holding it does on every request to the server.
func clientCertServer(t *testing.T, cfg Config) (*httptest.Server, *http.Client) {
	t.Helper()
	srv, clients := clientCertServerFor(t, Handler(cfg), "operator")
	return srv, clients["operator"]
}

// clientCertServerFor serves h over TLS, verifying client certificates
// of its CA, and returns a client for each common name, presenting a
// certificate of that subject (CN=name).
func clientCertServerFor(t *testing.T, h http.Handler, names ...string) (*httptest.Server, map[string]*http.Client) {
	t.Helper()
	ca := kiratest.NewCA(t, t.TempDir(), "ca")
	serverCert, serverKey := ca.Issue(t, "api", true)
	srv := httptest.NewUnstartedServer(h)
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(ca.File)
	pool.AppendCertsFromPEM(pem)
	cert, err := tls.LoadX509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	clients := map[string]*http.Client{}
	for _, name := range names {
		clientCert, clientKey := ca.Issue(t, name, false)
		mine, err := tls.LoadX509KeyPair(clientCert, clientKey)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{mine}}}}
		t.Cleanup(c.CloseIdleConnections)
		clients[name] = c
	}
	return srv, clients
}

// send makes one request with the given headers and returns its status and body.
func send(t *testing.T, c *http.Client, method, url string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("x=1"))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Every write route refuses (403, a JSON error) what a browser sends from
// another site, even with the operator's client certificate, and changes
// nothing; the same request from the page's own origin, or from a client
// that sends neither Origin nor Sec-Fetch-Site (curl, kira), goes through.
// Reads from another site are answered.
func TestCrossSiteWritesAreRefused(t *testing.T) {
	cli := storedCatalog(t)
	srv, browser := clientCertServer(t, Config{KV: cli, Cluster: "c", Auth: Auth{ClientCerts: true}})
	before := catalogRevision(t, cli)
	crossSite := []map[string]string{
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"},
		{"Origin": "https://kira.example.com", "Sec-Fetch-Site": "same-site"},
		{"Origin": "https://evil.example"},
	}
	for _, route := range []string{"POST /v1/jobs/tick/pause", "POST /v1/jobs/tick/resume", "POST /v1/jobs/tick/trigger",
		"DELETE /v1/jobs/tick/trigger/manual-x", "PUT /v1/catalog", "PATCH /v1/jobs/tick"} {
		method, path, _ := strings.Cut(route, " ")
		for _, h := range crossSite {
			if code, body := send(t, browser, method, srv.URL+path, h); code != http.StatusForbidden || !strings.Contains(body, `"error"`) || !strings.Contains(body, "another site") {
				t.Errorf("%s with %v: %d %s; want 403 and a JSON error", route, h, code, body)
			}
		}
	}
	if paused(t, cli, "tick") || waiting(t, cli, "tick") != 0 || catalogRevision(t, cli) != before {
		t.Fatal("a cross-site write took effect")
	}
	sameOrigin := map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	for _, h := range []map[string]string{sameOrigin, {"Origin": srv.URL}, nil} {
		if code, body := send(t, browser, "POST", srv.URL+"/v1/jobs/tick/pause", h); code != 200 {
			t.Errorf("pause with %v: %d %s; want 200", h, code, body)
		}
	}
	if code, body := send(t, browser, "GET", srv.URL+"/v1/jobs/tick", crossSite[0]); code != 200 {
		t.Errorf("a cross-site read: %d %s; want 200", code, body)
	}
}

func paused(t *testing.T, cli *clientv3.Client, job string) bool {
	t.Helper()
	p, err := ops.IsPaused(context.Background(), cli, "c", job)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waiting is how many manual runs of job wait.
func waiting(t *testing.T, cli *clientv3.Client, job string) int {
	t.Helper()
	runs, err := ops.WaitingRuns(context.Background(), cli, "c", job)
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

func catalogRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	_, rev, err := config.LoadStored(context.Background(), cli, "c")
	if err != nil {
		t.Fatal(err)
	}
	return rev
}
