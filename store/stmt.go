package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache holds the prepared form of the hot read queries (key
// lookup, one run, a tenant's runs), so that a read does not parse its
// SQL again: on embedded SQLite, parsing was a third of a read's CPU
// (docs/server.md, "Figures"). database/sql prepares a statement on each
// pooled connection once and reuses it.
type stmtCache struct {
	mu sync.RWMutex
	m  map[string]*sql.Stmt // by the engine's query text; guarded by mu
}

// prepared returns the read pool's prepared statement for query (in the
// ? form), preparing it on first use.
func (s *Store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	q := s.q(query)
	s.stmts.mu.RLock()
	st, ok := s.stmts.m[q]
	s.stmts.mu.RUnlock()
	if ok {
		return st, nil
	}
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	if st, ok := s.stmts.m[q]; ok {
		return st, nil
	}
	st, err := s.rdb.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if s.stmts.m == nil {
		s.stmts.m = map[string]*sql.Stmt{}
	}
	s.stmts.m[q] = st
	return st, nil
}

// fifoGate admits callers to a connection pool in arrival order, at
// most as many at once as the pool has connections. database/sql hands
// a freed connection to a random waiter, so with 200 clients waiting on
// 8 connections a read could be passed over again and again: the read
// p99 was several times its median (and a write's, on SQLite's one
// writer connection, seven times). A buffered channel's blocked senders
// are served first come, first served; with the gate in front, the pool
// has no waiters of these callers. A nil gate admits everyone at once.
type fifoGate chan struct{}

func (g fifoGate) acquire(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g fifoGate) release() {
	if g != nil {
		<-g
	}
}

// readRow runs a single-row read through its prepared statement, after
// the read gate; the gate is released when the row is scanned (every
// caller scans it).
func (s *Store) readRow(ctx context.Context, query string, args ...any) rowScanner {
	if tx := txFrom(ctx); tx != nil {
		// An audited transaction reads on its own connection (on SQLite
		// the one writer connection, which it holds), seeing its writes.
		return tx.QueryRowContext(ctx, s.q(query), args...)
	}
	st, err := s.prepared(ctx, query)
	if err != nil {
		return errRow{err}
	}
	if err := s.rgate.acquire(ctx); err != nil {
		return errRow{err}
	}
	return &gatedRow{row: st.QueryRowContext(s.pointRead(ctx), args...), release: s.rgate.release}
}

// pointRead is the context a hot read runs its statement under, once
// past the read gate (whose wait ctx still ends). On SQLite it is not
// cancelled with ctx: the statement is a local, indexed read of one row
// or a page of rows (Runs: at most its limit) that a cancel would not
// usefully shorten, and a cancellable
// context costs each statement two goroutines (the driver's interrupt
// watcher and database/sql's), 4% of the control plane's CPU under load
// (docs/server.md, "Figures"); SQLite's busy timeout still bounds a wait
// for a lock. On PostgreSQL, where a read waits on the network, ctx
// stays.
func (s *Store) pointRead(ctx context.Context) context.Context {
	if s.engine == SQLite {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// gatedRow releases the read gate once it is scanned.
type gatedRow struct {
	row     *sql.Row
	release func()
	once    sync.Once
}

func (r *gatedRow) Scan(dest ...any) error {
	defer r.once.Do(r.release)
	return r.row.Scan(dest...)
}

// rowScanner is a *sql.Row, or the error that kept one from being read.
type rowScanner interface{ Scan(...any) error }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// closeStmts closes the prepared statements (Close).
func (s *Store) closeStmts() {
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	for _, st := range s.stmts.m {
		st.Close()
	}
	s.stmts.m = nil
}
