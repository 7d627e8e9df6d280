package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/kira-scheduler/kira/config"
)

func validateCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: kira validate FILE\n\nChecks a catalog without running it; exit 1 and every problem with file:line when invalid.")
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	cat, warnings, err := config.LoadLint(fs.Arg(0))
	printWarnings(stderr, warnings)
	if err != nil {
		return err
	}
	slots := 0
	for _, j := range cat.Jobs {
		slots += j.Partitions
	}
	fmt.Fprintf(stdout, "%s: ok: cluster %q, %d jobs, %d slots, lease_ttl %s\n", fs.Arg(0), cat.Cluster, len(cat.Jobs), slots, cat.Membership.LeaseTTL)
	return nil
}

// printWarnings prints what is valid but will fail where it is run.
func printWarnings(w io.Writer, warnings []config.Problem) {
	for _, p := range warnings {
		fmt.Fprintln(w, "warning:", p)
	}
}
