package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// OutputTailBytes bounds how much of a command's output is kept.
const OutputTailBytes = 4096

// Command runs an argv, without an implied shell, in its own process group.
//
// Its environment is only what it is given: the member's variables named
// by config.DefaultPassEnv and PassEnv, the execution's KIRA_* facts, and
// Env with its ${NAME} references expanded from the member's environment.
// The member's own settings, its etcd credentials above all, never reach
// it. Held by TestCommandEnvironmentIsOnlyWhatItIsGiven.
type Command struct {
	Argv []string
	// Env is the job's own environment (config.Job.Env).
	Env map[string]string
	// PassEnv names the member's variables passed beside config.DefaultPassEnv.
	PassEnv []string
	// LookupEnv reads the member's environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Dir is the working directory; empty means the member's.
	Dir string
	// KillGrace is how long to wait for output pipes after the group is
	// killed (grandchildren may hold them); zero means one second.
	KillGrace time.Duration

	// found is where the PATH search for Argv[0] found the program, kept
	// from the first start that succeeded, as a shell's hash table keeps
	// it: the search stats every directory on PATH before the program's,
	// on the fire's instant (docs/decisions/0009-path-looked-up-once.md). A start that fails searches again on the next run, so a
	// program moved or removed is found anew; one newly installed earlier
	// on PATH is not, until the member restarts.
	found atomic.Pointer[string]
}

// environment is the execution's environment: the passed variables, the
// execution's facts and its trace context (TRACEPARENT, W3C), then the
// job's own, expanded.
func (c *Command) environment(ctx context.Context, e Execution) ([]string, error) {
	return childEnv(c.LookupEnv, c.PassEnv, append(e.Env(), traceEnv(ctx)...), c.Env)
}

// traceEnv is ctx's trace context as environment variables (TRACEPARENT,
// TRACESTATE), as OpenTelemetry's environment carrier names them.
func traceEnv(ctx context.Context) []string {
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	var out []string
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := carrier[k]; v != "" {
			out = append(out, strings.ToUpper(k)+"="+v)
		}
	}
	return out
}

// childEnv is a job's process environment: the member's variables named by
// config.DefaultPassEnv and passEnv, then facts (KIRA_*), then env with its
// references expanded from the member's environment (lookup; nil means
// os.LookupEnv).
func childEnv(lookup func(string) (string, bool), passEnv, facts []string, env map[string]string) ([]string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	out := make([]string, 0, len(config.DefaultPassEnv)+len(passEnv)+len(facts)+len(env))
	for _, list := range [][]string{config.DefaultPassEnv, passEnv} {
		for _, name := range list {
			if v, ok := lookup(name); ok {
				out = append(out, name+"="+v)
			}
		}
	}
	out = append(out, facts...)
	for _, name := range slices.Sorted(maps.Keys(env)) {
		v, err := config.Expand(env[name], lookup)
		if err != nil {
			return nil, fmt.Errorf("jobs: env %s: %w", name, err)
		}
		out = append(out, name+"="+v)
	}
	return out, nil
}

// devNull is the child's standard input, opened once: os/exec would open
// /dev/null for every run, on the fire's instant.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// Execute starts the command and waits for it. When ctx ends, the whole
// process group is killed with SIGKILL: losing a slot means stop now.
func (c *Command) Execute(ctx context.Context, e Execution) Result {
	program, searched := c.Argv[0], false
	if p := c.found.Load(); p != nil {
		program = *p
	} else {
		searched = filepath.Base(program) == program // exec.Command searches PATH
	}
	cmd := exec.CommandContext(ctx, program, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0] // the program sees the name it was given, not the path found
	cmd.Dir = c.Dir
	if in, err := devNull(); err == nil {
		cmd.Stdin = in
	} // else os/exec opens it, and reports why it cannot
	env, err := c.environment(ctx, e)
	if err != nil {
		notifyStarted(ctx)
		return Result{Outcome: Failed, Code: -1, Err: err}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = c.KillGrace
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = time.Second
	}
	tail := &tailBuffer{max: OutputTailBytes}
	// Output goes to a pipe this executor reads itself: given a writer,
	// os/exec copies through a 32 KiB buffer made for each run, and at a
	// thousand commands a second the collections that garbage causes make
	// fires late.
	out, outW, err := os.Pipe()
	if err != nil {
		notifyStarted(ctx)
		return Result{Outcome: Failed, Code: -1, Err: err}
	}
	cmd.Stdout, cmd.Stderr = outW, outW
	var started time.Time
	err = cmd.Start()
	outW.Close() // the child's now
	copied := make(chan struct{})
	go func() { tail.readFrom(out); close(copied) }()
	switch {
	case err == nil:
		started = time.Now()
		if path := cmd.Path; searched && filepath.IsAbs(path) {
			c.found.Store(&path)
		}
	case !searched:
		c.found.Store(nil) // search again next time
	}
	notifyStarted(ctx) // after the stamp: what it sets going must not delay it
	if err == nil {
		err = cmd.Wait()
	}
	// The pipe ends once every process holding it has exited; a grandchild
	// still holding it is given WaitDelay, as os/exec gives its own pipes.
	wait := time.NewTimer(cmd.WaitDelay)
	select {
	case <-copied:
	case <-wait.C:
		if err == nil {
			err = exec.ErrWaitDelay
		}
	}
	wait.Stop()
	out.Close() // ends the read, if it still waits
	<-copied
	res := Result{Code: -1, OutputTail: tail.String(), Err: err, ProcessStarted: started}
	if cmd.ProcessState != nil {
		res.Code = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.Outcome = Succeeded
	case ctx.Err() != nil:
		res.Outcome, _ = endedBy(ctx)
	case errors.As(err, &exitErr):
		res.Outcome = Failed
	default:
		res.Outcome = Failed // could not start: missing program, permissions
	}
	return res
}

// outputBuffers are the buffers output is read through.
var outputBuffers = sync.Pool{New: func() any { return new([OutputTailBytes]byte) }}

// readFrom reads r into the tail until r ends or fails.
func (t *tailBuffer) readFrom(r io.Reader) {
	buf := outputBuffers.Get().(*[OutputTailBytes]byte)
	defer outputBuffers.Put(buf)
	for {
		n, err := r.Read(buf[:])
		t.Write(buf[:n])
		if err != nil {
			return
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
