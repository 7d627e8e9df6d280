package etcdtest

import (
	"bytes"
	"github.com/kira-scheduler/kira/internal/etcdnode"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a real child process under test (kira run, kira etcd): faults
// are injected into it with real signals (SIGKILL, SIGSTOP/SIGCONT,
// SIGTERM). Its output is kept, and logged if the test fails.
type Process struct {
	Cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

// StartProcess starts bin with args; the test's cleanup kills it (SIGKILL,
// and SIGCONT in case it was stopped) and waits for it.
func StartProcess(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p, p
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Cmd.Process.Kill()
		p.Cmd.Process.Signal(syscall.SIGCONT)
		<-p.done
		if t.Failed() {
			t.Logf("%s %s output:\n%s", bin, strings.Join(args, " "), p.Output())
		}
	})
	return p
}

// Write implements io.Writer for the process's stdout and stderr.
func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output returns what the process printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Signal sends sig to the process (not to its children).
func (p *Process) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends sig, waits up to timeout for the process to exit and returns
// its exit code.
func (p *Process) Stop(t testing.TB, sig syscall.Signal, timeout time.Duration) int {
	t.Helper()
	p.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s of %v", p.Cmd.Path, timeout, sig)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// FreeAddr returns a loopback host:port that was free a moment ago, for a
// process under test to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := etcdnode.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
