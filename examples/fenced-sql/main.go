// Command ledger is the program of the fenced-sql example: a command job that
// writes to PostgreSQL through Kira's SQL guard.
//
//	ledger raise   run by Kira as fence_command when a member wins a slot
//	ledger write   run by Kira as the job's command at every fire
//
// Both read the slot and token from the environment Kira sets, and the
// database from DATABASE_URL. "raise" lifts the slot's fence to the new token
// before the first execution; "write" records the execution inside a
// transaction that holds the slot's fence, so a paused ex-leader's late write
// fails (exit 3), and a retry of the same fire (same KIRA_EXECUTION_ID) is
// recorded once.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/fencing/pgfence"
)

const schema = `
CREATE TABLE IF NOT EXISTS ledger_runs (
  execution_id   text PRIMARY KEY,
  slot           text NOT NULL,
  token          bigint NOT NULL,
  scheduled_time timestamptz NOT NULL
)`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		if errors.Is(err, fencing.ErrFenced) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 || (os.Args[1] != "raise" && os.Args[1] != "write") {
		return errors.New("usage: ledger raise|write (run by Kira)")
	}
	token, err := fencing.ParseToken(os.Getenv(fencing.EnvToken))
	if err != nil {
		return err
	}
	slot := os.Getenv("KIRA_JOB") + "/" + os.Getenv("KIRA_PARTITION")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	fence := pgfence.Fence{}
	if err := fence.Create(ctx, conn); err != nil {
		return err
	}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Members start together; serialise the CREATE as pgfence does.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(4711)"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	}); err != nil {
		return err
	}
	if os.Args[1] == "raise" {
		return fence.Raise(ctx, conn, slot, token)
	}
	scheduled, err := time.Parse(time.RFC3339Nano, os.Getenv("KIRA_SCHEDULED_TIME"))
	if err != nil {
		return err
	}
	return fence.Do(ctx, conn, slot, token, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO ledger_runs (execution_id, slot, token, scheduled_time)
			VALUES ($1, $2, $3, $4) ON CONFLICT (execution_id) DO NOTHING`,
			os.Getenv("KIRA_EXECUTION_ID"), slot, int64(token), scheduled)
		return err
	})
}
