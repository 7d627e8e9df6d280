package main

import (
	"fmt"
	"io"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/spf13/cobra"
)

// validated is what kira validate found in a valid catalog.
type validated struct {
	File     string   `json:"file"`
	Cluster  string   `json:"cluster"`
	Jobs     int      `json:"jobs"`
	Slots    int      `json:"slots"`
	LeaseTTL string   `json:"lease_ttl"`
	Warnings []string `json:"warnings"`
	// Next is each job's next fires (--next N), by job name.
	Next map[string][]nextFire `json:"next"`
}

func (c *cli) validateCmd() *cobra.Command {
	var next int
	var out output
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR",
		Short: "Check a catalog without running it",
		Long: "Checks a catalog without running it: exit 1 and every problem with file:line when invalid.\n" +
			"A directory is one catalog made of its *.yaml and *.yml files (a setting or a job defined twice is refused).\n" +
			"With --next N, prints each job's next N fire times as the scheduler will fire them.",
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cat, warnings, err := config.LoadLintPath(args[0])
			printWarnings(c.stderr, warnings)
			if err != nil {
				return err
			}
			v := validated{File: args[0], Cluster: cat.Cluster, Jobs: len(cat.Jobs), LeaseTTL: cat.Membership.LeaseTTL.String(),
				Warnings: []string{}, Next: map[string][]nextFire{}}
			for _, w := range warnings {
				v.Warnings = append(v.Warnings, w.String())
			}
			for _, j := range cat.Jobs {
				v.Slots += j.Partitions
				if next > 0 {
					if v.Next[j.Name], err = upcoming(j, time.Now(), next, 0); err != nil {
						return err
					}
				}
			}
			return out.print(c.stdout, v, func(w io.Writer) error {
				fmt.Fprintf(w, "%s: ok: cluster %q, %d jobs, %d slots, lease_ttl %s\n", v.File, v.Cluster, v.Jobs, v.Slots, v.LeaseTTL)
				for _, j := range cat.Jobs {
					if fires, ok := v.Next[j.Name]; ok {
						if j.Dependent() {
							fmt.Fprintln(w)
							if err := printNext(w, j, nil, 0); err != nil {
								return err
							}
							continue
						}
						fmt.Fprintf(w, "\njob %s (%s):\n", j.Name, j.Schedule)
						if err := printNext(w, j, fires, 0); err != nil {
							return err
						}
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&next, "next", 0, "also print each job's next N fire times, in its zone and in UTC")
	out.register(cmd.Flags())
	return cmd
}

// printWarnings prints what is valid but will fail where it is run.
func printWarnings(w io.Writer, warnings []config.Problem) {
	for _, p := range warnings {
		fmt.Fprintln(w, "warning:", p)
	}
}
