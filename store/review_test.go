package store_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/cordon-dev/cordon/store"
)

// finished creates a run and records it finished, with a review that
// needs `needed` approvers (none when needed is 0).
func finished(t *testing.T, s *store.Store, f fixture, needed int) string {
	t.Helper()
	ctx := t.Context()
	r, err := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID); err != nil {
		t.Fatal(err)
	}
	attempt, ok, err := s.Start(ctx, r.ID, "w", 1)
	if !ok || err != nil {
		t.Fatalf("start: %v %v", ok, err)
	}
	o := store.Outcome{State: store.StateFinished}
	if needed > 0 {
		o.Review = &store.NewReview{Tier: "high", Needed: needed, Classification: []byte(`{"tier":"high"}`)}
	}
	if ok, err := s.Finish(ctx, r.ID, attempt, o); !ok || err != nil {
		t.Fatalf("finish: %v %v", ok, err)
	}
	return r.ID
}

func approvers(t *testing.T, s *store.Store, f fixture, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		u, err := s.CreateUser(t.Context(), f.tenant.ID, "appr"+string(rune('a'+i)), store.RoleApprover)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	return ids
}

// TestReviewNeedsDistinctApprovers: a change that needs two approvers is
// not accepted by one, nor by one twice, nor by the submitter; a review
// is recorded only with a finished outcome and only once.
func TestReviewNeedsDistinctApprovers(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "acme")
		id := finished(t, s, f, 2)
		rv, err := s.Review(ctx, f.tenant.ID, id)
		if err != nil || rv.State != store.ReviewOpen || rv.Needed != 2 || rv.Tier != "high" || string(rv.Classification) != `{"tier":"high"}` {
			t.Fatalf("review %+v %v", rv, err)
		}
		if _, err := s.DecideReview(ctx, f.tenant.ID, id, f.member.ID, store.DecisionAccept, ""); !errors.Is(err, store.ErrSelfApproval) {
			t.Fatalf("the submitter accepted: %v", err)
		}
		a := approvers(t, s, f, 2)
		if rv, err = s.DecideReview(ctx, f.tenant.ID, id, a[0], store.DecisionAccept, "ok"); err != nil || rv.State != store.ReviewOpen {
			t.Fatalf("one of two: %+v %v", rv, err)
		}
		if _, err := s.DecideReview(ctx, f.tenant.ID, id, a[0], store.DecisionAccept, "again"); !errors.Is(err, store.ErrDecided) {
			t.Fatalf("the same approver twice: %v", err)
		}
		if rv, _ := s.Review(ctx, f.tenant.ID, id); rv.State != store.ReviewOpen || len(rv.Decisions) != 1 {
			t.Fatalf("after a repeated accept: %+v", rv)
		}
		if rv, err = s.DecideReview(ctx, f.tenant.ID, id, a[1], store.DecisionAccept, "ok"); err != nil || rv.State != store.ReviewAccepted || rv.DecidedAt == nil {
			t.Fatalf("two of two: %+v %v", rv, err)
		}
		if _, err := s.DecideReview(ctx, f.tenant.ID, id, f.approver.ID, store.DecisionDecline, "late"); !errors.Is(err, store.ErrNoReview) {
			t.Fatalf("a decision after acceptance: %v", err)
		}
		// Another tenant sees no review.
		g := setup(t, s, "other")
		if _, err := s.Review(ctx, g.tenant.ID, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another tenant's review: %v", err)
		}
		if _, err := s.DecideReview(ctx, g.tenant.ID, id, g.approver.ID, store.DecisionAccept, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another tenant's approver: %v", err)
		}
		// A finished run without a reported change has no review.
		none := finished(t, s, f, 0)
		if _, err := s.DecideReview(ctx, f.tenant.ID, none, f.approver.ID, store.DecisionAccept, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("accepting a run with no review: %v", err)
		}
		// A decline closes it at once.
		d := finished(t, s, f, 3)
		if rv, err := s.DecideReview(ctx, f.tenant.ID, d, a[0], store.DecisionDecline, "no"); err != nil || rv.State != store.ReviewDeclined {
			t.Fatalf("decline: %+v %v", rv, err)
		}
		if _, err := s.DecideReview(ctx, f.tenant.ID, d, a[1], store.DecisionAccept, ""); !errors.Is(err, store.ErrNoReview) {
			t.Fatalf("accept after decline: %v", err)
		}
		// Only a finished outcome carries a review.
		r, _ := s.CreateRun(ctx, f.tenant.ID, f.project.ID, "t", []byte(`{}`), f.member.ID, "")
		s.Approve(ctx, f.tenant.ID, r.ID, f.approver.ID)
		att, _, _ := s.Start(ctx, r.ID, "w", 2)
		if _, err := s.Finish(ctx, r.ID, att, store.Outcome{State: store.StateFailed, Review: &store.NewReview{Tier: "low", Needed: 1, Classification: []byte(`{}`)}}); err == nil {
			t.Fatal("a failed run's review was recorded")
		}
		if got, _ := s.Run(ctx, f.tenant.ID, r.ID); got.State != store.StateRunning {
			t.Fatalf("a refused finish changed the run: %s", got.State)
		}
	})
}

// TestReviewConcurrentDecisions: approvers deciding at once on a change
// that needs K of them leave exactly one outcome: accepted with at least
// K accepts, or declined; never a decision lost or counted twice.
func TestReviewConcurrentDecisions(t *testing.T) {
	engines(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s, "acme")
		id := finished(t, s, f, 3)
		a := approvers(t, s, f, 8)
		var wg sync.WaitGroup
		errs := make([]error, len(a)*2)
		for i, u := range a {
			for j := range 2 { // each approver tries twice
				wg.Go(func() {
					_, errs[i*2+j] = s.DecideReview(ctx, f.tenant.ID, id, u, store.DecisionAccept, "")
				})
			}
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrDecided), errors.Is(err, store.ErrNoReview):
			default:
				t.Errorf("decision: %v", err)
			}
		}
		rv, err := s.Review(ctx, f.tenant.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if rv.State != store.ReviewAccepted || len(rv.Decisions) != ok || ok < 3 {
			t.Fatalf("state %s, %d decisions recorded, %d succeeded", rv.State, len(rv.Decisions), ok)
		}
		seen := map[string]bool{}
		for _, d := range rv.Decisions {
			if seen[d.User] {
				t.Fatalf("user %s counted twice", d.User)
			}
			seen[d.User] = true
		}
	})
}
