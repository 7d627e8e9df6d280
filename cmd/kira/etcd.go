package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdFlags are etcd's own flag names, so users can carry their habits over.
type etcdFlags struct {
	name, dataDir                       string
	listenClient, advertiseClient       string
	listenPeer, initialAdvertisePeer    string
	initialCluster, initialClusterState string
	initialClusterToken, logLevel       string
	autoCompactionRetention             string
}

func (f *etcdFlags) register(fs *flag.FlagSet, defaultDir string) {
	fs.StringVar(&f.name, "name", "default", "human-readable name for this member")
	fs.StringVar(&f.dataDir, "data-dir", defaultDir, "path to the data directory")
	fs.StringVar(&f.listenClient, "listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to listen on for client traffic")
	fs.StringVar(&f.advertiseClient, "advertise-client-urls", "", "comma-separated client URLs to advertise (default: the listen URLs)")
	fs.StringVar(&f.listenPeer, "listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to listen on for peer traffic")
	fs.StringVar(&f.initialAdvertisePeer, "initial-advertise-peer-urls", "", "comma-separated peer URLs to advertise (default: the listen URLs)")
	fs.StringVar(&f.initialCluster, "initial-cluster", "", "initial cluster configuration, name=peerURL,... (default: this member alone)")
	fs.StringVar(&f.initialClusterState, "initial-cluster-state", "new", "new or existing")
	fs.StringVar(&f.initialClusterToken, "initial-cluster-token", "kira-etcd-cluster", "initial cluster token")
	fs.StringVar(&f.logLevel, "log-level", "warn", "debug, info, warn or error")
	fs.StringVar(&f.autoCompactionRetention, "auto-compaction-retention", defaultCompactionRetention,
		"keep this much history of revisions (periodic auto-compaction); 0 keeps every revision, and the database then grows until etcd's quota stops all writes")
}

// defaultCompactionRetention is the history of revisions an etcd started by
// Kira keeps: far longer than any watch of Kira's is behind.
const defaultCompactionRetention = "5m"

func (f *etcdFlags) config() (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = f.name
	cfg.Dir = f.dataDir
	cfg.LogLevel = f.logLevel
	// Every execution writes its slot's state and a history record, so an
	// etcd that never compacts fills its quota (2 GiB by default) in about an
	// hour at 1,000 slots firing every second, and then refuses every write.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = f.autoCompactionRetention
	if f.autoCompactionRetention == "" {
		cfg.AutoCompactionRetention = defaultCompactionRetention
	}
	var err error
	if cfg.ListenClientUrls, err = parseURLs("listen-client-urls", f.listenClient); err != nil {
		return nil, err
	}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if f.advertiseClient != "" {
		if cfg.AdvertiseClientUrls, err = parseURLs("advertise-client-urls", f.advertiseClient); err != nil {
			return nil, err
		}
	}
	if cfg.ListenPeerUrls, err = parseURLs("listen-peer-urls", f.listenPeer); err != nil {
		return nil, err
	}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	if f.initialAdvertisePeer != "" {
		if cfg.AdvertisePeerUrls, err = parseURLs("initial-advertise-peer-urls", f.initialAdvertisePeer); err != nil {
			return nil, err
		}
	}
	cfg.InitialCluster = f.initialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(f.name)
	}
	switch f.initialClusterState {
	case embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting:
		cfg.ClusterState = f.initialClusterState
	default:
		return nil, fmt.Errorf("kira etcd: --initial-cluster-state must be new or existing, got %q", f.initialClusterState)
	}
	cfg.InitialClusterToken = f.initialClusterToken
	if peers, _, err := cfg.PeerURLsMapAndToken("etcd"); err == nil && len(peers) == 1 {
		cfg.SnapshotCatchUpEntries = singleMemberCatchUpEntries
	}
	return cfg, cfg.Validate()
}

// singleMemberCatchUpEntries is how many applied raft entries an etcd of one
// member keeps in memory. etcd keeps 5,000 by default, for a slow follower
// to catch up from; one member has no follower. Each entry is a transaction
// of up to 64 writes, and at 10,000 slots firing every second the 5,000 held
// about 200 MB, in the heap that kira run's embedded etcd shares with the
// member (kira bench, whose embedded etcd does the same: live heap after each
// collection 330–390 MB → 100–170 MB).
const singleMemberCatchUpEntries = 100

func parseURLs(flagName, s string) ([]url.URL, error) {
	var out []url.URL
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix") {
			return nil, fmt.Errorf("kira etcd: --%s: %q is not a URL such as http://127.0.0.1:2379", flagName, part)
		}
		out = append(out, *u)
	}
	return out, nil
}

// startEmbedded starts an etcd server and waits until it serves clients.
func startEmbedded(cfg *embed.Config) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("embedded etcd: not ready after 60s (a multi-member cluster needs a quorum of members started)")
	}
}

func etcdCommand(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f etcdFlags
	f.register(fs, "")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if f.dataDir == "" {
		f.dataDir = f.name + ".etcd"
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	e, err := startEmbedded(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "kira etcd: member %s serving clients on %s\n", f.name, f.listenClient)
	select {
	case <-ctx.Done():
		e.Close()
		return nil
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("kira etcd: %w", err)
	}
}
