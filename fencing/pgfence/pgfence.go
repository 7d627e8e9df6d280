package pgfence

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/kira-scheduler/kira/fencing"
)

// DefaultTokenColumn is the column that holds a row's fence token.
const DefaultTokenColumn = "fence_token"

// Execer runs a statement: *pgx.Conn, *pgxpool.Pool and pgx.Tx all are.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Table is a table whose rows carry their writer's token.
type Table struct {
	// Name, optionally schema-qualified (billing.accounts).
	Name string
	// Key columns: the primary key or a unique constraint, the ON CONFLICT target.
	Key []string
	// TokenColumn defaults to DefaultTokenColumn.
	TokenColumn string
}

// Row is one row to write: the key values (in Table.Key order) and other columns.
type Row struct {
	Key    []any
	Set    []string // columns to write besides the key and the token
	Values []any    // values of Set, in order
}

func (t Table) tokenColumn() string {
	if t.TokenColumn == "" {
		return DefaultTokenColumn
	}
	return t.TokenColumn
}

func ident(name string) string { return pgx.Identifier(strings.Split(name, ".")).Sanitize() }

// UpsertSQL returns the fenced upsert statement for the given columns; the
// arguments are the key values, then the Set values, then the token.
func (t Table) UpsertSQL(set []string) string {
	cols := append(append(append([]string{}, t.Key...), set...), t.tokenColumn())
	quoted := make([]string, len(cols))
	params := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = ident(c)
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	keys := make([]string, len(t.Key))
	for i, k := range t.Key {
		keys[i] = ident(k)
	}
	updates := make([]string, 0, len(set)+1)
	for _, c := range append(append([]string{}, set...), t.tokenColumn()) {
		updates = append(updates, fmt.Sprintf("%s = EXCLUDED.%s", ident(c), ident(c)))
	}
	tok := ident(t.tokenColumn())
	return fmt.Sprintf("INSERT INTO %s AS t (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE t.%s <= EXCLUDED.%s",
		ident(t.Name), strings.Join(quoted, ", "), strings.Join(params, ", "), strings.Join(keys, ", "),
		strings.Join(updates, ", "), tok, tok)
}

// Upsert writes row with token, or returns fencing.ErrFenced when the stored
// row carries a higher token.
func (t Table) Upsert(ctx context.Context, db Execer, token fencing.Token, row Row) error {
	if len(row.Key) != len(t.Key) || len(row.Set) != len(row.Values) {
		return fmt.Errorf("pgfence: %s: %d key values for %d key columns, %d values for %d columns", t.Name, len(row.Key), len(t.Key), len(row.Values), len(row.Set))
	}
	args := append(append(append([]any{}, row.Key...), row.Values...), int64(token))
	tag, err := db.Exec(ctx, t.UpsertSQL(row.Set), args...)
	if err != nil {
		return fmt.Errorf("pgfence: upsert into %s: %w", t.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s row %v holds a token newer than %d", fencing.ErrFenced, t.Name, row.Key, token)
	}
	return nil
}

// Raise lifts the token of every row matching where (column = value, all
// of them; nil means the whole table) to token, before the new leader's first
// execution. It returns how many rows it raised.
func (t Table) Raise(ctx context.Context, db Execer, token fencing.Token, where map[string]any) (int64, error) {
	tok := ident(t.tokenColumn())
	sql := fmt.Sprintf("UPDATE %s SET %s = $1 WHERE %s < $1", ident(t.Name), tok, tok)
	args := []any{int64(token)}
	cols := make([]string, 0, len(where))
	for c := range where {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		args = append(args, where[c])
		sql += fmt.Sprintf(" AND %s = $%d", ident(c), len(args))
	}
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("pgfence: raise %s: %w", t.Name, err)
	}
	return tag.RowsAffected(), nil
}

// DefaultFenceTable is the table of slot fences.
const DefaultFenceTable = "kira_fences"

// Fence keeps one row per slot with the highest token raised for it.
type Fence struct {
	// Table defaults to DefaultFenceTable.
	Table string
}

// Beginner starts transactions: *pgx.Conn and *pgxpool.Pool are.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

func (f Fence) table() string {
	if f.Table == "" {
		return ident(DefaultFenceTable)
	}
	return ident(f.Table)
}

// createLock is the advisory lock key that serialises Create: PostgreSQL's
// CREATE TABLE IF NOT EXISTS fails with a duplicate key error when two
// sessions run it at once, as members starting together would.
const createLock = 0x6b697261 // "kira"

// Create makes the fence table if it does not exist. Concurrent calls are safe.
func (f Fence) Create(ctx context.Context, db Beginner) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgfence: create fence table: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", createLock); err != nil {
		return fmt.Errorf("pgfence: create fence table: %w", err)
	}
	if _, err = tx.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (slot text PRIMARY KEY, token bigint NOT NULL)", f.table())); err != nil {
		return fmt.Errorf("pgfence: create fence table: %w", err)
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: create fence table: %w", err)
	}
	return nil
}

// Raise records token as the slot's fence. It waits for every transaction
// of Do that holds the slot's fence, and returns fencing.ErrFenced if a
// higher token was raised already (this member is the stale one).
func (f Fence) Raise(ctx context.Context, db Execer, slot string, token fencing.Token) error {
	tag, err := db.Exec(ctx, fmt.Sprintf(
		"INSERT INTO %s AS f (slot, token) VALUES ($1, $2) ON CONFLICT (slot) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token",
		f.table()), slot, int64(token))
	if err != nil {
		return fmt.Errorf("pgfence: raise fence of %s: %w", slot, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: slot %s fenced above %d", fencing.ErrFenced, slot, token)
	}
	return nil
}

// Do runs fn in a transaction that commits only if token is still the
// slot's highest fence; otherwise it rolls back and returns fencing.ErrFenced.
// A slot with no fence row yet accepts the token (and records it).
func (f Fence) Do(ctx context.Context, db Beginner, slot string, token fencing.Token, fn func(pgx.Tx) error) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgfence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err = tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (slot, token) VALUES ($1, $2) ON CONFLICT (slot) DO NOTHING", f.table()), slot, int64(token)); err != nil {
		return fmt.Errorf("pgfence: fence of %s: %w", slot, err)
	}
	var fence int64
	// FOR SHARE: a concurrent Raise waits until this transaction ends.
	if err = tx.QueryRow(ctx, fmt.Sprintf("SELECT token FROM %s WHERE slot = $1 FOR SHARE", f.table()), slot).Scan(&fence); err != nil {
		return fmt.Errorf("pgfence: fence of %s: %w", slot, err)
	}
	if fencing.Token(fence) > token {
		return fmt.Errorf("%w: slot %s fenced at %d, this write has %d", fencing.ErrFenced, slot, fence, token)
	}
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: commit: %w", err)
	}
	return nil
}
