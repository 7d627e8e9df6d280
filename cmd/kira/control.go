package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdclient"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/operator"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterFlags are the flags of every command that talks to a running cluster.
type clusterFlags struct {
	etcd    etcdClientFlags
	cluster string
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	c.registerEtcd(fs)
	fs.StringVar(&c.cluster, "cluster", config.DefaultCluster, "cluster name (the catalog's cluster:)")
}

// registerEtcd adds the etcd client flags alone, for a command whose
// catalog names the cluster.
func (c *clusterFlags) registerEtcd(fs *flag.FlagSet) {
	c.etcd.register(fs, "http://127.0.0.1:2379", "comma-separated etcd endpoints")
}

func (c *clusterFlags) connect() (*clientv3.Client, error) { return etcdclient.New(c.etcd.config()) }

// unreachable explains an error of talking to etcd: a refusal says why, and
// anything else says where etcd was looked for.
func (c *clusterFlags) unreachable(err error) error {
	cfg := c.etcd.config()
	if err := etcdclient.Explain(cfg, keyspace.Cluster(c.cluster), err); errors.Is(err, etcdclient.ErrRefused) {
		return err
	}
	return fmt.Errorf("%w (etcd at %s, cluster %q: is etcd running there? set --etcd or %s)", err, strings.Join(cfg.Endpoints, ","), c.cluster, etcdclient.EnvEndpoints)
}

// jobCommand parses the flags of a command that takes one JOB argument and
// checks that the stored catalog has the job.
func jobCommand(name, usage string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*clusterFlags, *clientv3.Client, config.Job, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clusterFlags
	cf.register(fs)
	if extra != nil {
		extra(fs)
	}
	fs.Usage = func() { fmt.Fprintf(stderr, "Usage: kira %s JOB [flags]\n\n%s\n\n", name, usage); fs.PrintDefaults() }
	// Flags may come before or after JOB.
	var job string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		job, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, config.Job{}, errUsage
	}
	if job == "" && fs.NArg() == 1 {
		job = fs.Arg(0)
	} else if fs.NArg() != 0 || job == "" {
		fs.Usage()
		return nil, nil, config.Job{}, errUsage
	}
	cli, err := cf.connect()
	if err != nil {
		return nil, nil, config.Job{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cat, _, err := config.LoadStored(ctx, cli, cf.cluster)
	if err != nil {
		cli.Close()
		return nil, nil, config.Job{}, cf.unreachable(err)
	}
	j, ok := cat.Job(job)
	if !ok {
		cli.Close()
		var names []string
		for _, j := range cat.Jobs {
			names = append(names, j.Name)
		}
		return nil, nil, config.Job{}, fmt.Errorf("kira %s: cluster %q has no job %q (jobs: %s)", name, cf.cluster, job, strings.Join(names, ", "))
	}
	return &cf, cli, j, nil
}

func pauseCommand(args []string, stdout, stderr io.Writer, pause bool) error {
	name, usage := "resume", "Lets a paused job fire again from its next scheduled time."
	if pause {
		name, usage = "pause", "Stops a job's scheduled fires on every member until kira resume; runs in flight finish."
	}
	cf, cli, j, err := jobCommand(name, usage, args, stderr, nil)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if pause {
		err = operator.Pause(ctx, cli, cf.cluster, j.Name)
	} else {
		err = operator.Resume(ctx, cli, cf.cluster, j.Name)
	}
	if err != nil {
		return cf.unreachable(err)
	}
	fmt.Fprintf(stdout, "job %s %sd\n", j.Name, name)
	return nil
}

func triggerCommand(args []string, stdout, stderr io.Writer) error {
	partition := -1
	cf, cli, j, err := jobCommand("trigger", "Runs a job once now, by the current owner of each slot, with its own execution id.", args, stderr, func(fs *flag.FlagSet) {
		fs.IntVar(&partition, "partition", -1, "only this partition (default: every partition)")
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	var slots []shard.Slot
	switch {
	case partition >= j.Partitions:
		return fmt.Errorf("kira trigger: job %s has partitions 0 to %d; --partition %d does not exist", j.Name, j.Partitions-1, partition)
	case partition >= 0:
		slots = []shard.Slot{{Job: j.Name, Partition: partition}}
	default:
		for p := 0; p < j.Partitions; p++ {
			slots = append(slots, shard.Slot{Job: j.Name, Partition: p})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids, err := operator.RequestRun(ctx, cli, cf.cluster, slots)
	if err != nil {
		return cf.unreachable(err)
	}
	for i, s := range slots {
		fmt.Fprintf(stdout, "triggered %s execution_id %s\n", s, ids[i])
	}
	return nil
}

func historyCommand(args []string, stdout, stderr io.Writer) error {
	n, partition, output := 20, -1, "table"
	cf, cli, j, err := jobCommand("history", "Recent executions of a job, newest first.", args, stderr, func(fs *flag.FlagSet) {
		fs.IntVar(&n, "n", 20, "how many executions")
		fs.IntVar(&partition, "partition", -1, "only this partition (default: every partition)")
		fs.StringVar(&output, "o", "table", "output format: table or json")
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	if output != "table" && output != "json" {
		return fmt.Errorf("kira history: -o must be table or json, got %q", output)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := operator.ReadHistory(ctx, cli, cf.cluster, j.Name, partition, n)
	if err != nil {
		return cf.unreachable(err)
	}
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULED\tPART\tOUTCOME\tTRIGGER\tATTEMPT\tTOKEN\tMEMBER\tDURATION\tEXECUTION ID")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.ScheduledTime.Format(time.RFC3339), r.Partition, r.Outcome, r.Cause,
			r.Attempt, r.Token, r.Member, r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond), r.ExecutionID)
	}
	return tw.Flush()
}

func applyCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clusterFlags
	cf.registerEtcd(fs)
	file := fs.String("f", "", "catalog YAML file (required)")
	dryRun := fs.Bool("dry-run", false, "show what would change, write nothing")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *file == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "Usage: kira apply -f FILE [--dry-run] [--etcd URLS]")
		return errUsage
	}
	cat, warnings, err := config.LoadLint(*file)
	printWarnings(stderr, warnings)
	if err != nil {
		return err
	}
	cf.cluster = cat.Cluster
	cli, err := cf.connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prev, prevRev, err := config.LoadStored(ctx, cli, cat.Cluster)
	if err != nil && !errorsIsNoCatalog(err) {
		return cf.unreachable(err)
	}
	changes := config.Diff(prev, cat)
	if len(changes) == 0 {
		fmt.Fprintf(stdout, "cluster %s: catalog unchanged (revision %d)\n", cat.Cluster, prevRev)
		return nil
	}
	for _, c := range changes {
		fmt.Fprintln(stdout, c)
	}
	if *dryRun {
		fmt.Fprintf(stdout, "dry run: nothing written (stored revision %d)\n", prevRev)
		return nil
	}
	rev, _, err := config.Store(ctx, cli, cat)
	if err != nil {
		return cf.unreachable(err)
	}
	fmt.Fprintf(stdout, "cluster %s: catalog applied at revision %d; members converge without restart\n", cat.Cluster, rev)
	return nil
}

func errorsIsNoCatalog(err error) bool { return errors.Is(err, config.ErrNoCatalog) }
