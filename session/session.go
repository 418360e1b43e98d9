// Package session is the one place a governed execution happens: plan
// (grants, the tier decision and its explanation, one Enforcer), execute
// (a command in the sandbox, its egress through the proxy, every decision
// and effect journalled as typed entries), and seal (the energy the run
// used, metered or estimated, in a receipt and an attestation). The agent
// runner, `cordon exec` and the demo all go through it; nothing else
// builds a receipt core or writes a command or egress entry.
//
//	s, err := session.Open(ctx, cfg)   // tier decision, meters started
//	out, err := s.Exec(ctx, cmd)       // decision → sandbox → command entry
//	sealed, err := s.Seal(key, in)     // meter entries, receipt, attestation
//
// The journal entries are specified in docs/SPEC.md §4.3.1.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// Errors a caller can tell apart with errors.Is.
var (
	// ErrNoTier wraps an Exec refused because the host cannot provide
	// the tier the grant set requires.
	ErrNoTier = errors.New("session: the host cannot provide the required tier")
	// ErrRefused wraps an Exec refused before the sandbox was asked: by
	// the Before hook, a missing tenant, limits, or a grant set the
	// session's does not cover.
	ErrRefused = errors.New("session: refused")
	// ErrSealed is returned by every call after Seal or Close.
	ErrSealed = errors.New("session: already sealed")
)

// Sandbox is what a session needs from package sandbox; tests replace it
// to simulate a host without the sandbox's facilities.
type Sandbox interface {
	Offers() []tier.Tier
	Probe(tier.Tier) error
	Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error)
}

// HostSandbox is the host's sandbox (package sandbox). Spawner, when
// not nil, starts each sandbox's init (sandbox.Spec.Spawner).
type HostSandbox struct {
	Spawner *sandbox.Spawner
}

func (HostSandbox) Offers() []tier.Tier     { return sandbox.Offers() }
func (HostSandbox) Probe(t tier.Tier) error { return sandbox.Probe(t) }
func (h HostSandbox) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	if h.Spawner != nil && s.Tier != tier.S4 {
		s.Spawner = h.Spawner
	}
	return sandbox.Run(ctx, s)
}

// Effect is what the Before hook is asked to allow.
type Effect struct {
	Kind string   // "exec"
	Argv []string // the command
	Tier tier.Tier
}

// BeforeFunc is called before each effect; an error refuses it, and the
// refusal is journalled. It is the seam for approval gates and credential
// injection.
type BeforeFunc func(ctx context.Context, e Effect) error

// EgressFunc observes each egress decision (`cordon exec` prints
// denials); it must return quickly.
type EgressFunc func(egress.Record)

// Config is one session.
type Config struct {
	// Grants is the session's grant set; every command runs under it or
	// under a grant set it covers (Command.Grants).
	Grants *grant.Set
	// Tenant names the tenant of a multi-tenant (S3) grant set.
	Tenant string
	// StateDir is the sandbox's state directory (sandbox.Spec.StateDir).
	StateDir string
	// Workspace is the host directory inputs come from and outputs go to.
	Workspace string
	// Recorder receives every entry; nil records nothing.
	Recorder *Recorder
	// Sandbox runs commands; nil is the host's.
	Sandbox Sandbox
	// Before, if not nil, is called before each effect.
	Before BeforeFunc
	// OnEgress, if not nil, observes each egress decision.
	OnEgress EgressFunc
	// Inject are credentials the egress proxy adds as headers to plain
	// HTTP requests for one host and port each (egress.Injection); the
	// sandbox never sees them, and each egress entry names the
	// injections it carried, never their values.
	Inject []egress.Injection
	// Repository, if not nil, confines plain HTTP to one repository's
	// host and port to git's smart HTTP for it, and pushes to one ref
	// (egress.Repository); each allowed push's commands are in its
	// egress entry ("pushed").
	Repository *egress.Repository
	// MaxEgress caps the egress decisions recorded per command
	// (egress.Config.MaxRecords); 0 means egress.DefaultMaxRecords.
	MaxEgress int64
	// Meters are the hardware meters, by device class; nil means
	// HostMeters(ctx, Powercap, the classes the grant set can use). Use
	// Meters{} for none.
	Meters Meters
	// Powercap is the powercap tree HostMeters reads ("" is
	// energy.DefaultPowercap).
	Powercap string
	// Version is cordon's version, for the attestation.
	Version string
}

