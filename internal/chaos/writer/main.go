// Command writer is the chaos suite's command job: it says it has begun,
// works for a while, then writes to the witness with the execution's token.
// The work runs in its own process group, so a SIGSTOP of its member does not
// freeze it: its write lands while the member is frozen, the way a real
// job's late write would, and the fence must turn it away.
//
//	writer WITNESS_URL WORK_DURATION
//
// Exit status: 0 when the write was accepted (or a replay), 3 when fenced
// (409), 1 on any other failure.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/jobs"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: writer WITNESS_URL WORK_DURATION")
		os.Exit(2)
	}
	work, err := time.ParseDuration(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := post(os.Args[1] + "/begin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	time.Sleep(work)
	code, err := post(os.Args[1] + "/write")
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case code == http.StatusConflict:
		fmt.Println("fenced")
		os.Exit(3)
	case code/100 != 2:
		fmt.Println("write answered", code)
		os.Exit(1)
	}
}

// post sends the execution's facts, from Kira's environment, as Kira's HTTP
// executor would send them.
func post(url string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, http.NoBody)
	if err != nil {
		return 0, err
	}
	for header, env := range map[string]string{
		jobs.HeaderJob:            jobs.EnvJob,
		jobs.HeaderPartition:      jobs.EnvPartition,
		fencing.HeaderToken:       fencing.EnvToken,
		jobs.HeaderIdempotencyKey: jobs.EnvExecutionID,
		jobs.HeaderScheduledTime:  jobs.EnvScheduledTime,
		jobs.HeaderMember:         jobs.EnvMember,
	} {
		req.Header.Set(header, os.Getenv(env))
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
