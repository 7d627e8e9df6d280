package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The ledger program, run as Kira runs it: the new leader's raise makes the
// paused ex-leader's late write fail with exit 3, and a retry of the same
// fire is recorded once.
func TestLedgerAsKiraRunsIt(t *testing.T) {
	url := os.Getenv("KIRA_TEST_POSTGRES")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("KIRA_TEST_POSTGRES is not set: .ci/run must start PostgreSQL")
		}
		t.Skip("no PostgreSQL: set KIRA_TEST_POSTGRES to run this example's test")
	}
	bin := filepath.Join(t.TempDir(), "ledger")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	job := fmt.Sprintf("ledger%d", time.Now().UnixNano()) // a slot of its own
	ledger := func(action string, token int, executionID string) int {
		cmd := exec.Command(bin, action)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "KIRA_JOB="+job, "KIRA_PARTITION=0",
			fmt.Sprintf("KIRA_FENCING_TOKEN=%d", token), "KIRA_EXECUTION_ID="+executionID,
			"KIRA_SCHEDULED_TIME=2026-11-29T12:00:00Z")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v\n%s", action, err, out)
		}
		return 0
	}
	steps := []struct {
		action string
		token  int
		id     string
		exit   int
	}{
		{"raise", 10, "", 0},        // old leader acquires
		{"write", 10, job + "a", 0}, // and writes
		{"raise", 25, "", 0},        // new leader acquires, raises before its first run
		{"write", 10, job + "b", 3}, // old leader wakes up: fenced
		{"write", 25, job + "c", 0}, // new leader's run
		{"write", 25, job + "c", 0}, // a retry of the same fire
		{"raise", 10, "", 3},        // a stale raise learns it is stale
	}
	for i, s := range steps {
		if got := ledger(s.action, s.token, s.id); got != s.exit {
			t.Fatalf("step %d (%s token %d): exit %d; want %d", i, s.action, s.token, got, s.exit)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM ledger_runs WHERE slot = $1", job+"/0").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d runs recorded; want 2 (a and c; b fenced, c's retry deduplicated)", n)
	}
}
