package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// exactArgs is cobra's ExactArgs as a usage error (exit 2, usage shown).
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "kira %s: takes %d argument(s), got %d\n\n%s", cmd.Name(), n, len(args), cmd.UsageString())
		return errUsage
	}
}

// checkPartition refuses a --partition the job does not have; -1 stands
// for every partition where every says it may.
func checkPartition(cmd string, j config.Job, p int, every bool) error {
	if p >= j.Partitions || p < 0 && !(every && p == -1) {
		return fmt.Errorf("kira %s: job %s has partitions 0 to %d; --partition %d does not exist", cmd, j.Name, j.Partitions-1, p)
	}
	return nil
}

// jobCmd is a command on one job of the stored catalog.
func (c *cli) jobCmd(name, short string, run func(ctx context.Context, cli *clientv3.Client, j config.Job) error) *cobra.Command {
	return &cobra.Command{
		Use:               name + " JOB",
		Short:             short,
		Args:              exactArgs(1),
		ValidArgsFunction: c.completeJobs,
		RunE: func(_ *cobra.Command, args []string) error {
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				j, err := c.storedJob(ctx, cli, name, args[0])
				if err != nil {
					return err
				}
				return run(ctx, cli, j)
			})
		},
	}
}

func (c *cli) pauseCmd(pause bool) *cobra.Command {
	name, short := "resume", "Let a paused job fire again from its next scheduled time"
	if pause {
		name, short = "pause", "Stop a job's scheduled fires on every member until kira resume; runs in flight finish"
	}
	var out output
	cmd := c.jobCmd(name, short, func(ctx context.Context, cli *clientv3.Client, j config.Job) error {
		var err error
		if pause {
			err = ops.Pause(ctx, cli, c.cluster, j.Name)
		} else {
			err = ops.Resume(ctx, cli, c.cluster, j.Name)
		}
		if err != nil {
			return c.unreachable(err)
		}
		done := struct {
			Job    string `json:"job"`
			Paused bool   `json:"paused"`
		}{j.Name, pause}
		return out.print(c.stdout, done, func(w io.Writer) error { _, err := fmt.Fprintf(w, "job %s %sd\n", j.Name, name); return err })
	})
	out.register(cmd.Flags())
	return cmd
}

func (c *cli) triggerCmd() *cobra.Command {
	var partition int
	var cascade bool
	var out output
	var once oneOffFlags
	cmd := c.jobCmd("trigger", "Run a job once now or at a time (--at, --in), by the owner of each slot, with its own execution id; or cancel a waiting run (--cancel ID)",
		func(ctx context.Context, cli *clientv3.Client, j config.Job) error {
			if err := checkPartition("trigger", j, partition, true); err != nil {
				return err
			}
			var slots []shard.Slot
			switch {
			case partition >= 0:
				slots = []shard.Slot{{Job: j.Name, Partition: partition}}
			default:
				for p := 0; p < j.Partitions; p++ {
					slots = append(slots, shard.Slot{Job: j.Name, Partition: p})
				}
			}
			if cascade && partition >= 0 {
				return fmt.Errorf("kira trigger: --cascade runs every partition (its dependents wait for all of them): leave out --partition")
			}
			if cascade && (once.at != "" || once.in != "") {
				return fmt.Errorf("kira trigger: --cascade runs now: leave out --at and --in")
			}
			var ids []string
			var at time.Time
			var err error
			if cascade {
				ids, err = ops.RequestCascade(ctx, cli, c.cluster, slots)
			} else {
				ids, at, err = once.request(ctx, cli, c.cluster, slots)
			}
			if err != nil {
				return c.unreachable(err)
			}
			type triggered struct {
				Job         string     `json:"job"`
				Partition   int        `json:"partition"`
				ExecutionID string     `json:"execution_id"`
				At          *time.Time `json:"at,omitempty"`
			}
			runs := []triggered{}
			for i, s := range slots {
				r := triggered{s.Job, s.Partition, ids[i], nil}
				if !at.IsZero() {
					at := at.UTC()
					r.At = &at
				}
				runs = append(runs, r)
			}
			return out.print(c.stdout, runs, func(w io.Writer) error {
				for _, r := range runs {
					fmt.Fprintf(w, "triggered %s/%d execution_id %s%s\n", r.Job, r.Partition, r.ExecutionID, atText(r.At))
				}
				return nil
			})
		})
	cmd.Flags().IntVar(&partition, "partition", -1, "only this partition; -1: every partition")
	cmd.Flags().BoolVar(&cascade, "cascade", false, "the jobs that run after this one (after:) run after this run too, at its requested time")
	out.register(cmd.Flags())
	once.register(cmd)
	cmd.Use, cmd.Args = "trigger JOB | trigger [JOB] --cancel ID", once.args
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if once.cancel != "" {
			if once.at != "" || once.in != "" || partition != -1 {
				return errors.New("kira trigger: --cancel ID takes no --at, --in or --partition: the id names the run")
			}
			return c.cancelRun(&once, out, args)
		}
		if _, err := once.when(time.Now()); err != nil {
			return err
		}
		return run(cmd, args)
	}
	return cmd
}

