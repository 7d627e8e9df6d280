// Package incarnation is a Kira member's whole life in a process: join the
// cluster under a lease, follow the member views and the stored catalog, run
// the scheduler, and leave. kira run, kira bench and the root package kira
// (for services that embed Kira) all use it. It is apart from package member
// (lease, record, views) because the scheduler imports member and this
// package imports the scheduler: one package would be an import cycle.
//
// A member has one identity per incarnation: Start joins with a fresh id
// (hostname + UUID) and its own lease. Run keeps a member alive across lost
// leases by starting a new incarnation each time, so a process that lost its
// lease comes back as a new member and never acts on the old lease again.
//
//	incarnation:  join ──► running ──(ctx ends)──► draining ──► leave (revoke: slots handed over at once)
//	                          │
//	                          └──(lease lost)──► everything cancelled ──► leave, bounded ──► Run joins again
package incarnation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/highwater"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/scheduler"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Config is what a member needs. Etcd's endpoints, and Cluster or
// Catalog, are required.
type Config struct {
	// Etcd says how to reach etcd: endpoints, TLS, user.
	Etcd etcdclient.Config
	// Cluster names the catalog the member runs (the catalog's cluster:).
	Cluster string
	// Catalog, if set, is the member's --catalog file, read as
	// CatalogSource: stored at start when config.StoreFile allows (nothing
	// stored, or a file-stored catalog of a lower generation); its Cluster
	// is used. Either way the stored catalog runs. Without it the stored
	// catalog of Cluster runs.
	Catalog       *config.Catalog
	CatalogSource config.Source
	// Name is the member's human-readable name; default the hostname.
	Name string
	// HTTP is the address the member serves on, published in its record.
	HTTP string
	// Version is published in the member record.
	Version string
	// Labels are published in the member record, for the jobs' placement.
	Labels map[string]string
	// Scheduler is the scheduler's configuration (handlers, grace, clock,
	// events); its Logger defaults to Logger.
	Scheduler scheduler.Config
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnIncarnation, if set, is called with each incarnation once it has
	// joined, and with nil when it has left.
	OnIncarnation func(*Incarnation)
	// fileNotStored is the notice of an earlier incarnation's storeFile,
	// which a rejoin (Catalog no longer set) publishes again.
	fileNotStored string
	// HighWater, if set, is the highest etcd revision the member has seen
	// (in a file, to outlast the process): every incarnation feeds it and
	// starts nothing under a token it holds back (highwater.Mark.Admit). Run
	// makes one in memory if it is nil.
	HighWater *highwater.Mark
	// Tracing, if set, gives each incarnation the tracer provider of its
	// spans, so that their resource can name the member id; the returned
	// function flushes it and is called once the incarnation has stopped.
	// Without it the scheduler's Tracer (default the global provider's) is used.
	Tracing func(member string) (trace.TracerProvider, func())
}

// RetryDelay is the pause before Run joins again after a lost lease or an
// unreachable etcd.
const RetryDelay = time.Second

// leaveTimeout bounds the lease revoke of a graceful leave.
const leaveTimeout = 5 * time.Second

// Run keeps a member of the cluster alive until ctx ends (then it returns
// nil after a graceful leave). A lost lease or an unreachable etcd is
// retried with a new incarnation; an error no retry can cure (no catalog
// stored, a catalog this binary cannot run, etcd refusing this client:
// etcdclient.ErrRefused) is returned.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HighWater == nil {
		cfg.HighWater = highwater.New(cfg.Logger)
	}
	return (&rejoiner{cfg: cfg}).run(ctx)
}

// run starts incarnations until ctx ends or one ends with an error a new
// one cannot cure. Only r holds the Config: see forgetFile.
func (r *rejoiner) run(ctx context.Context) error {
	for {
		err := r.incarnate(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, etcdclient.ErrRefused):
			return err
		case errors.Is(err, member.ErrSessionLost) || errors.Is(err, scheduler.ErrUntrusted):
			r.cfg.Logger.Warn("lease lost: every execution cancelled; joining again as a new member", "err", err)
		case isTransient(err):
			r.cfg.Logger.Warn("cannot reach etcd; retrying", "etcd", strings.Join(r.cfg.Etcd.Endpoints, ","), "err", err)
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(RetryDelay):
		}
	}
}

