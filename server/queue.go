package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/sandbox/reaper"
	"github.com/cordon-dev/cordon/store"
)

// runArgs is the one job kind: execute a run by id. The job carries no
// configuration; the executor reads the run's snapshot from the store.
// Boot names the process that enqueued it: jobs are unique by run within
// a process's lifetime, and a restarted server enqueues its queued runs
// anew even when a job of its killed predecessor is stuck "running" in
// the queue (that orphan, once rescued, finds its run claimed or ended
// and does nothing: only store.Start's conditional claim executes a run).
type runArgs struct {
	Run  string `json:"run"`
	Boot string `json:"boot"`
}

func (runArgs) Kind() string { return "cordon.run" }

// jobClient is what the queue needs of a River client, whichever driver.
type jobClient interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

type queue struct {
	boot   string // this process's id in the jobs it enqueues
	s      *Server
	client jobClient
	pool   *pgxpool.Pool // PostgreSQL only
	stopc  chan struct{} // closed by stop: ends the re-enqueue sweep
	done   chan struct{} // closed when the sweep has ended
}

// sweepEvery is how often queued runs are enqueued again, in case an
// approval recorded the run but its enqueue failed.
const sweepEvery = 30 * time.Second

// jobTimeout is how long one execution may take before the queue
// cancels it: the operator's maximum plus a margin for sealing.
func (s *Server) jobTimeout() time.Duration {
	return s.cfg.MaxWall + min(30*time.Second, s.cfg.MaxWall)
}

// newQueue opens the River queue on the store's database (SQLite or
// PostgreSQL: one path), migrates River's tables, recovers what an
// earlier process left, and starts working when Config.Execute.
func newQueue(ctx context.Context, s *Server) (*queue, error) {
	if s.cfg.RescueAfter <= s.jobTimeout() {
		return nil, fmt.Errorf("server: RescueAfter %s must exceed the job timeout %s (MaxWall plus a margin), or a rescued run could overlap its first attempt", s.cfg.RescueAfter, s.jobTimeout())
	}
	q := &queue{s: s, boot: store.NewID("boot_")}
	workers := river.NewWorkers()
	river.AddWorker(workers, &runWorker{s: s})
	rc := &river.Config{
		ID:                   s.cfg.WorkerID,
		Logger:               s.log.With(slog.String("component", "river")),
		JobTimeout:           s.jobTimeout(),
		RescueStuckJobsAfter: s.cfg.RescueAfter,
		MaxAttempts:          5,
		FetchCooldown:        5 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
	}
	if s.cfg.Execute {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.cfg.Workers}}
		rc.Workers = workers
	}
	var err error
	switch s.store.Engine() {
	case store.SQLite:
		drv := localSQLite{riversqlite.New(s.store.DB())}
		if err = migrateRiver(ctx, drv); err != nil {
			return nil, err
		}
		// No LISTEN/NOTIFY: an insert wakes the fetcher in process
		// (localSQLite), as does a worker's slot coming free, and a poll
		// backs them up. Every job is inserted by this process, so the
		// poll only bounds a wake-up lost; at 10 ms it cost an idle
		// server about 65 fetches a second, each a write query (about 2%
		// of the process's CPU under load; docs/server.md, "Figures").
		rc.PollOnly = true
		rc.FetchPollInterval = 500 * time.Millisecond
		rc.FetchCooldown = time.Millisecond
		q.client, err = river.NewClient(drv, rc)
	case store.Postgres:
		if q.pool, err = pgxpool.New(ctx, s.store.DSN()); err != nil {
			return nil, fmt.Errorf("server: queue: %w", err)
		}
		drv := riverpgxv5.New(q.pool)
		if err = migrateRiver(ctx, drv); err != nil {
			q.pool.Close()
			return nil, err
		}
		q.client, err = river.NewClient(drv, rc)
	default:
		return nil, fmt.Errorf("server: queue: engine %q", s.store.Engine())
	}
	if err != nil {
		q.close()
		return nil, fmt.Errorf("server: queue: %w", err)
	}
	if err := q.recover(ctx); err != nil {
		q.close()
		return nil, err
	}
	if s.cfg.Execute {
		if err := q.client.Start(ctx); err != nil {
			q.close()
			return nil, fmt.Errorf("server: queue: %w", err)
		}
	}
	q.stopc, q.done = make(chan struct{}), make(chan struct{})
	go q.sweep(context.WithoutCancel(ctx))
	return q, nil
}

// localSQLite is River's SQLite driver declared without a listener.
// The driver says it has one (it polls a notification table), and River
// then leaves waking the fetcher to that listener, which poll-only mode
// does not start: an approved run waited for the next fetch poll, 10 to
// 20 ms, most of the queue's overhead per run (docs/server.md,
// "Figures"). Without a listener River wakes its own fetcher when this
// process inserts a job, which is every insert in the embedded mode (one
// process per database: the state directory's lock).
type localSQLite struct{ *riversqlite.Driver }

