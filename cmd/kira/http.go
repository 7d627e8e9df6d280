package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/dashboard"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EnvHTTPToken is read when --http-token-file is not given.
const EnvHTTPToken = "KIRA_HTTP_TOKEN"

// httpFlags are kira run's flags for its HTTP port: probes, metrics and the
// API (package api), and who may use the API's write actions.
type httpFlags struct {
	addr, tokenFile        string
	credentials            string
	tlsCert, tlsKey, useCA string
	readAuth               bool
	traceURL               string
}

func (h *httpFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&h.addr, "http", "", "serve /healthz, /metrics and the API (/v1) on this address; a bare port, such as 8080, binds 127.0.0.1; empty disables")
	fs.StringVar(&h.tokenFile, "http-token-file", "", "file whose first line is the bearer token the API's write actions require (also $"+EnvHTTPToken+")")
	fs.StringVar(&h.credentials, "http-credentials", "", "YAML file of named bearer tokens and client-certificate subjects, each with an optional scope of jobs, labels and verbs (docs/security.md); beside --http-token-file's token, which stays unscoped")
	fs.StringVar(&h.tlsCert, "http-tls-cert", "", "serve HTTPS with this certificate")
	fs.StringVar(&h.tlsKey, "http-tls-key", "", "key of --http-tls-cert")
	fs.StringVar(&h.useCA, "http-client-ca", "", "CA bundle: a client certificate it verifies may use the API's write actions (needs --http-tls-cert)")
	fs.BoolVar(&h.readAuth, "http-read-auth", false, "require the same authentication for the API's read endpoints and /metrics (default: open; an anonymous reader sees job specs with env values, header values and webhook URLs redacted)")
	fs.StringVar(&h.traceURL, "trace-url", "", "the dashboard links each execution to this address, its {trace_id} or {execution_id} (and {job}, {partition}) filled in: the trace, or a search of your trace backend for the span attribute kira.execution_id; with {trace_id}, executions not traced have no link")
}

// checkTraceURL says what is wrong with a --trace-url template, if
// anything: an http(s) address with {trace_id} or {execution_id} in it.
// With {trace_id}, an execution whose record keeps no trace id (tracing
// off or unsampled, or an earlier version's record) gets no link
// (TestTraceURLIsChecked, TestTraceLinksByTraceID).
func checkTraceURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	if !strings.Contains(tmpl, "{trace_id}") && !strings.Contains(tmpl, "{execution_id}") {
		return fmt.Errorf("kira run: --trace-url %q: it needs {trace_id} or {execution_id}, filled in with each execution's trace id or execution id", tmpl)
	}
	u, err := url.Parse(strings.NewReplacer("{trace_id}", "x", "{execution_id}", "x", "{job}", "x", "{partition}", "0").Replace(tmpl))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("kira run: --trace-url %q: want an http or https address", tmpl)
	}
	return nil
}

// listenAddr is the address to listen on: a bare port binds loopback.
func (h httpFlags) listenAddr() string {
	if h.addr != "" && !strings.Contains(h.addr, ":") {
		return "127.0.0.1:" + h.addr
	}
	return h.addr
}

// baseURL is the member's API as others reach it, for links: "" without
// --http; a wildcard host is replaced by the hostname.
func (h httpFlags) baseURL() string {
	addr := h.listenAddr()
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host, _ = os.Hostname()
	}
	scheme := "http"
	if h.tlsCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// auth reads the token and the credentials file and says which
// credentials the API accepts.
func (h httpFlags) auth() (api.Auth, error) {
	a := api.Auth{ClientCerts: h.useCA != "", ProtectReads: h.readAuth}
	token := os.Getenv(EnvHTTPToken)
	if h.tokenFile != "" {
		data, err := os.ReadFile(h.tokenFile)
		if err != nil {
			return a, fmt.Errorf("kira run: --http-token-file: %w", err)
		}
		token, _, _ = strings.Cut(string(data), "\n")
		token = strings.TrimRight(token, "\r")
		if token == "" {
			return a, fmt.Errorf("kira run: --http-token-file %s: the first line is empty", h.tokenFile)
		}
	}
	if token != "" {
		a.Token = []byte(token)
	}
	if h.credentials != "" {
		c, err := api.LoadCredentials(h.credentials)
		if err != nil {
			return a, fmt.Errorf("kira run: --http-credentials: %w", err)
		}
		a.Credentials = c
	}
	if err := a.Check(); err != nil {
		return a, fmt.Errorf("kira run: --http-credentials: %w", err)
	}
	return a, nil
}

