package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kira-scheduler/kira/config"
)

// jobError tells an error of kira job VERB on job name as a user can act
// on it: each says whether anything was written and what to do next; an
// invalid job's problems name label, the -f file, with their line and
// field (TestJobCommandsRoundTrip, TestJobCommandsRefuse); file is nil
// but for put.
func (c *cli) jobError(verb, name string, file *jobFile, err error) error {
	var (
		pre     *config.PreconditionError
		conf    *config.ManagerConflictError
		deps    *config.DependentsError
		invalid *config.Error
	)
	cmd := "kira job " + verb
	switch {
	case errors.Is(err, config.ErrNoJob):
		return fmt.Errorf("%s: cluster %q has no job %q (kira catalog lists its jobs)", cmd, c.cluster, name)
	case errors.Is(err, config.ErrNoCatalog):
		return fmt.Errorf("%s: cluster %q has no stored catalog: store one first (kira apply -f FILE), or give --cluster", cmd, c.cluster)
	case errors.Is(err, config.ErrUnreadableCatalog):
		return fmt.Errorf("%s: %v (kira apply --force replaces the stored catalog)", cmd, err)
	case errors.As(err, &pre):
		return preconditionFailed(cmd, verb, pre)
	case errors.As(err, &conf):
		return managerConflict(cmd, verb, name, conf)
	case errors.As(err, &deps):
		return fmt.Errorf("%s: job %s cannot be deleted: %s run after it (after:); change or delete them first; nothing written", cmd, name, strings.Join(deps.Dependents, ", "))
	case errors.As(err, &invalid):
		return file.problems(invalid, name)
	case errors.Is(err, config.ErrInvalidJob), errors.Is(err, config.ErrCatalogBusy):
		return fmt.Errorf("%s: %v", cmd, err)
	case errors.Is(err, config.ErrOutcomeUnknown):
		return fmt.Errorf("%s: %v: kira job get %s tells what is stored", cmd, err, name)
	case verb != "get":
		return fmt.Errorf("%s: %w; an error from etcd may hide a write applied: kira job get %s tells what is stored", cmd, c.unreachable(err), name)
	}
	return fmt.Errorf("%s: %w", cmd, c.unreachable(err))
}

// preconditionFailed tells a --if-revision or --create-only refused: the
// revision stored, and what changed since the one named.
func preconditionFailed(cmd, verb string, e *config.PreconditionError) error {
	switch {
	case e.Want == 0:
		return fmt.Errorf("%s: job %s exists (revision %d) and --create-only was given; nothing written", cmd, e.Job, e.Stored)
	case e.Stored == 0:
		return fmt.Errorf("%s: job %s is not stored, and --if-revision %d was given; nothing written", cmd, e.Job, e.Want)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: job %s is at revision %d, not %d (--if-revision): it changed meanwhile; nothing written.\n", cmd, e.Job, e.Stored, e.Want)
	if len(e.Differs) == 0 {
		fmt.Fprintf(&b, "What changed since revision %d cannot be told (etcd compacted it away, or it is not one of this job's revisions).\n", e.Want)
	} else {
		fmt.Fprintf(&b, "Changed since revision %d:\n", e.Want)
		for _, d := range e.Differs {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	if verb == "delete" {
		fmt.Fprintf(&b, "Read it again (kira job get %s) and delete it with --if-revision of its revision; or leave out --if-revision to delete it whatever it is.", e.Job)
	} else {
		fmt.Fprintf(&b, "Read it again (kira job get %s > FILE), make your change there and put it again; or leave out --if-revision to overwrite the change made meanwhile.", e.Job)
	}
	return errors.New(b.String())
}

// managerConflict tells a job another manager holds: who, and --force.
func managerConflict(cmd, verb, name string, e *config.ManagerConflictError) error {
	holder := "another manager"
	if len(e.Conflicts) > 0 {
		holder = e.Conflicts[0].Manager.String()
	}
	fix := "--force takes it over (its manager becomes " + string(e.By) + ")"
	if verb == "delete" {
		fix = "--force deletes it anyway"
	}
	return fmt.Errorf("%s: job %s is managed by %s, not %s; nothing written: %s, or leave it to its manager", cmd, name, holder, e.By, fix)
}