func (localSQLite) SupportsListener() bool { return false }

// sweep enqueues every queued run again every sweepEvery (a no-op for a
// run whose job exists), until stop.
func (q *queue) sweep(ctx context.Context) {
	defer close(q.done)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-q.stopc:
			return
		case <-t.C:
		}
		runs, err := q.s.store.RunsIn(ctx, store.StateQueued)
		if err != nil {
			q.s.log.WarnContext(ctx, "re-enqueue sweep", slog.String("err", err.Error()))
			continue
		}
		for _, r := range runs {
			if err := q.enqueue(ctx, r.ID); err != nil {
				q.s.log.WarnContext(ctx, "re-enqueue sweep", slog.String("run", r.ID), slog.String("err", err.Error()))
			}
		}
	}
}

// migrateRiver brings River's own tables up to date.
func migrateRiver[TTx any](ctx context.Context, drv riverdriver.Driver[TTx]) error {
	m, err := rivermigrate.New(drv, nil)
	if err != nil {
		return fmt.Errorf("server: queue migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("server: queue migrations: %w", err)
	}
	return nil
}

func (q *queue) close() {
	if q.pool != nil {
		q.pool.Close()
	}
}

func (q *queue) stop(ctx context.Context) error {
	if q.stopc != nil {
		select {
		case <-q.stopc:
		default:
			close(q.stopc)
		}
		<-q.done
	}
	var err error
	if q.s.cfg.Execute {
		err = q.client.Stop(ctx)
	}
	q.close()
	return err
}

// enqueue queues a run's job; the job is unique by its arguments, so
// enqueueing a run twice in one process (the sweep, an approval whose
// response was lost) makes one job.
func (q *queue) enqueue(ctx context.Context, id string) error {
	_, err := q.client.Insert(ctx, runArgs{Run: id, Boot: q.boot}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}})
	return err
}

// recover handles what an earlier process left: in the embedded mode
// (SQLite, this process the only executor) a run left running was
// interrupted by the server's death, so it is failed with that reason at
// once; every executing process reaps what its predecessor's sandboxes
// left in its state directory; with PostgreSQL, other workers
// may be running runs, so River's rescuer finds a dead worker's job and
// the worker fails its run (runWorker.Work). Queued runs are enqueued
// again (a no-op for those whose job exists).
func (q *queue) recover(ctx context.Context) error {
	s := q.s
	if s.cfg.Execute && s.store.Engine() == store.SQLite {
		running, err := s.store.RunsIn(ctx, store.StateRunning)
		if err != nil {
			return fmt.Errorf("server: recovery: %w", err)
		}
		for _, r := range running {
			reason := fmt.Sprintf("the server stopped while attempt %d was executing; a run is never executed twice, submit it again", r.Attempts)
			if ok, err := s.interruptedAudited(ctx, r.ID, reason); err != nil {
				return fmt.Errorf("server: recovery: %w", err)
			} else if ok {
				s.log.WarnContext(ctx, "run interrupted by a restart", slog.String("run", r.ID))
				s.metrics.run("interrupted")
			}
		}
	}
	if s.cfg.Execute {
		// This process's sandbox state is its own (a worker's state
		// directory is per host and process): what a killed predecessor's
		// sandboxes left is reaped; a sweep removes only runs whose owner
		// is dead.
		sb := filepath.Join(s.cfg.StateDir, "sandbox")
		if err := os.MkdirAll(sb, 0o700); err != nil {
			return fmt.Errorf("server: sandbox state: %w", err)
		}
		if rep, err := reaper.Sweep(sb, reaper.Options{Wait: true}); err != nil {
			s.log.WarnContext(ctx, "reaping leftover sandboxes", slog.String("err", err.Error()))
		} else if len(rep.Removed) > 0 {
			s.log.InfoContext(ctx, "reaped leftover sandboxes", slog.Int("removed", len(rep.Removed)))
		}
	}
	queued, err := s.store.RunsIn(ctx, store.StateQueued)
	if err != nil {
		return fmt.Errorf("server: recovery: %w", err)
	}
	for _, r := range queued {
		if err := q.enqueue(ctx, r.ID); err != nil {
			return fmt.Errorf("server: recovery: enqueue %s: %w", r.ID, err)
		}
	}
	return nil
}

// runWorker executes one run per job.
type runWorker struct {
	river.WorkerDefaults[runArgs]
	s *Server
}

