package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// StartTimeout bounds how long a server may take to become ready.
const StartTimeout = 30 * time.Second

// Cluster is a running set of embedded etcd members.
type Cluster struct {
	t       testing.TB
	mu      sync.Mutex
	members []*Member
}

// Member is one etcd server of a Cluster.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	dir       string
	etcd      *embed.Etcd // nil while stopped
}

// Start runs a single-node etcd.
func Start(t testing.TB) *Cluster { return StartCluster(t, 1) }

// StartCluster runs an etcd cluster of n members, stopped at the end of the test.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := Launch(t.TempDir(), n)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	c.t = t
	t.Cleanup(c.Close)
	return c
}

// Launch runs an etcd cluster of n members with data under dir. Close stops it.
//
// Ports are picked free and then bound by etcd: in between, another process
// (or an outgoing connection's local port) can take one, so Launch tries
// again with new ports and a clean dir.
func Launch(dir string, n int) (*Cluster, error) {
	const attempts = 5
	for i := 1; ; i++ {
		c, err := launch(dir, n)
		if err == nil || i == attempts || !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
		for j := range n {
			if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("etcd%d", j))); err != nil {
				return nil, err
			}
		}
	}
}

func launch(dir string, n int) (*Cluster, error) {
	c := &Cluster{}
	var initial []string
	for i := 0; i < n; i++ {
		clientAddr, err := pickAddr()
		if err != nil {
			return nil, err
		}
		peerAddr, err := pickAddr()
		if err != nil {
			return nil, err
		}
		m := &Member{
			Name:      fmt.Sprintf("etcd%d", i),
			ClientURL: "http://" + clientAddr,
			PeerURL:   "http://" + peerAddr,
			dir:       filepath.Join(dir, fmt.Sprintf("etcd%d", i)),
		}
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	errs := make(chan error, n)
	for _, m := range c.members {
		go func() { errs <- m.start(strings.Join(initial, ","), "new") }()
	}
	var first error
	for range c.members {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.Close()
		return nil, first
	}
	return c, nil
}

func (m *Member) start(initialCluster, state string) error {
	cfg, err := etcdnode.Config{
		Name: m.Name, DataDir: m.dir,
		ListenClientURLs: m.ClientURL, ListenPeerURLs: m.PeerURL,
		InitialCluster: initialCluster, InitialClusterState: state, InitialClusterToken: "etcdtest",
		// etcd's own transaction limit, which a user's etcd has, rather
		// than kira etcd's larger one.
		MaxTxnOps: embed.DefaultMaxTxnOps,
		Quiet:     true, Tuning: etcdnode.Fast,
	}.Embed()
	if err != nil {
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("start %s: %w", m.Name, err)
	case <-time.After(StartTimeout):
		e.Close()
		return fmt.Errorf("start %s: not ready after %s", m.Name, StartTimeout)
	}
	m.etcd = e
	return nil
}

// Close stops every member; it is idempotent.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.etcd != nil {
			m.etcd.Close()
			m.etcd = nil
		}
	}
}

// Members returns the cluster's members, in the order they were created.
func (c *Cluster) Members() []*Member { return c.members }

// Endpoints returns the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Client returns a client of the whole cluster, closed at the end of the test.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, c.Endpoints()...)
}

// NewClient connects to endpoints (a cluster's, or a Proxy's) and closes the
// client at the end of the test.
func NewClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithBlock()}, //nolint:staticcheck // fail fast when the server is not there
	})
	if err != nil {
		t.Fatalf("etcdtest: client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Stop stops member i, as a crash would (its data stays for Restart).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.members[i]; m.etcd != nil {
		m.etcd.Close()
		m.etcd = nil
	}
}

// Restart starts a stopped member i again with its data (tests only).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	if err := c.members[i].start(strings.Join(initial, ","), "existing"); err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
}

// Leader returns the index of the member that is the raft leader, or -1.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.members {
		if m.etcd != nil && m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			return i
		}
	}
	return -1
}

// WaitHealthy blocks until a write through cli succeeds or ctx ends.
func WaitHealthy(ctx context.Context, cli *clientv3.Client) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(wctx, "/etcdtest/health", "ok")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: not healthy: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pickAddr picks a port for a member; tests replace it.
var pickAddr = etcdnode.FreeAddr
