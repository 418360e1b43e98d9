// Package runner is cordon's agent runner: it drives a model through the
// tools an agent manifest grants, inside the sandbox, within budgets the
// model cannot raise, and leaves a record anyone can verify offline.
//
// The model sees the task and six tools (read, write, run, mailbox, spawn,
// finish) and answers with tool calls. Runner code decides every call
// before it has any effect:
//
//   - read returns a declared input (a file, or a directory listing)
//     and nothing else; write replaces exactly a declared output with a
//     regular file. Paths are checked by manifest.CheckPath (so the state
//     directory .cordon is never reachable) and resolved without following
//     any symbolic link.
//   - run takes an argv array. Shell metacharacters are refused; the
//     model's path for the program is discarded and its basename must be
//     one of the manifest's commands; git is gated by agent/gitgate; the
//     command runs in the sandbox under the manifest's grant set, with the
//     declared inputs staged in and only the declared outputs copied back,
//     and no environment from the runner.
//   - mailbox posts to the operator or reads the operator's replies
//     (agent/mailbox; `cordon mail` is the operator's side).
//   - spawn queues a sub-task under a child manifest that
//     manifest.Covers must accept, counted against max_pending_tasks;
//     queued sub-tasks run, one after another, when their parent finishes,
//     and everything they use is charged to every ancestor's budgets too.
//   - finish ends the task; with a verify command, the runner runs it and,
//     on failure, gives the model the output and loops, up to max_loops.
//
// Every budget is checked by runner code before each model call (turns,
// model calls with retries, input and output tokens, wall clock), a call's
// attempts are capped at the model calls left and its output tokens at the
// output tokens left, and token usage a provider does not report stops the
// run: a budget that cannot be enforced is not assumed.
//
// Without Config.Apply the run is a dry run: writes and commands are
// recorded as planned effects and not applied (later reads see the
// planned content). With Apply they happen; on a host without the
// sandbox, an applied run tool call is refused with the reason, never run
// unsandboxed.
//
// A run has its own agent key, generated at its start, and an issuer
// (Config.Issuer, or Key's public key). At every turn boundary the
// runner journals a checkpoint the agent key signs, and applies the
// issuer's amendments waiting in WORKSPACE/.cordon/amend/RUN/ (also while
// a command runs): an amendment only tightens the grant set and budgets,
// and from the next action on the runner acts under the new ones; egress
// it removes is cut at once (amend.go, docs/SPEC.md §3.7).
//
// Everything is journalled in WORKSPACE/.cordon/journal.jsonl (package
// evidence/journal), which is verified before the run appends, and, when
// a previous result exists, checked to still hold the head that result
// committed to. At the end WORKSPACE/.cordon/result.json commits to the
// manifest id, the journal head and count, and the result body; with a key
// the commitments are signed and a receipt and an attestation are sealed.
// Verify checks all of it offline.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/internal/flock"
	"github.com/cordon-dev/cordon/internal/nofollow"
	"github.com/cordon-dev/cordon/internal/printable"
	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/session"
)

// The record's names, from package evidence/runrecord.
const (
	StateDir        = runrecord.StateDir
	JournalFile     = runrecord.JournalFile
	ResultFile      = runrecord.ResultFile
	ManifestFile    = runrecord.ManifestFile
	ReceiptFile     = runrecord.ReceiptFile
	AttestationFile = runrecord.AttestationFile
	PubkeyFile      = runrecord.PubkeyFile
	lockFile        = "lock"
)

// The run record's types (package evidence/runrecord).
type (
	Body         = runrecord.Body
	WriteEffect  = runrecord.WriteEffect
	RunEffect    = runrecord.RunEffect
	TaskResult   = runrecord.TaskResult
	Verification = runrecord.Verification
	Result       = runrecord.Result
	Commitments  = runrecord.Commitments
	JournalHead  = runrecord.JournalHead
)

// Statuses of a run or task (evidence/runrecord).
const (
	StatusFinished        = runrecord.StatusFinished
	StatusVerified        = runrecord.StatusVerified
	StatusVerifyFailed    = runrecord.StatusVerifyFailed
	StatusBudgetExhausted = runrecord.StatusBudgetExhausted
	StatusModelError      = runrecord.StatusModelError
	StatusModelStopped    = runrecord.StatusModelStopped
	StatusCancelled       = runrecord.StatusCancelled
)

