package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/config"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// kira job get|put|delete read and write one job of the stored catalog
// without the others (config.GetJob, PutJob, DeleteJob; docs/cli.md,
// "kira job"), as the command line's manager, cli:<name> (cliManager).
// get's YAML is what put takes back, its revision in a comment that
// --if-revision file reads (TestJobCommandsRoundTrip).
func (c *cli) jobDefCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Read, create, replace or delete one job of the stored catalog, as its manager cli:NAME (get, put, delete)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "kira job: unknown command %q: get, put or delete\n\n%s", args[0], cmd.UsageString())
				return errUsage
			}
			return cmd.Help()
		},
	}
	for _, sub := range []*cobra.Command{c.jobGetCmd(), c.jobPutCmd(), c.jobDeleteCmd()} {
		jobSubEnv(sub)
		cmd.AddCommand(sub)
	}
	return cmd
}

// jobSubEnv names the variables of a kira job subcommand's own flags
// KIRA_JOB_<SUBCOMMAND>_<FLAG>: get, put and delete are words other
// commands may take too.
func jobSubEnv(cmd *cobra.Command) {
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		env := "KIRA_JOB_" + strings.ToUpper(cmd.Name()+"_"+strings.ReplaceAll(f.Name, "-", "_"))
		cmd.Flags().SetAnnotation(f.Name, envAnnotation, []string{env})
	})
}

func (c *cli) jobGetCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "get JOB",
		Short: "One job as stored, in the catalog's schema, with its revision and manager (-o yaml can be edited and put back)",
		Long: "Prints the job as one entry of a catalog's jobs:, every setting written out, preceded by the comment lines\n" +
			"# revision: N and # manager: M; kira job put -f FILE --if-revision file puts the edited file back unless the\n" +
			"job changed meanwhile. -o json prints {\"job\": {...}, \"revision\": N, \"manager\": M, \"catalog_revision\": N},\n" +
			"as GET /v1/jobs/{job}/definition answers.",
		Args:              exactArgs(1),
		ValidArgsFunction: c.completeJobs,
		RunE: func(_ *cobra.Command, args []string) error {
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				sj, err := config.GetJob(ctx, cli, c.cluster, args[0])
				if err != nil {
					return c.jobError("get", args[0], nil, err)
				}
				return c.printJob(sj, out)
			})
		},
	}
	out.register(cmd.Flags())
	out = "yaml"
	cmd.Flags().Lookup("output").DefValue = "yaml"
	return cmd
}

// printJob writes sj as kira job get does.
func (c *cli) printJob(sj *config.StoredJob, out output) error {
	if out == "json" {
		data, err := config.MarshalJobJSON(sj.Job)
		if err != nil {
			return err
		}
		return out.print(c.stdout, api.JobDefinition{Job: data, Revision: sj.Revision, Manager: sj.Manager.String(),
			CatalogRevision: sj.CatalogRevision}, nil)
	}
	text, err := config.MarshalJob(sj.Job)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s %d\n# manager: %s\n%s", revisionComment, sj.Revision, sj.Manager, text)
	return err
}

// jobPutFlags are kira job put's.
type jobPutFlags struct {
	file       string
	ifRevision string // a revision, or "file": the file's # revision: comment
	createOnly bool
	force      bool
	out        output
}

func (c *cli) jobPutCmd() *cobra.Command {
	var f jobPutFlags
	cmd := &cobra.Command{
		Use:   "put [JOB] -f FILE|-",
		Short: "Create or replace one job from a file of one job (the schema of one entry of a catalog's jobs:), as cli:NAME",
		Long: "Stores the job of FILE (- reads standard input): one job in YAML or JSON, as kira job get writes it. Its name is\n" +
			"JOB, or the file's name: when JOB is left out; both given must agree. The write is the command line's:\n" +
			"its manager is cli:NAME, NAME the etcd --user, else $USER@HOSTNAME. A job another manager holds (apply,\n" +
			"file, api:NAME, another cli:NAME) is a conflict unless --force takes it over. --if-revision N writes only\n" +
			"if the job is still at revision N (--if-revision file: the file's # revision: comment); --create-only only\n" +
			"if it does not exist. Other jobs are neither read nor written.",
		Args:              cobra.RangeArgs(0, 1),
		ValidArgsFunction: c.completeJobs,
		RunE: func(_ *cobra.Command, args []string) error {
			return c.putJob(f, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "filename", "f", "", "file of one job, YAML or JSON, or - for standard input (required)")
	cmd.MarkFlagRequired("filename")
	cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	fs.StringVar(&f.ifRevision, "if-revision", "", "write only if the job is at this revision (kira job get's); file: the file's # revision: comment")
	fs.BoolVar(&f.createOnly, "create-only", false, "write only if the job does not exist")
	fs.BoolVar(&f.force, "force", false, "take over the job from another manager (kira apply's, a file's, the API's, another user's)")
	f.out.register(fs)
	return cmd
}

// putJob is kira job put.
func (c *cli) putJob(f jobPutFlags, args []string) error {
	body, err := readJobFile(c.stdin, f.file)
	if err != nil {
		return err
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
	} else if name, err = body.name(); err != nil {
		return err
	}
	opt := config.PutJobOptions{CreateOnly: f.createOnly, Force: f.force}
	if opt.IfRevision, err = body.ifRevision(f.ifRevision); err != nil {
		return err
	}
	if opt.CreateOnly && opt.IfRevision != 0 {
		return fmt.Errorf("kira job put: --create-only and --if-revision exclude each other: a job to create has no revision")
	}
	if opt.Manager, err = c.cliManager(); err != nil {
		return err
	}
	return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
		w, err := config.PutJob(ctx, cli, c.cluster, body.data, name, opt)
		if err != nil {
			return c.jobError("put", name, body, err)
		}
		res := api.JobWritten{Job: w.Job, Revision: w.Revision, Created: w.Created, Unchanged: w.Unchanged,
			Manager: w.Manager.String(), Previous: string(w.Previous)}
		return f.out.print(c.stdout, res, func(w io.Writer) error { return printJobWritten(w, res) })
	})
}

