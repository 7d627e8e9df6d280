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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdclient"
	"github.com/kira-scheduler/kira/etcdnode"
	"github.com/kira-scheduler/kira/member"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/scheduler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type runFlags struct {
	catalog, cluster, dataDir, name, httpAddr string
	etcd                                      etcdClientFlags
	embeddedClient, embeddedPeer              string
	grace                                     time.Duration
	clockOffset                               time.Duration
	traceStdout                               bool
	logLevel                                  string
}

// parseRunFlags reads kira run's command line.
func parseRunFlags(args []string, stderr io.Writer) (runFlags, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	var f runFlags
	fs.StringVar(&f.catalog, "catalog", "", "catalog YAML file, applied to the cluster at start if it differs from the stored one; without it, the stored catalog of --cluster runs")
	fs.StringVar(&f.cluster, "cluster", config.DefaultCluster, "cluster to run when no --catalog is given")
	f.etcd.register(fs, "", "comma-separated etcd endpoints; empty starts an embedded single-node etcd")
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
		return f, errUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return f, errUsage
	}
	return f, nil
}

func runCommand(args []string, stderr io.Writer) error {
	f, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	var cat *config.Catalog
	if f.catalog != "" {
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

	etcd := f.etcd.config()
	if len(etcd.Endpoints) == 0 {
		e, err := etcdnode.Start(embeddedEtcd(f))
		if err != nil {
			return fmt.Errorf("kira run: %w", err)
		}
		defer e.Close()
		useHostingEtcdGC(os.Getenv("GOGC"))
		etcd = etcdclient.Config{Endpoints: etcdclient.SplitList(f.embeddedClient)}
		logger.Info("started embedded etcd", "data_dir", f.dataDir, "client_url", f.embeddedClient)
	}

	r := &runner{logger: logger, metrics: newMetrics()}
	if f.httpAddr != "" {
		srv, err := r.serveHTTP(f.httpAddr)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	err = member.Run(ctx, member.Config{
		Etcd: etcd, Cluster: f.cluster, Catalog: cat,
		Name: f.name, HTTP: f.httpAddr, Version: version, Logger: logger,
		Scheduler: scheduler.Config{
			Grace:   f.grace,
			OnEvent: r.onEvent,
			Clock:   scheduler.OffsetClock{Base: scheduler.RealClock{}, Offset: f.clockOffset},
		},
		OnIncarnation: func(inc *member.Incarnation) {
			if inc == nil {
				r.current.Store(nil)
				return
			}
			r.current.Store(inc.Member())
		},
	})
	if errors.Is(err, config.ErrNoCatalog) {
		return fmt.Errorf("kira run: %w: give --catalog FILE or run kira apply -f FILE first", err)
	}
	if err == nil {
		logger.Info("stopped")
	}
	return err
}

// runner is what kira run serves beside its member: metrics, logs and the
// health of the current incarnation.
type runner struct {
	logger  *slog.Logger
	metrics *metrics
	current atomic.Pointer[membership.Member]
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
		attrs := []any{"slot", e.Slot.String(), "token", e.Token.String(), "execution_id", e.Execution.ID, "trigger", string(e.Cause), "attempt", e.Attempt,
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

// embeddedEtcd is the single-node etcd kira run starts when no --etcd is
// given; kira bench measures against the same configuration by default.
func embeddedEtcd(f runFlags) etcdnode.Config {
	return etcdnode.Config{Name: "kira", DataDir: f.dataDir, ListenClientURLs: f.embeddedClient, ListenPeerURLs: f.embeddedPeer,
		InitialClusterState: "new", InitialClusterToken: "kira-embedded", LogLevel: "error", Quiet: true}
}