// Sandbox is what the runner needs from package sandbox; tests replace
// it to simulate a host without the sandbox's facilities.
type Sandbox = session.Sandbox

// Config is one run.
type Config struct {
	Workspace    string             // absolute path of the workspace
	Manifest     *manifest.Manifest // the run's manifest, fixed for the run
	Provider     provider.Provider  // the model
	Apply        bool               // apply writes and commands; false is a dry run
	Key          *sign.PrivateKey   // signs the result and seals a receipt and attestation; nil: unsigned
	SandboxState string             // the sandbox's state directory (sandbox.Spec.StateDir)
	Tenant       string             // the tenant commands run as when the grant set needs S3 (multi-tenant)
	Sandbox      Sandbox            // nil: the host's sandbox
	Memory       memory.Options     // the memory store's options
	Log          io.Writer          // one line per step for the operator; nil: none
	Version      string             // cordon's version, for the attestation
	Meters       session.Meters     // the hardware meters; nil: the host's (session.HostMeters)
	Powercap     string             // the powercap tree the host's RAPL meter reads ("": the default)
	// Env holds the operator's values of environment variables; a command
	// receives those its task's grant set names (grants env), no others.
	Env map[string]string
	// Inject are credentials the egress proxy adds as headers for one
	// host each (session.Config.Inject); the sandbox never sees them.
	Inject []egress.Injection
	// Repository, if not nil, confines the egress proxy's plain HTTP to
	// the task's repository to git's smart HTTP for it, and its pushes
	// to the run's review ref (session.Config.Repository).
	Repository *egress.Repository
	// Image, if not nil, is every command's runtime in place of the
	// host's (sandbox.Spec.Image); EnvID the environment manifest it
	// comes from, recorded in run.start.
	Image *sandbox.ImageRuntime
	EnvID canon.ID
	// Redact, if not nil, masks known credential shapes and the
	// operator's secret values in every journal entry, the operator's
	// log and captured command output (streamed: a secret split across
	// writes is caught). A pool that fails loud ends the run's record
	// rather than let text through unmasked, and refuses commands.
	Redact *redact.Pool
	// Issuer is the key of the run's issuer, who alone may amend the run
	// (docs/SPEC.md §3.7); nil means Key's public key, and with neither
	// the run has no issuer and refuses every amendment.
	Issuer *sign.PublicKey
	// Park lets the run park (park.go, docs/SPEC.md §9.4) when the model
	// waits for a mailbox reply that is not there, on a park request from
	// `cordon park`, or when its wall-clock allowance is spent. Without it
	// (a caller that cannot resume, such as the control plane) a wait
	// says there is no reply yet, a park request is ignored, and a spent
	// wall clock ends the run budget_exhausted.
	Park bool
	// Resume continues the run parked in the workspace instead of
	// starting one (and implies Park). Manifest must be the caller's own
	// copy of the run's manifest (never read from the workspace): its
	// ContentId must be the durable record's genesis manifest; EnvID,
	// Apply, Key, Issuer, Image, Tenant and which of the grant set's
	// variables Env sets must be the run's (docs/durable.md).
	Resume bool
}

// Outcome is what Run reports; Body is the result body committed in
// result.json.
type Outcome struct {
	Status string
	Body   *Body
	Head   journal.Head
	// Run and Reason: the run's id, and why it parked (Status
	// StatusParked).
	Run, Reason string
}

// Run runs the manifest's task in the workspace. It returns an error, and
// leaves the journal as it was, when the run cannot start (a bad
// workspace, a broken journal, an unsafe memory store); once the run has
// started, everything that happens is recorded and the Outcome says how
// it ended. An error after the start means the record itself could not be
// completed.
//
// Every error wraps exactly one of ErrLocked, ErrBrokenJournal,
// ErrCancelled, ErrRefused (the run did not start) and ErrRecord (it
// started, and its record could not be completed). A budget that runs
// out is not an error: the Outcome's Status is StatusBudgetExhausted, and
// a ctx that ends during the run gives StatusCancelled.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	r, err := start(ctx, cfg)
	if err != nil {
		return nil, startError(ctx, err)
	}
	defer r.close()
	out, err := r.run(ctx)
	if err != nil {
		return nil, mark(ErrRecord, err)
	}
	return out, nil
}

