package main

import (
	"fmt"
	"io"

	"github.com/kira-scheduler/kira/config"
	"github.com/spf13/cobra"
)

func (c *cli) validateCmd() *cobra.Command {
	var next int
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a catalog without running it",
		Long: "Checks a catalog without running it: exit 1 and every problem with file:line when invalid.\n" +
			"With --next N, prints each job's next N fire times as the scheduler will fire them.",
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cat, warnings, err := config.LoadLint(args[0])
			printWarnings(c.stderr, warnings)
			if err != nil {
				return err
			}
			slots := 0
			for _, j := range cat.Jobs {
				slots += j.Partitions
			}
			fmt.Fprintf(c.stdout, "%s: ok: cluster %q, %d jobs, %d slots, lease_ttl %s\n", args[0], cat.Cluster, len(cat.Jobs), slots, cat.Membership.LeaseTTL)
			if next > 0 {
				return printCatalogNext(c.stdout, cat, next)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&next, "next", 0, "also print each job's next N fire times, in its zone and in UTC")
	return cmd
}

// printWarnings prints what is valid but will fail where it is run.
func printWarnings(w io.Writer, warnings []config.Problem) {
	for _, p := range warnings {
		fmt.Fprintln(w, "warning:", p)
	}
}
