package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/kira-scheduler/kira/config"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"sigs.k8s.io/yaml"
)

func (c *cli) catalogCmd() *cobra.Command {
	var out output
	var history bool
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "The stored catalog, its revision and who stored it (-o yaml can be edited and applied again); --history: its last changes",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				if history {
					if !cmd.Flags().Changed("output") {
						out = "table"
					}
					return c.catalogHistory(ctx, cli, out)
				}
				s, err := config.Read(ctx, cli, c.cluster, 0)
				if err != nil {
					return c.unreachable(err)
				}
				// The revision: it was read at, so that kira apply of the
				// edited text conflicts with a change made meanwhile.
				cat := *s.Catalog
				cat.Revision = s.Revision
				text, err := config.Marshal(&cat)
				if err != nil {
					return err
				}
				if out == "json" {
					doc, err := yaml.YAMLToJSON(text)
					if err != nil {
						return err
					}
					return out.print(c.stdout, struct {
						Cluster  string          `json:"cluster"`
						Revision int64           `json:"revision"`
						Source   *config.Source  `json:"source"`
						Catalog  json.RawMessage `json:"catalog"`
						Jobs     []jobMeta       `json:"jobs"`
					}{cat.Cluster, s.Revision, s.Source, doc, jobMetas(s)}, nil)
				}
				fmt.Fprintf(c.stdout, "# cluster %s, stored at etcd revision %d; source: %s\n%s%s", cat.Cluster, s.Revision, s.Source, managedBy(s), text)
				return nil
			})
		},
	}
	out.register(cmd.Flags())
	out = "yaml"
	cmd.Flags().Lookup("output").DefValue = "yaml"
	cmd.Flags().BoolVar(&history, "history", false, "list the last 10 changes of the stored catalog that etcd still holds (older ones are compacted away), newest first")
	return cmd
}

// jobMeta is a stored job's manager and revision, for kira catalog.
type jobMeta struct {
	Job      string         `json:"job"`
	Manager  config.Manager `json:"manager"`
	Revision int64          `json:"revision"`
}

// jobMetas is every job of s with its manager and revision.
func jobMetas(s *config.Stored) []jobMeta {
	out := []jobMeta{}
	for _, j := range s.Catalog.Jobs {
		m, rev, _ := s.JobMeta(j.Name)
		out = append(out, jobMeta{Job: j.Name, Manager: config.Manager(m.String()), Revision: rev})
	}
	return out
}

// managedBy is a comment line for each job of s that a single-job writer
// manages (the others are the file's or kira apply's, as the source says):
// its manager and revision.
func managedBy(s *config.Stored) string {
	var b strings.Builder
	for _, m := range jobMetas(s) {
		if !m.Manager.Family() {
			fmt.Fprintf(&b, "# job %s: managed by %s, revision %d (kira apply keeps it unless --prune-others)\n", m.Job, m.Manager, m.Revision)
		}
	}
	return b.String()
}

// historyEntry is one change of the stored catalog, for kira catalog --history.
type historyEntry struct {
	Revision int64          `json:"revision"`
	Source   *config.Source `json:"source"`
	// Change is the single-job write that made the revision; absent for a
	// whole write, which Source describes.
	Change *config.JobChange `json:"change,omitempty"`
	// Changes are against the entry before it; absent for the oldest listed.
	Changes []string `json:"changes"`
}

// historyDepth is how many changes kira catalog --history lists.
const historyDepth = 10

