package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// oneOffFlags are kira trigger's flags for one-off runs: --at and --in ask
// for a run at a time, --cancel cancels a waiting run by its id.
type oneOffFlags struct {
	at, in, cancel string
}

func (o *oneOffFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.at, "at", "", "run once at this time, RFC 3339 with a zone (2027-01-01T09:00:00Z), instead of now")
	fs.StringVar(&o.in, "in", "", "run once after this duration (2h, 90m), instead of now")
	fs.StringVar(&o.cancel, "cancel", "", "cancel the waiting run with this execution id (JOB optional)")
}

// when is the time the flags ask the run for: zero for now.
func (o *oneOffFlags) when(now time.Time) (time.Time, error) {
	switch {
	case o.at != "" && o.in != "":
		return time.Time{}, errors.New("kira trigger: --at and --in both set: keep one")
	case o.at != "":
		t, err := time.Parse(time.RFC3339, o.at)
		if err != nil {
			return time.Time{}, fmt.Errorf("kira trigger: --at %q: want RFC 3339 with a zone, such as 2027-01-01T09:00:00Z or 2027-01-01T09:00:00+03:00", o.at)
		}
		if !t.After(now) {
			return time.Time{}, fmt.Errorf("kira trigger: --at %s is not in the future (now %s): leave --at out to run now", o.at, now.UTC().Format(time.RFC3339))
		}
		return t, nil
	case o.in != "":
		d, err := time.ParseDuration(o.in)
		if err != nil || d <= 0 {
			return time.Time{}, fmt.Errorf("kira trigger: --in %q: want a positive duration, such as 90s, 2h or 1h30m", o.in)
		}
		return now.Add(d), nil
	}
	return time.Time{}, nil
}

// request requests the runs of slots now, or at the flags' time.
func (o *oneOffFlags) request(ctx context.Context, cli *clientv3.Client, cluster string, slots []shard.Slot) ([]string, time.Time, error) {
	at, err := o.when(time.Now())
	if err != nil {
		return nil, at, err
	}
	if at.IsZero() {
		ids, err := ops.RequestRun(ctx, cli, cluster, slots)
		return ids, at, err
	}
	ids, err := ops.RequestRunAt(ctx, cli, cluster, slots, at)
	return ids, at, err
}

// args are kira trigger's arguments: JOB, or with --cancel an optional JOB.
func (o *oneOffFlags) args(cmd *cobra.Command, args []string) error {
	if o.cancel != "" && len(args) <= 1 {
		return nil
	}
	return exactArgs(1)(cmd, args)
}

// cancelled is what kira trigger --cancel prints.
type cancelled struct {
	ID        string     `json:"id"`
	Job       string     `json:"job,omitempty"`
	Partition int        `json:"partition"`
	At        *time.Time `json:"at,omitempty"`
	Cancelled bool       `json:"cancelled"`
	// Outcome is the run's, when it was not waiting and job's history has it.
	Outcome string `json:"outcome,omitempty"`
}

// cancelRun cancels the waiting run o.cancel. A run that is not waiting
// any more is an error that says what became of it, from job's history
// when job is given: it ran (with its outcome), or it started or was
// cancelled already. Held by TestTriggerAtRunsOnceAcrossRestarts.
func (c *cli) cancelRun(o *oneOffFlags, out output, args []string) error {
	return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
		job := ""
		if len(args) == 1 {
			j, err := c.storedJob(ctx, cli, "trigger", args[0])
			if err != nil {
				return err
			}
			job = j.Name
		}
		w, err := ops.CancelRun(ctx, cli, c.cluster, o.cancel)
		switch {
		case errors.Is(err, ops.ErrNotWaiting):
			if r, ok := c.ranAlready(ctx, cli, job, w.Job, o.cancel); ok {
				return fmt.Errorf("kira trigger: not cancelled: run %s of %s/%d already ran: %s, started %s, attempt %d",
					o.cancel, r.Job, r.Partition, r.Outcome, r.StartedAt.UTC().Format(time.RFC3339), r.Attempt)
			}
			return fmt.Errorf("kira trigger: not cancelled: %w", err)
		case err != nil:
			return c.unreachable(err)
		case job != "" && w.Job != job:
			// Cancelled all the same: the id named it exactly.
			fmt.Fprintf(c.stderr, "kira trigger: run %s is of job %s, not %s\n", o.cancel, w.Job, job)
		}
		res := cancelled{ID: w.ID, Job: w.Job, Partition: w.Partition, Cancelled: true}
		if !w.At.IsZero() {
			res.At = &w.At
		}
		return out.print(c.stdout, res, func(wr io.Writer) error {
			fmt.Fprintf(wr, "cancelled %s/%d execution_id %s%s: it will not run\n", w.Job, w.Partition, w.ID, atText(res.At))
			return nil
		})
	})
}

