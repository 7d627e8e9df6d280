package jobs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// OutputTailBytes bounds how much of a command's output is kept.
const OutputTailBytes = 4096

// Command runs an argv, without an implied shell, in its own process group.
type Command struct {
	Argv []string
	// Dir is the working directory; empty means the member's.
	Dir string
	// KillGrace is how long to wait for output pipes after the group is
	// killed (grandchildren may hold them); zero means one second.
	KillGrace time.Duration
}

// Execute starts the command and waits for it. When ctx ends, the whole
// process group is killed with SIGKILL: losing a slot means stop now.
func (c *Command) Execute(ctx context.Context, e Execution) Result {
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), e.Env()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = c.KillGrace
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = time.Second
	}
	tail := &tailBuffer{max: OutputTailBytes}
	cmd.Stdout, cmd.Stderr = tail, tail
	var started time.Time
	err := cmd.Start()
	if err == nil {
		started = time.Now()
	}
	notifyStarted(ctx) // after the stamp: what it sets going must not delay it
	if err == nil {
		err = cmd.Wait()
	}
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
