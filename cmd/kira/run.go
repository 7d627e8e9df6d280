package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdnode"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/scheduler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
)

// EnvEtcdEndpoints is read when --etcd is not given.
const EnvEtcdEndpoints = "KIRA_ETCD_ENDPOINTS"

type runFlags struct {
	catalog, cluster, etcd, dataDir, name, httpAddr string
	embeddedClient, embeddedPeer                    string
	grace                                           time.Duration
	clockOffset                                     time.Duration
	traceStdout                                     bool
	logLevel                                        string
}

func runCommand(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	var f runFlags
	fs.StringVar(&f.catalog, "catalog", "", "catalog YAML file, applied to the cluster at start if it differs from the stored one; without it, the stored catalog of --cluster runs")
	fs.StringVar(&f.cluster, "cluster", config.DefaultCluster, "cluster to run when no --catalog is given")
	fs.StringVar(&f.etcd, "etcd", os.Getenv(EnvEtcdEndpoints), "comma-separated etcd endpoints (also $"+EnvEtcdEndpoints+"); empty starts an embedded single-node etcd")
	fs.StringVar(&f.dataDir, "data-dir", "./kira-data", "data directory of the embedded etcd")
	fs.StringVar(&f.name, "name", host, "human-readable member name (the member id adds a UUID to the hostname)")
	fs.StringVar(&f.httpAddr, "http", "", "listen address for /healthz and /metrics, such as :8080; empty disables")
	fs.StringVar(&f.embeddedClient, "embedded-client-url", "http://127.0.0.1:2379", "client URL of the embedded etcd")
	fs.StringVar(&f.embeddedPeer, "embedded-peer-url", "http://127.0.0.1:2380", "peer URL of the embedded etcd")
	fs.DurationVar(&f.grace, "grace", scheduler.DefaultGrace, "on SIGTERM, how long in-flight executions may finish before they are cancelled")
	fs.DurationVar(&f.clockOffset, "clock-offset", 0, "fault injection: schedule as if the wall clock were this far ahead (negative: behind); leases and fencing do not depend on it")
	fs.BoolVar(&f.traceStdout, "trace-stdout", false, "print every execution's OpenTelemetry span to stdout")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	var cat *config.Catalog
	if f.catalog != "" {
		var err error
		if cat, err = config.Load(f.catalog); err != nil {
			return err
		}
		f.cluster = cat.Cluster
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("kira run: --log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if f.traceStdout {
		exp, err := stdouttrace.New(stdouttrace.WithPrettyPrint())
		if err != nil {
			return err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		otel.SetTracerProvider(tp)
		defer tp.Shutdown(context.Background())
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	endpoints := splitList(f.etcd)
	if len(endpoints) == 0 {
		e, err := etcdnode.Start(embeddedEtcd(f))
		if err != nil {
			return fmt.Errorf("kira run: %w", err)
		}
		defer e.Close()
		useHostingEtcdGC(os.Getenv("GOGC"))
		endpoints = splitList(f.embeddedClient)
		logger.Info("started embedded etcd", "data_dir", f.dataDir, "client_url", f.embeddedClient)
	}

	r := &runner{flags: f, file: cat, endpoints: endpoints, logger: logger, metrics: newMetrics()}
	if f.httpAddr != "" {
		srv, err := r.serveHTTP(f.httpAddr)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	return r.run(ctx)
}

// embeddedEtcd is the single-node etcd kira run starts when no --etcd is
// given; kira bench measures against the same configuration by default.
func embeddedEtcd(f runFlags) etcdnode.Config {
	return etcdnode.Config{Name: "kira", DataDir: f.dataDir, ListenClientURLs: f.embeddedClient, ListenPeerURLs: f.embeddedPeer,
		InitialClusterState: "new", InitialClusterToken: "kira-embedded", LogLevel: "error", Quiet: true}
}

type runner struct {
	flags     runFlags
	file      *config.Catalog // from --catalog, or nil
	endpoints []string
	logger    *slog.Logger
	metrics   *metrics
	current   atomic.Pointer[membership.Member]
	// staleLease is the lease of an incarnation that lost it and could not
	// revoke it (etcd had no quorum). Until it expires, its election keys
	// still hold its slots: the next incarnation revokes it first, so that
	// after an outage the slots are free at once, not a TTL later.
	staleLease clientv3.LeaseID
}

// run keeps a member alive until ctx ends. A member that loses its lease
// stops everything and joins again as a fresh member with a new id.
func (r *runner) run(ctx context.Context) error {
	applied := false
	for {
		err := r.runMember(ctx, &applied)
		if ctx.Err() != nil {
			r.logger.Info("stopped")
			return nil
		}
		if errors.Is(err, config.ErrNoCatalog) {
			return fmt.Errorf("kira run: %w: give --catalog FILE or run kira apply -f FILE first", err)
		}
		if !errors.Is(err, membership.ErrSessionLost) && !errors.Is(err, scheduler.ErrUntrusted) && !isTransient(err) {
			return err
		}
		if errors.Is(err, membership.ErrSessionLost) || errors.Is(err, scheduler.ErrUntrusted) {
			r.logger.Warn("lease lost: every execution cancelled; joining again as a new member", "err", err)
		} else {
			r.logger.Warn("cannot reach etcd; retrying", "etcd", strings.Join(r.endpoints, ","), "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// isTransient reports errors of talking to etcd that a retry may cure.
func isTransient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "etcdserver:") || strings.Contains(err.Error(), "connection")
}

func (r *runner) runMember(ctx context.Context, applied *bool) error {
	// A client per incarnation: closing it releases any etcd call that the
	// previous incarnation left pending on an unreachable server.
	cli, err := clientv3.New(clientv3.Config{Endpoints: r.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("kira run: etcd client: %w", err)
	}
	defer cli.Close()
	joinCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if r.staleLease != 0 {
		// Safe: the incarnation that held it has stopped everything.
		rctx, cancelRevoke := context.WithTimeout(joinCtx, 2*time.Second)
		_, err := cli.Revoke(rctx, r.staleLease)
		cancelRevoke()
		switch {
		case err == nil:
			r.logger.Info("revoked the lease of the previous incarnation", "lease", fmt.Sprintf("%x", int64(r.staleLease)))
			r.staleLease = 0
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			r.staleLease = 0 // expired meanwhile
		default:
			return fmt.Errorf("kira run: revoking the previous incarnation's lease: %w", err)
		}
	}
	if r.file != nil && !*applied {
		// Only if it differs: N replicas started with the same file do not fight.
		rev, changed, err := config.Store(joinCtx, cli, r.file)
		if err != nil {
			return err
		}
		if changed {
			r.logger.Info("applied the catalog file", "file", r.flags.catalog, "revision", rev)
		}
		*applied = true
	}
	cat, catRev, err := config.LoadStored(joinCtx, cli, r.flags.cluster)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	id := membership.NewID()
	m, err := membership.Join(joinCtx, cli, membership.Config{
		Cluster: cat.Cluster,
		TTL:     cat.Membership.LeaseTTL,
		Record: membership.Record{ID: id, Name: r.flags.name, Host: host, HTTP: r.flags.httpAddr, Version: version,
			StartedAt: time.Now().UTC(), CatalogRevision: catRev},
	})
	if err != nil {
		return err
	}
	r.current.Store(m)
	defer r.current.Store(nil)
	r.logger.Info("joined", "member", id, "cluster", cat.Cluster, "catalog_revision", catRev, "lease_ttl", cat.Membership.LeaseTTL, "etcd", strings.Join(r.endpoints, ","))

	views := membership.NewViews(cli, cat.Cluster)
	s, err := scheduler.New(m, views, cat, scheduler.Config{
		Grace:   r.flags.grace,
		Logger:  r.logger,
		OnEvent: r.onEvent,
		Clock:   scheduler.OffsetClock{Base: scheduler.RealClock{}, Offset: r.flags.clockOffset},
	})
	if err != nil {
		m.Leave(context.Background())
		return err
	}
	bgCtx, stopBackground := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); views.Run(bgCtx) }()
	go func() {
		defer wg.Done()
		config.WatchStored(bgCtx, cli, cat.Cluster, catRev, func(next *config.Catalog, rev int64) {
			if err := s.SetCatalog(next, rev); err != nil {
				r.logger.Error("cannot run the new catalog; keeping the current one", "revision", rev, "err", err)
				return
			}
			r.logger.Info("converging to a new catalog", "revision", rev)
			if err := m.SetCatalogRevision(bgCtx, rev); err != nil {
				r.logger.Warn("could not publish the catalog revision", "err", err)
			}
		})
	}()
	defer func() { stopBackground(); wg.Wait() }()

	runErr := s.Run(ctx)
	// Revoking hands the slots over at once. After a lost lease it gets a
	// quarter of the TTL: an etcd that answers revokes in milliseconds, and
	// one that does not (no leader) would only delay the rejoin; the next
	// incarnation revokes this lease first anyway (staleLease).
	leaveWait := 5 * time.Second
	if runErr != nil {
		leaveWait = min(leaveWait, cat.Membership.LeaseTTL/4)
	}
	leaveCtx, cancelLeave := context.WithTimeout(context.Background(), leaveWait)
	defer cancelLeave()
	if err := m.Leave(leaveCtx); err != nil && runErr == nil {
		r.logger.Warn("could not revoke the lease; it will expire on its own", "err", err)
	} else if err != nil {
		r.staleLease = m.Lease()
	} else if runErr == nil {
		r.logger.Info("left: lease revoked, every slot released", "member", id)
	}
	return runErr
}

func (r *runner) onEvent(e scheduler.Event) {
	r.metrics.observe(e)
	switch e.Kind {
	case scheduler.Acquired, scheduler.Released, scheduler.Lost:
		r.logger.Info("slot "+string(e.Kind), "slot", e.Slot.String(), "token", e.Token.String(), "reason", e.Reason)
	case scheduler.Skipped:
		r.logger.Warn("fire skipped", "slot", e.Slot.String(), "scheduled", e.Execution.ScheduledTimeText(), "reason", e.Reason)
	case scheduler.Paused, scheduler.Resumed:
		r.logger.Info("job "+string(e.Kind), "job", e.Slot.Job)
	case scheduler.Finished:
		attrs := []any{"slot", e.Slot.String(), "token", e.Token.String(), "execution_id", e.Execution.ID, "trigger", string(e.Trigger), "attempt", e.Attempt,
			"scheduled", e.Execution.ScheduledTimeText(), "outcome", string(e.Result.Outcome), "code", e.Result.Code}
		if out := strings.TrimSpace(e.Result.OutputTail); out != "" {
			attrs = append(attrs, "output", out)
		}
		if e.Result.Err != nil {
			attrs = append(attrs, "err", e.Result.Err)
		}
		r.logger.Info("execution finished", attrs...)
	}
}

func (r *runner) serveHTTP(addr string) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		m := r.current.Load()
		if m == nil || !m.Trusted(time.Now()) {
			http.Error(w, "not a trusted member: no live lease", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ok %s\n", m.ID())
	})
	mux.Handle("/metrics", promhttp.HandlerFor(r.metrics.registry, promhttp.HandlerOpts{}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kira run: --http: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	return srv, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// metrics are the member's Prometheus series.
type metrics struct {
	registry   *prometheus.Registry
	leader     *prometheus.GaugeVec
	executions *prometheus.CounterVec
	skipped    *prometheus.CounterVec
	lateness   *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kira_slot_leader",
			Help: "1 while this member leads the slot. Summed over members: 0 for long means nobody does the work, 2 means split brain.",
		}, []string{"job", "partition"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kira_executions_total", Help: "Executions that ended, by outcome.",
		}, []string{"job", "outcome"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kira_fires_skipped_total", Help: "Fires not started, by reason.",
		}, []string{"job", "reason"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kira_execution_lateness_seconds", Help: "Start time minus scheduled time.",
			Buckets: []float64{.001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}, []string{"job"}),
	}
	m.registry.MustRegister(m.leader, m.executions, m.skipped, m.lateness)
	return m
}

func (m *metrics) observe(e scheduler.Event) {
	part := fmt.Sprint(e.Slot.Partition)
	switch e.Kind {
	case scheduler.Acquired:
		m.leader.WithLabelValues(e.Slot.Job, part).Set(1)
	case scheduler.Released, scheduler.Lost:
		m.leader.WithLabelValues(e.Slot.Job, part).Set(0)
	case scheduler.Started:
		m.lateness.WithLabelValues(e.Slot.Job).Observe(e.At.Sub(e.Execution.ScheduledTime).Seconds())
	case scheduler.Finished:
		m.executions.WithLabelValues(e.Slot.Job, string(e.Result.Outcome)).Inc()
	case scheduler.Skipped:
		m.skipped.WithLabelValues(e.Slot.Job, e.Reason).Inc()
	}
}