func (c *cli) catalogHistory(ctx context.Context, cli *clientv3.Client, out output) error {
	// One more than listed: the oldest listed is diffed against it.
	stored, compacted, err := config.History(ctx, cli, c.cluster, historyDepth+1)
	if err != nil {
		return c.unreachable(err)
	}
	if len(stored) == 0 {
		return c.unreachable(fmt.Errorf("%w %q", config.ErrNoCatalog, c.cluster))
	}
	entries := []historyEntry{}
	for i, s := range stored[:min(len(stored), historyDepth)] {
		e := historyEntry{Revision: s.Revision, Source: s.Source, Change: s.Change}
		switch {
		case s.Catalog == nil || i+1 < len(stored) && stored[i+1].Catalog == nil:
			e.Changes = []string{"(a version this Kira cannot read)"}
		case i+1 < len(stored):
			e.Changes = []string{}
			for _, ch := range config.Diff(stored[i+1].Catalog, s.Catalog) {
				e.Changes = append(e.Changes, ch.String())
			}
		}
		entries = append(entries, e)
	}
	return out.print(c.stdout, entries, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tSTORED BY\tCHANGES")
		for _, e := range entries {
			changes := "(the first stored)"
			if compacted {
				changes = "(the oldest etcd still holds)"
			}
			if e.Changes != nil {
				changes = orNone(strings.Join(e.Changes, "; "))
			}
			by := e.Source.String()
			if e.Change != nil {
				by = e.Change.String()
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\n", e.Revision, by, changes)
		}
		if compacted {
			fmt.Fprintln(tw, "…\tolder changes were compacted away by etcd\t")
		}
		return tw.Flush()
	})
}

// exitCode is an error with its own exit status.
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }
func (e exitCode) Unwrap() error { return e.err }

func (c *cli) diffCmd() *cobra.Command {
	var file catalogFile
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR",
		Short: "Show what kira apply -f FILE would change; exit 0 when nothing, 1 when something, 2 on error (as kubectl diff)",
		Long: "Shows, as a unified diff of the two catalogs written out in full, what kira apply -f FILE would change.\n" +
			"Exit 0: no difference; 1: a difference; 2: an error. The diff program is diff -u -N, or $KIRA_EXTERNAL_DIFF\n" +
			"(as kubectl's KUBECTL_EXTERNAL_DIFF); without one, the changes are listed as kira apply lists them.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := c.diff(cmd, file)
			if err != nil && !errors.Is(err, errDiffers) {
				return exitCode{2, err}
			}
			return err
		},
	}
	file.register(cmd)
	return cmd
}

func (c *cli) diff(cmd *cobra.Command, file catalogFile) error {
	next, err := file.load(c, cmd)
	if err != nil {
		return err
	}
	return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
		prev, rev, err := c.stored(ctx, cli)
		if err != nil {
			return err
		}
		changes := config.Diff(prev, next)
		if len(changes) == 0 {
			return nil
		}
		before := []byte{}
		if prev != nil {
			if before, err = config.Marshal(prev); err != nil {
				return err
			}
		}
		// revision: and generation: are the file's, not the stored catalog's.
		shown := *next
		shown.Revision, shown.Generation = 0, 0
		after, err := config.Marshal(&shown)
		if err != nil {
			return err
		}
		if !c.externalDiff(fmt.Sprintf("stored/%s (revision %d)", next.Cluster, rev), file.path, before, after) {
			for _, ch := range changes {
				fmt.Fprintln(c.stdout, ch)
			}
		}
		return errDiffers
	})
}

// externalDiff runs the diff program on the two texts; false when there is
// none to run.
func (c *cli) externalDiff(labelA, labelB string, a, b []byte) bool {
	argv := []string{"diff", "-u", "-N", "--label", labelA, "--label", labelB}
	if env := os.Getenv("KIRA_EXTERNAL_DIFF"); env != "" {
		argv = strings.Fields(env)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return false
	}
	dir, err := os.MkdirTemp("", "kira-diff")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	pa, pb := filepath.Join(dir, "stored.yaml"), filepath.Join(dir, "file.yaml")
	if os.WriteFile(pa, a, 0o600) != nil || os.WriteFile(pb, b, 0o600) != nil {
		return false
	}
	var stderr bytes.Buffer
	run := exec.Command(argv[0], append(argv[1:], pa, pb)...)
	run.Stdout, run.Stderr = c.stdout, &stderr
	err = run.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		io.Copy(c.stderr, &stderr)
		return false
	}
	return true
}
