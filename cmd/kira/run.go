package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/kira-scheduler/kira/internal/highwater"
	"github.com/kira-scheduler/kira/internal/incarnation"
	"github.com/kira-scheduler/kira/internal/scheduler"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

type runFlags struct {
	catalog, dataDir, name       string
	dataDirSet                   bool // --data-dir given: with --etcd, it keeps only the high-water mark
	http                         httpFlags
	embeddedClient, embeddedPeer string
	grace                        time.Duration
	clockOffset                  time.Duration
	journalEntries               int
	traceStdout                  bool
	logLevel, logFormat          string
	labels                       map[string]string
}

func (c *cli) runCmd() *cobra.Command { return c.runCmdInto(new(runFlags)) }

// runCmdInto is kira run with its flags parsed into f.
func (c *cli) runCmdInto(f *runFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a member: with --etcd, of the cluster there; without, on an embedded single-node etcd",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.dataDirSet = cmd.Flags().Changed("data-dir")
			return c.run(*f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.catalog, "catalog", "", "catalog YAML file, stored at start only if no catalog is stored or the stored one came from a --catalog file of a lower generation: (docs/catalog.md); the stored catalog runs. Without it, the stored catalog of --cluster runs")
	cmd.MarkFlagFilename("catalog", "yaml", "yml")
	fs.StringVar(&f.dataDir, "data-dir", "./kira-data", "data directory of the embedded etcd, and of the member's high-water mark (the highest etcd revision it has seen, "+highwater.FileName+"); with --etcd, only if given")
	fs.StringVar(&f.name, "name", "", "human-readable member name (default: the hostname; the member id adds a UUID to the hostname)")
	f.http.register(fs)
	fs.StringVar(&f.embeddedClient, "embedded-client-url", "http://127.0.0.1:2379", "client URL of the embedded etcd")
	fs.StringVar(&f.embeddedPeer, "embedded-peer-url", "http://127.0.0.1:2380", "peer URL of the embedded etcd")
	fs.DurationVar(&f.grace, "grace", scheduler.DefaultGrace, "on SIGTERM, how long in-flight executions may finish before they are cancelled")
	fs.DurationVar(&f.clockOffset, "clock-offset", 0, "fault injection: schedule as if the wall clock were this far ahead (negative: behind); leases and fencing do not depend on it")
	fs.IntVar(&f.journalEntries, "journal-entries", scheduler.DefaultJournalEntries, "keys in this member's journal of records; fewer reuse them sooner, copying the records still needed to their slots' rings (fault injection: the chaos suite wraps journals round with 16)")
	fs.BoolVar(&f.traceStdout, "trace-stdout", false, "print every span to stdout (the console exporter; otherwise OTEL_TRACES_EXPORTER and the other OTEL_* variables configure tracing)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json (one JSON object a line)")
	fs.StringToStringVar(&f.labels, "label", nil, "a label of this member, key=value, for the jobs' placement (repeatable, or comma-separated: gpu=true,zone=eu-1)")
	return cmd
}

