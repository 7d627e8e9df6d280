package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/config"
)

// Outcome says how an execution ended. The values are shown to users.
type Outcome string

const (
	Succeeded Outcome = "succeeded"
	Failed    Outcome = "failed"
	TimedOut  Outcome = "timed_out"
	Cancelled Outcome = "cancelled" // the slot was lost or the member is stopping
	Fenced    Outcome = "fenced"    // a protected resource rejected the token
)

// Codes splits res.Code by the executor ex that produced it: a command's
// exit code (nil when it did not exit on its own), or an HTTP job's status
// (nil when no answer came); both nil for a Go handler.
func Codes(ex Executor, res Result) (exitCode, httpStatus *int) {
	code := res.Code
	switch ex.(type) {
	case *Command:
		if code >= 0 {
			return &code, nil
		}
	case *HTTP:
		if code != 0 {
			return nil, &code
		}
	}
	return nil, nil
}

// Result is what an executor reports.
type Result struct {
	Outcome Outcome
	// ExitCode of a command (-1 if it did not exit on its own); HTTP status of a request.
	Code int
	// OutputTail is the last bytes of a command's output or of a response body.
	OutputTail string
	Err        error
	// ProcessStarted is when a command's process had started (its program
	// was executing); zero for the other executors and for a command that
	// could not start. The scheduler's start is earlier: before the fork.
	ProcessStarted time.Time
}

// Executor runs one execution and blocks until it has ended. It must return
// promptly once ctx is done.
type Executor interface {
	Execute(ctx context.Context, e Execution) Result
}

// ErrUnknownHandler is returned when a job names a Go handler that was not registered.
var ErrUnknownHandler = errors.New("jobs: unknown handler")

// ForJob returns the executor a catalog job describes. Handlers resolves the
// jobs that name an in-process Go handler.
func ForJob(j config.Job, handlers Handlers) (Executor, error) {
	switch {
	case len(j.Command) > 0:
		return &Command{Argv: j.Command, Env: j.Env, PassEnv: j.PassEnv}, nil
	case j.HTTP != nil:
		return &HTTP{Spec: *j.HTTP}, nil
	case j.Handler != "":
		h, ok := handlers[j.Handler]
		if !ok {
			return nil, fmt.Errorf("%w %q (job %s): register it with jobs.Handlers before starting", ErrUnknownHandler, j.Handler, j.Name)
		}
		return h, nil
	}
	return nil, fmt.Errorf("jobs: job %s has no executor", j.Name)
}

// endedBy classifies a run that failed while ctx may have ended.
func endedBy(ctx context.Context) (Outcome, bool) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return TimedOut, true
	case ctx.Err() != nil:
		return Cancelled, true
	}
	return "", false
}
