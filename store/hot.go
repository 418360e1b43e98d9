package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/internal/flock"
)

// The hot reads' cache: a key's principal (Authenticate) and one run's
// row (Run), the two reads every API request makes, held in memory so
// that a request does not read SQLite for them again (under load they
// were about a quarter of a read's CPU; docs/server.md, "Figures").
//
// It is exact for the writes this process makes, which on SQLite are
// all of cordon's writes while it holds the database's lock
// (CacheHotReads): every statement that changes a run, a key or a user
// is marked in flight before it runs and bumps a generation once it is
// committed (writing), and an entry is used only while the generation
// it was read under is current. A read takes the generation before it
// queries, so a row read before a write committed is never kept as
// current after it. While a write is in flight (from before its
// statement until its commit is told) the reads it may change neither
// use nor fill the cache: a read that saw the write committed, before
// the cache was told, is never answered later from an entry filled by a
// slower read that queried before the commit. A write the process did
// not make (the database edited by hand while the server runs) is seen
// once the entry is older than hotTTL.
//
// Only the hot reads outside a transaction use it: a transaction reads
// its own connection, seeing its own writes. PostgreSQL, which other
// servers and workers write too, never uses it.

// hotTTL bounds how long a cached row is used without reading it again,
// for writes made outside this process.
const hotTTL = time.Second

// Bounds on what the cache holds: when a map is full it is emptied (the
// next reads fill it again). A run's snapshot is kept only when small.
const (
	hotMaxKeys        = 4096
	hotMaxRuns        = 4096
	hotMaxRunBytes    = 32 << 20
	hotMaxSnapshotLen = 64 << 10
)

// hotShards is the number of run generations (a run's is chosen by its
// id's hash): a write to one run invalidates the cached rows of about
// one in hotShards runs, not every run's.
const hotShards = 256

type hotReads struct {
	keyGen atomic.Uint64            // bumped after every committed write to keys or users
	runGen [hotShards]atomic.Uint64 // bumped after every committed write to a run of the shard
	allGen atomic.Uint64            // bumped after a write to runs that names no one run

	// The writes in flight to each generation's rows: raised before the
	// statement runs, lowered after the generation is bumped.
	keyBusy atomic.Int64
	runBusy [hotShards]atomic.Int64
	allBusy atomic.Int64

	// mu is read-locked by lookups, which every request makes, and
	// locked only to fill: a lookup whose thread the kernel preempts
	// holds up no other lookup.
	mu       sync.RWMutex
	keys     map[string]hotKey // by the key's hash; guarded by mu
	runs     map[string]hotRun // by run id; guarded by mu
	runBytes int               // the snapshots' bytes in runs; guarded by mu

	lock *os.File // the database's lock, held while the cache is on
}

type hotKey struct {
	p   Principal
	gen uint64
	at  time.Time
}

type hotRun struct {
	r        Run
	gen, all uint64
	at       time.Time
}

// ErrDatabaseHeld: another process caches this SQLite database's reads
// (another cordon serve or worker on it).
var ErrDatabaseHeld = errors.New("store: another cordon process holds this database")

