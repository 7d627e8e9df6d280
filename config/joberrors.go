package config

import (
	"errors"
	"fmt"
	"strings"
)

// The errors of the single-job operations (job.go), typed so that the API
// answers each with its status: ErrNoJob 404, *PreconditionError 412,
// *ManagerConflictError 409, *Error and ErrInvalidJob 422 (or 400),
// ErrCatalogBusy 503.

// ErrNoJob is returned when the stored catalog has no job of that name
// (GetJob, DeleteJob, PutJob with IfRevision).
var ErrNoJob = errors.New("config: no such job")

// ErrInvalidJob is returned when a single-job write's arguments are
// invalid: its manager, or a name its body contradicts. A body that is not
// a valid job is an *Error, with the line and field of each problem.
var ErrInvalidJob = errors.New("config: invalid job")

// ErrCatalogBusy is returned when the stored catalog changed under a
// single-job write at each of its attempts (jobAttempts): it wrote nothing.
var ErrCatalogBusy = errors.New("config: the stored catalog changed during every attempt of this write; nothing written: try again")

// ErrOutcomeUnknown is returned when etcd did not answer a single-job
// write's transaction and the job changed again before it could be read
// back: the write may or may not have been applied; GetJob tells what is
// stored.
var ErrOutcomeUnknown = errors.New("config: the write's answer was lost and the job changed since: it may or may not have been applied")

// PreconditionError is returned when a single-job write's condition does not
// hold: IfRevision is not the job's revision, or CreateOnly finds the job.
// Nothing is written. The API answers it 412.
type PreconditionError struct {
	Job string
	// Want is the revision the write was conditioned on; 0 with CreateOnly.
	Want int64
	// Stored is the job's revision now; 0 when it is not stored.
	Stored int64
	// Differs says what changed between Want and Stored, one line each
	// ("schedule: @hourly → @daily"); nil when it cannot be told (revision
	// Want compacted, or not this job's).
	Differs []string
}

func (e *PreconditionError) Error() string {
	var b strings.Builder
	switch {
	case e.Want == 0:
		fmt.Fprintf(&b, "config: precondition failed: job %s exists (revision %d) and the write was to create it", e.Job, e.Stored)
	case e.Stored == 0:
		fmt.Fprintf(&b, "config: precondition failed: job %s was to be at revision %d and is not stored", e.Job, e.Want)
	default:
		fmt.Fprintf(&b, "config: precondition failed: job %s is at revision %d, not %d", e.Job, e.Stored, e.Want)
	}
	if len(e.Differs) > 0 {
		fmt.Fprintf(&b, "; changed since: %s", strings.Join(e.Differs, "; "))
	}
	b.WriteString("; nothing written")
	return b.String()
}

// DependentsError is returned when a delete would leave jobs running after
// a job that no longer exists (after:): nothing is written. The API
// answers it 409.
type DependentsError struct {
	Job        string
	Dependents []string // some of them, by name
}

func (e *DependentsError) Error() string {
	return fmt.Sprintf("config: job %s cannot be deleted: %s run after it (after:); change or delete them first; nothing written", e.Job, strings.Join(e.Dependents, ", "))
}
