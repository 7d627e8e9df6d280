package jobs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Fence raises a protected resource's fence to a newly acquired token,
// before the slot's first execution. Raise returns an error wrapping
// fencing.ErrFenced when the resource has seen a newer token.
type Fence interface {
	Raise(ctx context.Context, job string, partition int, claim fencing.Claim) error
}

// FenceForJob returns the fence a catalog job describes, or nil.
func FenceForJob(j config.Job) Fence {
	switch {
	case j.FenceURL != "":
		return &FenceURL{URL: j.FenceURL}
	case len(j.FenceCommand) > 0:
		return &FenceCommand{Argv: j.FenceCommand, Env: j.Env, PassEnv: j.PassEnv}
	}
	return nil
}

// FenceURL raises a protected resource's fence when a slot is acquired: it
// POSTs the new token (Kira-Job, Kira-Partition, Kira-Fencing-Token headers)
// to the job's fence_url before the slot's first execution. A receiver that
// uses httpfence needs nothing more than its middleware on that path.
type FenceURL struct {
	URL string
	// Client defaults to defaultClient's; ctx bounds the request.
	Client *http.Client
}

// Raise sends the token. A 2xx answer means raised; 409 means the resource
// has seen a newer token (fencing.ErrFenced); anything else is an error.
func (f *FenceURL) Raise(ctx context.Context, job string, partition int, claim fencing.Claim) error {
	token := claim.Token
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set(HeaderJob, job)
	req.Header.Set(HeaderPartition, strconv.Itoa(partition))
	req.Header.Set(fencing.HeaderToken, token.String())
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header)) // the raise's span is the parent
	client := f.Client
	if client == nil {
		client = defaultClient(ctx)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("jobs: raise fence at %s: %w", f.URL, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w: %s refused token %s", fencing.ErrFenced, f.URL, token)
	}
	return fmt.Errorf("jobs: raise fence at %s: %s", f.URL, resp.Status)
}

// FenceCommand raises a fence by running a program (argv, no shell) with
// KIRA_JOB, KIRA_PARTITION, KIRA_FENCING_TOKEN and KIRA_LEADER_KEY in its
// environment; exit status 0 means raised. It is killed if ctx ends. Its
// environment follows Command's rules: nothing of the member's but what is
// passed.
type FenceCommand struct {
	Argv    []string
	Env     map[string]string // the job's env
	PassEnv []string          // the job's pass_env
	// LookupEnv reads the member's environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Raise runs the command.
func (f *FenceCommand) Raise(ctx context.Context, job string, partition int, claim fencing.Claim) error {
	cmd := exec.CommandContext(ctx, f.Argv[0], f.Argv[1:]...)
	env, err := childEnv(f.LookupEnv, f.PassEnv, []string{
		EnvJob + "=" + job,
		EnvPartition + "=" + strconv.Itoa(partition),
		fencing.EnvToken + "=" + claim.Token.String(),
		fencing.EnvLeaderKey + "=" + claim.LeaderKey,
	}, f.Env)
	if err != nil {
		return fmt.Errorf("jobs: fence_command %v: %w", f.Argv, err)
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	tail := &tailBuffer{max: 512}
	cmd.Stdout, cmd.Stderr = tail, tail
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("jobs: fence_command %v: %w: %s", f.Argv, err, strings.TrimSpace(tail.String()))
	}
	return nil
}