func (c *cli) historyCmd() *cobra.Command {
	var n, partition int
	var outcome string
	var out output
	cmd := c.jobCmd("history", "Recent executions of a job, newest first",
		func(ctx context.Context, cli *clientv3.Client, j config.Job) error {
			if err := checkPartition("history", j, partition, true); err != nil {
				return err
			}
			keep, err := ops.OutcomeFilter(outcome)
			if err != nil {
				return fmt.Errorf("kira history: --outcome: %w", err)
			}
			recs, err := ops.ReadHistoryWhere(ctx, cli, nil, c.cluster, j.Name, partition, n, keep)
			if err != nil {
				return c.unreachable(err)
			}
			return out.print(c.stdout, recs, func(w io.Writer) error { return printHistory(w, recs) })
		})
	fs := cmd.Flags()
	fs.IntVarP(&n, "limit", "n", 20, "how many executions")
	fs.IntVar(&partition, "partition", -1, "only this partition; -1: every partition")
	fs.StringVar(&outcome, "outcome", "", "only executions that ended so: succeeded, failed, timed_out, cancelled, fenced, skipped, missed")
	out.register(fs)
	return cmd
}

func printHistory(w io.Writer, recs []history.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULED\tPART\tOUTCOME\tCODE\tTRIGGER\tATTEMPT\tTOKEN\tMEMBER\tDURATION\tEXECUTION ID")
	for _, r := range recs {
		code := "-"
		if r.ExitCode != nil {
			code = fmt.Sprintf("exit %d", *r.ExitCode)
		} else if r.HTTPStatus != nil {
			code = fmt.Sprintf("HTTP %d", *r.HTTPStatus)
		}
		outcome := r.Outcome
		if r.Repeats > 0 && r.LastScheduledTime != nil {
			outcome = fmt.Sprintf("%s ×%d to %s", r.Outcome, r.Fires(), r.LastScheduledTime.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.ScheduledTime.Format(time.RFC3339), r.Partition, outcome, code, r.Cause,
			r.Attempt, r.Token, r.Member, r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond), r.ExecutionID)
	}
	return tw.Flush()
}

// catalogFile is the -f flag of apply and diff: a file, a directory of
// them (config.LintDir), or - for standard input. open takes a catalog
// whose after: names jobs it lacks, for apply to resolve against the
// stored jobs of other managers (config.UnresolvedCatalog).
type catalogFile struct {
	path string
	open bool
}

func (f *catalogFile) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.path, "filename", "f", "", "catalog YAML file, a directory whose *.yaml and *.yml files make one catalog, or - for standard input (required)")
	cmd.MarkFlagRequired("filename")
	cmd.MarkFlagFilename("filename", "yaml", "yml")
}

// load reads and checks the catalog; an explicit --cluster must agree
// with its cluster:.
func (f *catalogFile) load(c *cli, cmd *cobra.Command) (*config.Catalog, error) {
	var cat *config.Catalog
	var warnings []config.Problem
	var err error
	if f.path == "-" {
		data, rerr := io.ReadAll(c.stdin)
		if rerr != nil {
			return nil, fmt.Errorf("kira %s: reading standard input: %w", cmd.Name(), rerr)
		}
		cat, warnings, err = config.Lint("<stdin>", data)
	} else {
		cat, warnings, err = config.LoadLintPath(f.path)
	}
	printWarnings(c.stderr, warnings)
	if open, ok := config.UnresolvedCatalog(err); ok && f.open {
		// after: targets the files lack: the write resolves them against
		// the stored jobs of other managers, or refuses with these problems.
		cat, err = open, nil
	}
	if err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("cluster") && c.cluster != cat.Cluster {
		return nil, fmt.Errorf("kira %s: --cluster %s, but the catalog is of cluster %q (its cluster: field)", cmd.Name(), c.cluster, cat.Cluster)
	}
	c.cluster = cat.Cluster
	return cat, nil
}