// run is the state of one run.
type run struct {
	cfg   Config
	ws    *workspace
	state string // WORKSPACE/.cordon
	lock  *os.File
	jw    *journal.Writer
	rec   *session.Recorder // the only writer of jw
	sess  *session.Session  // commands, egress, meters, the receipt
	logMu sync.Mutex        // serializes logf: egress denials are logged from the proxy's goroutines
	mem   *memory.Store
	log   io.Writer
	start time.Time

	since     int64             // the index of this run's run.start entry
	committed int64             // the journal count the previous result committed to, -1 if none
	planned   map[string][]byte // dry-run writes, by path: later reads see them
	body      Body
	outputs   map[string]string // every output a write or a command produced, by path
	// egressTask is the task whose command is running, for the egress log
	egressTask string
	auth       authority // the principals and the authority in force (amend.go)

	// Parking (park.go).
	segStart  time.Time       // this segment's start: the wall-clock allowance counts from it
	drec      *durable.Record // the run's durable record
	parked    *parked         // the parked run this one resumes, checked at start
	waitSeq   int64           // a mailbox wait with no reply: the post it waits on
	parkWhy   string          // why the root task parked
	responses int64           // model responses received (a replay resumes after them)
	receiptID canon.ID        // the sealed receipt's id
	// priorDevices: the device records of the run's earlier segments
	// (a resumed run), which its receipt sums with this segment's.
	priorDevices []receipt.Device
}

