package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// nextFire is one upcoming fire as kira next prints it.
type nextFire struct {
	Scheduled time.Time `json:"scheduled"` // in the job's zone
	UTC       time.Time `json:"utc"`
	// Due is when the slot of --partition starts it: Scheduled plus the
	// slot's jitter offset (Scheduled when the job has no jitter).
	Due time.Time `json:"due"`
	// OneOff is the execution id of a waiting one-off run (kira trigger
	// --at) of partition OneOffPartition; empty for the schedule's fires.
	OneOff          string `json:"one_off,omitempty"`
	OneOffPartition int    `json:"one_off_partition,omitempty"`
}

func (c *cli) nextCmd() *cobra.Command {
	var n, partition int
	var from string
	var out output
	cmd := c.jobCmd("next", "The next fire times of a job, in its zone and in UTC, as the scheduler will fire them",
		func(ctx context.Context, cli *clientv3.Client, j config.Job) error {
			start := time.Now()
			if from != "" {
				t, err := time.Parse(time.RFC3339, from)
				if err != nil {
					return fmt.Errorf("kira next: --from %q: want RFC 3339, such as 2027-03-14T01:30:00-05:00", from)
				}
				start = t
			}
			if err := checkPartition("next", j, partition, false); err != nil {
				return err
			}
			fires, err := upcoming(j, start, n, partition)
			if err != nil {
				return err
			}
			if fires, err = withOneOffs(ctx, cli, c.cluster, j, fires, start, n); err != nil {
				return c.unreachable(err)
			}
			return out.print(c.stdout, fires, func(w io.Writer) error { return printNext(w, j, fires, partition) })
		})
	fs := cmd.Flags()
	fs.IntVarP(&n, "count", "n", 10, "how many fire times")
	fs.StringVar(&from, "from", "", "list the fires after this instant, RFC 3339 (default now)")
	fs.IntVar(&partition, "partition", 0, "the slot whose jitter offset the DUE column adds")
	out.register(fs)
	return cmd
}

// upcoming is the job's next n fires after from, by config.Job.Upcoming:
// the scheduler's own chain of fire times.
func upcoming(j config.Job, from time.Time, n, partition int) ([]nextFire, error) {
	times, err := j.Upcoming(from, n)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", j.Name, err)
	}
	loc := time.UTC
	if j.Timezone != "" {
		if loc, err = time.LoadLocation(j.Timezone); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.Name, err)
		}
	}
	offset := j.JitterOffset(shard.Slot{Job: j.Name, Partition: partition})
	out := []nextFire{}
	for _, t := range times {
		out = append(out, nextFire{Scheduled: t.In(loc), UTC: t, Due: t.Add(offset)})
	}
	return out, nil
}

func printNext(w io.Writer, j config.Job, fires []nextFire, partition int) error {
	if j.Dependent() {
		var ups []string
		for _, u := range j.After {
			ups = append(ups, u.String())
		}
		_, err := fmt.Fprintf(w, "%s has no schedule: it fires once per fire of %s, at its scheduled time, once every partition ended (kira jobs %s shows what it waits for)\n",
			j.Name, strings.Join(ups, " and "), j.Name)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	zone := j.Timezone
	if zone == "" {
		zone = "UTC"
	}
	header := "SCHEDULED (" + zone + ")\tUTC"
	if j.Jitter > 0 {
		header += fmt.Sprintf("\tDUE (partition %d, jitter)", partition)
	}
	oneOffs := slices.ContainsFunc(fires, func(f nextFire) bool { return f.OneOff != "" })
	if oneOffs {
		header += "\tRUN"
	}
	fmt.Fprintln(tw, header)
	for _, f := range fires {
		line := f.Scheduled.Format("2006-01-02 15:04:05 MST") + "\t" + f.UTC.Format(time.RFC3339)
		if j.Jitter > 0 {
			line += "\t" + f.Due.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		if oneOffs {
			line += "\t" + oneOffText(f)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