// rejoiner carries what one incarnation leaves to the next.
type rejoiner struct {
	cfg     Config
	applied bool // Catalog was offered to StoreFile: once per Run
	// fileNotStored is the first incarnation's notice (Incarnation.fileNotStored).
	fileNotStored string
	// staleLease is the lease of an incarnation that lost it and could not
	// revoke it (etcd had no quorum). Until it expires its election keys
	// still hold its slots: the next incarnation revokes it first, so after
	// an outage the slots are free at once, not a TTL later.
	staleLease clientv3.LeaseID
}

// incarnate runs one incarnation on a client of its own: closing it
// releases any etcd call the incarnation left pending on an unreachable
// server.
func (r *rejoiner) incarnate(ctx context.Context) error {
	cli, err := etcdclient.New(r.cfg.Etcd, grpc.WithChainUnaryInterceptor(r.cfg.HighWater.Interceptor()))
	if err != nil {
		return etcdclient.Explain(r.cfg.Etcd, keyspace.Cluster(r.cfg.cluster()), fmt.Errorf("member: %w", err))
	}
	defer cli.Close()
	if err := etcdclient.Check(ctx, cli, r.cfg.Etcd, keyspace.Cluster(r.cfg.cluster()), joinTimeout); err != nil {
		return err
	}
	if err := r.prepare(ctx, cli); err != nil {
		return err
	}
	cfg := r.cfg
	if r.applied {
		// Offered once: a rejoin publishes the first decision again.
		cfg.fileNotStored = r.fileNotStored
	}
	inc, err := Start(ctx, cli, cfg)
	if err != nil {
		return etcdclient.Explain(cfg.Etcd, keyspace.Cluster(cfg.cluster()), err)
	}
	if !r.applied {
		r.fileNotStored = inc.fileNotStored
		r.forgetFile()
	}
	r.applied = true
	if r.cfg.OnIncarnation != nil {
		r.cfg.OnIncarnation(inc)
		defer r.cfg.OnIncarnation(nil)
	}
	runErr := inc.Wait(ctx)
	// After a lost lease the revoke gets a quarter of the TTL: an etcd that
	// answers revokes in milliseconds, one without a leader would only delay
	// the rejoin, and the next incarnation revokes this lease first anyway.
	wait := leaveTimeout
	if runErr != nil {
		wait = min(wait, inc.member.TTL()/4)
	}
	leaveCtx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	switch err := inc.Leave(leaveCtx); {
	case err != nil && runErr == nil:
		r.cfg.Logger.Warn("could not revoke the lease; it will expire on its own", "err", err)
	case err != nil:
		r.staleLease = inc.member.Lease()
	case runErr == nil:
		r.cfg.Logger.Info("left: lease revoked, every slot released", "member", inc.ID())
	}
	return runErr
}

// forgetFile drops the --catalog file's catalog once it was offered to
// StoreFile: the stored catalog runs, and the file's every job, held for as
// long as the member runs, would be marked by its collector at every cycle.
// Held by TestTheFileCatalogIsNotKept.
func (r *rejoiner) forgetFile() {
	r.cfg.Cluster, r.cfg.Catalog = r.cfg.cluster(), nil
}

// prepare revokes the previous incarnation's lease if it is still alive.
func (r *rejoiner) prepare(ctx context.Context, cli *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	if r.staleLease != 0 {
		// Safe: the incarnation that held it has stopped everything.
		rctx, cancelRevoke := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Revoke(rctx, r.staleLease)
		cancelRevoke()
		switch {
		case err == nil:
			r.cfg.Logger.Info("revoked the lease of the previous incarnation", "lease", fmt.Sprintf("%x", int64(r.staleLease)))
			r.staleLease = 0
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			r.staleLease = 0 // expired meanwhile
		default:
			return fmt.Errorf("member: revoking the previous incarnation's lease: %w", err)
		}
	}
	return nil
}

// cluster is the cluster the member runs: its catalog's, if given.
func (c Config) cluster() string {
	if c.Catalog != nil {
		return c.Catalog.Cluster
	}
	return c.Cluster
}

