package pgfence

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connect returns a pool on a fresh schema of the test server (pgtest.Pool).
func connect(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool := pgtest.Pool(t, "the SQL guard tests")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schema := fmt.Sprintf("t%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	if _, err := pool.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.accounts (id text PRIMARY KEY, part int NOT NULL, balance bigint NOT NULL, fence_token bigint NOT NULL)", schema)); err != nil {
		t.Fatal(err)
	}
	return pool, schema
}

func accounts(schema string) Table {
	return Table{Name: schema + ".accounts", Key: []string{"id"}}
}

func write(ctx context.Context, db Execer, schema string, token fencing.Token, id string, balance int) error {
	return accounts(schema).Upsert(ctx, db, token, Row{Key: []any{id}, Set: []string{"part", "balance"}, Values: []any{3, balance}})
}

func balance(t *testing.T, db *pgxpool.Pool, schema, id string) int {
	t.Helper()
	var b int
	if err := db.QueryRow(context.Background(), fmt.Sprintf("SELECT balance FROM %s WHERE id = $1", ident(accounts(schema).Name)), id).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUpsertRejectsPausedExLeader(t *testing.T) {
	db, schema := connect(t)
	ctx := context.Background()
	if err := write(ctx, db, schema, 17, "acct-1", 100); err != nil {
		t.Fatalf("first write to a fresh row: %v", err)
	}
	if err := write(ctx, db, schema, 17, "acct-1", 110); err != nil {
		t.Fatalf("same leader's second write: %v", err)
	}
	if err := write(ctx, db, schema, 42, "acct-1", 90); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	if err := write(ctx, db, schema, 17, "acct-1", 999); !errors.Is(err, fencing.ErrFenced) {
		t.Fatalf("ex-leader's late write: %v; want ErrFenced", err)
	}
	if b := balance(t, db, schema, "acct-1"); b != 90 {
		t.Fatalf("balance %d; the stale write got through", b)
	}
}

// The new leader raises the fence before its first write; without the raise
// the ex-leader's late write lands (the control half shows the gap is real).
func TestRaiseOnAcquireClosesTheGap(t *testing.T) {
	db, schema := connect(t)
	ctx := context.Background()
	for _, raise := range []bool{true, false} {
		id := fmt.Sprintf("acct-raise-%v", raise)
		if err := write(ctx, db, schema, 17, id, 100); err != nil {
			t.Fatal(err)
		}
		if raise {
			n, err := accounts(schema).Raise(ctx, db, 42, map[string]any{"part": 3})
			if err != nil || n == 0 {
				t.Fatalf("raise: %d rows, %v", n, err)
			}
		}
		err := write(ctx, db, schema, 17, id, 999) // late, before the new leader's first write
		switch {
		case raise && !errors.Is(err, fencing.ErrFenced):
			t.Fatalf("after the raise the stale write returned %v", err)
		case !raise && err != nil:
			t.Fatalf("without the raise the gap should be open, got %v", err)
		}
	}
	// Raise never lowers a token.
	if n, err := accounts(schema).Raise(ctx, db, 5, nil); err != nil || n != 0 {
		t.Fatalf("raise with an old token changed %d rows, %v", n, err)
	}
}

// A slot fence covers writes to rows that do not exist yet.
func TestSlotFenceCoversNewRows(t *testing.T) {
	db, schema := connect(t)
	ctx := context.Background()
	f := Fence{Table: schema + ".kira_fences"}
	if err := f.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	insert := func(id string) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, part, balance, fence_token) VALUES ($1, 3, 1, 0)", ident(accounts(schema).Name)), id)
			return err
		}
	}
	// A fresh slot accepts the first writer.
	if err := f.Do(ctx, db, "billing/3", 17, insert("a")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	// The new leader raises; the ex-leader's write of a brand-new row is refused.
	if err := f.Raise(ctx, db, "billing/3", 42); err != nil {
		t.Fatal(err)
	}
	if err := f.Do(ctx, db, "billing/3", 17, insert("b")); !errors.Is(err, fencing.ErrFenced) {
		t.Fatalf("stale write of a new row: %v; want ErrFenced", err)
	}
	var n int
	db.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE id = 'b'", ident(accounts(schema).Name))).Scan(&n)
	if n != 0 {
		t.Fatal("the stale transaction's row was committed")
	}
	if err := f.Do(ctx, db, "billing/3", 42, insert("c")); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	// A stale member raising with its old token learns it is stale.
	if err := f.Raise(ctx, db, "billing/3", 17); !errors.Is(err, fencing.ErrFenced) {
		t.Fatalf("raise with an old token: %v; want ErrFenced", err)
	}
}

func TestUpsertSQL(t *testing.T) {
	got := Table{Name: "billing.accounts", Key: []string{"id"}}.UpsertSQL([]string{"balance"})
	want := `INSERT INTO "billing"."accounts" AS t ("id", "balance", "fence_token") VALUES ($1, $2, $3) ON CONFLICT ("id") DO UPDATE SET "balance" = EXCLUDED."balance", "fence_token" = EXCLUDED."fence_token" WHERE t."fence_token" <= EXCLUDED."fence_token"`
	if got != want {
		t.Fatalf("UpsertSQL:\n got %s\nwant %s", got, want)
	}
}

// Members starting together create the fence table at the same time.
func TestCreateIsSafeConcurrently(t *testing.T) {
	db, schema := connect(t)
	f := Fence{Table: schema + ".fences_race"}
	errs := make(chan error, 8)
	for i := 0; i < cap(errs); i++ {
		go func() { errs <- f.Create(context.Background(), db) }()
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
