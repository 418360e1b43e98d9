package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cordon-dev/cordon/store"
)

func cachedStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "cordon.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.CacheHotReads(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHotReadsSeeEveryCommittedWrite: with the hot reads cached, every
// write to a run or a key is seen by the first read after it returns,
// while other goroutines keep reading (and caching) the same run and
// key throughout, and when a read made during an audited transaction
// cached the row as it was before the commit.
func TestHotReadsSeeEveryCommittedWrite(t *testing.T) {
	s := cachedStore(t)
	auditKey(t, s, 1)
	ctx := t.Context()
	f := setup(t, s, "acme")
	_, secret, err := s.CreateKey(ctx, f.tenant.ID, f.member.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.Run(context.Background(), f.tenant.ID, r.ID)
				s.Authenticate(context.Background(), secret)
				reads.Add(1)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	state := func(want string) *store.Run {
		t.Helper()
		got, err := s.Run(ctx, f.tenant.ID, r.ID)
		if err != nil || got.State != want {
			t.Fatalf("the read right after the write: %+v %v, want state %s", got, err, want)
		}
		return got
	}
	for i := 0; reads.Load() < 50; i++ {
		s.Run(ctx, f.tenant.ID, r.ID) // let the readers warm the cache
	}
	if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); err != nil {
		t.Fatal(err)
	}
	state(store.StateQueued)
	attempt, ok, err := s.Start(ctx, r.ID, "w1", 1)
	if !ok || err != nil {
		t.Fatalf("start: %v %v", ok, err)
	}
	if got := state(store.StateRunning); got.Attempts != 1 || got.Worker != "w1" {
		t.Fatalf("started run %+v", got)
	}
	// An audited transaction: a read outside it, made after its write
	// and before its commit, sees (and caches) the run as it was; the
	// first read after the commit sees the outcome.
	code := 3
	err = s.Audited(ctx, func(tctx context.Context) (*store.AuditEvent, error) {
		if ok, err := s.Finish(tctx, r.ID, attempt, store.Outcome{State: store.StateFinished, Reason: "done", ExitCode: &code}); !ok || err != nil {
			t.Fatalf("finish: %v %v", ok, err)
		}
		if got, _ := s.Run(context.Background(), f.tenant.ID, r.ID); got == nil || got.State != store.StateRunning {
			t.Fatalf("outside the transaction, before its commit: %+v", got)
		}
		return &store.AuditEvent{Tenant: f.tenant.ID, Body: map[string]any{"action": "run.finish", "run": r.ID}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := state(store.StateFinished); got.ExitCode == nil || *got.ExitCode != 3 || got.Reason != "done" {
		t.Fatalf("finished run %+v", got)
	}
	// A key revoked inside an audited transaction the same way.
	p, err := s.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Audited(ctx, func(tctx context.Context) (*store.AuditEvent, error) {
		if err := s.RevokeKey(tctx, f.tenant.ID, p.KeyID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(context.Background(), secret); err != nil {
			t.Fatalf("outside the transaction, before its commit: %v", err)
		}
		return &store.AuditEvent{Tenant: f.tenant.ID, Body: map[string]any{"action": "key.revoke", "key": p.KeyID}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, secret); !errors.Is(err, store.ErrUnauthorized) {
		t.Fatalf("a revoked key right after the revocation: %v", err)
	}
	// Interrupted, cancel and rotation, outside transactions.
	r2, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
	s.Run(ctx, f.tenant.ID, r2.ID)
	if st, err := s.Cancel(ctx, f.tenant.ID, r2.ID, f.member.ID); err != nil || st != store.StateCancelled {
		t.Fatalf("cancel: %s %v", st, err)
	}
	if got, _ := s.Run(ctx, f.tenant.ID, r2.ID); got.State != store.StateCancelled || got.CancelledBy != f.member.ID {
		t.Fatalf("cancelled run %+v", got)
	}
	r3, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
	s.Approve(ctx, f.tenant.ID, r3.ID, f.approver.ID)
	s.Start(ctx, r3.ID, "w1", 2)
	s.Run(ctx, f.tenant.ID, r3.ID)
	if ok, err := s.Interrupted(ctx, r3.ID, "worker died"); !ok || err != nil {
		t.Fatalf("interrupted: %v %v", ok, err)
	}
	if got, _ := s.Run(ctx, f.tenant.ID, r3.ID); got.State != store.StateFailed || got.Reason != "worker died" {
		t.Fatalf("interrupted run %+v", got)
	}
	k2, secret2, err := s.CreateKey(ctx, f.tenant.ID, f.approver.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, secret2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RotateKey(ctx, f.tenant.ID, k2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, secret2); !errors.Is(err, store.ErrUnauthorized) {
		t.Fatalf("a rotated key right after the rotation: %v", err)
	}
}

// TestHotReadsRolledBack: a write in an audited transaction that rolls
// back leaves the run as it was, for a read that cached it before, during
// and after the transaction.
func TestHotReadsRolledBack(t *testing.T) {
	s := cachedStore(t)
	auditKey(t, s, 1)
	ctx := t.Context()
	f := setup(t, s, "acme")
	r, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
	s.Run(ctx, f.tenant.ID, r.ID)
	boom := errors.New("boom")
	err := s.Audited(ctx, func(tctx context.Context) (*store.AuditEvent, error) {
		if err := s.Approve(tctx, f.tenant.ID, r.ID, f.approver.ID); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Run(tctx, f.tenant.ID, r.ID); got.State != store.StateQueued {
			t.Fatalf("inside the transaction: %+v", got)
		}
		s.Run(context.Background(), f.tenant.ID, r.ID)
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got, _ := s.Run(ctx, f.tenant.ID, r.ID); got.State != store.StatePending || got.DecidedBy != "" {
		t.Fatalf("after the rollback: %+v", got)
	}
}

// TestHotReadsOneProcess: one store caches a SQLite database at a time;
// PostgreSQL is refused.
func TestHotReadsOneProcess(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "cordon.db")
	a, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CacheHotReads(); err != nil {
		t.Fatal(err)
	}
	b, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CacheHotReads(); !errors.Is(err, store.ErrDatabaseHeld) {
		t.Fatalf("a second cache of the database: %v", err)
	}
	a.Close()
	if err := b.CacheHotReads(); err != nil {
		t.Fatalf("once the first store closed: %v", err)
	}
	engines(t, func(t *testing.T, s *store.Store) {
		if s.Engine() != store.Postgres {
			return
		}
		if err := s.CacheHotReads(); err == nil {
			t.Fatal("PostgreSQL's reads were cached")
		}
	})
}

// TestHotReadsCopies: what a read returns is the caller's; changing it
// changes no later read.
func TestHotReadsCopies(t *testing.T) {
	s := cachedStore(t)
	ctx := t.Context()
	f := setup(t, s, "acme")
	r, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{"a":1}`), f.member.ID, "")
	s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID)
	got, _ := s.Run(ctx, f.tenant.ID, r.ID)
	got.Config[2] = 'X'
	got.State = "forged"
	*got.DecidedAt = got.DecidedAt.Add(1e9)
	again, _ := s.Run(ctx, f.tenant.ID, r.ID)
	if string(again.Config) != `{"a":1}` || again.State != store.StateQueued || again.DecidedAt.Equal(*got.DecidedAt) {
		t.Fatalf("a caller's change reached the cache: %+v", again)
	}
	_, secret, _ := s.CreateKey(ctx, f.tenant.ID, f.member.ID)
	p, _ := s.Authenticate(ctx, secret)
	p.Role = store.RoleApprover
	if p2, _ := s.Authenticate(ctx, secret); p2.Role != store.RoleMember {
		t.Fatalf("a caller's change reached the cache: %+v", p2)
	}
	// Another tenant's run is not found, cached or not.
	other := setup(t, s, "other")
	if _, err := s.Run(ctx, other.tenant.ID, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant's cached run: %v", err)
	}
}

// TestHotReadsConcurrentWrites: many goroutines read runs and
// authenticate keys through the cache while another keeps writing them
// through the store's API (each run approved, started and finished, in
// turn on its own and in an audited transaction; each key revoked). No
// read returns a run in a state older than one a write had recorded and
// returned before the read began, nor authenticates a key whose
// revocation had returned; and no reader reads a run older than it has
// read it already, or authenticates a key it was refused, even while
// the write is still returning (a read that missed the cache may see a
// write committed before the cache is told of it; a slower read made
// before the commit must not then fill the cache with the older row).
func TestHotReadsConcurrentWrites(t *testing.T) {
	s := cachedStore(t)
	auditKey(t, s, 1)
	ctx := t.Context()
	f := setup(t, s, "acme")
	const n = 40
	rank := map[string]int32{store.StatePending: 0, store.StateQueued: 1, store.StateRunning: 2, store.StateFinished: 3}
	ids := make([]string, n)
	secrets := make([]string, n)
	keyIDs := make([]string, n)
	for i := range n {
		r, err := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{"n":`+strconv.Itoa(i)+`}`), f.member.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		k, secret, err := s.CreateKey(ctx, f.tenant.ID, f.member.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], secrets[i], keyIDs[i] = r.ID, secret, k.ID
	}
	var told [n]atomic.Int32     // the rank of the last write that returned, per run
	var revoked [n]atomic.Bool   // the key's revocation returned
	var cur atomic.Int32         // the run being written
	var reads, hits atomic.Int64 // reads made; of them, authentications refused
	stop := make(chan struct{})
	errs := make(chan error, 8)
	fail := func(err error) { // the readers go on: the writer waits for their reads
		select {
		case errs <- err:
		default:
		}
	}
	var wg sync.WaitGroup
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
	t.Cleanup(halt) // before the store closes, on a failure too
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seen [n]int32   // the latest rank this reader read, per run
			var refused [n]bool // keys this reader was refused
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				reads.Add(1)
				i := int(cur.Load())
				if j%3 == 1 && i > 0 {
					i-- // the run written just before
				}
				floor, gone := told[i].Load(), revoked[i].Load()
				r, err := s.Run(context.Background(), f.tenant.ID, ids[i])
				if err != nil {
					fail(err)
					continue
				}
				if got := rank[r.State]; got < seen[i] {
					fail(fmt.Errorf("reader %d: run %d read %s after this reader had read it at rank %d", g, i, r.State, seen[i]))
				} else {
					seen[i] = got
				}
				if got := rank[r.State]; got < floor {
					fail(fmt.Errorf("reader %d: run %d read %s after a write to rank %d returned", g, i, r.State, floor))
				}
				_, err = s.Authenticate(context.Background(), secrets[i])
				if (gone || refused[i]) && !errors.Is(err, store.ErrUnauthorized) {
					fail(fmt.Errorf("reader %d: key %d authenticated after its revocation returned or this reader was refused it: %v", g, i, err))
				}
				if err != nil {
					refused[i] = true
					hits.Add(1)
				}
			}
		}()
	}
	write := func(i int, to string, w func() error) {
		t.Helper()
		if err := w(); err != nil {
			t.Fatalf("run %d to %s: %v", i, to, err)
		}
		told[i].Store(rank[to])
	}
	for i := range n {
		cur.Store(int32(i))
		for start := reads.Load(); reads.Load() < start+5; {
			runtime.Gosched() // the readers cache the run as it is
		}
		write(i, store.StateQueued, func() error { return s.Approve(ctx, f.tenant.ID, ids[i], f.approver.ID) })
		var attempt int
		write(i, store.StateRunning, func() error {
			a, ok, err := s.Start(ctx, ids[i], "w1", int64(i+1))
			if !ok && err == nil {
				err = errors.New("not started")
			}
			attempt = a
			return err
		})
		write(i, store.StateFinished, func() error {
			finish := func(c context.Context) error {
				ok, err := s.Finish(c, ids[i], attempt, store.Outcome{State: store.StateFinished, Reason: "done"})
				if !ok && err == nil {
					err = errors.New("not finished")
				}
				return err
			}
			if i%2 == 0 {
				return finish(ctx)
			}
			return s.Audited(ctx, func(tctx context.Context) (*store.AuditEvent, error) {
				return &store.AuditEvent{Tenant: f.tenant.ID, Body: map[string]any{"action": "run.finish", "run": ids[i]}}, finish(tctx)
			})
		})
		if err := s.RevokeKey(ctx, f.tenant.ID, keyIDs[i]); err != nil {
			t.Fatal(err)
		}
		revoked[i].Store(true)
		for start := reads.Load(); reads.Load() < start+5; {
			runtime.Gosched() // the readers read it as it is now
		}
	}
	halt()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if hits.Load() == 0 {
		t.Fatal("no read saw a revoked key: the test exercised too little")
	}
}
