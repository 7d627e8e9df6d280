// Package pgtest connects tests to the PostgreSQL server .ci/run starts,
// as etcdtest starts etcd: the SQL fence stores are tested against a real
// server, never a fake.
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Env names the server's URL (postgres://...); .ci/run starts one and sets it.
const Env = "KIRA_TEST_POSTGRES"

// Pool is a pool on the test server, closed when the test ends. Without a
// server the test skips, except under CI, where a missing server is a
// failure; what names what the skipped test would have covered.
func Pool(t testing.TB, what string) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv(Env)
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: .ci/run must start PostgreSQL", Env)
		}
		t.Skipf("no PostgreSQL: set %s=postgres://... to run %s (.ci/run does)", Env, what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("PostgreSQL at %s: %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}