// Session is one governed execution. Exec calls are serialized.
type Session struct {
	cfg      Config
	enforcer *grant.Enforcer
	sb       Sandbox
	plan     Plan
	rec      *Recorder
	meters   *metering
	opened   time.Time

	mu     sync.Mutex // serializes Exec and guards what follows
	sealed bool
	ran    bool
	tier   tier.Tier // the highest tier a command ran at, if ran
	cpuNS  int64
	outs   map[string]string
	energy *Energy // set by StopMeters
}

// Plan is the tier decision: the tier the grant set requires, whether
// this host provides it, and why not.
type Plan struct {
	Required tier.Tier
	Offers   []tier.Tier
	Err      error // nil when the host runs Required
}

// Open plans the session and starts its meters. It fails only on a bad
// Config; a host that cannot provide the tier is recorded in Plan and
// refuses each Exec, so that dry runs still work there.
func Open(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Grants == nil {
		return nil, errors.New("session: a grant set is required")
	}
	if cfg.MaxEgress < 0 {
		return nil, fmt.Errorf("session: MaxEgress %d is negative", cfg.MaxEgress)
	}
	s := &Session{cfg: cfg, enforcer: grant.New(cfg.Grants), sb: cfg.Sandbox, rec: cfg.Recorder,
		opened: time.Now(), outs: map[string]string{}}
	if s.sb == nil {
		s.sb = HostSandbox{}
	}
	s.plan = planFor(s.sb, cfg.Grants)
	meters := cfg.Meters
	var why map[string]string
	classes := classesOf(cfg.Grants)
	if meters == nil {
		meters, why = HostMeters(ctx, cfg.Powercap, classes)
	}
	m, err := startMeters(ctx, meters, why, classes)
	if err != nil {
		meters.Close()
		return nil, err
	}
	s.meters = m
	return s, nil
}

func planFor(sb Sandbox, gs *grant.Set) Plan {
	req := selection.Required(gs)
	if req == tier.S4 {
		sb.Probe(req) // S4 is offered only once its probe ran; it is costly, so only when needed
	}
	p := Plan{Required: req, Offers: sb.Offers()}
	if _, err := (selection.Host{Offers: p.Offers}).Select(gs); err != nil {
		if p.Required == tier.S2 || p.Required == tier.S3 || p.Required == tier.S4 {
			if perr := sb.Probe(p.Required); perr != nil {
				err = fmt.Errorf("%w (%w)", err, perr) // say which facility is missing
			}
		}
		p.Err = err
	}
	return p
}

// Plan returns the session's tier decision.
func (s *Session) Plan() Plan { return s.plan }

// Enforcer is the session's one Enforcer.
func (s *Session) Enforcer() *grant.Enforcer { return s.enforcer }

// Recorder is the session's journal (nil when none).
func (s *Session) Recorder() *Recorder { return s.rec }

// Decide decides q with the session's Enforcer and journals the decision.
func (s *Session) Decide(q grant.Query) (grant.Decision, error) {
	d := s.enforcer.Decide(q)
	if _, err := s.rec.Record(entry.Decision{Record: d.Record()}); err != nil {
		return d, err
	}
	return d, nil
}

