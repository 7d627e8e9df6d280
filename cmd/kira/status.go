package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/operator"
)

func statusCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clusterFlags
	cf.register(fs)
	cluster := &cf.cluster
	output := fs.String("o", "table", "output format: table or json")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "kira status: -o must be table or json, got %q\n", *output)
		return errUsage
	}
	cli, err := cf.connect()
	if err != nil {
		return fmt.Errorf("kira status: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := operator.ReadStatus(ctx, cli, *cluster)
	if err != nil {
		return fmt.Errorf("kira status: %w", cf.unreachable(err))
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(stdout, st)
	return nil
}

func printStatus(w io.Writer, st *operator.Status) {
	fmt.Fprintf(w, "cluster %s at revision %d: %d members, %d slots, catalog revision %d\n", st.Cluster, st.Revision, len(st.Members), len(st.Slots), st.CatalogRevision)
	if len(st.Paused) > 0 {
		fmt.Fprintf(w, "paused: %s\n", strings.Join(st.Paused, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tNAME\tHOST\tSTARTED\tCATALOG\tLEADS")
	leads := map[string]int{}
	for _, s := range st.Slots {
		leads[s.Owner]++
	}
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", m.ID, m.Name, m.Host, m.StartedAt.Format(time.RFC3339), m.CatalogRevision, leads[m.ID])
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPARTITION\tOWNER\tTOKEN")
	for _, s := range st.Slots {
		owner, token := s.Owner, strconv.FormatInt(s.Token, 10)
		if owner == "" {
			owner, token = "(none)", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.Job, s.Partition, owner, token)
	}
	tw.Flush()
}
