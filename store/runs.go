package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cordon-dev/cordon/risk"
)

// Run is one run: a snapshot of the project task it runs (Config, fixed
// at submission, so that what an approver saw is what executes) and its
// approval and execution record.
type Run struct {
	ID          string     `json:"id"`
	TenantID    string     `json:"-"`
	ProjectID   string     `json:"project"`
	Task        string     `json:"task"`
	Config      []byte     `json:"-"`
	State       string     `json:"state"`
	SubmittedBy string     `json:"submitted_by"`
	AuthoredBy  string     `json:"authored_by,omitempty"` // who last wrote the project the snapshot was taken from
	CreatedAt   time.Time  `json:"created_at"`
	DecidedBy   string     `json:"decided_by,omitempty"` // who approved or rejected
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
	CancelledBy string     `json:"cancelled_by,omitempty"`
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Attempts    int        `json:"attempts"`
	Worker      string     `json:"worker,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	ExitCode    *int       `json:"exit_code,omitempty"`
	Tier        string     `json:"tier,omitempty"`
	Status      string     `json:"status,omitempty"` // the run record's status (finished, verified, …)
	Job         int64      `json:"-"`                // the queue job that claimed it (0: none)

	// SubmittedKey is the key the run was submitted with ("" for runs
	// from before it was recorded): once it is revoked, the run cannot be
	// approved.
	SubmittedKey string `json:"submitted_key,omitempty"`
}

// Terminal reports whether a state is final.
func Terminal(state string) bool {
	switch state {
	case StateFinished, StateFailed, StateCancelled, StateRejected:
		return true
	}
	return false
}

const runColumns = `id, tenant_id, project_id, task, config, state, submitted_by, created_at, decided_by, decided_at,
	cancelled_by, cancelled_at, started_at, finished_at, attempts, worker, reason, exit_code, tier, status, job, authored_by, submitted_key`

// runListColumns are runColumns without config: a list or a sweep never
// loads the task snapshots (up to the request body limit each), only the
// view or execution of one run does.
const runListColumns = `id, tenant_id, project_id, task, state, submitted_by, created_at, decided_by, decided_at,
	cancelled_by, cancelled_at, started_at, finished_at, attempts, worker, reason, exit_code, tier, status, job, authored_by, submitted_key`

func scanRun(row interface{ Scan(...any) error }) (*Run, error) { return scanRunCols(row, true) }

// scanRunCols scans runColumns (withConfig) or runListColumns.
func scanRunCols(row interface{ Scan(...any) error }, withConfig bool) (*Run, error) {
	var r Run
	var config string
	var created int64
	var decidedBy, cancelledBy, worker, reason, tier, status, author, skey sql.NullString
	var decided, cancelled, started, finished, exit, job sql.NullInt64
	dest := []any{&r.ID, &r.TenantID, &r.ProjectID, &r.Task, &config, &r.State, &r.SubmittedBy, &created, &decidedBy, &decided,
		&cancelledBy, &cancelled, &started, &finished, &r.Attempts, &worker, &reason, &exit, &tier, &status, &job, &author, &skey}
	if !withConfig {
		dest = append(dest[:4:4], dest[5:]...)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	t := func(v sql.NullInt64) *time.Time {
		if !v.Valid {
			return nil
		}
		x := time.Unix(0, v.Int64).UTC()
		return &x
	}
	if withConfig {
		r.Config = []byte(config)
	}
	r.CreatedAt = time.Unix(0, created).UTC()
	r.DecidedBy, r.DecidedAt, r.CancelledBy, r.CancelledAt = decidedBy.String, t(decided), cancelledBy.String, t(cancelled)
	r.StartedAt, r.FinishedAt, r.Worker, r.Reason, r.Tier, r.Status = t(started), t(finished), worker.String, reason.String, tier.String, status.String
	r.Job, r.AuthoredBy, r.SubmittedKey = job.Int64, author.String, skey.String
	if exit.Valid {
		e := int(exit.Int64)
		r.ExitCode = &e
	}
	return &r, nil
}

// CreateRun records a run of a project's task, pending approval: no
// other state can be created.
//
// author is who wrote the snapshot's content (the project's last
// writer; "" when unknown): they may not approve it.
func (s *Store) CreateRun(ctx context.Context, tenantID, projectID, task string, config []byte, submitter, author string) (*Run, error) {
	return s.CreateRunCapped(ctx, tenantID, projectID, task, config, submitter, "", author, 0)
}

// ErrPendingCap: the tenant has as many runs pending approval or queued
// as the cap allows.
var ErrPendingCap = errors.New("store: the tenant's runs pending approval or queued are at the cap")

// CreateRunCapped is CreateRun, recording the submitter's key
// (submitterKey: once it is revoked the run cannot be approved), refused
// with ErrPendingCap when the
// tenant already has maxPending runs pending approval or queued (0: no
// cap). The count and the insert are one transaction that holds the
// tenant's row (PostgreSQL: SELECT … FOR UPDATE; SQLite: an immediate
// transaction holds the write lock), so concurrent submissions of one
// tenant are counted one after another and the cap is exact.
func (s *Store) CreateRunCapped(ctx context.Context, tenantID, projectID, task string, config []byte, submitter, submitterKey, author string, maxPending int) (*Run, error) {
	r := &Run{ID: NewID("run_"), TenantID: tenantID, ProjectID: projectID, Task: task, Config: config, State: StatePending,
		SubmittedBy: submitter, SubmittedKey: submitterKey, AuthoredBy: author, CreatedAt: s.now().UTC()}
	tx, own, err := s.begin(ctx) // joins an audited transaction
	if err != nil {
		return nil, err
	}
	if own {
		defer tx.Rollback()
	}
	if maxPending > 0 {
		lock := ""
		if s.engine == Postgres {
			lock = " FOR UPDATE"
		}
		var one int
		err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM tenants WHERE id = ?`+lock), tenantID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("store: tenant %q: %w", tenantID, ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM runs WHERE tenant_id = ? AND state IN (?, ?)`), tenantID, StatePending, StateQueued).Scan(&n); err != nil {
			return nil, err
		}
		if n >= maxPending {
			return nil, fmt.Errorf("%w: %d of %d", ErrPendingCap, n, maxPending)
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO runs (id, tenant_id, project_id, task, config, state, submitted_by, created_at, authored_by, submitted_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		r.ID, tenantID, projectID, task, string(config), StatePending, submitter, r.CreatedAt.UnixNano(), nullable(author), nullable(submitterKey)); err != nil {
		return nil, uniqueErr(err)
	}
	if own {
		if err := tx.Commit(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Run returns a tenant's run; another tenant's is ErrNotFound.
func (s *Store) Run(ctx context.Context, tenantID, id string) (*Run, error) {
	hot, gen, all, fill, now := s.hotFor(ctx), uint64(0), uint64(0), false, time.Time{}
	if hot != nil {
		now = s.now()
		var r *Run
		if r, gen, all, fill = hot.run(id, now); r != nil {
			if r.TenantID != tenantID {
				return nil, fmt.Errorf("store: run %q: %w", id, ErrNotFound)
			}
			return r, nil
		}
	}
	r, err := scanRun(s.readRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ? AND tenant_id = ?`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: run %q: %w", id, ErrNotFound)
	}
	if err == nil && fill {
		hot.putRun(r, gen, all, now)
	}
	return r, err
}