func start(ctx context.Context, cfg Config) (*run, error) {
	if err := ctx.Err(); err != nil {
		return nil, mark(ErrCancelled, fmt.Errorf("runner: %w", context.Cause(ctx)))
	}
	if cfg.Manifest == nil || cfg.Provider == nil {
		return nil, errors.New("runner: a manifest and a provider are required")
	}
	if !filepath.IsAbs(cfg.Workspace) {
		return nil, fmt.Errorf("runner: workspace %q is not an absolute path", cfg.Workspace)
	}
	if cfg.Apply && !filepath.IsAbs(cfg.SandboxState) {
		return nil, fmt.Errorf("runner: an applied run needs an absolute sandbox state directory, not %q", cfg.SandboxState)
	}
	ws, err := openWorkspace(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, ws: ws, log: cfg.Log, planned: map[string][]byte{}, outputs: map[string]string{}}
	if r.log == nil {
		r.log = io.Discard
	}
	ok := false
	defer func() {
		if !ok {
			r.close()
		}
	}()
	if r.state, err = stateDir(cfg.Workspace); err != nil {
		return nil, err
	}
	for _, f := range []string{lockFile, JournalFile, ResultFile, ManifestFile, ReceiptFile, AttestationFile, PubkeyFile} {
		if err := regularOrAbsent(filepath.Join(r.state, f)); err != nil {
			return nil, err
		}
	}
	if r.lock, err = os.OpenFile(filepath.Join(r.state, lockFile), os.O_RDWR|os.O_CREATE|flock.NoFollow|flock.NonBlock, 0o600); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if err := flock.TryLock(r.lock); errors.Is(err, flock.ErrHeld) {
		return nil, mark(ErrLocked, fmt.Errorf("runner: %s: another run holds the workspace lock; wait for it to end", r.lock.Name()))
	} else if err != nil {
		return nil, fmt.Errorf("runner: lock %s: %w", r.lock.Name(), err)
	}
	if cfg.Resume {
		if r.parked, err = r.loadParked(); err != nil {
			return nil, err
		}
	} else if err := checkNotParked(r.state); err != nil {
		return nil, err
	}
	if r.committed, err = checkPrevious(r.state, cfg.Key, cfg.Resume); err != nil {
		return nil, previousError(ctx, err)
	}
	if r.jw, err = journal.Open(filepath.Join(r.state, JournalFile)); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if r.mem, err = memory.Open(ctx, cfg.Workspace, cfg.Memory); err != nil {
		return nil, fmt.Errorf("runner: the memory store is unsafe, so the run is aborted: %w", err)
	}
	r.rec = session.NewRecorder(r.jw, r.filter)
	r.sess, err = session.Open(ctx, session.Config{
		Grants: cfg.Manifest.Grants, Tenant: cfg.Tenant, StateDir: cfg.SandboxState, Workspace: cfg.Workspace,
		Recorder: r.rec, Sandbox: cfg.Sandbox, Meters: cfg.Meters, Powercap: cfg.Powercap, Version: cfg.Version,
		Inject: cfg.Inject, Repository: cfg.Repository,
		OnEgress: func(rec egress.Record) {
			if !rec.Allow {
				r.logf("task %s: egress denied: %s", r.egressTask, oneLine(rec.String()))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	ok = true
	return r, nil
}

func (r *run) close() {
	if r.sess != nil {
		r.sess.Close()
	}
	if r.jw != nil {
		r.jw.Close()
	}
	if r.lock != nil {
		r.lock.Close()
	}
	r.ws.Close()
}

// stateDir returns WORKSPACE/.cordon, created 0700 if absent; it must be
// a real directory.
func stateDir(ws string) (string, error) {
	dir := filepath.Join(ws, StateDir)
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", fmt.Errorf("runner: %w", err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return "", fmt.Errorf("runner: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("runner: %s is %s, not a directory; remove it (cordon keeps its state there)", dir, nofollow.Describe(fi.Mode()))
	}
	return dir, nil
}

// checkPrevious refuses to run on top of a journal that no longer holds
// the head the previous result committed to, or a previous result whose
// signature does not verify under the run's key.
//
// It returns the journal count the previous result committed to (0 when
// there is none), so a run can record that entries after it belong to a
// run that never finished.
func checkPrevious(state string, key *sign.PrivateKey, resume bool) (int64, error) {
	b, err := nofollow.Read(filepath.Join(state, ResultFile), runrecord.MaxResultBytes)
	if errors.Is(err, os.ErrNotExist) {
		// Every finished run leaves a result. A signed run does not vouch
		// for a journal whose result is gone (deleted, or a run that
		// crashed): what it held cannot be checked any more.
		// A resumed run's journal is vouched for by its signed record head
		// and run.park (loadParked).
		if fi, jerr := os.Lstat(filepath.Join(state, JournalFile)); key != nil && !resume && jerr == nil && fi.Size() > 0 {
			return -1, fmt.Errorf("runner: %s has entries but there is no %s to check them against, so a signed run will not extend it; "+
				"check it with 'cordon verify journal' and move %s away to start a new record", JournalFile, ResultFile, state)
		}
		return 0, nil // without a result, any entries are from runs that did not finish
	}
	if err != nil {
		return -1, fmt.Errorf("runner: previous result: %w", err)
	}
	res, err := runrecord.ParseResult(b)
	if err != nil {
		return -1, fmt.Errorf("runner: previous result %s: %w; restore it or move the .cordon directory away", ResultFile, err)
	}
	if key != nil && res.Signature != nil {
		if err := res.CheckSignature(key.Public()); err != nil {
			return -1, fmt.Errorf("runner: previous result %s: %w", ResultFile, err)
		}
	}
	f, err := nofollow.Open(filepath.Join(state, JournalFile))
	if err != nil {
		return -1, fmt.Errorf("runner: previous result commits to a journal that cannot be read: %w", err)
	}
	defer f.Close()
	_, err = journal.VerifyAgainst(f, res.Commitments.Head())
	var je *journal.Error
	if errors.As(err, &je) && errors.Is(err, journal.ErrTorn) && je.Index >= res.Commitments.Journal.Count {
		// A line after what the result committed to: a later run
		// crashed mid-append. Repair removes just that line.
		return -1, fmt.Errorf("runner: %s: %w", JournalFile, err)
	}
	if err != nil {
		return -1, fmt.Errorf("runner: the journal no longer holds what the previous result committed to, so nothing is appended: %w", err)
	}
	return res.Commitments.Journal.Count, nil
}

// regularOrAbsent refuses anything but a regular file at name.
func regularOrAbsent(name string) error {
	fi, err := os.Lstat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("runner: %w", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("runner: %s is %s, not a regular file; remove it", name, nofollow.Describe(fi.Mode()))
	}
	return nil
}

// record appends one typed journal entry through the session's
// recorder, which passes it through filter. A failed append ends the
// run: nothing happens unrecorded.
func (r *run) record(b entry.Body) (journal.Entry, error) {
	e, err := r.rec.Record(b)
	if err != nil {
		return journal.Entry{}, fmt.Errorf("runner: %w", err)
	}
	return e, nil
}

// filter removes the provider's API key from a body. The JCS form
// escapes nothing a key is made of, so the key (and fragments of it a
// hostile provider split or cut) cannot hide from the redaction behind a
// JSON escape.
func (r *run) filter(v canon.Value) (canon.Value, error) {
	j := string(v.AppendJCS(nil))
	if r.redactKey(j) != j {
		var err error
		if v, err = canon.Parse([]byte(r.redactKey(j))); err != nil {
			return canon.Value{}, fmt.Errorf("after removing the API key: %w", err)
		}
		j = string(v.AppendJCS(nil))
	}
	if p := r.cfg.Redact; p != nil {
		m, err := p.String(j)
		if err != nil {
			return canon.Value{}, err
		}
		if m != j {
			// Something to mask: mask each string (and member name) of
			// the entry, so that a mask never cuts through JSON syntax.
			return maskValue(p, v)
		}
	}
	return v, nil
}

// maskValue masks every string and member name of v through p.
func maskValue(p *redact.Pool, v canon.Value) (canon.Value, error) {
	d := json.NewDecoder(strings.NewReader(string(v.AppendJCS(nil))))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return canon.Value{}, err
	}
	var walk func(any) (any, error)
	walk = func(x any) (any, error) {
		switch y := x.(type) {
		case string:
			return p.String(y)
		case []any:
			for i, e := range y {
				m, err := walk(e)
				if err != nil {
					return nil, err
				}
				y[i] = m
			}
		case map[string]any:
			out := make(map[string]any, len(y))
			for k, e := range y {
				mk, err := p.String(k)
				if err != nil {
					return nil, err
				}
				if out[mk], err = walk(e); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		return x, nil
	}
	m, err := walk(x)
	if err != nil {
		return canon.Value{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return canon.Value{}, err
	}
	return canon.Parse(b)
}

// logf writes one line for the operator. Model- and provider-chosen text
// reaches it (tool names, refusal reasons, argv), so control, C1 and
// format characters (terminal escapes, bidirectional overrides) are
// written escaped, never raw.
func (r *run) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintln(r.log, printable.String(r.redact(fmt.Sprintf(format, args...))))
}

// redact removes the provider's API key, and fragments of it, from s,
// when the provider can say what its key is.
func (r *run) redact(s string) string {
	s = r.redactKey(s)
	if r.cfg.Redact != nil {
		m, err := r.cfg.Redact.String(s)
		if err != nil {
			return "[withheld: " + err.Error() + "]"
		}
		s = m
	}
	return s
}

// redactKey removes the provider's API key, and fragments of it.
func (r *run) redactKey(s string) string {
	if rd, ok := r.cfg.Provider.(interface{ Redact(string) string }); ok {
		return rd.Redact(s)
	}
	return s
}

func (r *run) run(ctx context.Context) (*Outcome, error) {
	m := r.cfg.Manifest
	r.segStart = time.Now()
	var root *task
	if r.parked != nil {
		var err error
		if root, err = r.resume(r.parked); err != nil {
			return nil, err
		}
		defer r.endAuthority()
	} else {
		r.start = r.segStart
		r.body = Body{
			Type: runrecord.BodyType, Apply: r.cfg.Apply, Provider: r.cfg.Provider.Name(), Model: m.Model,
			Start: r.start.UTC().Format(time.RFC3339Nano), Writes: []WriteEffect{}, Runs: []RunEffect{}, Tasks: []TaskResult{},
			Memory: r.mem.Kind(),
		}
		if head := r.jw.Head(); head.Count > r.committed {
			// A run that started after the last result never finished (it
			// crashed or was killed): say so, so its entries are not taken
			// for this run's or left unexplained.
			if _, err := r.record(entry.RunUnfinished{From: r.committed, Entries: head.Count - r.committed}); err != nil {
				return nil, err
			}
			r.logf("journal: entries %d to %d belong to a run that did not finish", r.committed, head.Count-1)
		}
		r.since = r.jw.Head().Count
		start := entry.RunStart{
			Manifest: m.ID().String(), Apply: r.cfg.Apply, Provider: r.cfg.Provider.Name(), Model: m.Model,
			Grants: m.Grants.ID().String(), Memory: entry.Memory{Kind: r.mem.Kind(), Reason: r.mem.Reason()},
		}
		if !r.cfg.EnvID.IsZero() {
			start.Env = r.cfg.EnvID.String()
		}
		if r.cfg.Image != nil {
			start.Image = &entry.Image{Manifest: r.cfg.Image.Manifest, Config: r.cfg.Image.Config}
		}
		if _, err := r.record(start); err != nil {
			return nil, err
		}
		if err := r.startAuthority(false); err != nil {
			return nil, err
		}
		defer r.endAuthority()
		r.drec = durable.New()
		root = &task{id: "1", m: m, run: r}
	}
	// Each segment has the manifest's wall-clock allowance.
	root.deadline = r.segStart.Add(time.Duration(m.Budgets.WallMS) * time.Millisecond)
	mode := "dry run (writes and commands are planned, not applied)"
	if r.cfg.Apply {
		mode = "apply"
	}
	r.logf("run %s: %s, model %s/%s, memory %s", m.ID(), mode, r.cfg.Provider.Name(), m.Model, r.mem.Kind())
	if r.mem.Kind() != memory.KindGit {
		r.logf("memory: %s; using file-backed memory", r.mem.Reason())
	}
	status, err := r.runTask(ctx, root)
	if err != nil {
		return nil, err
	}
	if status == StatusParked {
		return r.park(root, r.parkWhy)
	}
	r.body.Status = status
	r.body.End = time.Now().UTC().Format(time.RFC3339Nano)
	if err := r.remember(ctx); err != nil {
		return nil, err
	}
	// The meter entries precede run.end, which the receipt binds to.
	energy, err := r.sess.StopMeters()
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	end, err := r.record(entry.RunEnd{Status: status, Body: r.body.ID().String()})
	if err != nil {
		return nil, err
	}
	if err := r.seal(end); err != nil {
		return nil, err
	}
	if err := r.closeRecord(energy); err != nil {
		return nil, err
	}
	// A park request that came too late (while sub-tasks ran) is void.
	if err := os.Remove(filepath.Join(r.state, ParkDir, r.auth.run)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.logf("run %s: %s (%d turns, %d model calls, %d+%d tokens); journal %d entries, head %s",
		m.ID(), status, r.body.Turns, r.body.ModelCalls, r.body.InputTokens, r.body.OutputTokens, r.jw.Head().Count, r.jw.Head().ID)
	return &Outcome{Status: status, Body: &r.body, Head: r.jw.Head(), Run: r.auth.run}, nil
}

// remember records the run in the memory store: one commit per run with
// git, files otherwise. A cancelled run is still remembered, as it is
// still recorded: the store's own timeout bounds git, not ctx's
// cancellation.
func (r *run) remember(ctx context.Context) error {
	b, err := json.Marshal(r.body)
	if err != nil {
		return err
	}
	v, err := canon.JCS(b)
	if err != nil {
		return err
	}
	name := "runs/" + strings.NewReplacer(":", "", ".", "").Replace(r.start.UTC().Format("20060102T150405.000000000Z")) + ".json"
	commit, err := r.mem.Write(context.WithoutCancel(ctx), map[string][]byte{name: v, "last.json": v},
		fmt.Sprintf("cordon run %s: %s", r.cfg.Manifest.ID(), r.body.Status))
	if err != nil {
		// The run has happened; a memory failure is recorded, not hidden.
		_, jerr := r.record(entry.Memory{Kind: r.mem.Kind(), Error: oneLine(err.Error())})
		r.logf("memory: not stored: %v", err)
		return jerr
	}
	_, err = r.record(entry.Memory{Kind: r.mem.Kind(), File: name, Commit: commit, Reason: r.mem.Reason()})
	return err
}

// previousSummary is the last run's summary from memory, for the prompt.
func (r *run) previousSummary() string {
	b, err := r.mem.Read("last.json")
	if err != nil {
		return ""
	}
	var last struct {
		Status  string `json:"status"`
		Summary string `json:"summary"`
		End     string `json:"end"`
	}
	if json.Unmarshal(b, &last) != nil || last.Status == "" {
		return ""
	}
	return fmt.Sprintf("The previous run (ended %s) ended %s: %s", last.End, last.Status, clip(last.Summary, 2000))
}

func oneLine(s string) string {
	return clip(strings.Join(strings.Fields(s), " "), 500)
}

// clip keeps at most n bytes of s, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