func (c *cli) run(f runFlags) error {
	stderr := c.stderr
	if f.journalEntries < 1 {
		return fmt.Errorf("kira run: --journal-entries %d: a journal needs at least 1 key", f.journalEntries)
	}
	for k, v := range f.labels {
		if err := config.CheckLabel(k, v); err != nil {
			return fmt.Errorf("kira run: --label: %w", err)
		}
	}
	var cat *config.Catalog
	var src config.Source
	if f.catalog != "" {
		data, err := os.ReadFile(f.catalog)
		if err != nil {
			return fmt.Errorf("kira run: --catalog: %w", err)
		}
		if cat, err = config.Parse(f.catalog, data); err != nil {
			return err
		}
		src = config.FileSource(f.catalog, data, cat)
		c.cluster = cat.Cluster
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("kira run: --log-level: %w", err)
	}
	logger, err := newLogger(stderr, f.logFormat, level)
	if err != nil {
		return err
	}
	traces, err := setupTracing(context.Background(), f.traceStdout, c.cluster)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	etcd := c.etcdConfig("")
	if len(etcd.Endpoints) == 0 {
		e, err := etcdnode.Start(embeddedEtcd(f))
		if err != nil {
			return fmt.Errorf("kira run: %w", portTaken(err, map[string]string{
				"embedded-client-url": f.embeddedClient, "embedded-peer-url": f.embeddedPeer}, "or --etcd to join a running etcd"))
		}
		defer e.Close()
		defer keepSpace(e, etcdnode.DefaultMinFreeDisk, logger)()
		useHostingEtcdGC(os.Getenv("GOGC"))
		etcd = etcdclient.Config{Endpoints: etcdclient.SplitList(f.embeddedClient)}
		logger.Info("started embedded etcd", "data_dir", f.dataDir, "client_url", f.embeddedClient)
	}

	r := &runner{logger: logger}
	if r.highWater, err = loadHighWater(f, len(c.etcdConfig("").Endpoints) > 0, logger); err != nil {
		return err
	}
	markCtx, stopMark := context.WithCancel(context.Background())
	markDone := make(chan struct{})
	go func() { defer close(markDone); r.highWater.Run(markCtx) }()
	defer func() { stopMark(); <-markDone }()
	r.metrics = newMetrics(r.current.Load)
	r.metrics.watchHighWater(r.highWater)
	if f.http.addr != "" {
		stopHTTP, err := r.serveHTTP(f.http, etcd, c.cluster)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	cfg := incarnation.Config{
		Etcd: etcd, Cluster: c.cluster, Catalog: cat, CatalogSource: src,
		Name: f.name, HTTP: f.http.listenAddr(), Version: version, Logger: logger, Labels: f.labels,
		Scheduler: scheduler.Config{
			Grace:          f.grace,
			JournalEntries: f.journalEntries,
			OnEvent:        r.onEvent,
			Clock:          clock.Offset{Base: clock.Real{}, Offset: f.clockOffset},
			APIURL:         f.http.baseURL(),
			Handlers:       jobs.Builtin(),
		},
		OnIncarnation: r.current.Store,
		HighWater:     r.highWater,
	}
	if traces != nil {
		cfg.Tracing = traces.forMember
	}
	err = incarnation.Run(ctx, cfg)
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
	logger    *slog.Logger
	highWater *highwater.Mark
	metrics   *metrics
	current   atomic.Pointer[incarnation.Incarnation]
	counted   countedLog
}

// loadHighWater is the member's high-water mark: in --data-dir, the
// embedded etcd's, or with --etcd one given on purpose; otherwise in
// memory, forgotten at a restart (docs/operations.md says what that misses),
// which it says at WARN. Held by TestExternalEtcdWithoutADataDirWarns.
func loadHighWater(f runFlags, external bool, logger *slog.Logger) (*highwater.Mark, error) {
	if external && !f.dataDirSet {
		logger.Warn("no --data-dir: the high-water mark (the highest etcd revision this member saw) is kept in memory only; " +
			"after a restart this member cannot tell an etcd restored without --bump-revision, which hands out fencing tokens again: " +
			"give each member a --data-dir of its own on storage that outlives the process")
		return highwater.New(logger), nil
	}
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("kira run: --data-dir: %w", err)
	}
	m, err := highwater.Load(filepath.Join(f.dataDir, highwater.FileName), logger)
	if err != nil {
		return nil, fmt.Errorf("kira run: %w", err)
	}
	return m, nil
}

// countedLog logs a kind of event that can come by the thousand a second
// (fires refused under NOSPACE, fires skipped past capacity) once every
// countedLogEvery per key, with how many came since its previous line,
// instead of one line each: a line each would cost the member the CPU it
// lacks already. The first event of a key is logged at once; each event is
// still counted in the metrics and, for a skip, recorded in the history.
// Held by TestNoSpaceRecoversByItself and TestSkipsAreCountedInTheLog.
type countedLog struct {
	mu   sync.Mutex
	keys map[string]*counted
}

type counted struct {
	count int // events since the last line
	last  time.Time
}

// countedLogEvery is how often a key's events are counted in the log.
const countedLogEvery = 10 * time.Second

