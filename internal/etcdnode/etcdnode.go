// Package etcdnode starts an embedded etcd server with the settings every
// Kira command shares: kira etcd, the embedded etcd of kira run, and the one
// kira bench measures against. Tests reach it through etcdtest, which adds
// the Fast tuning; production code never uses that tuning unless a user asks.
package etcdnode

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Tuning chooses how an embedded etcd trades durability for speed.
type Tuning int

const (
	// Production is etcd's own behaviour: every commit is fsync'd, and
	// raft ticks every 100 ms with a 1 s election timeout.
	Production Tuning = iota
	// Fast skips fsync and ticks every 20 ms (200 ms elections): for tests
	// and for kira bench --etcd-fast, never for data anyone keeps.
	Fast
)

// String names the tuning as kira bench reports it.
func (t Tuning) String() string {
	if t == Fast {
		return "fast (no fsync, 20 ms ticks)"
	}
	return "production (fsync, etcd's default ticks)"
}

// DefaultCompactionRetention is the revision history an etcd started by
// Kira keeps (periodic auto-compaction): far longer than any of Kira's
// watches is behind, short enough that the database does not fill its quota.
const DefaultCompactionRetention = "5m"

// SingleMemberCatchUpEntries is how many applied raft entries an etcd of one
// member keeps in memory; etcd's default (5,000) is for slow followers, and
// one member has none. Each entry can be a transaction of 64 writes, so the
// default would share the member's heap with hundreds of megabytes.
// Held by TestSingleMemberEtcdKeepsFewRaftEntries.
const SingleMemberCatchUpEntries = 100

// DefaultMaxTxnOps is the most operations an etcd started by Kira takes in
// one transaction (etcd's own default is 128): a catalog stored in stages
// costs etcd less per job in fewer, larger transactions, and config.PutJobs
// uses them where etcd allows (docs/benchmarks.md, "Many jobs").
const DefaultMaxTxnOps = 1024

// StartTimeout bounds how long Start waits for the server to serve clients.
const StartTimeout = 60 * time.Second

// Config is an embedded etcd's settings, named as etcd's own flags.
type Config struct {
	Name                string
	DataDir             string
	ListenClientURLs    string // comma-separated
	AdvertiseClientURLs string // default: ListenClientURLs
	ListenPeerURLs      string
	AdvertisePeerURLs   string // default: ListenPeerURLs
	InitialCluster      string // name=peerURL,...; default: this member alone
	InitialClusterState string // new or existing
	InitialClusterToken string
	LogLevel            string
	// AutoCompactionRetention defaults to DefaultCompactionRetention; "0"
	// keeps every revision, and the database then grows until etcd's quota
	// stops all writes.
	AutoCompactionRetention string
	// QuotaBackendBytes is etcd's --quota-backend-bytes: past it etcd
	// raises the NOSPACE alarm and refuses writes; 0 is etcd's default (2 GiB).
	QuotaBackendBytes int64
	// MaxTxnOps is etcd's --max-txn-ops; 0 is DefaultMaxTxnOps.
	MaxTxnOps uint
	// MinFreeDisk is kira etcd's --min-free-disk-bytes, for KeepSpace; etcd
	// itself does not use it.
	MinFreeDisk int64
	// Client TLS (etcd's --cert-file, --key-file, --trusted-ca-file,
	// --client-cert-auth): the listen client URLs must then be https.
	ClientTLS TLS
	// Peer TLS (etcd's --peer-* flags): the peer URLs must then be https.
	PeerTLS TLS
	// Quiet discards etcd's own log: its failures still reach the caller
	// through Err.
	Quiet  bool
	Tuning Tuning
}

// TLS is one side's certificates, as etcd's flags name them.
type TLS struct {
	CertFile, KeyFile, TrustedCAFile string
	// ClientCertAuth requires every client (or peer) to present a
	// certificate signed by TrustedCAFile; with auth enabled, the
	// certificate's common name is the client's user.
	ClientCertAuth bool
}

func (t TLS) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.ClientCertAuth}
}

// Embed validates c and returns etcd's configuration for it. Errors name the
// flag (etcd's name) that is wrong.
func (c Config) Embed() (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.DataDir
	if c.LogLevel != "" {
		cfg.LogLevel = c.LogLevel
	}
	lg, err := etcdLogger(c, os.Stderr)
	if err != nil {
		return nil, fmt.Errorf("etcd: --log-level %q: %w", c.LogLevel, err)
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	// Every execution writes a history record, so an etcd that never
	// compacts fills its quota and then refuses every write.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = c.AutoCompactionRetention
	if cfg.AutoCompactionRetention == "" {
		cfg.AutoCompactionRetention = DefaultCompactionRetention
	}
	if cfg.ListenClientUrls, err = ParseURLs("listen-client-urls", c.ListenClientURLs); err != nil {
		return nil, err
	}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if c.AdvertiseClientURLs != "" {
		if cfg.AdvertiseClientUrls, err = ParseURLs("advertise-client-urls", c.AdvertiseClientURLs); err != nil {
			return nil, err
		}
	}
	if cfg.ListenPeerUrls, err = ParseURLs("listen-peer-urls", c.ListenPeerURLs); err != nil {
		return nil, err
	}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	if c.AdvertisePeerURLs != "" {
		if cfg.AdvertisePeerUrls, err = ParseURLs("initial-advertise-peer-urls", c.AdvertisePeerURLs); err != nil {
			return nil, err
		}
	}
	cfg.InitialCluster = c.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(c.Name)
	}
	switch c.InitialClusterState {
	case "", embed.ClusterStateFlagNew:
		cfg.ClusterState = embed.ClusterStateFlagNew
	case embed.ClusterStateFlagExisting:
		cfg.ClusterState = c.InitialClusterState
	default:
		return nil, fmt.Errorf("etcd: --initial-cluster-state must be new or existing, got %q", c.InitialClusterState)
	}
	cfg.InitialClusterToken = c.InitialClusterToken
	if c.QuotaBackendBytes < 0 {
		return nil, fmt.Errorf("etcd: --quota-backend-bytes must not be negative, got %d", c.QuotaBackendBytes)
	}
	cfg.QuotaBackendBytes = c.QuotaBackendBytes
	cfg.MaxTxnOps = c.MaxTxnOps
	if cfg.MaxTxnOps == 0 {
		cfg.MaxTxnOps = DefaultMaxTxnOps
	}
	cfg.ClientTLSInfo, cfg.PeerTLSInfo = c.ClientTLS.info(), c.PeerTLS.info()
	if err := checkTLS("client", cfg.ListenClientUrls, c.ClientTLS); err != nil {
		return nil, err
	}
	if err := checkTLS("peer", cfg.ListenPeerUrls, c.PeerTLS); err != nil {
		return nil, err
	}
	if peers, _, err := cfg.PeerURLsMapAndToken("etcd"); err == nil && len(peers) == 1 {
		cfg.SnapshotCatchUpEntries = SingleMemberCatchUpEntries
	}
	if c.Tuning == Fast {
		cfg.TickMs = 20
		cfg.ElectionMs = 200
		cfg.UnsafeNoFsync = true
	}
	return cfg, cfg.Validate()
}

