package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func (c *cli) jobsCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "jobs [JOB]",
		Short: "The jobs of the stored catalog: schedule, slots led, last and next fire (with JOB: each slot)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return exactArgs(1)(cmd, args)
			}
			return nil
		},
		ValidArgsFunction: c.completeJobs,
		RunE: func(_ *cobra.Command, args []string) error {
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				if len(args) == 1 {
					if _, err := c.storedJob(ctx, cli, "jobs", args[0]); err != nil {
						return err
					}
					d, _, err := ops.ReadJob(ctx, cli, nil, nil, c.cluster, args[0], time.Now())
					if err != nil {
						return c.unreachable(err)
					}
					// Its manager and revision; none for a catalog an older
					// version stored in a single key.
					stored, _ := config.GetJob(ctx, cli, c.cluster, args[0])
					return out.print(c.stdout, d, func(w io.Writer) error {
						if err := printJob(w, d); err != nil || stored == nil {
							return err
						}
						_, err := fmt.Fprintf(w, "\nmanaged by %s, job revision %d\n", stored.Manager, stored.Revision)
						return err
					})
				}
				js, err := ops.ReadJobs(ctx, cli, nil, nil, c.cluster, time.Now())
				if err != nil {
					return c.unreachable(err)
				}
				return out.print(c.stdout, js, func(w io.Writer) error { return printJobs(w, js) })
			})
		},
	}
	out.register(cmd.Flags())
	return cmd
}

// when prints a time for a table: RFC 3339 in UTC, "-" for none.
func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// lastFire is a fire's time, outcome and member, for a table.
func lastFire(f *ops.Fire) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s by %s", when(&f.ScheduledTime), f.Outcome, f.Member)
}

// placement is a job's placement for a table, with how many members it
// admits.
func placement(j ops.JobStatus) string {
	switch {
	case j.Placement == "":
		return "any"
	case j.EligibleMembers == 0:
		return j.Placement + " (NO MEMBER: not running)"
	}
	return fmt.Sprintf("%s (%d members)", j.Placement, j.EligibleMembers)
}

func printJobs(w io.Writer, js []ops.JobStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tTIMEZONE\tPARTITIONS\tPAUSED\tPLACEMENT\tLED\tLAST FIRE\tNEXT FIRE")
	for _, j := range js {
		tz := j.Timezone
		if tz == "" {
			tz = "UTC"
		}
		schedule := j.Schedule
		if len(j.After) > 0 {
			schedule = "after " + strings.Join(j.After, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%t\t%s\t%d/%d\t%s\t%s\n", j.Name, schedule, tz, j.Partitions, j.Paused, placement(j), j.SlotsLed, j.Partitions, lastFire(j.LastFire), when(j.NextFire))
	}
	return tw.Flush()
}

func printJob(w io.Writer, d *ops.JobDetail) error {
	if err := printJobs(w, []ops.JobStatus{d.JobStatus}); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nslots led by each member: %s\n", orNone(ops.FormatShares(d.Shares)))
	printGraph(w, d.JobStatus)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tOWNER\tTOKEN\tLAST FIRE\tNEXT FIRE")
	for _, s := range d.Slots {
		owner, token := s.Owner, strconv.FormatInt(s.Token, 10)
		if owner == "" {
			owner, token = "(none)", "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", s.Partition, owner, token, lastFire(s.LastFire), when(s.NextFire))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printWaitingRuns(w, d.WaitingRuns)
}

// printGraph prints what a job runs after, what runs after it, and where a
// dependent stands on the logical time it waits for.
func printGraph(w io.Writer, j ops.JobStatus) {
	if len(j.After) > 0 {
		fmt.Fprintf(w, "runs after: %s\n", strings.Join(j.After, ", "))
	}
	if len(j.Dependents) > 0 {
		fmt.Fprintf(w, "runs before: %s\n", strings.Join(j.Dependents, ", "))
	}
	if wt := j.Waiting; wt != nil {
		var parts []string
		for _, u := range wt.Upstreams {
			parts = append(parts, fmt.Sprintf("%s: %d of %d partitions not ended", u.Job, u.Pending, u.Partitions))
		}
		fmt.Fprintf(w, "waiting for the fire at %s: %s\n", when(&wt.LogicalTime), strings.Join(parts, ", "))
	}
}
