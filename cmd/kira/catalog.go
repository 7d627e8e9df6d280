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

	"github.com/kira-scheduler/kira/config"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"sigs.k8s.io/yaml"
)

func (c *cli) catalogCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "The stored catalog and its revision (-o yaml can be applied again)",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				cat, rev, err := config.LoadStored(ctx, cli, c.cluster)
				if err != nil {
					return c.unreachable(err)
				}
				text, err := config.Marshal(cat)
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
						Catalog  json.RawMessage `json:"catalog"`
					}{cat.Cluster, rev, doc}, nil)
				}
				fmt.Fprintf(c.stdout, "# cluster %s, stored at etcd revision %d\n%s", cat.Cluster, rev, text)
				return nil
			})
		},
	}
	out.register(cmd.Flags())
	out = "yaml"
	cmd.Flags().Lookup("output").DefValue = "yaml"
	return cmd
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
		Use:   "diff -f FILE",
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
		after, err := config.Marshal(next)
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