// printJobWritten says what kira job put or delete did.
func printJobWritten(w io.Writer, res api.JobWritten) error {
	var err error
	switch {
	case res.Deleted:
		_, err = fmt.Fprintf(w, "job %s deleted at catalog revision %d\n", res.Job, res.Revision)
	case res.Unchanged:
		_, err = fmt.Fprintf(w, "job %s unchanged (revision %d, manager %s): nothing written\n", res.Job, res.Revision, res.Manager)
	default:
		did := "replaced"
		if res.Created {
			did = "created"
		}
		taken := ""
		if res.Previous != "" {
			taken = ", taken over from " + res.Previous
		}
		_, err = fmt.Fprintf(w, "job %s %s at revision %d (manager %s%s)\n", res.Job, did, res.Revision, res.Manager, taken)
	}
	return err
}

func (c *cli) jobDeleteCmd() *cobra.Command {
	var ifRevision int64
	var force bool
	var out output
	cmd := &cobra.Command{
		Use:   "delete JOB",
		Short: "Delete one job of the stored catalog, as cli:NAME; refused while other jobs run after it",
		Long: "Deletes the job, as the command line's manager cli:NAME (see kira job put). A job another manager holds\n" +
			"is a conflict unless --force; --if-revision N deletes only if the job is still at revision N. A job that\n" +
			"other jobs run after (after:) is not deleted: the error names them.",
		Args:              exactArgs(1),
		ValidArgsFunction: c.completeJobs,
		RunE: func(_ *cobra.Command, args []string) error {
			if ifRevision < 0 {
				return fmt.Errorf("kira job delete: --if-revision %d: a revision is positive (kira job get's)", ifRevision)
			}
			m, err := c.cliManager()
			if err != nil {
				return err
			}
			return c.withCluster(func(ctx context.Context, cli *clientv3.Client) error {
				rev, err := config.DeleteJob(ctx, cli, c.cluster, args[0], config.DeleteJobOptions{Manager: m, IfRevision: ifRevision, Force: force})
				if err != nil {
					return c.jobError("delete", args[0], nil, err)
				}
				res := api.JobWritten{Job: args[0], Revision: rev, Deleted: true}
				return out.print(c.stdout, res, func(w io.Writer) error { return printJobWritten(w, res) })
			})
		},
	}
	cmd.Flags().Int64Var(&ifRevision, "if-revision", 0, "delete only if the job is at this revision (kira job get's); 0: whatever it is")
	cmd.Flags().BoolVar(&force, "force", false, "delete the job although another manager holds it")
	out.register(cmd.Flags())
	return cmd
}

// cliManager is the manager of the command line's writes: cli:<etcd
// user> when --user is given (the name etcd authenticates), else
// cli:$USER@hostname.
func (c *cli) cliManager() (config.Manager, error) {
	name, _, _ := strings.Cut(c.etcd.User, ":")
	if name == "" {
		name = os.Getenv("USER")
		if name == "" {
			name = "unknown"
		}
		if host, err := os.Hostname(); err == nil && host != "" {
			name += "@" + host
		}
	}
	m := config.ManagerCLI(name)
	if err := m.ValidateSingle(); err != nil {
		return "", fmt.Errorf("kira job: %v: set --user (or $USER) to a name without spaces", err)
	}
	return m, nil
}