// add counts one event of key; when the key's last line is countedLogEvery
// old, it calls log with the count since then, this event included.
func (c *countedLog) add(key string, log func(count int)) {
	c.mu.Lock()
	if c.keys == nil {
		c.keys = map[string]*counted{}
	}
	k := c.keys[key]
	if k == nil {
		k = &counted{}
		c.keys[key] = k
	}
	k.count++
	if time.Since(k.last) < countedLogEvery {
		c.mu.Unlock()
		return
	}
	n := k.count
	k.count, k.last = 0, time.Now()
	c.mu.Unlock()
	log(n)
}

func (r *runner) onEvent(e scheduler.Event) {
	r.metrics.observe(e)
	switch e.Kind {
	case scheduler.Acquired, scheduler.Released, scheduler.Lost:
		r.logger.Info("slot "+string(e.Kind), "slot", e.Slot.String(), "token", e.Token.String(), "reason", e.Reason)
	case scheduler.Raised:
		r.logger.Debug("slot "+string(e.Kind), "slot", e.Slot.String(), "token", e.Token.String())
	case scheduler.Skipped:
		r.counted.add("skipped\x00"+e.Slot.Job+"\x00"+e.Reason, func(n int) {
			r.logger.Warn("fires skipped", "job", e.Slot.Job, "reason", e.Reason, "fires", n,
				"last_slot", e.Slot.String(), "last_scheduled", e.Execution.ScheduledTimeText())
		})
	case scheduler.Paused, scheduler.Resumed:
		r.logger.Info("job "+string(e.Kind), "job", e.Slot.Job)
	case scheduler.Finished:
		r.executionFinished(e)
	}
}

// executionFinished logs an execution's end: at WARN when it failed, timed
// out or was fenced, with its execution id and trace id either way.
func (r *runner) executionFinished(e scheduler.Event) {
	if errors.Is(e.Result.Err, rpctypes.ErrNoSpace) {
		r.counted.add("nospace", func(n int) {
			r.logger.Warn("fires not started: etcd is out of space (NOSPACE) and refuses to record their start",
				"fires", n, "last_slot", e.Slot.String(), "last_execution_id", e.Execution.ID)
		})
		return
	}
	attrs := []any{"slot", e.Slot.String(), "token", e.Token.String(), "execution_id", e.Execution.ID, "trace_id", e.TraceID,
		"trigger", string(e.Cause), "attempt", e.Attempt, "scheduled", e.Execution.ScheduledTimeText(), "outcome", string(e.Result.Outcome), "code", e.Result.Code}
	if out := strings.TrimSpace(e.Result.OutputTail); out != "" {
		attrs = append(attrs, "output", out)
	}
	if e.Result.Err != nil {
		attrs = append(attrs, "err", e.Result.Err)
	}
	switch e.Result.Outcome {
	case jobs.Failed, jobs.TimedOut, jobs.Fenced:
		r.logger.Warn("execution "+string(e.Result.Outcome), attrs...)
	default:
		r.logger.Info("execution finished", attrs...)
	}
}

// embeddedEtcd is the single-node etcd kira run starts when no --etcd is
// given; kira bench measures against the same configuration by default.
func embeddedEtcd(f runFlags) etcdnode.Config {
	return etcdnode.Config{Name: "kira", DataDir: f.dataDir, ListenClientURLs: f.embeddedClient, ListenPeerURLs: f.embeddedPeer,
		InitialClusterState: "new", InitialClusterToken: "kira-embedded", LogLevel: "error", Quiet: true}
}

// portTaken explains a failure to listen on an address already in use:
// which URL, and the flag (of flags: flag name → URL) that moves it.
func portTaken(err error, flags map[string]string, alternative string) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		for _, u := range etcdclient.SplitList(flags[name]) {
			if parsed, perr := url.Parse(u); perr == nil && strings.Contains(err.Error(), parsed.Host) {
				return fmt.Errorf("%s is taken (another etcd, or another kira run?): give --%s another address, %s: %w", parsed.Host, name, alternative, err)
			}
		}
	}
	return fmt.Errorf("a port is taken (another etcd, or another kira run?); see --%s, %s: %w", strings.Join(slices.Sorted(maps.Keys(flags)), ", --"), alternative, err)
}

// newLogger is kira run's logger: text (slog's key=value) or JSON.
func newLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("kira run: --log-format must be text or json, got %q", format)
}