// stored reads the stored catalog, nil if there is none yet.
func (c *cli) stored(ctx context.Context, cli *clientv3.Client) (*config.Catalog, int64, error) {
	prev, rev, err := config.LoadStored(ctx, cli, c.cluster)
	if errors.Is(err, config.ErrNoCatalog) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, c.unreachable(err)
	}
	return prev, rev, nil
}

func (c *cli) applyCmd() *cobra.Command {
	file := catalogFile{open: true}
	var dryRun, force bool
	var whole config.WholeOptions
	var out output
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR",
		Short: "Store a catalog unless the stored one changed since it was read; the members converge to it without restart",
		Long: "Stores the catalog of FILE (or of DIR: its *.yaml and *.yml files merged), as kira apply's, if the stored\n" +
			"catalog is still the one it compared against:\n" +
			"the file's revision: (as kira catalog -o yaml writes it), or, without one, the stored catalog read\n" +
			"just before. Otherwise nothing is written, and it exits 1 with what changed meanwhile; --force stores anyway.\n" +
			"Jobs written one by one by others (managers api:NAME, cli:NAME) are kept unless --prune-others;\n" +
			"a job of FILE that one of them holds is a conflict, unless --force-conflicts takes it over.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cat, err := file.load(c, cmd)
			if err != nil {
				return err
			}
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				res, err := c.apply(ctx, cli, cat, config.ApplyOptions{DryRun: dryRun, Force: force, WholeOptions: whole})
				if err != nil {
					return err
				}
				return out.print(c.stdout, res, res.print)
			})
		},
	}
	file.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would change, write nothing")
	cmd.Flags().BoolVar(&force, "force", false, "store even if the stored catalog changed since the file was read (overwrites the change made meanwhile)")
	cmd.Flags().BoolVar(&whole.ForceConflicts, "force-conflicts", false, "take over the jobs of the file that another manager (api:NAME, cli:NAME) holds")
	cmd.Flags().BoolVar(&whole.PruneOthers, "prune-others", false, "delete the stored jobs of other managers that the file lacks (kept without it)")
	whole.Where = func(job string) string { return config.WhereJob(file.path, job) }
	out.register(cmd.Flags())
	return cmd
}

// applied is what kira apply did.
type applied config.Applied

// apply stores cat as config.Apply does, its conflict told as kira apply's.
func (c *cli) apply(ctx context.Context, cli *clientv3.Client, cat *config.Catalog, opt config.ApplyOptions) (*applied, error) {
	res, err := config.ApplyWith(ctx, cli, cat, config.Source{By: config.ByApply, At: time.Now().UTC()}, opt)
	var conflict *config.ConflictError
	if errors.As(err, &conflict) {
		return nil, fmt.Errorf("kira apply: %v; nothing written.\n%sRead the catalog again (kira catalog -o yaml > FILE), make your change there and apply it; or apply with --force to overwrite the change made meanwhile.",
			conflict, config.Meanwhile(ctx, cli, cat, conflict))
	}
	if errors.Is(err, config.ErrUnreadableCatalog) {
		return nil, fmt.Errorf("kira apply: %v (kira apply --force replaces it)", err)
	}
	var managed *config.ManagerConflictError
	var invalid *config.Error
	if errors.As(err, &managed) || errors.As(err, &invalid) {
		return nil, err
	}
	if err != nil {
		return nil, c.unreachable(err)
	}
	return (*applied)(res), nil
}

func (a *applied) print(w io.Writer) error {
	if len(a.Changes) == 0 {
		_, err := fmt.Fprintf(w, "cluster %s: catalog unchanged (revision %d)\n", a.Cluster, a.Revision)
		return err
	}
	for _, ch := range a.Changes {
		fmt.Fprintln(w, ch)
	}
	if a.DryRun {
		_, err := fmt.Fprintf(w, "dry run: nothing written (stored revision %d)\n", a.Revision)
		return err
	}
	_, err := fmt.Fprintf(w, "cluster %s: catalog applied at revision %d; members converge without restart\n", a.Cluster, a.Revision)
	return err
}