// OpenCached opens the SQLite database file at path as the one process
// that serves it, with its hot reads cached (cordon serve). It takes an
// exclusive lock on the file (flock, which SQLite's own locks do not
// use; the file is made, 0600, when missing) before any connection opens
// it or a migration runs, so a second server is refused
// (ErrDatabaseHeld) before it has changed anything; the lock is held
// until Close. It then checks that the file SQLite opened is the one it
// locked. PostgreSQL is refused (other processes write it).
func OpenCached(ctx context.Context, path string) (*Store, error) {
	if strings.HasPrefix(path, "postgres://") || strings.HasPrefix(path, "postgresql://") {
		return nil, errors.New("store: the hot reads' cache is for SQLite only (PostgreSQL is written by other processes too)")
	}
	f, err := os.OpenFile(filepath.Clean(path), os.O_RDWR|os.O_CREATE|flock.NoFollow, 0o600)
	if err != nil {
		return nil, lockOpenErr(err)
	}
	if err := lockDatabase(f, path); err != nil {
		f.Close() // no connection has the file open yet: closing drops no lock of SQLite's
		return nil, err
	}
	s, err := Open(ctx, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := s.sameFile(s.db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`), f); err != nil {
		s.Close()
		f.Close() // after the connections closed
		return nil, err
	}
	s.hot = &hotReads{keys: map[string]hotKey{}, runs: map[string]hotRun{}, lock: f}
	return s, nil
}

// CacheHotReads turns on the hot reads' cache of a store already open:
// as OpenCached, but the lock is taken after Open has migrated the
// schema (cordon serve uses OpenCached). It fails with ErrDatabaseHeld
// when another process holds the lock. The file it opens to lock is
// closed only by Close, after SQLite's connections: closing any
// descriptor of a file drops every POSIX lock the process holds on it,
// SQLite's included.
func (s *Store) CacheHotReads() error {
	if s.engine != SQLite {
		return fmt.Errorf("store: the hot reads' cache is for SQLite only (%s is written by other processes too)", s.engine)
	}
	if s.hot != nil {
		return nil
	}
	f, err := os.OpenFile(filepath.Clean(s.dsn), os.O_RDONLY|flock.NoFollow, 0)
	if err != nil {
		return lockOpenErr(err)
	}
	s.spare = append(s.spare, f)
	if err := lockDatabase(f, s.dsn); err != nil {
		return err
	}
	if err := s.sameFile(s.db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`), f); err != nil {
		return err
	}
	s.spare = s.spare[:len(s.spare)-1]
	s.hot = &hotReads{keys: map[string]hotKey{}, runs: map[string]hotRun{}, lock: f}
	return nil
}

// lockOpenErr is the error of opening the database file to lock it.
func lockOpenErr(err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("store: locking the database: %w (name the database file itself: a symbolic link to it is refused)", err)
	}
	return fmt.Errorf("store: locking the database: %w", err)
}

func lockDatabase(f *os.File, path string) error {
	if err := flock.TryLock(f); err != nil {
		if errors.Is(err, flock.ErrHeld) {
			return fmt.Errorf("%w: %s (stop the other server, or give this one its own database)", ErrDatabaseHeld, path)
		}
		return fmt.Errorf("store: locking the database %s: %w", path, err)
	}
	return nil
}

// sameFile checks that the database file SQLite opened (row: its
// pragma_database_list name) is the file locked.
func (s *Store) sameFile(row rowScanner, locked *os.File) error {
	var name string
	if err := row.Scan(&name); err != nil {
		return fmt.Errorf("store: the database's file: %w", err)
	}
	opened, err := os.Stat(name)
	if err != nil {
		return fmt.Errorf("store: the database's file: %w", err)
	}
	held, err := locked.Stat()
	if err != nil {
		return fmt.Errorf("store: the database's file: %w", err)
	}
	if !os.SameFile(opened, held) {
		return fmt.Errorf("store: SQLite opened %s, not the file locked (%s); name the database by a plain file path", name, locked.Name())
	}
	return nil
}

func (h *hotReads) close() {
	if h != nil && h.lock != nil {
		h.lock.Close()
	}
}

// runShard is the id's FNV-1a hash modulo hotShards, computed inline:
// it is on every run read, and hash/fnv's Hash allocates.
func runShard(id string) int {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return int(h % hotShards)
}

// hotFor is the cache a read with ctx may use: none in a transaction.
func (s *Store) hotFor(ctx context.Context) *hotReads {
	if s.hot == nil || txFrom(ctx) != nil {
		return nil
	}
	return s.hot
}

// writing marks a write to keys or users (keys), or to run id ("" for
// any run), about to run in ctx; done, called once the statement has
// run (whether it changed anything or failed), tells the cache it is
// committed: it bumps the generation, then lowers the mark. Until then
// the reads it may change miss and fill nothing (hot.go). In an audited
// transaction the bump waits for the transaction's end (Audited runs it
// after the commit or the rollback), and done does nothing. Every
// statement that changes runs, keys or users is between the two
// (TestHotEveryWriteTells).
func (s *Store) writing(ctx context.Context, keys bool, id string) (done func()) {
	h := s.hot
	if h == nil {
		return func() {}
	}
	busy, gen := &h.keyBusy, &h.keyGen
	if !keys {
		busy, gen = &h.allBusy, &h.allGen
		if id != "" {
			busy, gen = &h.runBusy[runShard(id)], &h.runGen[runShard(id)]
		}
	}
	busy.Add(1)
	tell := func() {
		gen.Add(1)
		busy.Add(-1)
	}
	if p, ok := ctx.Value(pendingKey{}).(*pending); ok && txFrom(ctx) != nil {
		p.mu.Lock()
		p.bumps = append(p.bumps, tell)
		p.mu.Unlock()
		return func() {}
	}
	var once sync.Once
	return func() { once.Do(tell) }
}