// RunByID returns a run whatever its tenant: for the executor, which
// holds only the id a queued job names.
func (s *Store) RunByID(ctx context.Context, id string) (*Run, error) {
	r, err := scanRun(s.r(ctx).QueryRowContext(ctx, s.q(`SELECT `+runColumns+` FROM runs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: run %q: %w", id, ErrNotFound)
	}
	return r, err
}

// Runs lists a tenant's runs, newest first, at most limit, without
// their snapshots (Config is nil: Run loads one run's).
func (s *Store) Runs(ctx context.Context, tenantID string, limit int) ([]*Run, error) {
	return s.listRuns(ctx, true, `SELECT `+runListColumns+` FROM runs WHERE tenant_id = ? ORDER BY created_at DESC, id LIMIT ?`, tenantID, limit)
}

// RunsIn lists every run in a state, oldest first (recovery, the
// re-enqueue sweep), without their snapshots (Config is nil).
func (s *Store) RunsIn(ctx context.Context, state string) ([]*Run, error) {
	return s.listRuns(ctx, false, `SELECT `+runListColumns+` FROM runs WHERE state = ? ORDER BY created_at, id`, state)
}

// PendingRuns counts a tenant's runs not yet executing: pending approval
// or queued (the operator's cap on them, Config.MaxPending, bounds what
// one tenant can pile up).
func (s *Store) PendingRuns(ctx context.Context, tenantID string) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM runs WHERE tenant_id = ? AND state IN (?, ?)`), tenantID, StatePending, StateQueued).Scan(&n)
	return n, err
}

// listRuns runs a list query; a bounded one (a page, LIMIT) is a hot
// read (pointRead).
func (s *Store) listRuns(ctx context.Context, bounded bool, query string, args ...any) ([]*Run, error) {
	if tx := txFrom(ctx); tx != nil { // an audited transaction sees its own writes
		rows, err := tx.QueryContext(ctx, s.q(query), args...)
		if err != nil {
			return nil, err
		}
		return scanRuns(rows)
	}
	st, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	if err := s.rgate.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.rgate.release()
	qctx := ctx
	if bounded {
		qctx = s.pointRead(ctx)
	}
	rows, err := st.QueryContext(qctx, args...)
	if err != nil {
		return nil, err
	}
	return scanRuns(rows)
}

// scanRuns scans rows of runListColumns, and closes them.
func scanRuns(rows *sql.Rows) ([]*Run, error) {
	defer rows.Close()
	out := []*Run{}
	for rows.Next() {
		r, err := scanRunCols(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// transition is the one conditional UPDATE every state change goes
// through; it reports ErrState, with the run's current state, when the
// run is not in from.
func (s *Store) transition(ctx context.Context, tenantID, id string, set string, args []any, cond string, condArgs []any, from ...string) error {
	where := ` WHERE id = ? AND tenant_id = ?` + cond + ` AND state IN (`
	for i := range from {
		if i > 0 {
			where += ", "
		}
		where += "?"
	}
	where += ")"
	all := append(append(append(args, id, tenantID), condArgs...), anys(from)...)
	defer s.writing(ctx, false, id)()
	n, err := s.exec(ctx, `UPDATE runs SET `+set+where, all...)
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	r, err := s.Run(ctx, tenantID, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("store: run %s is %s: %w", id, r.State, ErrState)
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Approve moves a pending run to queued. The approver must not be the
// submitter (gate independence); a run approved or decided already is
// ErrState, so a replayed approval changes nothing.
func (s *Store) Approve(ctx context.Context, tenantID, id, approver string) error {
	return s.decide(ctx, tenantID, id, approver, StateQueued)
}

// Reject moves a pending run to rejected, under the same rules as Approve.
func (s *Store) Reject(ctx context.Context, tenantID, id, approver string) error {
	return s.decide(ctx, tenantID, id, approver, StateRejected)
}

func (s *Store) decide(ctx context.Context, tenantID, id, approver, to string) error {
	r, err := s.Run(ctx, tenantID, id)
	if err != nil {
		return err
	}
	if r.SubmittedBy == approver {
		return fmt.Errorf("store: run %s: %w", id, ErrSelfApproval)
	}
	if to == StateQueued && r.AuthoredBy == approver {
		return fmt.Errorf("store: run %s: %w", id, ErrAuthorApproval)
	}
	if to == StateQueued && r.SubmittedKey != "" {
		if revoked, err := s.keyRevoked(ctx, r.SubmittedKey); err != nil {
			return err
		} else if revoked {
			return fmt.Errorf("store: run %s: %w", id, ErrSubmitterRevoked)
		}
	}
	now := s.now().UnixNano()
	set := `state = ?, decided_by = ?, decided_at = ?`
	args := []any{to, approver, now}
	if to == StateRejected {
		set += `, finished_at = ?`
		args = append(args, now)
	}
	// submitted_by <> ? again in the UPDATE: the check above and the
	// change are one condition.
	cond, condArgs := ` AND submitted_by <> ?`, []any{approver}
	if to == StateQueued {
		// The submitting key unrevoked, in the same condition: a revoke
		// that lands between the check above and the change still wins.
		cond += ` AND (authored_by IS NULL OR authored_by <> ?)
			AND (submitted_key IS NULL OR EXISTS (SELECT 1 FROM keys k WHERE k.id = runs.submitted_key AND k.revoked_at IS NULL))`
		condArgs = append(condArgs, approver)
	}
	err = s.transition(ctx, tenantID, id, set, args, cond, condArgs, StatePending)
	if errors.Is(err, ErrState) && to == StateQueued && r.SubmittedKey != "" {
		if revoked, kerr := s.keyRevoked(ctx, r.SubmittedKey); kerr == nil && revoked {
			return fmt.Errorf("store: run %s: %w", id, ErrSubmitterRevoked)
		}
	}
	return err
}

// ErrSubmitterRevoked: the key a run was submitted with has been
// revoked (or rotated out), so the run cannot be approved; it can still
// be rejected or cancelled.
var ErrSubmitterRevoked = errors.New("store: the key that submitted the run has been revoked")

// keyRevoked reports whether a key has been revoked (a missing key
// counts as revoked: keys are never deleted).
func (s *Store) keyRevoked(ctx context.Context, keyID string) (bool, error) {
	var revoked sql.NullInt64
	err := s.r(ctx).QueryRowContext(ctx, s.q(`SELECT revoked_at FROM keys WHERE id = ?`), keyID).Scan(&revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	return revoked.Valid, err
}

// Cancel cancels a run that has not ended. A pending or queued run is
// cancelled at once; a running run is marked, and its executor stops it
// and records the outcome (Running reports the mark).
func (s *Store) Cancel(ctx context.Context, tenantID, id, by string) (string, error) {
	now := s.now().UnixNano()
	err := s.transition(ctx, tenantID, id, `state = ?, cancelled_by = ?, cancelled_at = ?, finished_at = ?, reason = ?`,
		[]any{StateCancelled, by, now, now, "cancelled before it ran"}, "", nil, StatePending, StateQueued)
	if err == nil {
		return StateCancelled, nil
	}
	if !errors.Is(err, ErrState) {
		return "", err
	}
	// Only the first cancel is recorded: a second one of a running run
	// changes nothing (who and when stay the first canceller's).
	err = s.transition(ctx, tenantID, id, `cancelled_by = ?, cancelled_at = ?`, []any{by, now}, ` AND cancelled_by IS NULL`, nil, StateRunning)
	if errors.Is(err, ErrState) {
		if r, rerr := s.Run(ctx, tenantID, id); rerr == nil && r.State == StateRunning && r.CancelledBy != "" {
			return StateRunning, nil
		}
	}
	if err != nil {
		return "", err
	}
	return StateRunning, nil
}

// Start claims a queued run for execution by worker, under the queue's
// job: it becomes running with its attempt count raised. ok is false when
// the run is not queued (cancelled meanwhile, or claimed already): the
// caller must not execute it. attempt is the claim's number, which
// Finish must present.
func (s *Store) Start(ctx context.Context, id, worker string, job int64) (attempt int, ok bool, err error) {
	defer s.writing(ctx, false, id)()
	n, err := s.exec(ctx, `UPDATE runs SET state = ?, attempts = attempts + 1, worker = ?, started_at = ?, job = ? WHERE id = ? AND state = ?`,
		StateRunning, worker, s.now().UnixNano(), job, id, StateQueued)
	if err != nil || n == 0 {
		return 0, false, err
	}
	err = s.w(ctx).QueryRowContext(ctx, s.q(`SELECT attempts FROM runs WHERE id = ?`), id).Scan(&attempt)
	return attempt, err == nil, err
}

// Outcome is how an execution ended.
type Outcome struct {
	State    string // StateFinished, StateFailed or StateCancelled
	Reason   string
	ExitCode *int
	Tier     string
	Status   string
	// Change is what the executor reports the run changed: its declared
	// outputs that differ from its inputs (empty: none did). nil when
	// the executor reports nothing; the run then gets no review.
	Change []risk.File
	// Review, for a finished run whose executor reported its change, is
	// that change's review, recorded with the outcome. A finished run
	// without one has no result that can be accepted.
	Review *NewReview
}

// Finish records the outcome of the attempt that Start returned. It
// changes nothing (and reports false) when the run is no longer running
// under that attempt: an outcome is recorded once.
func (s *Store) Finish(ctx context.Context, id string, attempt int, o Outcome) (bool, error) {
	if !Terminal(o.State) || o.State == StateRejected {
		return false, fmt.Errorf("store: finish run %s: %q is not an outcome", id, o.State)
	}
	var exit any
	if o.ExitCode != nil {
		exit = *o.ExitCode
	}
	if o.Review != nil && o.State != StateFinished {
		return false, fmt.Errorf("store: finish run %s: only a finished run's change is reviewed", id)
	}
	// Told after the commit or the rollback (deferred calls run last
	// first), or at the end of the audited transaction this joins.
	defer s.writing(ctx, false, id)()
	tx, own, err := s.begin(ctx)
	if err != nil {
		return false, err
	}
	if own {
		defer tx.Rollback()
	}
	res, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET state = ?, reason = ?, exit_code = ?, tier = ?, status = ?, finished_at = ? WHERE id = ? AND state = ? AND attempts = ?`),
		o.State, o.Reason, exit, nullable(o.Tier), nullable(o.Status), s.now().UnixNano(), id, StateRunning, attempt)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, err
	}
	if o.Review != nil {
		if err := s.insertReview(ctx, tx, id, o.Review); err != nil {
			return false, err
		}
	}
	if !own {
		return true, nil
	}
	return true, tx.Commit()
}

// Interrupted fails a run left running by an attempt that did not
// finish (its worker or server died): the run is failed with the reason,
// never executed again, because its first attempt may have had effects.
func (s *Store) Interrupted(ctx context.Context, id, reason string) (bool, error) {
	defer s.writing(ctx, false, id)()
	n, err := s.exec(ctx, `UPDATE runs SET state = ?, reason = ?, finished_at = ? WHERE id = ? AND state = ?`,
		StateFailed, reason, s.now().UnixNano(), id, StateRunning)
	return n == 1, err
}

// CancelRequested reports whether a running run has been asked to stop.
func (s *Store) CancelRequested(ctx context.Context, id string) (bool, error) {
	var by sql.NullString
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT cancelled_by FROM runs WHERE id = ?`), id).Scan(&by)
	return by.Valid, err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// MaxEvidence caps a run's stored record and journal, each.
const MaxEvidence = 256 << 20

// PutEvidence stores a run's record (a gzipped tar) and journal, once.
func (s *Store) PutEvidence(ctx context.Context, runID string, record, journal []byte) error {
	if len(record) > MaxEvidence || len(journal) > MaxEvidence {
		return fmt.Errorf("store: evidence of run %s: over %d bytes", runID, MaxEvidence)
	}
	_, err := s.exec(ctx, `INSERT INTO run_evidence (run_id, record, journal, created_at) VALUES (?, ?, ?, ?)`,
		runID, record, journal, s.now().UnixNano())
	return err
}

// Evidence returns a tenant's run's stored record or journal ("record"
// or "journal"); another tenant's, or none stored, is ErrNotFound.
func (s *Store) Evidence(ctx context.Context, tenantID, runID, which string) ([]byte, error) {
	col := map[string]string{"record": "e.record", "journal": "e.journal"}[which]
	if col == "" {
		return nil, fmt.Errorf("store: evidence %q: want record or journal", which)
	}
	var b []byte
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT `+col+` FROM run_evidence e JOIN runs r ON r.id = e.run_id WHERE e.run_id = ? AND r.tenant_id = ?`), runID, tenantID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: evidence of run %q: %w", runID, ErrNotFound)
	}
	return b, err
}
