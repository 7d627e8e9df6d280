package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// defaultEndpoints is where the commands that talk to a cluster look for
// etcd when neither --etcd nor KIRA_ETCD_ENDPOINTS says.
const defaultEndpoints = "http://127.0.0.1:2379"

// cli is what every command shares: its streams and the global flags.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	endpoints      string // --etcd; "" means defaultEndpoints, or the embedded etcd of kira run and kira bench
	etcd           etcdclient.Config
	cluster        string
}

// newRoot is the command tree.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "kira",
		Short: "A sharded, replicated job scheduler on etcd",
		Long: "kira: a sharded, replicated job scheduler on etcd.\n\n" +
			"Every flag can also be set from the environment: KIRA_<COMMAND>_<FLAG>, or KIRA_<FLAG>\n" +
			"for the global flags (--etcd is KIRA_ETCD_ENDPOINTS, --cacert KIRA_ETCD_CACERT, ...).\n" +
			"A flag on the command line wins over the variable. The table: docs/cli.md.",
		Version:           version,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return flagsFromEnv(cmd) },
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		fmt.Fprintf(stderr, "%s\n\n%s", err, cmd.UsageString())
		return errUsage
	})
	root.SetVersionTemplate("kira {{.Version}}\n")
	c.registerGlobal(root.PersistentFlags())
	root.AddCommand(c.runCmd(), c.etcdCmd(), c.statusCmd(), c.jobsCmd(), c.nextCmd(), c.catalogCmd(),
		c.historyCmd(), c.applyCmd(), c.diffCmd(), c.pauseCmd(true), c.pauseCmd(false), c.triggerCmd(),
		c.validateCmd(), c.benchCmd(), c.jobDefCmd(), &cobra.Command{
			Use: "version", Short: "Print the version", Args: exactArgs(0),
			Run: func(*cobra.Command, []string) { fmt.Fprintln(stdout, "kira", version) },
		})
	return root
}

// registerGlobal adds the flags every command takes: etcdctl's client
// flags and the cluster.
func (c *cli) registerGlobal(fs *pflag.FlagSet) {
	fs.StringVar(&c.endpoints, "etcd", "", "comma-separated etcd endpoints (default "+defaultEndpoints+"; kira run and kira bench start an embedded etcd when unset)")
	fs.StringVar(&c.etcd.CACert, "cacert", "", "verify etcd's server certificates with this CA bundle")
	fs.StringVar(&c.etcd.Cert, "cert", "", "client certificate for etcd's --client-cert-auth")
	fs.StringVar(&c.etcd.Key, "key", "", "key of --cert")
	fs.StringVar(&c.etcd.User, "user", "", "etcd user: name, or name:password")
	fs.StringVar(&c.etcd.Password, "password", "", "password of --user; prefer --password-file or the variable: a command line is visible to every user of the machine")
	fs.StringVar(&c.etcd.PasswordFile, "password-file", "", "file whose first line is the password of --user")
	fs.StringVar(&c.cluster, "cluster", config.DefaultCluster, "cluster name (the catalog's cluster:)")
	for flag, env := range map[string]string{"etcd": etcdclient.EnvEndpoints, "cacert": etcdclient.EnvCACert, "cert": etcdclient.EnvCert,
		"key": etcdclient.EnvKey, "user": etcdclient.EnvUser, "password": etcdclient.EnvPassword, "password-file": etcdclient.EnvPasswordFile} {
		fs.SetAnnotation(flag, envAnnotation, []string{env})
	}
}

// etcdConfig is the etcd client configuration the global flags give;
// fallback is used when --etcd is unset.
func (c *cli) etcdConfig(fallback string) etcdclient.Config {
	cfg := c.etcd
	e := c.endpoints
	if e == "" {
		e = fallback
	}
	cfg.Endpoints = etcdclient.SplitList(e)
	return cfg
}

func (c *cli) connect() (*clientv3.Client, error) {
	return etcdclient.New(c.etcdConfig(defaultEndpoints))
}

// unreachable explains an error of talking to etcd: a refusal says why, and
// anything else says where etcd was looked for.
func (c *cli) unreachable(err error) error {
	cfg := c.etcdConfig(defaultEndpoints)
	if err := etcdclient.Explain(cfg, keyspace.Cluster(c.cluster), err); errors.Is(err, etcdclient.ErrRefused) {
		return err
	}
	return fmt.Errorf("%w (etcd at %s, cluster %q: is etcd running there? set --etcd or %s)", err, strings.Join(cfg.Endpoints, ","), c.cluster, etcdclient.EnvEndpoints)
}

// withCluster connects, and calls f with a client and a bounded context.
func (c *cli) withCluster(f func(ctx context.Context, cli *clientv3.Client) error) error {
	cli, err := c.connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f(ctx, cli)
}

// storedJob reads the stored catalog and its job name; an unknown job is an
// error that lists the jobs there are.
func (c *cli) storedJob(ctx context.Context, cli *clientv3.Client, cmd, name string) (config.Job, error) {
	cat, _, err := config.LoadStored(ctx, cli, c.cluster)
	if err != nil {
		return config.Job{}, c.unreachable(err)
	}
	j, ok := cat.Job(name)
	if !ok {
		var names []string
		for _, j := range cat.Jobs {
			names = append(names, j.Name)
		}
		return config.Job{}, fmt.Errorf("kira %s: cluster %q has no job %q (jobs: %s)", cmd, c.cluster, name, strings.Join(names, ", "))
	}
	return j, nil
}

// completeJobs completes a JOB argument from the stored catalog.
func (c *cli) completeJobs(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if err := flagsFromEnv(cmd); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []string
	c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
		cat, _, err := config.LoadStored(ctx, cli, c.cluster)
		if err == nil {
			for _, j := range cat.Jobs {
				names = append(names, j.Name+"\t"+j.Schedule)
			}
		}
		return err
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}
