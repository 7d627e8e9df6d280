package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/spf13/cobra"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// DefaultRevisionBump is how far kira etcd snapshot restore moves etcd's
// revision past the snapshot's, so that every fencing token handed out
// after the restore is above every token handed out before it, however
// much was written between the snapshot and the loss. It must exceed the
// revisions a cluster can reach between two backups; docs/operations.md
// ("Backup and restore") gives the arithmetic from the measured write rate.
// TestSnapshotRestoreKeepsTokensRising holds it.
const DefaultRevisionBump = 1_000_000_000_000

func (cl *cli) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save a backup of etcd, or restore one without letting fencing tokens go back",
		Args:  exactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(cl.snapshotSaveCmd(), cl.snapshotRestoreCmd())
	return cmd
}

func (cl *cli) snapshotSaveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent snapshot of etcd's keyspace to FILE, over the client API",
		Long: "Saves a consistent snapshot of one etcd member's database to FILE (etcd's own snapshot\n" +
			"client, as etcdctl snapshot save). Give one endpoint with --etcd; the global TLS and auth\n" +
			"flags (--cacert, --cert, --key, --user, --password-file) apply. FILE is written whole or not at all.",
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return cl.snapshotSave(args[0]) },
	}
}

func (cl *cli) snapshotSave(file string) error {
	ec := cl.etcdConfig(defaultEndpoints)
	if len(ec.Endpoints) != 1 {
		return fmt.Errorf("kira etcd snapshot save: give one endpoint with --etcd, not %d: a snapshot is one member's database", len(ec.Endpoints))
	}
	cfg, err := ec.ClientConfig()
	if err != nil {
		return fmt.Errorf("kira etcd snapshot save: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	version, err := clientsnapshot.SaveWithVersion(ctx, zap.NewNop(), cfg, file)
	if err != nil {
		return fmt.Errorf("kira etcd snapshot save %s (etcd at %s): %w", file, ec.Endpoints[0], err)
	}
	st, err := snapshot.NewV3(zap.NewNop()).Status(file)
	if err != nil {
		return fmt.Errorf("kira etcd snapshot save: reading back %s: %w", file, err)
	}
	fmt.Fprintf(cl.stdout, "saved %s: revision %d, %d keys, %d bytes, etcd %s\n", file, st.Revision, st.TotalKey, st.TotalSize, version)
	return nil
}

// restoreFlags are etcdutl snapshot restore's flags, by its names.
type restoreFlags struct {
	name, dataDir, walDir, initialCluster, clusterToken, peerURLs string
	bump                                                          uint64
	noBump, skipHashCheck                                         bool
}

func (cl *cli) snapshotRestoreCmd() *cobra.Command {
	var f restoreFlags
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Restore a snapshot into a new data directory, its revision bumped so fencing tokens keep rising",
		Long: "Restores FILE into a new --data-dir for one member (etcd's own restore, as etcdutl snapshot\n" +
			"restore); run it once per member with that member's --name and --initial-advertise-peer-urls and\n" +
			"the same --initial-cluster, then start each member with kira etcd on the restored directory.\n\n" +
			fmt.Sprintf("The revision is raised by --bump-revision (default %d) and marked compacted, so that every\n", uint64(DefaultRevisionBump)) +
			"election key, and so every fencing token, created after the restore is above every token handed\n" +
			"out before it, and watchers of the lost revisions are told to start over. The default exceeds\n" +
			"by far the revisions a cluster reaches between backups at Kira's measured write rate (docs/operations.md,\n" +
			"\"Backup and restore\"). --bump-revision 0 is refused; --no-bump restores without a bump, and tokens may go back.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return snapshotRestore(args[0], f, cmd.Flags().Changed("bump-revision"), cl.stdout, cl.stderr)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.dataDir, "data-dir", "", "the new data directory to restore into; it must not exist (required)")
	fs.StringVar(&f.walDir, "wal-dir", "", "a separate WAL directory (default: inside --data-dir)")
	fs.StringVar(&f.name, "name", "default", "human-readable name of this member, as kira etcd --name")
	fs.StringVar(&f.peerURLs, "initial-advertise-peer-urls", "http://127.0.0.1:2380", "comma-separated peer URLs of this member, as kira etcd")
	fs.StringVar(&f.initialCluster, "initial-cluster", "", "the restored cluster, name=peerURL,... (default: this member alone)")
	fs.StringVar(&f.clusterToken, "initial-cluster-token", "kira-etcd-cluster", "initial cluster token of the restored cluster")
	fs.Uint64Var(&f.bump, "bump-revision", DefaultRevisionBump, "raise the restored revision by this much, and mark it compacted, so fencing tokens keep rising")
	fs.BoolVar(&f.noBump, "no-bump", false, "restore the snapshot's revision unchanged: tokens handed out after the snapshot may be handed out again")
	fs.BoolVar(&f.skipHashCheck, "skip-hash-check", false, "ignore the snapshot's integrity hash (required for a database file copied from a data directory)")
	cmd.MarkFlagRequired("data-dir")
	return cmd
}

// snapshotRestore restores file as f says; bumpGiven is whether
// --bump-revision was given.
func snapshotRestore(file string, f restoreFlags, bumpGiven bool, stdout, stderr io.Writer) error {
	switch {
	case f.noBump && bumpGiven && f.bump != 0:
		return errors.New("kira etcd snapshot restore: --no-bump and --bump-revision contradict each other")
	case f.noBump:
		f.bump = 0
		fmt.Fprintln(stderr, "kira etcd snapshot restore: WARNING: --no-bump: the revision goes back to the snapshot's, and fencing tokens handed out after the snapshot may be handed out again to other holders")
	case f.bump == 0:
		return errors.New("kira etcd snapshot restore: --bump-revision 0 would let fencing tokens go back; give a positive bump, or --no-bump if that is what you want")
	}
	initial := f.initialCluster
	if initial == "" {
		initial = f.name + "=" + f.peerURLs
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: file, Name: f.name, OutputDataDir: f.dataDir, OutputWALDir: f.walDir,
		PeerURLs: etcdclient.SplitList(f.peerURLs), InitialCluster: initial, InitialClusterToken: f.clusterToken,
		SkipHashCheck: f.skipHashCheck, RevisionBump: f.bump, MarkCompacted: f.bump > 0,
	})
	if err != nil {
		return fmt.Errorf("kira etcd snapshot restore %s --data-dir %s: %w", file, f.dataDir, err)
	}
	if f.bump > 0 {
		fmt.Fprintf(stdout, "restored %s into %s as member %s; revision raised by %d and marked compacted\n", file, f.dataDir, f.name, f.bump)
	} else {
		fmt.Fprintf(stdout, "restored %s into %s as member %s; revision unchanged\n", file, f.dataDir, f.name)
	}
	return nil
}
