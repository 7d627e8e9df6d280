package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/kira-scheduler/kira/fencing"
)

// Handler is an in-process job. Its context carries the execution
// (FromContext) and the fencing token (fencing.FromContext), and is cancelled
// when the slot is lost or the timeout passes.
type Handler func(ctx context.Context) error

// ErrFenced is what a handler returns (wrapped or not) when a protected
// resource rejected its token; the run is then recorded as fenced. It is the
// same error every fencing guard returns.
var ErrFenced = fencing.ErrFenced

// Handlers maps the names used by a catalog's handler: field to Go functions.
type Handlers map[string]Handler

// Builtin are the handlers kira run has: noop, which does nothing and
// succeeds, for trying a schedule, a placement or a failover without side
// effects, and for measuring the scheduler without a job's own cost (kira
// bench). A program embedding Kira adds them to its own if it wants them.
func Builtin() Handlers {
	return Handlers{"noop": func(context.Context) error { return nil }}
}

// Execute runs the handler with the execution in its context.
func (h Handler) Execute(ctx context.Context, e Execution) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{Outcome: Failed, Err: fmt.Errorf("jobs: handler for %s panicked: %v", e.Job, p)}
		}
	}()
	if cur, ok := FromContext(ctx); !ok || cur.ID != e.ID || cur.Token != e.Token {
		ctx = WithExecution(ctx, e) // the scheduler's context carries it already
	}
	err := h(ctx)
	switch {
	case err == nil:
		return Result{Outcome: Succeeded}
	case errors.Is(err, ErrFenced):
		return Result{Outcome: Fenced, Err: err}
	}
	if o, ok := endedBy(ctx); ok {
		return Result{Outcome: o, Err: err}
	}
	return Result{Outcome: Failed, Err: err}
}