// Command is one command to run.
type Command struct {
	Argv            []string
	Inputs, Outputs []string
	// OutputsOptional: see sandbox.Spec.OutputsOptional.
	OutputsOptional bool
	// Env holds values of environment variables the grant set names.
	Env map[string]string
	// Wall, if positive, shortens the grant set's wall-clock limit; a
	// longer one is refused.
	Wall time.Duration
	// Grants, if not nil, is a narrower grant set for this command
	// (a sub-task's); the session's must cover it.
	Grants *grant.Set
	// Stdin, Stdout and Stderr are the program's streams (nil: /dev/null).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Capture, if positive, keeps the first Capture bytes of stdout and
	// stderr in the Outcome, as well as writing them to Stdout and
	// Stderr when those are set, and journals their ContentIds.
	Capture int
	// Redact, if not nil, masks the captured streams as they are
	// written (a secret split across two writes is still caught), before
	// they are kept and before their ContentIds are journalled. A pool
	// that fails loud makes every write fail: check Err first.
	Redact *redact.Pool
	// Task, ID and Kind label the journal entries (the runner's).
	Task, ID, Kind string
	// Image, if not nil, is the command's runtime in place of the
	// host's: see sandbox.Spec.Image.
	Image *sandbox.ImageRuntime
	// Control, if not nil, can freeze and thaw the command while it
	// runs: see sandbox.Spec.Control.
	Control *sandbox.Control
	// EgressPolicy, if not nil, decides the command's egress in place of
	// an Enforcer of its grant set; the caller builds it from that grant
	// set and may tighten it while the command runs (an amendment, docs/SPEC.md
	// §3.7): connections it stops allowing close at once.
	EgressPolicy *egress.Policy
}

// Outcome is what one Exec did.
type Outcome struct {
	Result         *sandbox.Result
	Stdout, Stderr Captured // when Command.Capture > 0
	Egress         egress.Stats
	Entry          journal.Entry // the command entry
}

// Captured is the head of one stream and how many bytes followed it.
type Captured struct {
	Bytes   []byte
	Dropped int64
}

