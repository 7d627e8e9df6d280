package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/kira-scheduler/kira/etcdnode"
)

// registerEtcdFlags registers etcd's own flag names, so users carry their
// habits over, into c.
func registerEtcdFlags(fs *flag.FlagSet, c *etcdnode.Config) {
	fs.StringVar(&c.Name, "name", "default", "human-readable name for this member")
	fs.StringVar(&c.DataDir, "data-dir", "", "path to the data directory (default: NAME.etcd)")
	fs.StringVar(&c.ListenClientURLs, "listen-client-urls", "http://127.0.0.1:2379", "comma-separated URLs to listen on for client traffic")
	fs.StringVar(&c.AdvertiseClientURLs, "advertise-client-urls", "", "comma-separated client URLs to advertise (default: the listen URLs)")
	fs.StringVar(&c.ListenPeerURLs, "listen-peer-urls", "http://127.0.0.1:2380", "comma-separated URLs to listen on for peer traffic")
	fs.StringVar(&c.AdvertisePeerURLs, "initial-advertise-peer-urls", "", "comma-separated peer URLs to advertise (default: the listen URLs)")
	fs.StringVar(&c.InitialCluster, "initial-cluster", "", "initial cluster configuration, name=peerURL,... (default: this member alone)")
	fs.StringVar(&c.InitialClusterState, "initial-cluster-state", "new", "new or existing")
	fs.StringVar(&c.InitialClusterToken, "initial-cluster-token", "kira-etcd-cluster", "initial cluster token")
	fs.StringVar(&c.LogLevel, "log-level", "warn", "debug, info, warn or error")
	fs.StringVar(&c.AutoCompactionRetention, "auto-compaction-retention", etcdnode.DefaultCompactionRetention,
		"keep this much history of revisions (periodic auto-compaction); 0 keeps every revision, and the database then grows until etcd's quota stops all writes")
}

func etcdCommand(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c etcdnode.Config
	registerEtcdFlags(fs, &c)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if c.DataDir == "" {
		c.DataDir = c.Name + ".etcd"
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	e, err := etcdnode.Start(c)
	if err != nil {
		return fmt.Errorf("kira etcd: %w", err)
	}
	fmt.Fprintf(stderr, "kira etcd: member %s serving clients on %s\n", c.Name, c.ListenClientURLs)
	select {
	case <-ctx.Done():
		e.Close()
		return nil
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("kira etcd: %w", err)
	}
}