// Work claims the run (store.Start: only a queued run is claimed, once),
// executes it with a watcher that stops it when a cancel is recorded,
// and records the outcome under its attempt. A job that finds its run
// running under its own id is a rescued job whose worker died: the run is
// failed with the reason, never executed again; a job that finds its run
// claimed by another job does nothing.
func (w *runWorker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	s := w.s
	id := job.Args.Run
	attempt, ok, err := s.startAudited(ctx, id, job.ID)
	if err != nil {
		return err // the store did not answer: River retries
	}
	if !ok {
		run, err := s.store.RunByID(ctx, id)
		if err != nil {
			return err
		}
		// Running under this very job: an earlier attempt of this job
		// claimed it and died (the queue rescued the job). Running under
		// another job: that job is executing it; this one is a duplicate.
		if run.State == store.StateRunning && run.Job == job.ID {
			reason := fmt.Sprintf("attempt %d (worker %s) stopped without recording an outcome; the queue rescued its job; a run is never executed twice, submit it again", run.Attempts, run.Worker)
			if ok, err := s.interruptedAudited(ctx, id, reason); err != nil {
				return err
			} else if ok {
				s.metrics.run("interrupted")
			}
		}
		return nil
	}
	run, err := s.store.RunByID(ctx, id)
	if err != nil {
		return err
	}
	out := func() store.Outcome {
		if s.cfg.SpareProc {
			runProcs.begin() // procs.go
			defer runProcs.end()
		}
		return w.execute(ctx, run)
	}()
	rec := context.WithoutCancel(ctx)
	out = s.review(rec, out)
	if req, _ := s.store.CancelRequested(rec, id); req && out.State != store.StateFinished {
		out.State, out.Reason = store.StateCancelled, "cancelled while running; the sandbox was torn down"
	}
	if err := s.saveEvidence(rec, id); err != nil {
		// The run's outcome stands; its record stays on this host.
		s.log.ErrorContext(ctx, "storing the run's evidence", slog.String("run", id), slog.String("err", err.Error()))
		// The reason names the worker, not the path (the log has it):
		// tenants see reasons.
		s.log.ErrorContext(ctx, "the run's evidence stays on this worker", slog.String("run", id), slog.String("dir", s.runDir(id)))
		out.Reason = strings.TrimPrefix(out.Reason+"; ", "; ") + "its evidence could not be stored: it stays on worker " + s.cfg.WorkerID
	}
	recorded, err := s.finishAudited(rec, id, attempt, out)
	if err != nil {
		return err
	}
	if !recorded {
		// Another process ended the run meanwhile (a recovery that took
		// it for interrupted, a rescue): the record it wrote stands, and
		// this attempt's outcome is lost; say so.
		s.log.ErrorContext(ctx, "run outcome not recorded: the run was no longer running under this attempt", slog.String("run", id),
			slog.Int("attempt", attempt), slog.String("state", out.State), slog.String("reason", out.Reason))
		s.metrics.run("outcome_unrecorded")
		return nil
	}
	s.metrics.run(out.State)
	if run.StartedAt != nil {
		s.metrics.executed(out.State, time.Since(*run.StartedAt))
	}
	s.log.InfoContext(ctx, "run ended", slog.String("run", id), slog.String("state", out.State), slog.String("reason", out.Reason))
	return nil
}

// Timeout is the job's: the operator's maximum plus a margin.
func (w *runWorker) Timeout(*river.Job[runArgs]) time.Duration { return w.s.jobTimeout() }

func (w *runWorker) execute(ctx context.Context, run *store.Run) store.Outcome {
	s := w.s
	t, err := s.store.Tenant(ctx, run.TenantID)
	if err != nil {
		return store.Outcome{State: store.StateFailed, Reason: "the run's tenant could not be read"}
	}
	if err := checkSnapshot(run.Config, t.Ceiling, s.cfg.MaxWall); err != nil {
		return store.Outcome{State: store.StateFailed, Reason: "refused at execution: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MaxWall)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() { // stop the run when a cancel is recorded
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if req, err := s.store.CancelRequested(ctx, run.ID); err == nil && req {
					cancel()
					return
				}
			}
		}
	}()
	out := s.cfg.Executor.Execute(ctx, run)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && out.State != store.StateFinished {
		out.State = store.StateFailed
		out.Reason = fmt.Sprintf("stopped at the operator's maximum wall time of %s; %s", s.cfg.MaxWall, out.Reason)
	}
	return out
}

// saveEvidence stores the run's record (.cordon, as a gzipped tar under
// RUN/.cordon) and its journal in the database, so that the API serves
// them whichever host executed the run. A run that never started has no
// record, and nothing is stored.
func (s *Server) saveEvidence(ctx context.Context, id string) error {
	ws := filepath.Join(s.runDir(id), "ws")
	rec := filepath.Join(ws, runner.StateDir)
	if _, err := os.Lstat(rec); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var tb bytes.Buffer
	if err := writeTar(&tb, rec, id+"/"+runner.StateDir); err != nil {
		return err
	}
	j, err := os.ReadFile(filepath.Join(rec, runner.JournalFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return s.store.PutEvidence(ctx, id, tb.Bytes(), j)
}