// isTransient reports errors of talking to etcd that a retry may cure.
func isTransient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "etcdserver:") || strings.Contains(err.Error(), "connection")
}

// joinTimeout bounds loading the catalog and joining.
const joinTimeout = 10 * time.Second

// Incarnation is one joined member: its lease, its views, its catalog watch
// and its scheduler, all running until Stop or a lost lease.
type Incarnation struct {
	member *member.Member
	views  *member.Views
	sched  *scheduler.Scheduler
	stop   context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{} // closed when the scheduler returned
	// flushTraces ends the incarnation's tracer provider, after the scheduler.
	flushTraces func()
	alarms      alarms
	// record is the catalog revision the member runs, for its record.
	record *catalogRecord
	err    error // the scheduler's, once done
	// fileNotStored is what its record says of the --catalog file not stored.
	fileNotStored string
}

// Start stores cfg.Catalog if config.StoreFile allows (storeFile), joins the
// cluster with a fresh member id through cli, and starts the member's
// goroutines on the stored catalog; ctx bounds the joining only. The caller ends it with
// Stop (graceful) then Leave, or lets a lost lease end it (Done).
func Start(ctx context.Context, cli *clientv3.Client, cfg Config) (*Incarnation, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cluster := cfg.cluster()
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	host, _ := os.Hostname()
	name := cfg.Name
	if name == "" {
		name = host
	}
	notStored := cfg.fileNotStored
	if cfg.Catalog != nil {
		var err error
		if notStored, err = storeFile(ctx, cli, cfg, name); err != nil {
			return nil, err
		}
	}
	stored, err := config.Read(ctx, cli, cluster, 0)
	if err != nil {
		return nil, err
	}
	cat, catRev := stored.Catalog, stored.Revision
	id := member.NewID()
	sc := cfg.Scheduler
	flushTraces := func() {}
	if cfg.Tracing != nil {
		var tp trace.TracerProvider
		tp, flushTraces = cfg.Tracing(id)
		sc.Tracer = tp.Tracer(scheduler.TracerName)
	}
	m, err := member.Join(ctx, cli, member.Config{
		Cluster: cat.Cluster,
		TTL:     cat.Membership.LeaseTTL,
		Record: member.Record{ID: id, Name: name, Host: host, HTTP: cfg.HTTP, Version: cfg.Version, Labels: cfg.Labels, HistoryFormat: history.NewestFormat,
			StartedAt: time.Now().UTC(), CatalogRevision: catRev, CatalogFileNotStored: notStored},
	})
	if err != nil {
		flushTraces()
		return nil, err
	}
	cfg.Logger.Info("joined", "member", id, "cluster", cat.Cluster, "catalog_revision", catRev, "lease_ttl", cat.Membership.LeaseTTL, "etcd", strings.Join(cfg.Etcd.Endpoints, ","))
	views := member.NewViews(cli, cat.Cluster)
	views.Logger = cfg.Logger
	if sc.Logger == nil {
		sc.Logger = cfg.Logger
	}
	sc.CatalogRevision = catRev
	if cfg.HighWater != nil && sc.Admit == nil {
		sc.Admit = cfg.HighWater.Admit
	}
	s, err := scheduler.New(m, views, cat, sc)
	if err != nil {
		m.Leave(context.Background())
		flushTraces()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	inc := &Incarnation{member: m, views: views, sched: s, stop: stop, done: make(chan struct{}), flushTraces: sync.OnceFunc(flushTraces), fileNotStored: notStored,
		record: newCatalogRecord()}
	inc.wg.Add(5)
	go func() { defer inc.wg.Done(); views.Run(runCtx) }()
	// Not cfg, cat or stored captured: they would keep the --catalog file
	// and the first catalog read for as long as these run, after the watch
	// replaced it (TestTheFileCatalogIsNotKept).
	logger, clusterName := cfg.Logger, cat.Cluster
	go func() { defer inc.wg.Done(); inc.alarms.watch(runCtx, cli, logger) }()
	go func() { defer inc.wg.Done(); inc.publishRevisions(runCtx, catRev, logger) }()
	go func(stored *config.Stored) {
		defer inc.wg.Done()
		inc.followCatalog(runCtx, cli, clusterName, stored, logger)
	}(stored)
	go func() {
		defer inc.wg.Done()
		inc.err = s.Run(runCtx)
		close(inc.done)
	}()
	return inc, nil
}

// storeFile stores the member's --catalog file if config.StoreFile allows;
// when the file differs from the stored catalog and is not stored, it says
// so at WARN and returns the notice the member publishes in its record.
func storeFile(ctx context.Context, cli *clientv3.Client, cfg Config, name string) (string, error) {
	src := cfg.CatalogSource
	src.By, src.Member, src.At = config.ByFile, name, time.Now().UTC()
	out, err := config.StoreFile(ctx, cli, cfg.Catalog, src)
	switch {
	case err != nil:
		return "", err
	case out.Stored:
		cfg.Logger.Info("stored the --catalog file", "revision", out.Revision, "file", src.File, "digest", src.Digest, "generation", src.Generation)
	case out.Refused != "":
		file := src.File
		if file == "" {
			file = "FILE" // a program embedding Kira, with no file of its own
		}
		how := "to run it, kira apply -f " + file
		if out.Current.Source != nil && out.Current.Source.By == config.ByFile {
			how += ", or roll it out with a generation: above the stored one's"
		}
		cfg.Logger.Warn("the --catalog file differs from the stored catalog and was not stored: running the stored catalog",
			"file", src.File, "digest", src.Digest, "generation", src.Generation, "stored_revision", out.Revision, "why", out.Refused, "how", how)
		return fmt.Sprintf("its --catalog file %s (%s) differs from the stored catalog of revision %d and was not stored at its start: %s; %s", src.File, src.Digest, out.Revision, out.Refused, how), nil
	}
	return "", nil
}

// followCatalog makes the scheduler converge to every catalog stored after
// from, the one the incarnation's start read; its record publishes the
// revisions, coalesced (publishRevisions).
func (inc *Incarnation) followCatalog(ctx context.Context, cli *clientv3.Client, cluster string, from *config.Stored, logger *slog.Logger) {
	config.WatchStored(ctx, cli, cluster, from, func(u config.Update) {
		rev := u.Revision
		if err := inc.sched.SetCatalogUpdate(u); err != nil {
			logger.Error("cannot run the new catalog; keeping the current one", "revision", rev, "running", inc.sched.CatalogRevision(), "err", err)
			return
		}
		inc.record.set(rev)
	}, func(rev int64, err error) {
		logger.Error("cannot read the stored catalog; keeping the current one", "revision", rev, "running", inc.sched.CatalogRevision(), "err", err)
	})
}

// ID is the incarnation's member id.
func (inc *Incarnation) ID() string { return inc.member.ID() }

// Member is the incarnation's membership (lease, trust window).
func (inc *Incarnation) Member() *member.Member { return inc.member }

// Ready reports whether the incarnation is a working member at now: its
// lease is proven alive, and its views have caught up with it (they contain
// it, so the assignment gives it its share of the slots).
func (inc *Incarnation) Ready(now time.Time) bool {
	return inc.member.Trusted(now) && inc.views.Latest().Contains(inc.ID())
}

// Scheduler is the incarnation's scheduler.
func (inc *Incarnation) Scheduler() *scheduler.Scheduler { return inc.sched }

// Done is closed when the scheduler has returned: after Stop, or on its own
// when the lease was lost or no longer trusted (Err says which).
func (inc *Incarnation) Done() <-chan struct{} { return inc.done }

// Err waits for Done and returns the scheduler's error: nil after Stop.
func (inc *Incarnation) Err() error { <-inc.done; return inc.err }

// Stop is a graceful stop: no more fires, in-flight runs drain (up to the
// scheduler's grace), then the goroutines end. Call Leave after it. Stop is
// idempotent.
func (inc *Incarnation) Stop() {
	inc.stop()
	inc.wg.Wait()
	inc.flushTraces()
}

// Wait runs the incarnation until ctx ends (a graceful stop: it returns
// nil once in-flight runs drained) or the scheduler returns on its own.
func (inc *Incarnation) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-inc.done:
	}
	inc.Stop()
	return inc.err
}

// Leave revokes the lease: every election key of the member goes in one
// revision, so the next owners take over at once.
func (inc *Incarnation) Leave(ctx context.Context) error { return inc.member.Leave(ctx) }