// atText is " at TIME" for a one-off run's time, "" for none.
func atText(at *time.Time) string {
	if at == nil || at.IsZero() {
		return ""
	}
	return " at " + at.UTC().Format(time.RFC3339)
}

// ranAlready finds the record of run id in the history of job, else of
// the job the run was found waiting for, else of every stored job.
func (c *cli) ranAlready(ctx context.Context, cli *clientv3.Client, job, waitedFor, id string) (history.Record, bool) {
	var names []string
	switch {
	case job != "":
		names = []string{job}
	case waitedFor != "":
		names = []string{waitedFor}
	default:
		cat, _, err := config.LoadStored(ctx, cli, c.cluster)
		if err != nil {
			return history.Record{}, false
		}
		for _, j := range cat.Jobs {
			names = append(names, j.Name)
		}
	}
	for _, name := range names {
		if r, ok, err := ops.FindRun(ctx, cli, c.cluster, name, id); err == nil && ok {
			r.Job = name
			return r, true
		}
	}
	return history.Record{}, false
}

// withOneOffs adds to the schedule's fires of job j the one-off runs
// waiting for it after from, in time order, and keeps the first n.
func withOneOffs(ctx context.Context, cli *clientv3.Client, cluster string, j config.Job, fires []nextFire, from time.Time, n int) ([]nextFire, error) {
	waiting, err := ops.WaitingRuns(ctx, cli, cluster, j.Name)
	if err != nil {
		return nil, err
	}
	loc := time.UTC
	if len(fires) > 0 {
		loc = fires[0].Scheduled.Location()
	} else if j.Timezone != "" {
		if l, err := time.LoadLocation(j.Timezone); err == nil {
			loc = l
		}
	}
	for _, w := range waiting {
		if !w.At.IsZero() && w.At.After(from) {
			fires = append(fires, nextFire{Scheduled: w.At.In(loc), UTC: w.At, Due: w.At, OneOff: w.ID, OneOffPartition: w.Partition})
		}
	}
	slices.SortStableFunc(fires, func(a, b nextFire) int { return a.UTC.Compare(b.UTC) })
	if len(fires) > n {
		fires = fires[:n]
	}
	return fires, nil
}

// oneOffText is the RUN column of kira next: the schedule's, or a one-off
// run's id and partition.
func oneOffText(f nextFire) string {
	if f.OneOff == "" {
		return "schedule"
	}
	return fmt.Sprintf("one-off %s (partition %d)", f.OneOff, f.OneOffPartition)
}

// printWaitingRuns is the part of kira jobs JOB that lists the manual runs
// not started yet: one-off runs at their time, others as soon as the
// slot's holder sees them.
func printWaitingRuns(w io.Writer, runs []ops.WaitingRun) error {
	if len(runs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nwaiting runs (kira trigger --cancel ID cancels one):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPARTITION\tAT\tREQUESTED")
	for _, r := range runs {
		at := "now"
		if !r.At.IsZero() {
			at = r.At.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.ID, r.Partition, at, when(&r.RequestedAt))
	}
	return tw.Flush()
}
