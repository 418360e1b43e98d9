package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/internal/pgtest"
	"github.com/cordon-dev/cordon/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// engines runs f against a fresh SQLite store and a fresh PostgreSQL
// store: one suite, both engines.
func engines(t *testing.T, f func(t *testing.T, s *store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "cordon.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.CacheHotReads(); err != nil { // as cordon serve does: the suite reads through the cache
			t.Fatal(err)
		}
		f(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t, os.Getenv("CORDON_TEST_POSTGRES"), pgtest.Required(os.Getenv("CORDON_CI")))
		s, err := store.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.Engine() != store.Postgres {
			t.Fatalf("engine %s", s.Engine())
		}
		f(t, s)
	})
}

type fixture struct {
	tenant   *store.Tenant
	member   *store.User
	approver *store.User
	project  *store.Project
}

func setup(t *testing.T, s *store.Store, name string) fixture {
	t.Helper()
	ctx := t.Context()
	ten, err := s.CreateTenant(ctx, name, []byte(`{"ceiling":true}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.CreateUser(ctx, ten.ID, "mia", store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.CreateUser(ctx, ten.ID, "abe", store.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.PutProject(ctx, ten.ID, "proj", "", []byte(`{}`), func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return fixture{ten, m, a, p}
}

func TestKeysHashedRevokedRotated(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "acme")
		k, secret, err := s.CreateKey(ctx, f.tenant.ID, f.member.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, store.KeyPrefix) || len(secret) < 50 {
			t.Fatalf("secret %q", secret)
		}
		// The secret is stored only hashed.
		var n int
		if err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM keys WHERE hash = '"+store.HashKey(secret)+"'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("hash rows %d, %v", n, err)
		}
		var leaked int
		s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM keys WHERE hash = '"+secret+"' OR hint = '"+secret+"'").Scan(&leaked)
		if leaked != 0 {
			t.Fatal("the secret is stored in the clear")
		}
		p, err := s.Authenticate(ctx, secret)
		if err != nil || p.TenantID != f.tenant.ID || p.UserID != f.member.ID || p.Role != store.RoleMember {
			t.Fatalf("principal %+v, %v", p, err)
		}
		if _, err := s.Authenticate(ctx, secret+"x"); !errors.Is(err, store.ErrUnauthorized) {
			t.Fatalf("wrong secret: %v", err)
		}
		k2, secret2, err := s.RotateKey(ctx, f.tenant.ID, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, secret); !errors.Is(err, store.ErrUnauthorized) {
			t.Fatalf("rotated-out key still authenticates: %v", err)
		}
		if p, err := s.Authenticate(ctx, secret2); err != nil || p.UserID != f.member.ID {
			t.Fatalf("rotated key: %+v %v", p, err)
		}
		if err := s.RevokeKey(ctx, f.tenant.ID, k2.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, secret2); !errors.Is(err, store.ErrUnauthorized) {
			t.Fatalf("revoked key authenticates: %v", err)
		}
		if err := s.RevokeKey(ctx, f.tenant.ID, k2.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second revoke: %v", err)
		}
		keys, err := s.Keys(ctx, f.tenant.ID)
		if err != nil || len(keys) != 2 || keys[0].RevokedAt == nil || keys[1].RevokedAt == nil {
			t.Fatalf("keys %+v %v", keys, err)
		}
		// Another tenant cannot revoke or rotate this tenant's key.
		other := setup(t, s, "other")
		k3, _, _ := s.CreateKey(ctx, f.tenant.ID, "")
		if err := s.RevokeKey(ctx, other.tenant.ID, k3.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("cross-tenant revoke: %v", err)
		}
		if _, _, err := s.CreateKey(ctx, other.tenant.ID, f.member.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("key for another tenant's user: %v", err)
		}
	})
}

func TestRunStateMachine(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "acme")
		r, err := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		if err != nil || r.State != store.StatePending {
			t.Fatalf("%+v %v", r, err)
		}
		// Self-approval is refused, whatever the role.
		if err := s.Approve(ctx, f.tenant.ID, r.ID, f.member.ID); !errors.Is(err, store.ErrSelfApproval) {
			t.Fatalf("self approval: %v", err)
		}
		// Not startable before approval.
		if _, ok, err := s.Start(ctx, r.ID, "w1", 1); ok || err != nil {
			t.Fatalf("started a pending run: %v %v", ok, err)
		}
		if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); err != nil {
			t.Fatal(err)
		}
		// A replayed approval changes nothing.
		if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); !errors.Is(err, store.ErrState) {
			t.Fatalf("replayed approval: %v", err)
		}
		if err := s.Reject(ctx, f.tenant.ID, r.ID, f.approver.ID); !errors.Is(err, store.ErrState) {
			t.Fatalf("reject after approve: %v", err)
		}
		got, _ := s.Run(ctx, f.tenant.ID, r.ID)
		if got.State != store.StateQueued || got.DecidedBy != f.approver.ID || got.DecidedAt == nil {
			t.Fatalf("approved run %+v", got)
		}
		attempt, ok, err := s.Start(ctx, r.ID, "w1", 1)
		if !ok || err != nil || attempt != 1 {
			t.Fatalf("start: %d %v %v", attempt, ok, err)
		}
		if _, ok, _ := s.Start(ctx, r.ID, "w2", 2); ok {
			t.Fatal("a running run was claimed twice")
		}
		state, err := s.Cancel(ctx, f.tenant.ID, r.ID, f.member.ID)
		if err != nil || state != store.StateRunning {
			t.Fatalf("cancel running: %s %v", state, err)
		}
		if req, _ := s.CancelRequested(ctx, r.ID); !req {
			t.Fatal("cancel not requested")
		}
		if ok, err := s.Finish(ctx, r.ID, attempt+1, store.Outcome{State: store.StateFinished}); ok || err != nil {
			t.Fatalf("finish by a stale attempt: %v %v", ok, err)
		}
		if ok, err := s.Finish(ctx, r.ID, attempt, store.Outcome{State: store.StateCancelled, Reason: "cancelled"}); !ok || err != nil {
			t.Fatalf("finish: %v %v", ok, err)
		}
		if ok, _ := s.Finish(ctx, r.ID, attempt, store.Outcome{State: store.StateFinished}); ok {
			t.Fatal("an outcome was recorded twice")
		}
		got, _ = s.Run(ctx, f.tenant.ID, r.ID)
		if got.State != store.StateCancelled || got.CancelledBy != f.member.ID || got.FinishedAt == nil {
			t.Fatalf("cancelled run %+v", got)
		}
		// Rejection, and cancel before running.
		r2, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		if err := s.Reject(ctx, f.tenant.ID, r2.ID, f.member.ID); !errors.Is(err, store.ErrSelfApproval) {
			t.Fatalf("self rejection: %v", err)
		}
		if err := s.Reject(ctx, f.tenant.ID, r2.ID, f.approver.ID); err != nil {
			t.Fatal(err)
		}
		r3, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		if st, err := s.Cancel(ctx, f.tenant.ID, r3.ID, f.member.ID); err != nil || st != store.StateCancelled {
			t.Fatalf("cancel pending: %s %v", st, err)
		}
		if _, err := s.Cancel(ctx, f.tenant.ID, r3.ID, f.member.ID); !errors.Is(err, store.ErrState) {
			t.Fatalf("second cancel: %v", err)
		}
		// Interrupted: a running run whose attempt died is failed, once.
		r4, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		s.Approve(ctx, f.tenant.ID, r4.ID, f.approver.ID)
		s.Start(ctx, r4.ID, "w1", 3)
		if ok, err := s.Interrupted(ctx, r4.ID, "worker died"); !ok || err != nil {
			t.Fatalf("interrupted: %v %v", ok, err)
		}
		got, _ = s.Run(ctx, f.tenant.ID, r4.ID)
		if got.State != store.StateFailed || got.Reason != "worker died" {
			t.Fatalf("interrupted run %+v", got)
		}
		runs, err := s.Runs(ctx, f.tenant.ID, 10)
		if err != nil || len(runs) != 4 {
			t.Fatalf("runs %d %v", len(runs), err)
		}
	})
}

func TestCrossTenantInvisible(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		a := setup(t, s, "a")
		b := setup(t, s, "b")
		r, _ := s.CreateRun(ctx, a.tenant.ID, a.project.ID, "t", []byte(`{}`), a.member.ID, "")
		if _, err := s.Run(ctx, b.tenant.ID, r.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("other tenant reads the run: %v", err)
		}
		if err := s.Approve(ctx, b.tenant.ID, r.ID, b.approver.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("other tenant approves the run: %v", err)
		}
		if _, err := s.Cancel(ctx, b.tenant.ID, r.ID, b.member.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("other tenant cancels the run: %v", err)
		}
		if _, err := s.Project(ctx, b.tenant.ID, "proj"); err != nil {
			t.Fatal(err) // b's own project of the same name
		}
		if runs, _ := s.Runs(ctx, b.tenant.ID, 10); len(runs) != 0 {
			t.Fatalf("other tenant lists %d runs", len(runs))
		}
		if err := s.PutEvidence(ctx, r.ID, []byte{0x1f, 0x8b, 0, 0xff}, []byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutEvidence(ctx, r.ID, []byte("x"), []byte("y")); !errors.Is(err, store.ErrExists) {
			t.Fatalf("evidence stored twice: %v", err)
		}
		if got, err := s.Evidence(ctx, a.tenant.ID, r.ID, "record"); err != nil || string(got) != "\x1f\x8b\x00\xff" {
			t.Fatalf("record %q %v", got, err)
		}
		if _, err := s.Evidence(ctx, b.tenant.ID, r.ID, "journal"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("other tenant reads the evidence: %v", err)
		}
	})
}

func TestProjectCheckedAgainstCeiling(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "acme")
		refuse := errors.New("not covered")
		var seen string
		_, err := s.PutProject(ctx, f.tenant.ID, "proj", "", []byte(`{"v":2}`), func(c []byte) error { seen = string(c); return refuse })
		if !errors.Is(err, refuse) || seen != `{"ceiling":true}` {
			t.Fatalf("%v, ceiling seen %q", err, seen)
		}
		p, _ := s.Project(ctx, f.tenant.ID, "proj")
		if string(p.Config) != `{}` {
			t.Fatalf("a refused write changed the project: %s", p.Config)
		}
	})
}

// TestConcurrentApprovals races approvers and claimers: exactly one of
// each wins.
func TestConcurrentApprovals(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := context.WithoutCancel(t.Context())
		f := setup(t, s, "acme")
		r, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		var wg sync.WaitGroup
		var mu sync.Mutex
		approved, started := 0, 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); err == nil {
					mu.Lock()
					approved++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, ok, _ := s.Start(ctx, r.ID, "w"+string(rune('0'+i)), int64(i)); ok {
					mu.Lock()
					started++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if approved != 1 || started != 1 {
			t.Fatalf("approved %d times, started %d times", approved, started)
		}
	})
}

// TestPendingCapExact races submissions against the cap on a tenant's
// runs pending approval or queued: exactly the cap's worth are created,
// the rest refused with ErrPendingCap, another tenant is not counted, and
// an ended run frees its place.
func TestPendingCapExact(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := context.WithoutCancel(t.Context())
		f := setup(t, s, "acme")
		o := setup(t, s, "other")
		const max = 5
		// One pending and one queued already count; another tenant's do not.
		r1, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		r2, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		if err := s.Approve(ctx, f.tenant.ID, r2.ID, f.approver.ID); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := s.CreateRun(ctx, o.tenant.ID, o.project.ID, "t", []byte(`{}`), o.member.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		created, capped := 0, 0
		start := make(chan struct{})
		for range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := s.CreateRunCapped(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "", "", max)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					created++
				case errors.Is(err, store.ErrPendingCap):
					capped++
				default:
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		n, err := s.PendingRuns(ctx, f.tenant.ID)
		if err != nil {
			t.Fatal(err)
		}
		if created != max-2 || capped != 24-(max-2) || n != max {
			t.Fatalf("created %d, refused %d, pending or queued %d: want %d, %d, %d", created, capped, n, max-2, 24-(max-2), max)
		}
		if _, err := s.Cancel(ctx, f.tenant.ID, r1.ID, f.member.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateRunCapped(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "", "", max); err != nil {
			t.Fatalf("a cancelled run still counted: %v", err)
		}
		if _, err := s.CreateRunCapped(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "", "", max); !errors.Is(err, store.ErrPendingCap) {
			t.Fatalf("over the cap: %v", err)
		}
	})
}

// TestRevokedSubmitterKey: a run whose submitting key is revoked cannot
// be approved (ErrSubmitterRevoked, the run unchanged), and can still be
// rejected; a run from before keys were recorded ("" key) is approved.
func TestRevokedSubmitterKey(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "acme")
		k, _, err := s.CreateKey(ctx, f.tenant.ID, f.member.ID)
		if err != nil {
			t.Fatal(err)
		}
		var runs []*store.Run
		for range 2 {
			r, err := s.CreateRunCapped(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, k.ID, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
		old, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		if err := s.RevokeKey(ctx, f.tenant.ID, k.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Approve(ctx, f.tenant.ID, runs[0].ID, f.approver.ID); !errors.Is(err, store.ErrSubmitterRevoked) {
			t.Fatalf("approving a revoked key's run: %v", err)
		}
		if r, _ := s.Run(ctx, f.tenant.ID, runs[0].ID); r.State != store.StatePending || r.DecidedBy != "" || r.SubmittedKey != k.ID {
			t.Fatalf("the refused approval changed the run: %+v", r)
		}
		if err := s.Reject(ctx, f.tenant.ID, runs[1].ID, f.approver.ID); err != nil {
			t.Fatalf("rejecting a revoked key's run: %v", err)
		}
		if err := s.Approve(ctx, f.tenant.ID, old.ID, f.approver.ID); err != nil {
			t.Fatalf("a run without a recorded key: %v", err)
		}
	})
}

// TestReadGateReleased: the hot reads pass a gate as wide as the read
// pool; a read that finds nothing, fails or is cancelled gives its place
// back, so that many more such reads than places still complete.
func TestReadGateReleased(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		f := setup(t, s, "acme")
		done := ctx
		cancelled, stop := context.WithCancel(ctx)
		stop()
		for i := range 100 {
			if _, err := s.Run(done, f.tenant.ID, "run_missing"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("read %d: %v", i, err)
			}
			if _, err := s.Authenticate(done, "cdn_wrong"); !errors.Is(err, store.ErrUnauthorized) {
				t.Fatalf("read %d: %v", i, err)
			}
			if _, err := s.Run(cancelled, f.tenant.ID, "run_missing"); err == nil {
				t.Fatalf("read %d: a cancelled read succeeded", i)
			}
			if _, err := s.Runs(cancelled, f.tenant.ID, 10); err == nil {
				t.Fatalf("read %d: a cancelled list succeeded", i)
			}
		}
		if _, err := s.Runs(ctx, f.tenant.ID, 10); err != nil || ctx.Err() != nil {
			t.Fatalf("after 400 reads: %v (%v)", err, ctx.Err())
		}
	})
}

// TestConsoleSessionsBounded: a key holds at most MaxConsoleSessions live
// sessions (a sign-in past it ends the oldest), a sign-in purges expired
// and ended rows, and EndConsoleSessionsOf ends every session of one key
// and none of another's (red team F9).
func TestConsoleSessionsBounded(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "t")
		km, _, err := s.CreateKey(ctx, f.tenant.ID, f.member.ID)
		if err != nil {
			t.Fatal(err)
		}
		ka, _, err := s.CreateKey(ctx, f.tenant.ID, f.approver.ID)
		if err != nil {
			t.Fatal(err)
		}
		h := func(i int) string { return fmt.Sprintf("%064x", i) }
		later := time.Now().Add(time.Hour)
		count := func(where string) (n int) {
			if err := s.DB().QueryRow("SELECT COUNT(*) FROM console_sessions WHERE " + where).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		// an expired row and an ended one, of another key
		if err := s.StartConsoleSession(ctx, h(1000), ka.ID, "", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := s.StartConsoleSession(ctx, h(1001), ka.ID, "", later); err != nil {
			t.Fatal(err)
		}
		if err := s.EndConsoleSession(ctx, h(1001)); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if err := s.StartConsoleSession(ctx, h(i), km.ID, "", later); err != nil {
				t.Fatal(err)
			}
		}
		if n := count("1=1"); n != store.MaxConsoleSessions {
			t.Errorf("%d session rows after 40 sign-ins and two dead rows; want %d (the dead purged, the oldest ended)", n, store.MaxConsoleSessions)
		}
		for i := range 40 {
			_, err := s.ConsoleSessionByHash(ctx, h(i))
			if live := err == nil; live != (i >= 40-store.MaxConsoleSessions) {
				t.Errorf("session %d: live %v", i, live)
			}
		}
		for i := range 3 {
			if err := s.StartConsoleSession(ctx, h(2000+i), ka.ID, "", later); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.StartConsoleSession(ctx, h(3000), "", "fp", later); err != nil {
			t.Fatal(err)
		}
		n, err := s.EndConsoleSessionsOf(ctx, h(39))
		if err != nil || n != int64(store.MaxConsoleSessions) {
			t.Fatalf("ended %d (%v), want %d", n, err, store.MaxConsoleSessions)
		}
		if _, err := s.ConsoleSessionByHash(ctx, h(30)); !errors.Is(err, store.ErrUnauthorized) {
			t.Errorf("a session of the key is live after sign-out everywhere: %v", err)
		}
		for _, other := range []string{h(2000), h(2002), h(3000)} {
			if _, err := s.ConsoleSessionByHash(ctx, other); err != nil {
				t.Errorf("another key's (or the admin's) session ended: %v", err)
			}
		}
		if n, err := s.EndConsoleSessionsOf(ctx, h(3000)); err != nil || n != 1 {
			t.Errorf("the admin's sign-out everywhere ended %d (%v)", n, err)
		}
		if n, err := s.EndConsoleSessionsOf(ctx, h(9999)); err != nil || n != 0 {
			t.Errorf("an unknown session ended %d (%v)", n, err)
		}
	})
}
