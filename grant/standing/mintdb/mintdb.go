// Package mintdb keeps the mint counts of standing grants durably and
// exactly (docs/SPEC.md §3.6): one SQLite database (modernc.org/sqlite,
// pure Go) in which every mint is decided and recorded in one immediate
// transaction, so that parallel mints — in goroutines or in separate
// processes — against a limit of K mint exactly K, an event mints at most
// once, and the counts survive restarts. The control plane will keep the
// same table in its store.
package mintdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/standing"
)

// ErrReplayed is wrapped when an event already minted a child under the
// policy.
var ErrReplayed = errors.New("event already minted under this policy")

// DB is a mint database.
type DB struct{ db *sql.DB }

const schema = `CREATE TABLE IF NOT EXISTS mints (
	policy TEXT NOT NULL,
	seq INTEGER NOT NULL,
	event TEXT NOT NULL,
	at_ms INTEGER NOT NULL,
	minted BLOB NOT NULL,
	PRIMARY KEY (policy, seq),
	UNIQUE (policy, event)
)`

// Open opens (creating it if needed) the database at path. Every
// transaction takes the write lock when it begins, and waits up to 30 s
// for it.
func Open(path string) (*DB, error) {
	dsn := "file:" + url.PathEscape(path) + "?_txlock=immediate&_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("mint database %s: %w", path, err)
	}
	return &DB{db: db}, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Mint decides and records one mint at now: it counts the policy's mints
// (in total, and in the rate window ending now), asks standing.Mint,
// seals the child with seal, and records it — all in one transaction, so
// no two mints see the same counts. Nothing is recorded when anything is
// refused.
func (d *DB) Mint(ctx context.Context, p *standing.Policy, e *standing.Event, child *grant.Set, now time.Time,
	seal func(*standing.Minted) ([]byte, error)) ([]byte, *standing.Minted, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	pid, eid := p.ID().String(), e.ContentID().String()
	nowMS := now.UnixMilli()
	var used int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM mints WHERE policy = ? AND event = ?`, pid, eid).Scan(&used); err != nil {
		return nil, nil, err
	}
	if used > 0 {
		return nil, nil, fmt.Errorf("%w: event %q (%s)", ErrReplayed, e.ID, eid)
	}
	var c standing.Counts
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(at_ms > ?), 0) FROM mints WHERE policy = ?`, nowMS-p.RateWindow, pid).Scan(&c.Total, &c.InWindow); err != nil {
		return nil, nil, err
	}
	m, err := standing.Mint(p, e, child, nowMS, c)
	if err != nil {
		return nil, nil, err
	}
	env, err := seal(m)
	if err != nil {
		return nil, nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO mints (policy, seq, event, at_ms, minted) VALUES (?, ?, ?, ?, ?)`, pid, m.Seq, eid, m.AtMS, env); err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, err
	}
	return env, m, nil
}

// Counts returns a policy's mints in total and in the window ending now.
func (d *DB) Counts(ctx context.Context, p *standing.Policy, now time.Time) (standing.Counts, error) {
	var c standing.Counts
	err := d.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(at_ms > ?), 0) FROM mints WHERE policy = ?`, now.UnixMilli()-p.RateWindow, p.ID().String()).Scan(&c.Total, &c.InWindow)
	return c, err
}