// tlsConfig is the HTTPS configuration, or nil for plain HTTP. A client
// certificate is verified if given, not required, so probes and token
// holders need none.
func (h httpFlags) tlsConfig() (*tls.Config, error) {
	if h.tlsCert == "" && h.tlsKey == "" {
		if h.useCA != "" {
			return nil, errors.New("kira run: --http-client-ca needs --http-tls-cert and --http-tls-key: client certificates come over TLS")
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(h.tlsCert, h.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("kira run: --http-tls-cert, --http-tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if h.useCA != "" {
		pem, err := os.ReadFile(h.useCA)
		if err != nil {
			return nil, fmt.Errorf("kira run: --http-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kira run: --http-client-ca %s: no PEM certificate in it", h.useCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// serveHTTP serves the member's HTTP port and returns what stops it.
func (r *runner) serveHTTP(h httpFlags, etcd etcdclient.Config, cluster string) (func(), error) {
	auth, err := h.auth()
	if err != nil {
		return nil, err
	}
	if err := checkTraceURL(h.traceURL); err != nil {
		return nil, err
	}
	tlsCfg, err := h.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := etcdclient.New(etcd)
	if err != nil {
		return nil, fmt.Errorf("kira run: --http: %w", err)
	}
	mux := r.httpMux(h, auth, cli, cluster)
	l, err := net.Listen("tcp", h.listenAddr())
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("kira run: --http: %w", err)
	}
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg)
	}
	srv := newHTTPServer(mux, httpTimeouts)
	go srv.Serve(l)
	return func() { srv.Close(); cli.Close() }, nil
}

// httpMux is what the member's HTTP port serves: the probes, /metrics
// (behind the API's read rule, api.Auth.Reads), the API and the dashboard.
func (r *runner) httpMux(h httpFlags, auth api.Auth, cli *clientv3.Client, cluster string) *http.ServeMux {
	mux := http.NewServeMux()
	// /livez answers while the process serves: a liveness probe must not
	// restart every member during an etcd outage. /readyz (and /healthz, its
	// older name) answers 200 only while the member is a trusted member of
	// the cluster: its lease proven alive.
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", r.ready)
	mux.HandleFunc("/healthz", r.ready)
	mux.Handle("/metrics", auth.Reads(promhttp.HandlerFor(r.metrics.registry, promhttp.HandlerOpts{})))
	mux.Handle("/v1/", api.Handler(api.Config{KV: cli, Cluster: cluster, Auth: auth, Leases: cli, Maintenance: cli, Peers: peerClient(h, auth), Logger: r.logger}))
	mux.Handle("/", dashboard.Handler(dashboard.Config{TraceURL: h.traceURL}))
	return mux
}

func (r *runner) ready(w http.ResponseWriter, _ *http.Request) {
	if why := r.highWater.Holding(); why != "" {
		http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
		return
	}
	inc := r.current.Load()
	if inc == nil || !inc.Ready(time.Now()) {
		http.Error(w, "not ready: no trusted lease or not yet in the member views (joining, or etcd unreachable)", http.StatusServiceUnavailable)
		return
	}
	if alarms := inc.EtcdAlarms(); len(alarms) > 0 {
		http.Error(w, "not ready: etcd alarm "+strings.Join(alarms, ", ")+": etcd refuses writes, no execution starts", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "ok %s\n", inc.ID())
}

// peerClient reads the other members' /metrics for GET /v1/health: nil
// (not asked) when members serve HTTPS (see ops.ReadClaims); with
// --http-read-auth it sends the token, which their /metrics then need
// (TestMetricsNeedTheReadAuth).
func peerClient(h httpFlags, auth api.Auth) *http.Client {
	switch {
	case h.tlsCert != "":
		return nil
	case auth.ProtectReads && auth.Token != nil:
		return &http.Client{Transport: withToken{token: auth.Token}}
	}
	return &http.Client{}
}

// withToken sends every request with the API's bearer token.
type withToken struct{ token []byte }

func (w withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(w.token))
	return http.DefaultTransport.RoundTrip(r)
}
