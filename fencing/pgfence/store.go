package pgfence

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/kira-scheduler/kira/fencing"
)

// DefaultStoreTable is the table of Store: one row per resource, laid out as
// the slot fence table (slot text PRIMARY KEY, token bigint). It is not
// kira_fences: a request held by Store locks its row, and a handler that
// then ran Fence.Do on the same row would wait for itself.
const DefaultStoreTable = "kira_http_fences"

// StoreDB is what Store runs on: *pgxpool.Pool is. Each held request keeps
// one connection until it is answered, so give the Store a pool of its own,
// not the one the handlers write with: were that pool's connections all
// held, a handler waiting for one would wait for itself.
type StoreDB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store keeps httpfence's highest admitted token per resource in PostgreSQL,
// so that the replicas of a service sharing the database are fenced as one
// (it implements httpfence.Store and httpfence.Holder). The token only rises:
// one INSERT … ON CONFLICT … DO UPDATE SET token = GREATEST(…), committed
// before the request reaches the handler. Held, a transaction keeps the row
// locked (FOR UPDATE) until the request is answered, so another replica's
// admission of the same resource waits for it.
// TestSharedStoreFencesReplicasAsOne (httpfence) holds it.
type Store struct {
	DB StoreDB
	// Table defaults to DefaultStoreTable.
	Table string
}

func (s Store) fence() Fence {
	if s.Table == "" {
		return Fence{Table: DefaultStoreTable}
	}
	return Fence{Table: s.Table}
}

// Create makes the store's table if it does not exist. Concurrent calls are safe.
func (s Store) Create(ctx context.Context) error { return s.fence().Create(ctx, s.DB) }

// Admit records token for resource unless a higher one is stored, and
// returns the highest stored after the call.
func (s Store) Admit(ctx context.Context, resource string, token fencing.Token) (fencing.Token, bool, error) {
	var highest int64
	err := s.DB.QueryRow(ctx, fmt.Sprintf(
		"INSERT INTO %s AS f (slot, token) VALUES ($1, $2) ON CONFLICT (slot) DO UPDATE SET token = GREATEST(f.token, EXCLUDED.token) RETURNING f.token",
		s.fence().table()), resource, int64(token)).Scan(&highest)
	if err != nil {
		return 0, false, fmt.Errorf("pgfence: fence of %s: %w", resource, err)
	}
	return fencing.Token(highest), fencing.Token(highest) == token, nil
}

// Hold is Admit, then a transaction that keeps the resource's row locked
// until release is called. A higher token admitted between the two is seen
// under the lock and refuses this one.
func (s Store) Hold(ctx context.Context, resource string, token fencing.Token) (fencing.Token, bool, func(), error) {
	highest, ok, err := s.Admit(ctx, resource, token)
	if err != nil || !ok {
		return highest, false, nil, err
	}
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return 0, false, nil, fmt.Errorf("pgfence: begin: %w", err)
	}
	var locked int64
	err = tx.QueryRow(ctx, fmt.Sprintf("SELECT token FROM %s WHERE slot = $1 FOR UPDATE", s.fence().table()), resource).Scan(&locked)
	if err != nil || fencing.Token(locked) != token {
		tx.Rollback(context.WithoutCancel(ctx))
		if err != nil {
			return 0, false, nil, fmt.Errorf("pgfence: hold fence of %s: %w", resource, err)
		}
		return fencing.Token(locked), false, nil, nil
	}
	// Nothing was written under the lock: ending the transaction only frees the row.
	release := func() { tx.Rollback(context.WithoutCancel(ctx)) }
	return token, true, release, nil
}