// Exec runs one command: the Before hook, the tier and limits, the
// sandbox (whose exec decision is journalled before the program starts),
// the egress proxy (each decision streamed to the journal as it is made,
// capped), then one command entry with the outcome — also when the
// command was refused or failed to start, so no decision dangles.
// The error is a *sandbox.ExitError when the program did not start;
// errors wrapping ErrRefused or ErrNoTier when the session refused it;
// otherwise a journal failure.
func (s *Session) Exec(ctx context.Context, c Command) (*Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return nil, ErrSealed
	}
	gs := s.cfg.Grants
	if c.Grants != nil {
		if err := grant.Covers(gs, c.Grants); err != nil {
			return nil, s.refuse(c, fmt.Errorf("%w: the command's grant set is wider than the session's: %w", ErrRefused, err))
		}
		gs = c.Grants
	}
	plan := s.plan
	if c.Grants != nil {
		plan = planFor(s.sb, gs)
	}
	if plan.Err != nil {
		return nil, s.refuse(c, fmt.Errorf("%w: %w", ErrNoTier, plan.Err))
	}
	t := plan.Required
	tenant := ""
	if t == tier.S3 {
		if s.cfg.Tenant == "" {
			return nil, s.refuse(c, fmt.Errorf("%w: an S3 run needs a tenant name: the grant set is multi-tenant", ErrRefused))
		}
		tenant = s.cfg.Tenant
	}
	limits, err := sandbox.LimitsFor(gs)
	if err != nil {
		return nil, s.refuse(c, fmt.Errorf("%w: the grant set: %w", ErrRefused, err))
	}
	if c.Wall < 0 || c.Wall > limits.Wall {
		return nil, s.refuse(c, fmt.Errorf("%w: a wall clock of %s is outside the granted %s", ErrRefused, c.Wall, limits.Wall))
	}
	if c.Wall > 0 {
		limits.Wall = c.Wall
	}
	// The decision and the command entry name argv and every output: a
	// command whose record could not be written is refused before it
	// runs, so nothing runs unrecorded.
	if n := recordSize(c); n > journal.MaxLine {
		big := c
		big.Argv = nil
		return nil, s.refuse(big, fmt.Errorf("%w: this command's record could reach %d bytes, more than a journal line takes (%d); its argv (%s) is not recorded",
			ErrRefused, n, journal.MaxLine, argvID(c.Argv)))
	}
	if s.cfg.Before != nil {
		if err := s.cfg.Before(ctx, Effect{Kind: "exec", Argv: c.Argv, Tier: t}); err != nil {
			return nil, s.refuse(c, fmt.Errorf("%w: %w", ErrRefused, err))
		}
	}
	spec := &sandbox.Spec{
		Argv: c.Argv, Grants: gs, Tier: t, Tenant: tenant, StateDir: s.cfg.StateDir, Workspace: s.cfg.Workspace,
		Inputs: c.Inputs, Outputs: c.Outputs, OutputsOptional: c.OutputsOptional, Env: c.Env, Limits: limits,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, Image: c.Image, Control: c.Control,
		Decided: func(d grant.Decision) error {
			_, err := s.rec.Record(entry.Decision{Record: d.Record()})
			return err
		},
		// Every bind, executable scratch and mask the fs grants make,
		// before the program starts; a failed write refuses the run.
		Mounted: func(ms []sandbox.Mount) error {
			for _, m := range ms {
				e := entry.Mount{Kind: m.Kind, Path: m.Path, Access: m.Access, Rule: m.Rule, Writable: m.Writable}
				e.Task = quote(&e.Quoted, "task", c.Task)
				e.ID = quote(&e.Quoted, "id", c.ID)
				if _, err := s.rec.Record(e); err != nil {
					return err
				}
			}
			return nil
		},
	}
	var stdout, stderr capped
	var masks []*redact.Writer
	if c.Capture > 0 {
		stdout.limit, stderr.limit = c.Capture, c.Capture
		var so, se io.Writer = &stdout, &stderr
		if c.Redact != nil {
			mo, me := c.Redact.NewWriter(&stdout), c.Redact.NewWriter(&stderr)
			masks, so, se = []*redact.Writer{mo, me}, mo, me
		}
		spec.Stdout, spec.Stderr = so, se
		if c.Stdout != nil {
			spec.Stdout = io.MultiWriter(so, c.Stdout)
		}
		if c.Stderr != nil {
			spec.Stderr = io.MultiWriter(se, c.Stderr)
		}
	}
	var (
		proxy   *egress.Proxy
		egMu    sync.Mutex
		egErr   error // the first egress entry that failed; guarded by egMu
		egStats egress.Stats
	)
	if len(gs.Egress) > 0 {
		cfg := egress.DefaultConfig(grant.New(gs))
		cfg.Policy = c.EgressPolicy
		if s.cfg.MaxEgress > 0 {
			cfg.MaxRecords = s.cfg.MaxEgress
		}
		cfg.Inject = s.cfg.Inject
		cfg.Repository = s.cfg.Repository
		cfg.Record = func(r egress.Record) {
			if s.cfg.OnEgress != nil {
				s.cfg.OnEgress(r)
			}
			err := s.rec.stream(egressEntry(c, r))
			egMu.Lock()
			if err != nil && egErr == nil {
				egErr = err
			}
			egMu.Unlock()
		}
		if proxy, err = egress.New(cfg); err != nil {
			return nil, s.refuse(c, fmt.Errorf("%w: egress proxy: %w", ErrRefused, err))
		}
		spec.Egress = proxy
	}
	res, runErr := s.sb.Run(ctx, spec)
	for _, m := range masks {
		m.Close() // what it held back, masked
	}
	if proxy != nil {
		proxy.Close() // returns once every connection is done: every decision is streamed
		egStats = proxy.Stats()
	}
	egMu.Lock()
	failed := egErr
	egMu.Unlock()
	if failed != nil {
		// A decision is missing from the record. The command still gets
		// its entry, with what it did and why its record is incomplete,
		// and its outcome is not vouched for: the caller gets an error.
		failed = fmt.Errorf("session: egress decisions were not all recorded: %w", failed)
		body := commandEntry(c, gs, res, failed, egStats)
		if err := s.splitOutputs(c, &body); err != nil {
			return nil, fmt.Errorf("%w; and the command's outputs: %w", failed, err)
		}
		if _, err := s.rec.Record(body); err != nil {
			return nil, fmt.Errorf("%w; and the command entry: %w", failed, err)
		}
		return nil, failed
	}
	if runErr != nil {
		if ctx.Err() != nil && !errors.Is(runErr, ctx.Err()) {
			runErr = fmt.Errorf("%w (%w)", runErr, ctx.Err())
		}
		if ctx.Err() != nil {
			runErr = fmt.Errorf("interrupted: the run was killed before its outcome was read: %w", runErr)
		}
		if _, err := s.rec.Record(commandEntry(c, gs, nil, runErr, egStats)); err != nil {
			return nil, err
		}
		return nil, runErr
	}
	s.ran = true
	s.tier = max(s.tier, res.Tier)
	s.cpuNS += res.CPUNanos
	for p, id := range outputs(res) {
		s.outs[p] = id
	}
	body := commandEntry(c, gs, res, nil, egStats)
	if c.Capture > 0 {
		body.Stdout = canon.Sum(stdout.buf).String()
		body.Stderr = canon.Sum(stderr.buf).String()
	}
	if err := s.splitOutputs(c, &body); err != nil {
		return nil, err
	}
	e, err := s.rec.Record(body)
	if err != nil {
		return nil, err
	}
	return &Outcome{Result: res, Egress: egStats, Entry: e,
		Stdout: Captured{stdout.buf, stdout.dropped}, Stderr: Captured{stderr.buf, stderr.dropped}}, nil
}

