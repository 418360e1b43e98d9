package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/session"
	"github.com/cordon-dev/cordon/store"
)

// Executor executes one claimed run and says how it ended. It must stop
// promptly when ctx ends (cancel, wall time, shutdown).
type Executor interface {
	Execute(ctx context.Context, run *store.Run) store.Outcome
}

// RunnerExecutor runs a run's task with the agent runner (package
// agent/runner) in the sandbox, in a new workspace under
// StateDir/runs/ID/ws, signed with Key: the run record is the one
// `cordon run` writes and `cordon verify run` checks.
type RunnerExecutor struct {
	StateDir string
	Key      *sign.PrivateKey
	Version  string
	// Sandbox, when not nil, replaces the host's (tests).
	Sandbox runner.Sandbox
	// Spawner, when not nil and Sandbox is nil, starts the runs'
	// sandboxes (sandbox.Spawner): this process's fork is then never
	// paid per run.
	Spawner *sandbox.Spawner
	// Broker resolves the tenant's secrets a task names (delivery.go);
	// nil: a task that names secrets fails.
	Broker *broker.Broker
	// Audit, when not nil, records that a run resolves the secrets it
	// names (by reference, never by value) before any is resolved; an
	// error fails the run: no credential is resolved unrecorded. New sets
	// the server's audit log.
	Audit func(ctx context.Context, run *store.Run, refs []string) error
	// Redact, when not nil, returns the pool that masks the run's
	// journal and captured command output (New sets the server's).
	Redact func() *redact.Pool
}

func failed(format string, args ...any) store.Outcome {
	return store.Outcome{State: store.StateFailed, Reason: fmt.Sprintf(format, args...)}
}

// Execute writes the task's files into a new workspace and runs it.
func (e *RunnerExecutor) Execute(ctx context.Context, run *store.Run) store.Outcome {
	var tc TaskConfig
	if err := decodeStrict(run.Config, &tc); err != nil {
		return failed("the run's task snapshot does not decode: %v", err)
	}
	m, err := manifest.Parse(tc.Manifest)
	if err != nil {
		return failed("manifest: %v", err)
	}
	dir := filepath.Join(e.StateDir, "runs", run.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return failed("run directory: %v", err)
	}
	// The run's directory holds its workspace, outputs included, which
	// stays on the worker (CLAIMS.md, Known limitations): closed to every
	// other user, even where StateDir/runs was made wider before.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o700); err != nil {
			return failed("run directory: %v", err)
		}
	}
	ws := filepath.Join(dir, "ws")
	// Mkdir, not MkdirAll: a workspace that exists belongs to an earlier
	// attempt, and a run is never executed twice.
	if err := os.Mkdir(ws, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return failed("the run's workspace exists: an earlier attempt executed it; a run is never executed twice")
		}
		return failed("workspace: %v", err)
	}
	for p, c := range tc.Files {
		if err := checkPath(p); err != nil { // checked at every write; again here
			return failed("files: %q: %v", p, err)
		}
		full := filepath.Join(ws, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return failed("files: %v", err)
		}
		if err := os.WriteFile(full, []byte(c), 0o600); err != nil {
			return failed("files: %v", err)
		}
	}
	p, err := provider.NewReplayData(m.Replay, []byte(tc.Files[m.Replay]))
	if err != nil {
		return failed("replay script: %v", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return failed("log: %v", err)
	}
	defer logf.Close()
	// The tenant's secrets, resolved here, at execution, for the run's
	// tenant as the store recorded it; wiped when the run ends.
	if refs := tc.secretRefs(); len(refs) > 0 && e.Audit != nil {
		if err := e.Audit(ctx, run, refs); err != nil {
			fmt.Fprintf(logf, "recording the resolution of %q in the audit log: %v\n", refs, err)
			return failed("credentials: their resolution could not be recorded in the audit log, so none was resolved")
		}
	}
	deliv, err := resolveDelivery(ctx, e.Broker, run.TenantID, run.ID, tc, m, logf)
	if err != nil {
		return failed("credentials: %v", err)
	}
	defer deliv.Destroy()
	tenant := ""
	if m.Grants.MultiTenant {
		tenant = run.TenantID
	}
	var pool *redact.Pool
	if e.Redact != nil {
		pool = e.Redact()
	}
	sandboxState := filepath.Join(e.StateDir, "sandbox")
	if err := os.MkdirAll(sandboxState, 0o700); err != nil {
		return failed("sandbox state: %v", err)
	}
	sb := e.Sandbox
	if sb == nil && e.Spawner != nil {
		sb = session.HostSandbox{Spawner: e.Spawner}
	}
	out, err := runner.Run(ctx, runner.Config{
		Workspace: ws, Manifest: m, Provider: p, Apply: true, Key: e.Key, SandboxState: sandboxState, Tenant: tenant,
		Sandbox: sb, Memory: memory.Options{NoGit: true}, Log: logf, Version: e.Version,
		Env: deliv.Env, Inject: deliv.Inject, Repository: deliv.Repo, Redact: pool,
	})
	if err != nil {
		if ctx.Err() != nil {
			return store.Outcome{State: store.StateCancelled, Reason: "stopped: " + err.Error()}
		}
		return failed("%v", err)
	}
	o := store.Outcome{Status: out.Status, Tier: e.tier(ws)}
	switch out.Status {
	case runner.StatusFinished, runner.StatusVerified:
		change, err := runChange(ws, m, tc.Files)
		if err != nil {
			return store.Outcome{State: store.StateFailed, Reason: "the run's change cannot be reviewed: " + err.Error(), Status: out.Status, Tier: o.Tier}
		}
		o.State, o.Change = store.StateFinished, change
		zero := 0
		o.ExitCode = &zero
	case runner.StatusCancelled:
		o.State, o.Reason = store.StateCancelled, "stopped before it finished"
	default:
		o.State, o.Reason = store.StateFailed, "the run ended "+out.Status
		one := 1
		o.ExitCode = &one
	}
	return o
}

// tier is the containment tier the run's receipt records, "" without one.
func (e *RunnerExecutor) tier(ws string) string {
	b, err := os.ReadFile(filepath.Join(ws, runner.StateDir, runner.ReceiptFile))
	if err != nil {
		return ""
	}
	c, _, err := receipt.Verify(b, e.Key.Public())
	if err != nil {
		return ""
	}
	return c.Tier
}
