package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cordon-dev/cordon/evidence/audit"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/store"
)

func auditKey(t *testing.T, s *store.Store, b byte) {
	t.Helper()
	if err := s.SetAuditKey(bytes.Repeat([]byte{b}, 32), fmt.Sprintf("key%d", b)); err != nil {
		t.Fatal(err)
	}
}

func auditCount(t *testing.T, s *store.Store) uint64 {
	t.Helper()
	h, err := s.AuditLog(t.Context(), func(store.AuditRecord) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return h.Count
}

// TestAuditInTheChangesTransaction: a change that fails leaves no audit
// record (and no change); a change that commits always has its record;
// a record that cannot be appended undoes the change.
func TestAuditInTheChangesTransaction(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "acme")
		if err := s.Audit(ctx, &store.AuditEvent{Body: map[string]any{"event": "x"}}); !errors.Is(err, store.ErrAuditKey) {
			t.Fatalf("append without an audit key: %v", err)
		}
		auditKey(t, s, 1)
		r, err := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		ev := func(what string) *store.AuditEvent {
			return &store.AuditEvent{Tenant: f.tenant.ID, Body: map[string]any{"event": what, "run": r.ID}}
		}
		// Refused by the store: no record.
		err = s.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
			if err := s.Approve(ctx, f.tenant.ID, r.ID, f.member.ID); err != nil {
				return nil, err
			}
			return ev("run.approve"), nil
		})
		if !errors.Is(err, store.ErrSelfApproval) || auditCount(t, s) != 0 {
			t.Fatalf("self-approval: %v, %d records", err, auditCount(t, s))
		}
		// Changed, then failed: the change is undone and nothing recorded.
		boom := errors.New("boom")
		err = s.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
			if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); err != nil {
				return nil, err
			}
			return nil, boom
		})
		if got, _ := s.Run(ctx, f.tenant.ID, r.ID); !errors.Is(err, boom) || got.State != store.StatePending || auditCount(t, s) != 0 {
			t.Fatalf("failed change: %v, state %s, %d records", err, got.State, auditCount(t, s))
		}
		// Committed: exactly one record.
		err = s.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
			if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); err != nil {
				return nil, err
			}
			return ev("run.approve"), nil
		})
		if got, _ := s.Run(ctx, f.tenant.ID, r.ID); err != nil || got.State != store.StateQueued || auditCount(t, s) != 1 {
			t.Fatalf("approve: %v, state %s, %d records", err, got.State, auditCount(t, s))
		}
		// A project write joins the audited transaction.
		err = s.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
			if _, err := s.PutProject(ctx, f.tenant.ID, "p2", f.member.ID, []byte(`{}`), func([]byte) error { return nil }); err != nil {
				return nil, err
			}
			return ev("project.put"), nil
		})
		if err != nil || auditCount(t, s) != 2 {
			t.Fatalf("project put: %v, %d records", err, auditCount(t, s))
		}
		// Another process's audit key: the append fails, so the change does too.
		auditKey(t, s, 2)
		err = s.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
			if _, err := s.CreateTenant(ctx, "other", []byte(`{}`)); err != nil {
				return nil, err
			}
			return &store.AuditEvent{Body: map[string]any{"event": "tenant.create"}}, nil
		})
		if !errors.Is(err, store.ErrAuditKey) {
			t.Fatalf("append under another key: %v", err)
		}
		if ts, _ := s.Tenants(ctx); len(ts) != 1 {
			t.Fatalf("the tenant was created though its record was not: %d tenants", len(ts))
		}
		if err := s.CheckAuditKey(ctx); !errors.Is(err, store.ErrAuditKey) {
			t.Fatalf("CheckAuditKey under another key: %v", err)
		}
		auditKey(t, s, 1)
		if err := s.CheckAuditKey(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAuditConcurrentAppendsOneChain: appends from many goroutines (and
// changes racing for one run) form one linear chain that exports and
// verifies against a signed head.
func TestAuditConcurrentAppendsOneChain(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := context.WithoutCancel(t.Context())
		f := setup(t, s, "acme")
		auditKey(t, s, 7)
		r, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for g := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 8 {
					errs <- s.Audit(ctx, &store.AuditEvent{Tenant: f.tenant.ID, Body: map[string]any{"event": "test", "g": g, "i": i}})
				}
				// Racing approvals: exactly one commits, and only it is recorded.
				err := s.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
					if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); err != nil {
						return nil, err
					}
					return &store.AuditEvent{Tenant: f.tenant.ID, Body: map[string]any{"event": "run.approve"}}, nil
				})
				if err != nil && !errors.Is(err, store.ErrState) {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		k, _ := sign.Generate()
		var out bytes.Buffer
		approvals := 0
		head, err := s.AuditLog(ctx, func(r store.AuditRecord) error {
			if ev, _ := r.Record.Body.Get("event"); ev.Str() == "run.approve" {
				approvals++
			}
			out.Write(r.Record.Export(true, func(audit.Path, canon.Value) bool { return true }))
			out.WriteByte('\n')
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if head.Count != 12*8+1 || approvals != 1 {
			t.Fatalf("%d records, %d approvals; want %d and 1", head.Count, approvals, 12*8+1)
		}
		out.Write(head.Seal(k))
		out.WriteByte('\n')
		if recs, err := audit.Verify(out.Bytes(), k.Public()); err != nil || len(recs) != int(head.Count) {
			t.Fatalf("verify: %d records, %v", len(recs), err)
		}
	})
}