// refuse journals a command refused before the sandbox was asked and
// returns err (or the journal's failure).
func (s *Session) refuse(c Command, err error) error {
	if _, jerr := s.rec.Record(commandEntry(c, s.cfg.Grants, nil, err, egress.Stats{})); jerr != nil {
		return jerr
	}
	return err
}

func commandEntry(c Command, gs *grant.Set, res *sandbox.Result, err error, eg egress.Stats) entry.Command {
	body := entry.Command{Argv: make([]string, len(c.Argv)), Grants: gs.ID().String(),
		EgressDropped: eg.Dropped, Outputs: map[string]string{}}
	if c.Image != nil {
		body.Image = &entry.Image{Manifest: c.Image.Manifest, Config: c.Image.Config}
	}
	body.Task = quote(&body.Quoted, "task", c.Task)
	body.ID = quote(&body.Quoted, "id", c.ID)
	body.Kind = quote(&body.Quoted, "kind", c.Kind)
	for i, a := range c.Argv {
		var quoted bool
		if body.Argv[i], quoted = entry.Text(a); quoted {
			body.Quoted = append(body.Quoted, fmt.Sprintf("argv[%d]", i))
		}
	}
	if err != nil {
		body.Error = quote(&body.Quoted, "error", clip(oneLine(err.Error()), maxText))
	}
	if res == nil {
		return body
	}
	exit := res.ExitCode
	body.Tier, body.Exit, body.Signal, body.TimedOut, body.OOMKills = res.Tier.String(), &exit, res.Signal, res.TimedOut, res.OOMKills
	body.Program = &entry.Program{Path: quote(&body.Quoted, "program.path", res.Program.Path), B3: res.Program.B3.String()}
	body.CPUNS, body.WallUS, body.PeakMemoryBytes = res.CPUNanos, res.Wall().Microseconds(), res.PeakMemoryBytes
	for p, id := range outputs(res) {
		body.Outputs[p] = id
	}
	if res.OutputsErr != nil {
		body.OutputsError = quote(&body.Quoted, "outputs_error", clip(oneLine(res.OutputsErr.Error()), maxText))
	}
	return body
}

// maxText bounds an error text in an entry.
const maxText = 4096

// outputs is what came back, path → ContentId. The paths of files inside
// a declared directory are the program's choice: one that is not plain
// text is written as entry.PathText quotes it (the declared paths
// themselves are refused unless plain, by stage.CheckPath).
func outputs(res *sandbox.Result) map[string]string {
	m := make(map[string]string, len(res.Outputs))
	for _, f := range res.Outputs {
		p, _ := entry.PathText(f.Path)
		m[p] = f.ID.String()
	}
	return m
}

// quote is entry.Text(s), naming member in quoted when it was quoted.
func quote(quoted *[]string, member, s string) string {
	t, q := entry.Text(s)
	if q {
		*quoted = append(*quoted, member)
	}
	return t
}