// checkTLS refuses TLS settings that would not be used, or half of them:
// etcd would otherwise serve plain HTTP where its operator asked for TLS.
func checkTLS(side string, urls []url.URL, t TLS) error {
	prefix := ""
	if side == "peer" {
		prefix = "peer-"
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("etcd: --%scert-file and --%skey-file go together", prefix, prefix)
	}
	if t.ClientCertAuth && t.TrustedCAFile == "" {
		return fmt.Errorf("etcd: --%sclient-cert-auth needs --%strusted-ca-file", prefix, prefix)
	}
	for _, u := range urls {
		if t.CertFile != "" && u.Scheme == "http" {
			return fmt.Errorf("etcd: --%scert-file is given but the %s URL %s is http://: use https://", prefix, side, u.String())
		}
		if t.CertFile == "" && u.Scheme == "https" {
			return fmt.Errorf("etcd: the %s URL %s is https:// but no --%scert-file and --%skey-file are given", side, u.String(), prefix, prefix)
		}
	}
	return nil
}

// ParseURLs reads a comma-separated list of URLs given to flag.
func ParseURLs(flag, s string) ([]url.URL, error) {
	var out []url.URL
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix") {
			return nil, fmt.Errorf("etcd: --%s: %q is not a URL such as http://127.0.0.1:2379", flag, part)
		}
		out = append(out, *u)
	}
	return out, nil
}

// Start starts the server and waits until it serves clients (at most
// StartTimeout: a multi-member cluster needs a quorum of members started).
func Start(c Config) (*embed.Etcd, error) {
	cfg, err := c.Embed()
	if err != nil {
		return nil, err
	}
	if err := checkDataDir(cfg.Dir); err != nil {
		return nil, err
	}
	return StartEmbed(cfg)
}

// checkDataDir makes sure etcd can write its data directory, so a member
// pointed at a read-only or full disk says so at start, with the flag to
// fix, instead of failing somewhere inside etcd. Held by
// TestUnwritableDataDirFailsAtStart (cmd/kira).
func checkDataDir(dir string) error {
	fail := func(err error) error { return fmt.Errorf("etcd: --data-dir %s is not writable: %w", dir, err) }
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(dir, ".kira-write-check-")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, 64<<10)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	return nil
}

// StartEmbed is Start for a configuration already built (etcd's
// --config-file, or a test's own).
func StartEmbed(cfg *embed.Config) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd %s: %w", cfg.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd %s: %w", cfg.Name, err)
	case <-time.After(StartTimeout):
		e.Close()
		return nil, errors.New("embedded etcd " + cfg.Name + ": not ready after " + StartTimeout.String() + " (a multi-member cluster needs a quorum of members started)")
	}
}

// FreeAddr returns a loopback address whose port was free a moment ago.
// Another process can take it before etcd binds it: callers that start a
// server on it retry on "address already in use" (see etcdtest.Launch).
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("etcdnode: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreeAddrs returns n distinct loopback host:ports that were free a moment
// ago: each is held until all are picked, so the system cannot hand out
// one twice, as n calls of FreeAddr can.
func FreeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdnode: free port: %w", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// StartLocal starts a single-member etcd with its data in dir, listening on
// free loopback ports, with tuning t: kira bench's own etcd. It tries new
// ports when one was taken between FreeAddr and etcd's bind.
func StartLocal(dir string, t Tuning) (*embed.Etcd, error) {
	const attempts = 5
	for i := 1; ; i++ {
		e, err := startLocal(dir, t)
		if err == nil || i == attempts || !strings.Contains(err.Error(), "address already in use") {
			return e, err
		}
	}
}

func startLocal(dir string, t Tuning) (*embed.Etcd, error) {
	client, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	peer, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	return Start(Config{Name: "kira", DataDir: dir, ListenClientURLs: "http://" + client, ListenPeerURLs: "http://" + peer,
		InitialClusterToken: "kira-local", Quiet: true, Tuning: t})
}

// ClientURLs are the URLs e serves clients on, as endpoints for clientv3.
func ClientURLs(e *embed.Etcd) []string {
	var out []string
	for _, u := range e.Config().ListenClientUrls {
		out = append(out, u.String())
	}
	return out
}
