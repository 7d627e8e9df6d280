package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/ops"
)

// POST /v1/jobs/{job}/trigger?at= or ?in= stores one-off runs, listed by
// GET /v1/jobs/{job} (waiting_runs); DELETE …/trigger/{id} cancels one
// (200), and answers 409 for a run not waiting; a bad time is a 400.
func TestOneOffRunsThroughTheAPI(t *testing.T) {
	cli := storedCatalog(t)
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("tok")}}))
	defer srv.Close()
	c := srv.Client()
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var trig Triggered
	if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/trigger?partition=1&at="+at.Format(time.RFC3339), "tok", "", &trig); code != 200 ||
		len(trig.ExecutionIDs) != 1 || trig.At == nil || !trig.At.Equal(at) {
		t.Fatalf("trigger at: %d %+v", code, trig)
	}
	var soon Triggered
	if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/trigger?partition=0&in=2h", "tok", "", &soon); code != 200 || soon.At == nil {
		t.Fatalf("trigger in: %d %+v", code, soon)
	}
	for _, q := range []string{"at=2020-01-01T00:00:00Z", "at=tomorrow", "in=-1h", fmt.Sprintf("at=%s&in=1h", at.Format(time.RFC3339))} {
		var e Error
		if code := call(t, c, "POST", srv.URL+"/v1/jobs/tick/trigger?"+q, "tok", "", &e); code != http.StatusBadRequest || e.Error == "" {
			t.Errorf("trigger?%s: %d %+v; want 400", q, code, e)
		}
	}
	var d ops.JobDetail
	if code := call(t, c, "GET", srv.URL+"/v1/jobs/tick", "", "", &d); code != 200 || len(d.WaitingRuns) != 2 ||
		d.WaitingRuns[0].ID != trig.ExecutionIDs[0] || d.WaitingRuns[0].Partition != 1 || !d.WaitingRuns[0].At.Equal(at) ||
		d.WaitingRuns[1].ID != soon.ExecutionIDs[0] {
		t.Fatalf("job: %d waiting runs %+v; want %s then %s", code, d.WaitingRuns, trig.ExecutionIDs[0], soon.ExecutionIDs[0])
	}
	var cancelled Cancelled
	if code := call(t, c, "DELETE", srv.URL+"/v1/jobs/tick/trigger/"+trig.ExecutionIDs[0], "tok", "", &cancelled); code != 200 || !cancelled.Cancelled || cancelled.ID != trig.ExecutionIDs[0] {
		t.Fatalf("cancel: %d %+v", code, cancelled)
	}
	var e Error
	if code := call(t, c, "DELETE", srv.URL+"/v1/jobs/tick/trigger/"+trig.ExecutionIDs[0], "tok", "", &e); code != http.StatusConflict || !strings.Contains(e.Error, "not cancelled") {
		t.Fatalf("second cancel: %d %+v; want 409", code, e)
	}
	if code := call(t, c, "DELETE", srv.URL+"/v1/jobs/tick/trigger/"+soon.ExecutionIDs[0], "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("cancel without the token: %d; want 401", code)
	}
	if code := call(t, c, "GET", srv.URL+"/v1/jobs/tick", "", "", &d); code != 200 || len(d.WaitingRuns) != 1 || d.WaitingRuns[0].ID != soon.ExecutionIDs[0] {
		t.Fatalf("after the cancel: %d %+v", code, d.WaitingRuns)
	}
}

// DELETE /v1/jobs/{job}/trigger/{id} with the id of another job's run
// answers 404 naming that job and cancels nothing: the run still waits, and
// its own job's path cancels it.
func TestCancelThroughAnotherJobsPath(t *testing.T) {
	cli := storedYAML(t, "cluster: c\njobs:\n  - {name: tick, schedule: \"@every 1s\", command: [\"true\"]}\n  - {name: tock, schedule: \"@every 1s\", command: [\"true\"]}\n")
	srv := httptest.NewServer(Handler(Config{KV: cli, Cluster: "c", Auth: Auth{Token: []byte("tok")}}))
	defer srv.Close()
	var trig Triggered
	if code := call(t, srv.Client(), "POST", srv.URL+"/v1/jobs/tock/trigger?in=2h", "tok", "", &trig); code != 200 {
		t.Fatalf("trigger: %d", code)
	}
	id := trig.ExecutionIDs[0]
	var e Error
	if code := call(t, srv.Client(), "DELETE", srv.URL+"/v1/jobs/tick/trigger/"+id, "tok", "", &e); code != http.StatusNotFound || !strings.Contains(e.Error, "of job tock, not tick") {
		t.Fatalf("cancel through tick's path: %d %+v; want 404 naming tock", code, e)
	}
	if n := waiting(t, cli, "tock"); n != 1 {
		t.Fatalf("tock has %d waiting runs after a cancel through tick's path, want 1", n)
	}
	var cancelled Cancelled
	if code := call(t, srv.Client(), "DELETE", srv.URL+"/v1/jobs/tock/trigger/"+id, "tok", "", &cancelled); code != 200 || !cancelled.Cancelled || cancelled.Job != "tock" {
		t.Fatalf("cancel through tock's path: %d %+v", code, cancelled)
	}
}
