package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Review states.
const (
	ReviewOpen     = "review"   // waiting for approvers
	ReviewAccepted = "accepted" // enough distinct approvers accepted it
	ReviewDeclined = "declined" // an approver declined it
)

// Decisions on a run's change.
const (
	DecisionAccept  = "accept"
	DecisionDecline = "decline"
)

// ErrDecided is a second decision by the same user on one review.
var ErrDecided = errors.New("store: this user has already decided on this run's change")

// ErrNoReview is a decision on a run that has no open review: it has not
// finished, its executor reported no change, or it was decided already.
var ErrNoReview = errors.New("store: the run has no change waiting for review")

// NewReview is what a finished run's outcome carries for its change:
// the classification (a risk.Classification, as JSON), its tier and the
// number of distinct approvers it needs.
type NewReview struct {
	Tier           string
	Needed         int
	Classification []byte
}

// Review is a run's change under review, with every decision on it.
type Review struct {
	RunID          string          `json:"run"`
	Tier           string          `json:"tier"`
	Needed         int             `json:"needed"`
	State          string          `json:"state"`
	Classification json.RawMessage `json:"classification"`
	Decisions      []Decision      `json:"decisions"`
	CreatedAt      time.Time       `json:"created_at"`
	DecidedAt      *time.Time      `json:"decided_at,omitempty"`
}

// Decision is one approver's decision on a run's change.
type Decision struct {
	User     string    `json:"user"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// insertReview records a finished run's review, in the transaction that
// records the run's outcome.
func (s *Store) insertReview(ctx context.Context, tx *sql.Tx, runID string, r *NewReview) error {
	if r.Needed < 1 || r.Tier == "" || !json.Valid(r.Classification) {
		return fmt.Errorf("store: review of run %s: want a tier, at least one approver and a JSON classification", runID)
	}
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO run_reviews (run_id, classification, tier, needed, state, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		runID, r.Classification, r.Tier, r.Needed, ReviewOpen, s.now().UnixNano())
	if err != nil {
		return uniqueErr(err)
	}
	return nil
}

// Review returns a tenant's run's review; a run without one (or another
// tenant's run) is ErrNotFound.
func (s *Store) Review(ctx context.Context, tenantID, runID string) (*Review, error) {
	return s.review(ctx, s.r(ctx), tenantID, runID)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) review(ctx context.Context, db querier, tenantID, runID string) (*Review, error) {
	rv := Review{RunID: runID, Decisions: []Decision{}}
	var class []byte
	var created int64
	var decided sql.NullInt64
	err := db.QueryRowContext(ctx, s.q(`SELECT v.classification, v.tier, v.needed, v.state, v.created_at, v.decided_at
		FROM run_reviews v JOIN runs r ON r.id = v.run_id WHERE v.run_id = ? AND r.tenant_id = ?`), runID, tenantID).
		Scan(&class, &rv.Tier, &rv.Needed, &rv.State, &created, &decided)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: review of run %q: %w", runID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	rv.Classification = json.RawMessage(class)
	rv.CreatedAt = time.Unix(0, created).UTC()
	if decided.Valid {
		t := time.Unix(0, decided.Int64).UTC()
		rv.DecidedAt = &t
	}
	rows, err := db.QueryContext(ctx, s.q(`SELECT user_id, decision, reason, at FROM review_decisions WHERE run_id = ? ORDER BY at, user_id`), runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var d Decision
		var at int64
		if err := rows.Scan(&d.User, &d.Decision, &d.Reason, &at); err != nil {
			return nil, err
		}
		d.At = time.Unix(0, at).UTC()
		rv.Decisions = append(rv.Decisions, d)
	}
	return &rv, rows.Err()
}

// DecideReview records one approver's decision on a run's change and
// moves the review on, in one transaction: a decline closes it declined;
// an accept closes it accepted once the number of distinct accepting
// approvers reaches what its tier needs. The run's submitter and the
// author of its task may not decide (ErrSelfApproval, ErrAuthorApproval),
// each user decides once (ErrDecided), and only an open review takes
// decisions (ErrNoReview).
func (s *Store) DecideReview(ctx context.Context, tenantID, runID, userID, decision, reason string) (*Review, error) {
	if decision != DecisionAccept && decision != DecisionDecline {
		return nil, fmt.Errorf("store: decision %q: want %s or %s", decision, DecisionAccept, DecisionDecline)
	}
	if userID == "" {
		return nil, fmt.Errorf("store: review of run %s: %w", runID, ErrSelfApproval)
	}
	tx, own, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	if own {
		defer tx.Rollback()
	}
	lock := ""
	if s.engine == Postgres {
		lock = " FOR UPDATE OF v"
	}
	var state, submitter string
	var author sql.NullString
	var needed int
	err = tx.QueryRowContext(ctx, s.q(`SELECT v.state, v.needed, r.submitted_by, r.authored_by FROM run_reviews v JOIN runs r ON r.id = v.run_id
		WHERE v.run_id = ? AND r.tenant_id = ?`+lock), runID, tenantID).Scan(&state, &needed, &submitter, &author)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: review of run %q: %w", runID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case state != ReviewOpen:
		return nil, fmt.Errorf("store: review of run %s is %s: %w", runID, state, ErrNoReview)
	case submitter == userID:
		return nil, fmt.Errorf("store: review of run %s: %w", runID, ErrSelfApproval)
	case author.Valid && author.String == userID:
		return nil, fmt.Errorf("store: review of run %s: %w", runID, ErrAuthorApproval)
	}
	now := s.now().UnixNano()
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO review_decisions (run_id, user_id, decision, reason, at) VALUES (?, ?, ?, ?, ?)`),
		runID, userID, decision, reason, now); err != nil {
		if err := uniqueErr(err); errors.Is(err, ErrExists) {
			return nil, fmt.Errorf("store: review of run %s: %w", runID, ErrDecided)
		}
		return nil, err
	}
	next := ""
	if decision == DecisionDecline {
		next = ReviewDeclined
	} else {
		var accepts int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM review_decisions WHERE run_id = ? AND decision = ?`), runID, DecisionAccept).Scan(&accepts); err != nil {
			return nil, err
		}
		if accepts >= needed {
			next = ReviewAccepted
		}
	}
	if next != "" {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE run_reviews SET state = ?, decided_at = ? WHERE run_id = ? AND state = ?`), next, now, runID, ReviewOpen); err != nil {
			return nil, err
		}
	}
	rv, err := s.review(ctx, tx, tenantID, runID)
	if err != nil || !own {
		return rv, err
	}
	return rv, tx.Commit()
}

// Setting returns an operator setting's value; ErrNotFound when unset.
func (s *Store) Setting(ctx context.Context, name string) ([]byte, error) {
	var v []byte
	err := s.r(ctx).QueryRowContext(ctx, s.q(`SELECT value FROM settings WHERE name = ?`), name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: setting %q: %w", name, ErrNotFound)
	}
	return v, err
}

// PutSetting writes an operator setting, replacing its value.
func (s *Store) PutSetting(ctx context.Context, name string, value []byte) error {
	_, err := s.exec(ctx, `INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, name, value, s.now().UnixNano())
	return err
}
