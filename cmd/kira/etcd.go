package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
)

// registerEtcdFlags registers etcd's own flag names, so users carry their
// habits over, into c.
func registerEtcdFlags(fs *pflag.FlagSet, c *etcdnode.Config) {
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
	fs.Int64Var(&c.QuotaBackendBytes, "quota-backend-bytes", 0, "raise the NOSPACE alarm (writes refused) when the database reaches this size; 0 is etcd's default, 2 GiB. Kira defragments and disarms by itself once compaction has freed space")
	fs.UintVar(&c.MaxTxnOps, "max-txn-ops", etcdnode.DefaultMaxTxnOps, "the most operations etcd takes in one transaction (etcd's own default is 128); kira apply stores a large catalog in fewer transactions where etcd takes more")
	fs.StringVar(&c.AutoCompactionRetention, "auto-compaction-retention", etcdnode.DefaultCompactionRetention,
		"keep this much history of revisions (periodic auto-compaction); 0 keeps every revision, and the database then grows until etcd's quota stops all writes")
	fs.Int64Var(&c.MinFreeDisk, "min-free-disk-bytes", etcdnode.DefaultMinFreeDisk, "raise the NOSPACE alarm (writes refused, nothing starts) while the filesystem of --data-dir has less free space than this, and disarm it once there is half as much again: etcd stops on a write that finds the disk full; 0 turns this off")
	fs.StringVar(&c.ClientTLS.CertFile, "cert-file", "", "path to the client server TLS cert file (the client URLs must be https://)")
	fs.StringVar(&c.ClientTLS.KeyFile, "key-file", "", "path to the client server TLS key file")
	fs.StringVar(&c.ClientTLS.TrustedCAFile, "trusted-ca-file", "", "path to the client server TLS trusted CA cert file")
	fs.BoolVar(&c.ClientTLS.ClientCertAuth, "client-cert-auth", false, "require clients to present a certificate signed by --trusted-ca-file; with auth enabled, its common name is the user")
	fs.StringVar(&c.PeerTLS.CertFile, "peer-cert-file", "", "path to the peer server TLS cert file (the peer URLs must be https://)")
	fs.StringVar(&c.PeerTLS.KeyFile, "peer-key-file", "", "path to the peer server TLS key file")
	fs.StringVar(&c.PeerTLS.TrustedCAFile, "peer-trusted-ca-file", "", "path to the peer server TLS trusted CA file")
	fs.BoolVar(&c.PeerTLS.ClientCertAuth, "peer-client-cert-auth", false, "require peers to present a certificate signed by --peer-trusted-ca-file")
}

func (cl *cli) etcdCmd() *cobra.Command {
	var c etcdnode.Config
	var configFile string
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run a standalone etcd server (etcd's own flag names); three make a cluster",
		Long: "Runs one etcd server, embedded in this binary, configured by etcd's own flag names or its\n" +
			"--config-file. The global etcd client flags (--etcd, --cacert, ...) do not apply to it; they do to\n" +
			"kira etcd snapshot save, which backs up an etcd, and kira etcd snapshot restore restores one.",
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error { return runEtcd(c, configFile, cl.stderr) },
	}
	registerEtcdFlags(cmd.Flags(), &c)
	cmd.AddCommand(cl.snapshotCmd())
	cmd.Flags().StringVar(&configFile, "config-file", "", "etcd's own YAML configuration file; when given, the other flags are ignored, as etcd does")
	cmd.MarkFlagFilename("config-file", "yaml", "yml", "conf")
	return cmd
}

// keepSpace runs etcdnode.KeepSpace on e until the returned function is
// called.
func keepSpace(e *embed.Etcd, minFreeDisk int64, logger *slog.Logger) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { etcdnode.KeepSpace(ctx, e, minFreeDisk, logger); close(done) }()
	return func() { cancel(); <-done }
}

// runEtcd serves until SIGTERM or SIGINT.
func runEtcd(c etcdnode.Config, configFile string, stderr io.Writer) error {
	if c.DataDir == "" {
		c.DataDir = c.Name + ".etcd"
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var e *embed.Etcd
	var err error
	if configFile != "" {
		var cfg *embed.Config
		if cfg, err = embed.ConfigFromFile(configFile); err != nil {
			return fmt.Errorf("kira etcd: --config-file %s: %w", configFile, err)
		}
		e, err = etcdnode.StartEmbed(cfg)
	} else {
		e, err = etcdnode.Start(c)
	}
	if err != nil {
		return fmt.Errorf("kira etcd: %w", portTaken(err, map[string]string{
			"listen-client-urls": c.ListenClientURLs, "listen-peer-urls": c.ListenPeerURLs}, "as etcd does"))
	}
	fmt.Fprintf(stderr, "kira etcd: member %s serving clients on %s\n", e.Config().Name, strings.Join(etcdnode.ClientURLs(e), ","))
	stopKeeping := keepSpace(e, c.MinFreeDisk, slog.New(slog.NewTextHandler(stderr, nil)))
	defer e.Close()
	defer stopKeeping()
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("kira etcd: %w", err)
	}
}
