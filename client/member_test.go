package client_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira"
	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/client"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// token is the test member's unscoped API token.
const token = "client-test-token-0123456789"

// serveAPI serves the API of cfg (Cluster "client" and Auth's Token
// token unless cfg says) on a test server closed with the test, each
// request through wrap if it is set.
func serveAPI(t *testing.T, cli *clientv3.Client, cfg api.Config, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	cfg.KV = cli
	if cfg.Cluster == "" {
		cfg.Cluster = "client"
	}
	if cfg.Auth.Token == nil && cfg.Auth.Credentials == nil {
		cfg.Auth.Token = []byte(token)
	}
	h := api.Handler(cfg)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// storeCatalog stores the catalog yaml in the etcd of cli.
func storeCatalog(t *testing.T, cli *clientv3.Client, yaml string) {
	t.Helper()
	cat, err := config.Parse("test catalog", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := config.Store(context.Background(), cli, cat); err != nil {
		t.Fatal(err)
	}
}

// runMember runs a member of cat (its jobs' handler "ok" succeeds) over
// the etcd at endpoints until the test ends, and waits for it to leave.
func runMember(t *testing.T, endpoints []string, yaml string) {
	t.Helper()
	cat, err := config.Parse("test catalog", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- kira.Run(ctx, kira.Config{Etcd: kira.Etcd{Endpoints: endpoints}, Catalog: cat, Name: "client-test",
			Labels: map[string]string{"zone": "earth"}, Handlers: jobs.Handlers{"ok": func(context.Context) error { return nil }},
			Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the member: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the member did not leave within 30s of its context ending")
		}
	})
}

// newClient is a client of srv with opts, through the recorder rec if set.
func newClient(t *testing.T, srv *httptest.Server, rec *recorder, opts ...client.Option) *client.Client {
	t.Helper()
	hc := srv.Client()
	if rec != nil {
		rec.next = hc.Transport
		hc = &http.Client{Transport: rec}
	}
	c, err := client.New(srv.URL, append([]client.Option{client.WithHTTPClient(hc)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exchange is one request a recorder saw, with its answer's status and
// body (decompressed).
type exchange struct {
	req    *http.Request
	status int
	body   []byte
}

// recorder is a RoundTripper that keeps every exchange through it.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, exchange{req: req, status: resp.StatusCode, body: body})
	return resp, nil
}

// last is the last exchange seen.
func (r *recorder) last(t *testing.T) exchange {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		t.Fatal("no request was sent")
	}
	return r.seen[len(r.seen)-1]
}