type pendingKey struct{}

// pending holds an audited transaction's bumps until it ends: each
// lowers its write's mark too, so it must run once whatever the end.
type pending struct {
	mu    sync.Mutex
	bumps []func()
}

func (p *pending) run() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.bumps {
		b()
	}
	p.bumps = nil
}

// key returns a cached principal for a key's hash, and the generation a
// read that misses must record; fill is false while a write to keys is
// in flight (the read must neither use nor fill the cache). The mark is
// loaded before the generation: a write that was committed before the
// read began is either told (the generation moved) or still marked.
func (h *hotReads) key(hash string, now time.Time) (p *Principal, gen uint64, fill bool) {
	if h.keyBusy.Load() != 0 {
		return nil, 0, false
	}
	gen = h.keyGen.Load()
	h.mu.RLock()
	e, ok := h.keys[hash]
	h.mu.RUnlock()
	if ok && e.gen == gen && now.Sub(e.at) < hotTTL && !now.Before(e.at) {
		p := e.p
		return &p, gen, true
	}
	return nil, gen, true
}

func (h *hotReads) putKey(hash string, p *Principal, gen uint64, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.keys) >= hotMaxKeys {
		clear(h.keys)
	}
	h.keys[hash] = hotKey{p: *p, gen: gen, at: now}
}

// run returns a copy of a cached run, and the generations a read that
// misses must record; fill is false while a write that may change the
// run is in flight (as key).
func (h *hotReads) run(id string, now time.Time) (r *Run, gen, all uint64, fill bool) {
	sh := runShard(id)
	if h.runBusy[sh].Load() != 0 || h.allBusy.Load() != 0 {
		return nil, 0, 0, false
	}
	gen, all = h.runGen[sh].Load(), h.allGen.Load()
	h.mu.RLock()
	e, ok := h.runs[id]
	h.mu.RUnlock()
	if ok && e.gen == gen && e.all == all && now.Sub(e.at) < hotTTL && !now.Before(e.at) {
		return copyRun(&e.r), gen, all, true
	}
	return nil, gen, all, true
}

func (h *hotReads) putRun(r *Run, gen, all uint64, now time.Time) {
	if len(r.Config) > hotMaxSnapshotLen {
		return
	}
	// The copy is made, and its bytes counted as allocated (a length
	// just over a size class takes up to a quarter more), before the
	// lock is taken.
	c := copyRun(r)
	size := cap(c.Config)
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.runs[r.ID]; ok {
		h.runBytes -= cap(old.r.Config)
		delete(h.runs, r.ID)
	}
	if len(h.runs) >= hotMaxRuns || h.runBytes+size > hotMaxRunBytes {
		clear(h.runs)
		h.runBytes = 0
	}
	h.runs[r.ID] = hotRun{r: *c, gen: gen, all: all, at: now}
	h.runBytes += size
}

// copyRun copies a run deeply enough that neither the cache nor its
// caller can change the other's: the snapshot and every pointer.
func copyRun(r *Run) *Run {
	c := *r
	c.Config = append([]byte(nil), r.Config...)
	if r.Config == nil {
		c.Config = nil
	}
	dup := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		x := *t
		return &x
	}
	c.DecidedAt, c.CancelledAt, c.StartedAt, c.FinishedAt = dup(r.DecidedAt), dup(r.CancelledAt), dup(r.StartedAt), dup(r.FinishedAt)
	if r.ExitCode != nil {
		e := *r.ExitCode
		c.ExitCode = &e
	}
	return &c
}
