package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrSessionLost is returned when a member's lease expired or was revoked
// behind its back; the member must stop everything and join again.
var ErrSessionLost = errors.New("membership: session lost")

// NewID returns a member id made of the hostname and a fresh UUID.
func NewID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + "-" + uuid.NewString()
}

// Record is what a member publishes about itself.
type Record struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	HTTP      string    `json:"http"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	// CatalogRevision is the catalog this member runs (0 when it runs a local file).
	CatalogRevision int64 `json:"catalog_revision"`
	// Labels are the member's (kira run --label); a job's placement picks
	// members by them. Set at join, never changed.
	Labels map[string]string `json:"labels"`
	// HistoryFormat is the newest format of stored history records the
	// member reads (history.NewestFormat); absent from the records of
	// versions that read only the first (history.FormatJSON).
	HistoryFormat int `json:"history_format,omitempty"`
	// CatalogFileNotStored, when set, says that the member's --catalog file
	// differs from the stored catalog it runs, why it was not stored at the
	// member's start, and how to apply it.
	CatalogFileNotStored string `json:"catalog_file_not_stored,omitempty"`
}

// Config says how a member joins.
type Config struct {
	Cluster string
	Record  Record
	// TTL of the lease, a whole number of seconds, at least 2s.
	TTL time.Duration
	// Margin is subtracted from renewal+TTL to make Deadline conservative.
	// Zero means TTL/6.
	Margin time.Duration
	// Now is the clock the trust window is measured on; nil means time.Now
	// (monotonic). Tests inject a manual clock.
	Now func() time.Time
}

// Validate checks the timing invariants where they enter the system.
func (c *Config) Validate() error {
	switch {
	case c.Cluster == "":
		return errors.New("membership: cluster is required")
	case c.Record.ID == "":
		return errors.New("membership: record id is required")
	case c.TTL < 2*time.Second || c.TTL%time.Second != 0:
		return fmt.Errorf("membership: lease TTL %s must be whole seconds and at least 2s", c.TTL)
	case c.Margin < 0 || c.Margin >= c.TTL/3:
		return fmt.Errorf("membership: margin %s must be in [0, TTL/3)", c.Margin)
	}
	return nil
}

// Member is this process's live membership: a lease, its session and its record.
type Member struct {
	cfg     Config
	cli     *clientv3.Client
	session *concurrency.Session
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// lastAck is read by every execution as it starts (Trusted), so it is
	// an atomic, not under mu: thousands of fires start together.
	lastAck atomic.Pointer[time.Time]

	mu        sync.Mutex
	closed    bool
	withdrawn bool // record deleted: SetCatalogRevision must not bring it back
}

// Join grants a lease, starts renewing it and publishes the member record.
// ctx bounds the joining only; the membership lasts until Leave or until the
// lease is lost (Done).
func Join(ctx context.Context, cli *clientv3.Client, cfg Config) (*Member, error) {
	if cfg.Margin == 0 {
		cfg.Margin = cfg.TTL / 6
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Member{cfg: cfg, cli: cli}
	// Measured before the grant: the server's lease cannot start earlier.
	granted := cfg.Now()
	lease, err := cli.Grant(ctx, int64(cfg.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("membership: grant lease: %w", err)
	}
	m.lastAck.Store(&granted)
	kaCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.session, err = concurrency.NewSession(renewingClient(kaCtx, m), concurrency.WithLease(lease.ID), concurrency.WithContext(kaCtx))
	if err != nil {
		cancel()
		m.revoke(lease.ID)
		return nil, fmt.Errorf("membership: session: %w", err)
	}

	rec, _ := json.Marshal(cfg.Record)
	if _, err := cli.Put(ctx, keyspace.Member(cfg.Cluster, cfg.Record.ID), string(rec), clientv3.WithLease(lease.ID)); err != nil {
		m.Leave(context.Background())
		return nil, fmt.Errorf("membership: publish record: %w", err)
	}
	return m, nil
}

// renewingClient is cli as the member's session sees it: the same
// connection for every call, except that keeping the lease alive is left to
// the member's own renewals (renew), not to etcd's client. That client looks
// for due renewals on a fixed 500 ms poll, so a renewal due every 667 ms
// (TTL 2s) goes out every second and the lease lasts two renewal intervals,
// not three. The session's context ends the client's, which shares cli's
// connection and must not close it.
func renewingClient(ctx context.Context, m *Member) *clientv3.Client {
	c := clientv3.NewCtxClient(ctx, clientv3.WithZapLogger(m.cli.GetLogger()))
	c.Cluster, c.KV, c.Watcher, c.Auth, c.Maintenance = m.cli.Cluster, m.cli.KV, m.cli.Watcher, m.cli.Auth, m.cli.Maintenance
	c.Lease = renewals{Lease: m.cli.Lease, m: m}
	return c
}

// renewals is a clientv3.Lease whose KeepAlive is served by Member.renew.
type renewals struct {
	clientv3.Lease
	m *Member
}

// KeepAlive renews lease id every TTL/3 until ctx ends, the client closes or
// etcd says the lease is gone; the channel closes then, as etcd's does.
func (r renewals) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	acks := make(chan *clientv3.LeaseKeepAliveResponse, 1)
	r.m.wg.Add(1)
	go r.m.renew(ctx, id, acks)
	return acks, nil
}

// renew renews the lease every TTL/3 and records each proven renewal for
// the trust window. A renewal that fails or takes longer than TTL/3 is not
// waited for: the next tick sends another, and the trust window shrinks
// meanwhile, which is what it is for.
func (m *Member) renew(ctx context.Context, id clientv3.LeaseID, acks chan<- *clientv3.LeaseKeepAliveResponse) {
	defer m.wg.Done()
	defer close(acks)
	interval := m.cfg.TTL / 3
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.cli.Ctx().Done():
			return
		case <-tick.C:
		}
		// Taken before the request: etcd renews the lease after it, so
		// sent+TTL never overestimates the server's expiry.
		sent := m.cfg.Now()
		rctx, cancel := context.WithTimeout(ctx, interval)
		resp, err := m.cli.KeepAliveOnce(rctx, id)
		cancel()
		switch {
		case err == nil:
			m.lastAck.Store(&sent)
			select {
			case acks <- resp:
			default: // the session only drains the channel
			}
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return
		}
	}
}

// SetCatalogRevision republishes the member record with the catalog
// revision the member now runs, for kira status.
func (m *Member) SetCatalogRevision(ctx context.Context, rev int64) error {
	m.mu.Lock()
	if m.withdrawn {
		m.mu.Unlock()
		return nil
	}
	m.cfg.Record.CatalogRevision = rev
	rec, _ := json.Marshal(m.cfg.Record)
	m.mu.Unlock()
	_, err := m.cli.Put(ctx, keyspace.Member(m.cfg.Cluster, m.cfg.Record.ID), string(rec), clientv3.WithLease(m.session.Lease()))
	return err
}

// ID returns the member id.
func (m *Member) ID() string { return m.cfg.Record.ID }

// Cluster returns the cluster the member joined.
func (m *Member) Cluster() string { return m.cfg.Cluster }

// TTL returns the lease TTL.
func (m *Member) TTL() time.Duration { return m.cfg.TTL }

// Session returns the session that elections are built on.
func (m *Member) Session() *concurrency.Session { return m.session }

// Lease returns the member's lease id.
func (m *Member) Lease() clientv3.LeaseID { return m.session.Lease() }

// Done is closed when the lease is lost or the member left.
func (m *Member) Done() <-chan struct{} { return m.session.Done() }

// Deadline is the end of the trust window: last keepalive ack + TTL − margin.
func (m *Member) Deadline() time.Time {
	return m.lastAck.Load().Add(m.cfg.TTL - m.cfg.Margin)
}

// Trusted reports whether the member may start work at now: its session is
// not known to be lost and now is before the deadline.
func (m *Member) Trusted(now time.Time) bool {
	select {
	case <-m.session.Done():
		return false
	default:
	}
	return now.Before(m.Deadline())
}

// Withdraw deletes the member's record but keeps its lease: the member
// leaves every view, so the others take its slots over as it resigns them,
// while it still holds the slots whose executions it is draining. A graceful
// stop with executions in flight withdraws first; Leave ends the rest.
func (m *Member) Withdraw(ctx context.Context) error {
	m.mu.Lock()
	m.withdrawn = true
	m.mu.Unlock()
	if _, err := m.cli.Delete(ctx, keyspace.Member(m.cfg.Cluster, m.cfg.Record.ID)); err != nil {
		return fmt.Errorf("membership: withdraw record: %w", err)
	}
	return nil
}

// TrustLeft is how much of the trust window is left now, by the member's own
// clock (Config.Now, monotonic): zero or less when it may not start work.
// Callers that schedule by another clock (a scheduler's, possibly skewed)
// use this rather than comparing their times with Deadline.
func (m *Member) TrustLeft() time.Duration {
	now := m.cfg.Now()
	if !m.Trusted(now) {
		return 0
	}
	return m.Deadline().Sub(now)
}

// Leave revokes the lease, which deletes the member record and every election
// key of this member in one revision, so others take over at once. It is
// idempotent and bounded by ctx; if the revoke fails, the lease expires on its own.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	err := m.revokeCtx(ctx, m.session.Lease())
	m.session.Orphan()
	m.cancel()
	m.wg.Wait()
	return err
}

func (m *Member) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.revokeCtx(ctx, id)
}

func (m *Member) revokeCtx(ctx context.Context, id clientv3.LeaseID) error {
	if _, err := m.cli.Revoke(ctx, id); err != nil {
		return fmt.Errorf("membership: revoke lease: %w", err)
	}
	return nil
}
