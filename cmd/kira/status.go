package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func (c *cli) statusCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The members of the cluster and the owner and token of every slot",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				st, err := ops.ReadStatus(ctx, cli, c.cluster)
				if err != nil {
					return fmt.Errorf("kira status: %w", c.unreachable(err))
				}
				return out.print(c.stdout, st, func(w io.Writer) error { printStatus(w, st); return nil })
			})
		},
	}
	out.register(cmd.Flags())
	return cmd
}

func printStatus(w io.Writer, st *ops.Status) {
	fmt.Fprintf(w, "cluster %s at revision %d: %d members, %d slots, catalog revision %d\n", st.Cluster, st.Revision, len(st.Members), len(st.Slots), st.CatalogRevision)
	if st.CatalogRevision > 0 {
		fmt.Fprintf(w, "catalog source: %s\n", st.CatalogSource)
	}
	for _, m := range st.Members {
		if m.CatalogFileNotStored != "" {
			fmt.Fprintf(w, "WARNING member %s (%s): %s\n", m.Name, m.ID, m.CatalogFileNotStored)
		}
	}
	if len(st.Paused) > 0 {
		fmt.Fprintf(w, "paused: %s\n", strings.Join(st.Paused, ", "))
	}
	if len(st.Unplaced) > 0 {
		fmt.Fprintf(w, "NOT RUNNING, no member matches their placement: %s\n", strings.Join(st.Unplaced, ", "))
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
	// Not headed JOB: scripts read the slot table as the section under JOB.
	fmt.Fprintln(tw, "SPLIT OF JOB\tSLOTS LED BY EACH MEMBER")
	for _, js := range st.Shares {
		fmt.Fprintf(tw, "%s\t%s\n", js.Job, orNone(ops.FormatShares(js.Shares)))
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

// orNone is s, or "(none)" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