func egressEntry(c Command, r egress.Record) entry.Egress {
	e := entry.Egress{Port: r.Port, Allow: r.Allow, Status: r.Status,
		BytesUp: r.BytesUp, BytesDown: r.BytesDown, StartUS: r.Start.UnixMicro(), DurationUS: r.Duration.Microseconds()}
	e.Task = quote(&e.Quoted, "task", c.Task)
	e.ID = quote(&e.Quoted, "id", c.ID)
	// Method, host and the texts come from the program's request, or
	// name it: quoted when they are not plain text, never dropped.
	e.Method = quote(&e.Quoted, "method", r.Method)
	e.Host = quote(&e.Quoted, "host", r.Host)
	e.Rule = quote(&e.Quoted, "rule", r.Rule)
	e.Reason = quote(&e.Quoted, "reason", clip(r.Reason, 1024))
	e.Error = quote(&e.Quoted, "error", clip(r.Error, 1024))
	e.Injected = quote(&e.Quoted, "injected", r.Injected)
	e.Pushed = r.Pushed // plain text: the proxy forwards only plain ref names and hex ids
	if r.Addr.IsValid() {
		e.Addr = r.Addr.String()
	}
	return e
}

// maxOutputsPart bounds the outputs of one outputs entry, in bytes of
// their JSON, well under a journal line.
const maxOutputsPart = 256 << 10

// splitOutputs moves a command's outputs into outputs entries, streamed
// before its command entry, when they would make that entry longer than
// a journal line takes (a declared directory can bring back thousands of
// files): the command entry then names their number and the ContentId of
// the whole map. Every output is recorded; none is dropped.
func (s *Session) splitOutputs(c Command, body *entry.Command) error {
	v, err := entry.Encode(*body)
	if err != nil {
		return err
	}
	if len(v.AppendJCS(nil)) <= journal.MaxLine/2 {
		return nil
	}
	all, err := json.Marshal(body.Outputs)
	if err != nil {
		return err
	}
	j, err := canon.JCS(all)
	if err != nil {
		return err
	}
	paths := slices.Sorted(maps.Keys(body.Outputs))
	part, size := entry.Outputs{Task: body.Task, ID: body.ID, Outputs: map[string]string{}}, 0
	for _, p := range paths {
		n := len(p) + len(body.Outputs[p]) + 16
		if size > 0 && size+n > maxOutputsPart {
			if err := s.rec.stream(part); err != nil {
				return err
			}
			part = entry.Outputs{Task: body.Task, ID: body.ID, Part: part.Part + 1, Outputs: map[string]string{}}
			size = 0
		}
		part.Outputs[p] = body.Outputs[p]
		size += n
	}
	if err := s.rec.stream(part); err != nil {
		return err
	}
	body.OutputsID, body.OutputsParts, body.Outputs = canon.Sum(j).String(), part.Part+1, map[string]string{}
	return nil
}

// recordSize bounds the bytes of the larger of the command's two
// entries, its decision and its command entry: argv as they write it
// (entry.Text's form, JSON-escaped, which the canonical form never
// exceeds), its outputs with their ContentIds, and room for every other
// member.
func recordSize(c Command) int {
	n := 16384 // the program's path, a clipped error text (maxText), every other member
	for _, a := range c.Argv {
		t, _ := entry.Text(a)
		b, _ := json.Marshal(t)
		n += len(b) + 16
	}
	for _, o := range c.Outputs {
		b, _ := json.Marshal(o)
		n += len(b) + 64
	}
	return n
}

// argvID names an argv too large to record by the ContentId of its JSON.
func argvID(argv []string) string {
	b, _ := json.Marshal(argv)
	return canon.Sum(b).String()
}

// Ran reports whether a command ran, and the highest tier one ran at.
func (s *Session) Ran() (tier.Tier, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tier, s.ran
}

// CPU is the CPU time of every command run so far.
func (s *Session) CPU() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.cpuNS)
}

// Close stops the meters without sealing. It is safe after Seal.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed = true
	s.meters.close()
}

// capped keeps the first limit bytes written and counts the rest.
type capped struct {
	limit   int
	buf     []byte
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	n := min(len(p), c.limit-len(c.buf))
	c.buf = append(c.buf, p[:n]...)
	c.dropped += int64(len(p) - n)
	return len(p), nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return "linux " + strings.TrimSpace(string(b))
}
