package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/agent/mailbox"
	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/energy"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant/amend"
	"github.com/cordon-dev/cordon/internal/nofollow"
	"github.com/cordon-dev/cordon/session"
)

// Parked runs (docs/SPEC.md §9.4). A run parks at a turn boundary of its
// root task — when the model waits for the operator's reply (mailbox
// action wait) and none is there, when `cordon park` drops a request in
// WORKSPACE/.cordon/park/RUN, or when the run's wall-clock allowance
// runs out — and the process ends. Everything needed to continue is in
// WORKSPACE/.cordon/runs/RUN/: StateFile (the conversation, usage, the
// authority in force, the result so far) and the run's durable record
// (evidence/durable) with its head, signed with Config.Key. Run with
// Config.Resume continues it: it checks the record, the head, the
// journal, the state file and the workspace tree against the snapshot
// the record's suspend segment names, and refuses on any difference.
const (
	RunsDir     = "runs"       // under the state directory: one directory per run
	ParkDir     = "park"       // under the state directory: park requests, one file per run
	StateFile   = "state.json" // a parked run's state
	RecordFile  = "record"     // the run's durable record (wire form)
	HeadFile    = "head.dsse"  // its head, signed with the run's key
	HeadJCSFile = "head.json"  // its head, unsigned (a run without a key)
	StateType   = "cordon.park-state.v2"
	// TreeType and SnapshotType version the tree digest and the snapshot
	// (docs/SPEC.md §9.4).
	TreeType     = "cordon.tree.v2"
	SnapshotType = "cordon.snapshot.v2"
	// StatusParked is a run that parked; it has no result yet.
	StatusParked = "parked"
	// Reasons a run parks.
	ParkMailbox = "mailbox"
	ParkRequest = "request"
	ParkBudget  = "budget"

	maxStateBytes = 256 << 20
	maxRecord     = 64 << 20
	maxTreeFiles  = 1 << 20
)

// ErrParked is wrapped when a run cannot start because another is parked
// in the workspace, and ErrResume when a parked run cannot be resumed.
var (
	ErrParked = errors.New("a run is parked in this workspace")
	ErrResume = errors.New("cannot resume")
)

// hostEnv is the environment address of a run on the host's runtime (no
// environment manifest): the durable record names an environment in
// every segment.
var hostEnv = canon.Sum([]byte("cordon.env.host.v1"))

// envAddr is the run's environment address for its durable record.
func (r *run) envAddr() canon.ID {
	if !r.cfg.EnvID.IsZero() {
		return r.cfg.EnvID
	}
	return hostEnv
}

// parkState is StateFile.
type parkState struct {
	Type     string          `json:"type"`
	Run      string          `json:"run"`
	Reason   string          `json:"reason"`
	WaitSeq  int64           `json:"wait_seq,omitempty"` // the agent's post a mailbox park waits on
	Manifest json.RawMessage `json:"manifest"`           // the run's manifest (JCS)
	// What configured the run at its start, which a resume must repeat
	// (identity): docs/durable.md lists them.
	Env      string      `json:"env"`
	Issuer   string      `json:"issuer,omitempty"`
	Apply    bool        `json:"apply"`
	Key      string      `json:"key,omitempty"`   // the key id that signs the run; "" unsigned
	Image    *imageState `json:"image,omitempty"` // the image runtime; nil: the host's
	Tenant   string      `json:"tenant,omitempty"`
	EnvNames []string    `json:"env_names,omitempty"` // the grant set's variables the operator set (names only)
	// Devices are the device records (receipt form) of the run's
	// segments so far, summed per class: the final receipt adds the last
	// segment's.
	Devices      []deviceState     `json:"devices,omitempty"`
	Start        string            `json:"start"`
	Since        int64             `json:"since"`
	Journal      JournalHead       `json:"journal"` // the journal before run.park
	ParkedUnixMS int64             `json:"parked_unix_ms"`
	Responses    int64             `json:"responses"` // model responses received, for a replay to skip
	Task         taskState         `json:"task"`
	Body         Body              `json:"body"`
	Outputs      map[string]string `json:"outputs"`
	Planned      map[string][]byte `json:"planned"`
	Authority    authorityState    `json:"authority"`
	Tree         map[string]string `json:"tree"` // the workspace's files at park: path → kind and digest
}

type imageState struct {
	Manifest string `json:"manifest"`
	Config   string `json:"config"`
}

type deviceState struct {
	Class       string  `json:"class"`
	Provenance  string  `json:"provenance"`
	EstimatedUJ uint64  `json:"estimated_uj"`
	MeasuredUJ  *uint64 `json:"measured_uj,omitempty"`
	BusyNS      uint64  `json:"busy_ns"`
	AttrMethod  string  `json:"attr_method,omitempty"`
	AttrNum     uint64  `json:"attr_num,omitempty"`
	AttrDen     uint64  `json:"attr_den,omitempty"`
}

func devicesToState(ds []receipt.Device) []deviceState {
	var out []deviceState
	for _, d := range ds {
		s := deviceState{Class: d.Class, Provenance: d.Provenance, EstimatedUJ: d.EstimatedUJ, MeasuredUJ: d.MeasuredUJ, BusyNS: d.BusyNS}
		if a := d.Attribution; a != nil {
			s.AttrMethod, s.AttrNum, s.AttrDen = a.Method, a.Num, a.Den
		}
		out = append(out, s)
	}
	return out
}

func devicesFromState(ss []deviceState) []receipt.Device {
	var out []receipt.Device
	for _, s := range ss {
		d := receipt.Device{Class: s.Class, Provenance: s.Provenance, EstimatedUJ: s.EstimatedUJ, MeasuredUJ: s.MeasuredUJ, BusyNS: s.BusyNS}
		if s.AttrMethod != "" {
			d.Attribution = &receipt.Attribution{Method: s.AttrMethod, Num: s.AttrNum, Den: s.AttrDen}
		}
		out = append(out, d)
	}
	return out
}

// identity is what configured the run at its start and must be the
// same on every resume (the parts of parkState that say so).
func (r *run) identity() parkState {
	st := parkState{Env: r.envAddr().String(), Apply: r.cfg.Apply, Tenant: r.cfg.Tenant}
	switch {
	case r.cfg.Issuer != nil:
		st.Issuer = r.cfg.Issuer.ID().String()
	case r.cfg.Key != nil:
		st.Issuer = r.cfg.Key.Public().ID().String()
	}
	if r.cfg.Key != nil {
		st.Key = r.cfg.Key.Public().ID().String()
	}
	if img := r.cfg.Image; img != nil {
		st.Image = &imageState{Manifest: img.Manifest, Config: img.Config}
	}
	for _, name := range r.cfg.Manifest.Grants.Env {
		if _, ok := r.cfg.Env[name]; ok {
			st.EnvNames = append(st.EnvNames, name)
		}
	}
	sort.Strings(st.EnvNames)
	return st
}

// checkIdentity refuses a resume whose configuration is not the one the
// run started with, naming what differs.
func (r *run) checkIdentity(st *parkState) error {
	now := r.identity()
	img := func(i *imageState) string {
		if i == nil {
			return "none (the host's runtime)"
		}
		return i.Manifest + " (config " + i.Config + ")"
	}
	onOff := func(b bool, on, off string) string {
		if b {
			return on
		}
		return off
	}
	orNone := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	switch {
	case now.Apply != st.Apply:
		return resumef("the run started as %s and this resume is %s; a run resumes in its own mode (%s)",
			onOff(st.Apply, "an applied run (--apply)", "a dry run"), onOff(now.Apply, "applied (--apply)", "a dry run"),
			onOff(st.Apply, "pass --apply", "leave out --apply"))
	case img(now.Image) != img(st.Image):
		return resumef("the run started on image %s and this resume offers image %s; a run resumes on its own runtime (pass the same --image)", img(st.Image), img(now.Image))
	case now.Key != st.Key:
		return resumef("the run was signed by key %s and this resume by key %s; resume it with its own key (--key)", orNone(st.Key), orNone(now.Key))
	case now.Issuer != st.Issuer:
		return resumef("the run's issuer was %q; resume it with the same issuer (--key or --issuer), not %q", st.Issuer, now.Issuer)
	case now.Tenant != st.Tenant:
		return resumef("the run started as tenant %q and this resume is tenant %q; pass the same --tenant", st.Tenant, now.Tenant)
	case strings.Join(now.EnvNames, ",") != strings.Join(st.EnvNames, ","):
		return resumef("the run's commands got the variables [%s] from the operator's environment and this resume would give them [%s]; set the same variables",
			strings.Join(st.EnvNames, " "), strings.Join(now.EnvNames, " "))
	}
	return nil
}

type taskState struct {
	ID           string             `json:"id"`
	Used         usageState         `json:"used"`
	Msgs         []provider.Message `json:"messages"`
	Summary      string             `json:"summary"`
	Pending      []pendingState     `json:"pending"`
	Verification *Verification      `json:"verification,omitempty"`
}

type usageState struct {
	Turns     int64 `json:"turns"`
	Calls     int64 `json:"model_calls"`
	InTokens  int64 `json:"input_tokens"`
	OutTokens int64 `json:"output_tokens"`
	Loops     int64 `json:"loops"`
}

type pendingState struct {
	Manifest json.RawMessage `json:"manifest"`
	Task     string          `json:"task"`
}

type authorityState struct {
	Seq     int64           `json:"seq"`
	Next    int64           `json:"next"`
	Grants  json.RawMessage `json:"grants"`
	Budgets amend.Budgets   `json:"budgets"`
}

// treeDigest lists the workspace's files, without following links and
// leaving out the state directory (docs/SPEC.md §9.4, cordon.tree.v2):
// path → "f:MODE:ID" (a regular file and its content), "d:MODE" (a
// directory), "l:TARGET" (a link), "o:TYPE" (anything else); MODE is
// four octal digits, the permission bits with setuid (4000), setgid
// (2000) and sticky (1000); paths and link targets are their exact bytes,
// escaped (escapeName) so that no two differ only in bytes that are not
// UTF-8. Its digest is the ContentId of the JCS of {"type":TreeType,
// "entries":list}.
func treeDigest(ws string) (map[string]string, canon.ID, error) {
	tree := map[string]string{}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(ws, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if rel == StateDir {
			return filepath.SkipDir
		}
		rel = escapeName(rel)
		if len(tree) >= maxTreeFiles {
			return fmt.Errorf("the workspace holds more than %d files", maxTreeFiles)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fmt.Sprintf("%04o", modeBits(fi.Mode()))
		switch {
		case fi.Mode().IsRegular():
			f, err := nofollow.Open(p)
			if err != nil {
				return err
			}
			id, err := canon.SumReader(f)
			f.Close()
			if err != nil {
				return err
			}
			tree[rel] = "f:" + perm + ":" + id.String()
		case fi.IsDir():
			tree[rel] = "d:" + perm
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = "l:" + escapeName(t)
		default:
			tree[rel] = "o:" + fi.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		return nil, canon.ID{}, fmt.Errorf("runner: the workspace tree: %w", err)
	}
	b, err := json.Marshal(map[string]any{"type": TreeType, "entries": tree})
	if err != nil {
		return nil, canon.ID{}, err
	}
	c, err := canon.JCS(b)
	if err != nil {
		return nil, canon.ID{}, fmt.Errorf("runner: the workspace tree: %w", err)
	}
	return tree, canon.Sum(c), nil
}

// escapeName writes a name's bytes injectively as UTF-8 text: valid
// UTF-8 stays as it is, except "%", which is "%25"; each byte of an
// invalid sequence is "%XX" (upper-case hex).
func escapeName(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		if (c == utf8.RuneError && n == 1) || s[i] == '%' {
			fmt.Fprintf(&b, "%%%02X", s[i])
			i++
			continue
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	return b.String()
}

// modeBits are a mode's permission bits with setuid, setgid and sticky
// in their Unix places (04000, 02000, 01000).
func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// snapshotID is a parked run's snapshot (cordon.snapshot.v2): the
// ContentId over the workspace tree's digest, the state file's, and the
// journal's head after the run's run.park entry — so the record's
// suspend segment, and its signed head, bind the journal up to and
// including run.park.
func snapshotID(tree, state canon.ID, j journal.Head) canon.ID {
	b, _ := json.Marshal(map[string]any{"type": SnapshotType, "tree": tree.String(), "state": state.String(),
		"journal": map[string]any{"count": j.Count, "head": j.ID.String()}})
	c, err := canon.JCS(b)
	if err != nil {
		panic(err)
	}
	return canon.Sum(c)
}

// treeDiff names the paths that differ between two trees (at most 10).
func treeDiff(was, now map[string]string) string {
	var diff []string
	for p, v := range was {
		if w, ok := now[p]; !ok {
			diff = append(diff, p+" (removed)")
		} else if w != v {
			diff = append(diff, p+" (changed)")
		}
	}
	for p := range now {
		if _, ok := was[p]; !ok {
			diff = append(diff, p+" (added)")
		}
	}
	sort.Strings(diff)
	if len(diff) > 10 {
		diff = append(diff[:10], fmt.Sprintf("and %d more", len(diff)-10))
	}
	if len(diff) == 0 {
		return "no path differs from the list the state file keeps (was the state file edited too?)"
	}
	return strings.Join(diff, ", ")
}

// energyUJ is the energy of a session's devices: measured where a meter
// measured it, else estimated.
func energyUJ(e *session.Energy) int64 {
	var n uint64
	for _, d := range e.Devices {
		if d.MeasuredUJ != nil {
			n += *d.MeasuredUJ
		} else {
			n += d.EstimatedUJ
		}
	}
	return int64(min(n, uint64(canon.MaxInt)))
}

// idleEnergy estimates the energy a parked run accrued: the Estimator's
// idle power of the cores the sandbox allots (one) over the time it was
// parked, rounded up, never zero.
func idleEnergy(parked time.Duration) int64 {
	ns := uint64(max(parked.Nanoseconds(), 1))
	// µW × ns / 1e9 = µJ, rounded up, in 128 bits.
	hi, lo := bits.Mul64(energy.DefaultCoefficients.IdlePerCoreUW, ns)
	lo, c := bits.Add64(lo, 1e9-1, 0)
	hi += c
	if hi >= 1e9 {
		return canon.MaxInt
	}
	uj, _ := bits.Div64(hi, lo, 1e9)
	return int64(max(min(uj, uint64(canon.MaxInt)), 1))
}

// runDir is WORKSPACE/.cordon/runs/RUN.
func (r *run) runDir() string { return filepath.Join(r.state, RunsDir, r.auth.run) }

// makeRunDir creates the run's directory (0700) and its parent.
func (r *run) makeRunDir() error {
	for _, d := range []string{filepath.Join(r.state, RunsDir), r.runDir()} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("runner: %w", err)
		}
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			return fmt.Errorf("runner: %s is not a directory; remove it (cordon keeps its runs' records there)", d)
		}
	}
	return nil
}

// appendSegment appends to the run's durable record and writes it and
// its head. A refusal here is a bug or a record tampered with under the
// run: the run's record cannot be completed.
func (r *run) appendSegment(s durable.Segment) error {
	s.Manifest, s.Grants, s.Env = r.cfg.Manifest.ID(), r.cfg.Manifest.Grants.ID(), r.envAddr()
	if _, err := r.drec.Append(s); err != nil {
		return fmt.Errorf("runner: durable record: %w", err)
	}
	return nil
}

// writeRecord writes the durable record and its head: signed with the
// run's key, else unsigned.
func (r *run) writeRecord() error {
	if err := r.makeRunDir(); err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(r.runDir(), RecordFile), r.drec.Wire()); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	h := r.drec.Head()
	name, data, stale := HeadJCSFile, h.JCS(), HeadFile
	if r.cfg.Key != nil {
		name, data, stale = HeadFile, h.Seal(r.cfg.Key), HeadJCSFile
	}
	if err := os.Remove(filepath.Join(r.runDir(), stale)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("runner: %w", err)
	}
	if err := replaceFile(filepath.Join(r.runDir(), name), data); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	return nil
}

// mayPark reports whether the run may park: its caller can resume it.
func (r *run) mayPark() bool { return r.cfg.Park || r.cfg.Resume }

// parkRequested reports whether `cordon park` asked this run to park.
func (r *run) parkRequested() bool {
	if r.auth.run == "" {
		return false
	}
	_, err := os.Lstat(filepath.Join(r.state, ParkDir, r.auth.run))
	return err == nil
}

// parkReason is why the root task t parks at this boundary ("" if it
// does not).
func (r *run) parkReason(t *task) string {
	switch {
	case t.parent != nil || !r.mayPark():
		return ""
	case r.waitSeq > 0:
		return ParkMailbox
	case r.parkRequested():
		return ParkRequest
	}
	return ""
}

// park ends this segment of the run: the meters stop, the state is
// written, the durable record gets the segment's execute and a suspend
// naming the snapshot, and run.park closes the journal's segment.
func (r *run) park(root *task, reason string) (*Outcome, error) {
	e, err := r.sess.StopMeters()
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	seg := energyUJ(e)
	if err := r.makeRunDir(); err != nil {
		return nil, err
	}
	a := &r.auth
	a.mu.Lock()
	auth := authorityState{Seq: a.state.Seq, Next: a.next, Grants: a.state.Grants.JCS(), Budgets: a.state.Budgets}
	a.mu.Unlock()
	head := r.jw.Head()
	st := r.identity()
	st.Type, st.Run, st.Reason, st.WaitSeq, st.Manifest = StateType, a.run, reason, r.waitSeq, r.cfg.Manifest.JCS()
	st.Start, st.Since, st.Journal = r.body.Start, r.since, JournalHead{Count: head.Count, Head: head.ID.String()}
	st.ParkedUnixMS, st.Responses = time.Now().UnixMilli(), r.responses
	st.Task = taskState{ID: root.id, Used: usageState{Turns: root.used.turns, Calls: root.used.calls, InTokens: root.used.inTokens,
		OutTokens: root.used.outTokens, Loops: root.used.loops}, Msgs: root.msgs, Summary: root.summary, Verification: root.verification}
	st.Body, st.Outputs, st.Planned, st.Authority = r.body, r.outputs, r.planned, auth
	st.Devices = devicesToState(session.MergeDevices(r.priorDevices, e.Devices))
	for _, p := range root.pending {
		st.Task.Pending = append(st.Task.Pending, pendingState{Manifest: p.m.JCS(), Task: p.task})
	}
	var treeID canon.ID
	if st.Tree, treeID, err = treeDigest(r.cfg.Workspace); err != nil {
		return nil, err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("runner: state: %w", err)
	}
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("runner: the run's state is %d bytes, more than %d", len(b), maxStateBytes)
	}
	stateID := canon.Sum(b)
	if err := replaceFile(filepath.Join(r.runDir(), StateFile), b); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if err := os.Chmod(filepath.Join(r.runDir(), StateFile), 0o600); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	// run.park closes the segment; the snapshot binds it (and the
	// journal before it), the record's suspend the snapshot.
	if _, err := r.record(entry.RunPark{Run: a.run, Reason: reason, Tree: treeID.String(), State: stateID.String(), EnergyUJ: seg}); err != nil {
		return nil, err
	}
	snap := snapshotID(treeID, stateID, r.jw.Head())
	if err := r.appendSegment(durable.Segment{Kind: durable.Execute, EnergyUJ: seg}); err != nil {
		return nil, err
	}
	if err := r.appendSegment(durable.Segment{Kind: durable.Suspend, Snapshot: snap}); err != nil {
		return nil, err
	}
	if err := r.writeRecord(); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(r.state, ParkDir, a.run)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.logf("run %s: parked (%s); snapshot %s; resume with 'cordon run --resume --manifest MANIFEST %s' (your copy of the run's manifest %s)", a.run, reason, snap, r.cfg.Workspace, r.cfg.Manifest.ID())
	// The outcome says how far the run got (the body's totals are set
	// when the run ends).
	r.body.Status = StatusParked
	r.body.Turns, r.body.ModelCalls, r.body.InputTokens, r.body.OutputTokens, r.body.Loops = root.used.turns, root.used.calls, root.used.inTokens, root.used.outTokens, root.used.loops
	return &Outcome{Status: StatusParked, Body: &r.body, Head: r.jw.Head(), Run: a.run, Reason: reason}, nil
}

// parked is a parked run found in a workspace, checked.
type parked struct {
	run    string
	dir    string
	rec    *durable.Record
	st     *parkState
	m      *manifest.Manifest
	park   journal.Entry // the journal's last entry, run.park
	parkAt time.Time
	auth   amend.State // the authority in force, replayed from the journal
	next   int64       // the next amendment file
}

// replayAuthority derives the authority in force at the park from what
// the operator offers — the manifest's grant set and budgets — and the
// journal: each amendment the run applied (an amend entry) is read again
// from its file and applied again under the run's issuer (signature,
// sequence, base, tighten-only), and must be the amendment the entry
// names; each refused one (amend.refused) only advances the file
// number. The state file's copy of the authority must be the result:
// the workspace's word for it is never taken.
func (r *run) replayAuthority(p *parked, es []journal.Entry) error {
	st, m := p.st, r.cfg.Manifest
	if st.Since < 0 || st.Since >= int64(len(es)) || es[st.Since].Type != "run.start" {
		return resumef("the state says the run started at journal entry %d, which is not a run.start", st.Since)
	}
	var issuer sign.PublicKey
	switch {
	case r.cfg.Issuer != nil:
		issuer = *r.cfg.Issuer
	case r.cfg.Key != nil:
		issuer = r.cfg.Key.Public()
	}
	cur := amend.State{Run: p.run, Grants: m.Grants, Budgets: manifestBudgets(m)}
	next := int64(1)
	dir := filepath.Join(r.state, AmendDir, p.run)
	for _, e := range es[st.Since:] {
		switch e.Type {
		case "amend.refused", "amend":
		default:
			continue
		}
		var a entry.Amend
		if err := json.Unmarshal(e.Body().AppendJCS(nil), &a); err != nil || a.Seq != next {
			return resumef("journal entry %d: %s of amendment %d, but the next amendment file is %d", e.Index, e.Type, a.Seq, next)
		}
		next++
		if e.Type == "amend.refused" {
			continue
		}
		name := filepath.Join(dir, strconv.FormatInt(a.Seq, 10)+".dsse")
		b, err := nofollow.Read(name, maxAmendment)
		if err != nil {
			return resumef("amendment %d, which the run applied (journal entry %d): %v; restore %s", a.Seq, e.Index, err, name)
		}
		ns, ch, err := amend.Apply(cur, issuer, b)
		if err != nil {
			return resumef("amendment %d, which the run applied (journal entry %d), does not apply again to the operator's grant set: %v", a.Seq, e.Index, err)
		}
		if got := canon.Sum(ch.Amendment.JCS()).String(); got != a.Amendment || ch.Amendment.Seq != a.Seq {
			return resumef("%s is amendment %s, but journal entry %d applied %s", name, got, e.Index, a.Amendment)
		}
		cur = ns
	}
	auth := st.Authority
	if cur.Seq != auth.Seq || next != auth.Next || !bytes.Equal(cur.Grants.JCS(), auth.Grants) || !maps.Equal(cur.Budgets, auth.Budgets) {
		return resumef("the state file's authority in force (amendment %d, grants %s, next file %d) is not what the operator's manifest and the journal's amendments give (amendment %d, grants %s, next file %d)",
			auth.Seq, canon.Sum(auth.Grants), auth.Next, cur.Seq, cur.Grants.ID(), next)
	}
	p.auth, p.next = cur, next
	return nil
}

// runRecords reads each run's durable record under the state directory:
// by run id, the record, or why it does not parse.
func runRecords(state string) (ids []string, recs map[string]*durable.Record, errs map[string]error, err error) {
	des, err := os.ReadDir(filepath.Join(state, RunsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, err
	}
	recs, errs = map[string]*durable.Record{}, map[string]error{}
	for _, d := range des {
		if amend.CheckRunID(d.Name()) != nil {
			continue
		}
		b, err := nofollow.Read(filepath.Join(state, RunsDir, d.Name(), RecordFile), maxRecord)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		ids = append(ids, d.Name())
		if err == nil {
			recs[d.Name()], err = durable.Parse(b)
		}
		if err != nil {
			errs[d.Name()] = err
		}
	}
	return ids, recs, errs, nil
}

// findParked returns the id of the run to resume: the one whose record
// is not closed. A record that does not parse, or is not parked, is
// judged by loadParked (only a parked one resumes).
func findParked(state string) (string, error) {
	ids, recs, errs, err := runRecords(state)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrResume, err)
	}
	var found []string
	for _, id := range ids {
		if errs[id] != nil || recs[id].Head().State != durable.Closed {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: %s has no parked run (no record under %s is parked: each ran to its end, or none was parked here); start a new run without --resume",
			ErrResume, filepath.Dir(state), filepath.Join(state, RunsDir))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%w: %s holds %d runs that did not close (%s); cordon parks one run per workspace: move the others' directories away",
		ErrResume, filepath.Join(state, RunsDir), len(found), strings.Join(found, ", "))
}

// checkNotParked refuses a new run in a workspace with a parked run (or
// a run record that does not parse, which may be one): it would start
// another run in the middle of that one's journal. A record left running
// by a run that crashed does not stop a new run (its journal entries are
// marked run.unfinished).
func checkNotParked(state string) error {
	ids, recs, errs, err := runRecords(state)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	for _, id := range ids {
		switch {
		case errs[id] != nil:
			return fmt.Errorf("runner: %w: run %s's record %s does not parse (%v), so it may be a parked run; move %s away",
				ErrParked, id, filepath.Join(state, RunsDir, id, RecordFile), errs[id], filepath.Join(state, RunsDir, id))
		case recs[id].Head().State == durable.Parked:
			return fmt.Errorf("runner: %w: run %s; continue it with 'cordon run --resume --manifest MANIFEST %s', or move %s away to abandon it",
				ErrParked, id, filepath.Dir(state), filepath.Join(state, RunsDir, id))
		}
	}
	return nil
}

func resumef(format string, args ...any) error {
	return fmt.Errorf("runner: %w: "+format, append([]any{ErrResume}, args...)...)
}

// loadParked finds and checks the workspace's parked run: its record and
// head (signed with the run's key when it has one), the journal ending
// at its run.park, the state file and the workspace tree against the
// snapshot, and the manifest, grant set, environment and issuer offered
// against the record's.
func (r *run) loadParked() (*parked, error) {
	id, err := findParked(r.state)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	p := &parked{run: id, dir: filepath.Join(r.state, RunsDir, id)}
	wire, err := nofollow.Read(filepath.Join(p.dir, RecordFile), maxRecord)
	if err != nil {
		return nil, resumef("%s: %v", filepath.Join(p.dir, RecordFile), err)
	}
	if p.rec, err = durable.Parse(wire); err != nil {
		return nil, resumef("%s: %v; the record was tampered with: it cannot be resumed", filepath.Join(p.dir, RecordFile), err)
	}
	h := p.rec.Head()
	if h.State != durable.Parked {
		return nil, resumef("%s is %s, not parked", filepath.Join(p.dir, RecordFile), h.State)
	}
	signed, serr := nofollow.Read(filepath.Join(p.dir, HeadFile), 1<<20)
	switch {
	case r.cfg.Key != nil && serr != nil:
		return nil, resumef("%s: %v; a signed run's record needs its signed head", filepath.Join(p.dir, HeadFile), serr)
	case r.cfg.Key != nil:
		payload, err := durable.OpenHead(signed, r.cfg.Key.Public())
		if err != nil {
			return nil, resumef("%s: %v; the head must be signed by the run's key (--key)", filepath.Join(p.dir, HeadFile), err)
		}
		if !bytes.Equal(payload, h.JCS()) {
			return nil, resumef("%s: the record's head (%d segments, %s) is not the signed head: the record was cut short, extended or rewritten", filepath.Join(p.dir, RecordFile), h.Count, h.Head)
		}
	case serr == nil:
		return nil, resumef("%s: the run was signed; resume it with its key (--key)", filepath.Join(p.dir, HeadFile))
	default:
		b, err := nofollow.Read(filepath.Join(p.dir, HeadJCSFile), 1<<20)
		if err != nil {
			return nil, resumef("%s: %v", filepath.Join(p.dir, HeadJCSFile), err)
		}
		if !bytes.Equal(b, h.JCS()) {
			return nil, resumef("%s is not the record's head (%d segments, %s): the record was cut short, extended or rewritten", filepath.Join(p.dir, HeadJCSFile), h.Count, h.Head)
		}
	}
	// The run's identity: what the operator offers (never what the
	// workspace holds) must be the record's genesis.
	m := r.cfg.Manifest
	switch {
	case m.Grants.ID() != h.Grants:
		return nil, resumef("the grant set offered (%s) is not the parked run's (%s); a run resumes only under its own grants", m.Grants.ID(), h.Grants)
	case r.envAddr() != h.Env:
		return nil, resumef("the environment offered (%s) is not the parked run's (%s); a run resumes only in its own environment (pass the same --env and --image)", r.envAddr(), h.Env)
	case m.ID() != h.Manifest:
		return nil, resumef("the manifest offered (%s) is not the parked run's (%s), the one its record started with; a run resumes only with its own manifest (your copy, --manifest)", m.ID(), h.Manifest)
	}
	// The journal: verified, and ending at this run's run.park.
	f, err := nofollow.Open(filepath.Join(r.state, JournalFile))
	if err != nil {
		return nil, resumef("the journal: %v", err)
	}
	es, jh, err := journal.Scan(f)
	f.Close()
	if err != nil {
		return nil, resumef("the journal does not verify: %v", err)
	}
	if len(es) == 0 || es[len(es)-1].Type != "run.park" {
		return nil, resumef("the journal does not end with the run's run.park entry (%d entries): something was appended while it was parked", jh.Count)
	}
	p.park = es[len(es)-1]
	var pe struct {
		Type string `json:"type"`
		entry.RunPark
	}
	dec := json.NewDecoder(bytes.NewReader(p.park.Body().AppendJCS(nil)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pe); err != nil || pe.Type != entry.Type(entry.RunPark{}.Name()) {
		return nil, resumef("the journal's run.park (entry %d) is not the entry this runner writes (%v): it was rewritten, or the run was parked by an earlier cordon (snapshot v1), which alone can resume it; or move %s away to abandon the run", p.park.Index, err, p.dir)
	}
	if pe.Run != id {
		return nil, resumef("the journal's run.park names run %s; the record is run %s", pe.Run, id)
	}
	// The state file and the tree, against run.park.
	sb, err := nofollow.Read(filepath.Join(p.dir, StateFile), maxStateBytes)
	if err != nil {
		return nil, resumef("%s: %v", filepath.Join(p.dir, StateFile), err)
	}
	stateID := canon.Sum(sb)
	if stateID.String() != pe.State {
		return nil, resumef("the state file %s differs from the one recorded at suspension (%s, now %s): it was edited while the run was parked", filepath.Join(p.dir, StateFile), pe.State, stateID)
	}
	st := &parkState{}
	dec = json.NewDecoder(bytes.NewReader(sb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(st); err != nil || st.Type != StateType || st.Run != id {
		if err == nil {
			err = fmt.Errorf("type %q, run %s", st.Type, st.Run)
		}
		return nil, resumef("%s: not a %s document of run %s: %v", filepath.Join(p.dir, StateFile), StateType, id, err)
	}
	p.st = st
	tree, treeID, err := treeDigest(r.cfg.Workspace)
	if err != nil {
		return nil, err
	}
	if treeID.String() != pe.Tree {
		return nil, resumef("the workspace tree differs from the one recorded at suspension: %s; restore it, or move %s away to abandon the run",
			treeDiff(st.Tree, tree), p.dir)
	}
	// The snapshot binds tree, state and the journal up to and including
	// run.park; the record's suspend (and its signed head) names it.
	if snapshotID(treeID, stateID, jh) != h.Snapshot {
		return nil, resumef("the journal up to its run.park (%d entries, head %s) with the tree and state file does not make the snapshot %s the record's suspend names: the journal or its run.park entry was rewritten while the run was parked",
			jh.Count, jh.ID, h.Snapshot)
	}
	if st.Journal.Count != p.park.Index || st.Journal.Head != p.park.Prev.String() {
		return nil, resumef("the state file was written at journal entry %d (%s), but run.park stands at entry %d after %s", st.Journal.Count, st.Journal.Head, p.park.Index, p.park.Prev)
	}
	segs := p.rec.Segments()
	if last := segs[len(segs)-2]; last.Kind != durable.Execute || pe.Reason != st.Reason || pe.EnergyUJ != last.EnergyUJ {
		return nil, resumef("the journal's run.park (reason %s, %d µJ) does not agree with the state (reason %s) and the record's last execute segment (%d µJ)",
			pe.Reason, pe.EnergyUJ, st.Reason, last.EnergyUJ)
	}
	if pm, err := manifest.Parse(st.Manifest); err != nil || pm.ID() != m.ID() {
		return nil, resumef("the state file's manifest is not the run's %s", m.ID())
	}
	p.m = m
	// What configured the run at its start: mode, runtime, key, issuer,
	// tenant, the operator's variables.
	if err := r.checkIdentity(st); err != nil {
		return nil, err
	}
	// The authority in force: the operator's grant set and budgets, with
	// the amendments the journal records re-applied from their signed
	// files (tighten-only); the state's copy must agree.
	if err := r.replayAuthority(p, es); err != nil {
		return nil, err
	}
	if st.Reason == ParkMailbox {
		n, err := mailbox.Pending(r.cfg.Workspace)
		if err != nil {
			return nil, resumef("the mailbox: %v", err)
		}
		if n == 0 {
			return nil, resumef("the run waits for the operator's reply to message #%d and there is none; reply with 'cordon mail --reply TEXT %s' first", st.WaitSeq, r.cfg.Workspace)
		}
	}
	start, err := time.Parse(time.RFC3339Nano, st.Start)
	if err != nil {
		return nil, resumef("state: start: %v", err)
	}
	if st.ParkedUnixMS < start.UnixMilli() {
		return nil, resumef("the state says the run parked at %d ms, before it started (%s); the state file is not the runner's", st.ParkedUnixMS, st.Start)
	}
	p.parkAt = time.UnixMilli(st.ParkedUnixMS)
	return p, nil
}

// resume restores the parked run p and journals its resumption: run.resume,
// then the run's principals with a fresh agent key.
func (r *run) resume(p *parked) (*task, error) {
	st := p.st
	r.drec = p.rec
	r.since = st.Since
	r.body = st.Body
	r.body.Status = ""
	// The run is remembered when it ends, in this host's memory store.
	r.body.Memory = r.mem.Kind()
	if t, err := time.Parse(time.RFC3339Nano, st.Start); err == nil {
		r.start = t
	} else {
		return nil, resumef("state: start: %v", err)
	}
	r.outputs = st.Outputs
	if r.outputs == nil {
		r.outputs = map[string]string{}
	}
	r.planned = st.Planned
	if r.planned == nil {
		r.planned = map[string][]byte{}
	}
	r.responses = st.Responses
	root := &task{id: st.Task.ID, m: r.cfg.Manifest, run: r, msgs: st.Task.Msgs, summary: st.Task.Summary, verification: st.Task.Verification, resumed: true,
		used: usage{turns: st.Task.Used.Turns, calls: st.Task.Used.Calls, inTokens: st.Task.Used.InTokens, outTokens: st.Task.Used.OutTokens, loops: st.Task.Used.Loops}}
	for _, ps := range st.Task.Pending {
		cm, err := manifest.Parse(ps.Manifest)
		if err != nil {
			return nil, resumef("state: a queued sub-task's manifest: %v", err)
		}
		if err := manifest.Covers(r.cfg.Manifest, cm); err != nil {
			return nil, resumef("state: queued sub-task %s's manifest is not within the run's: %v", ps.Task, err)
		}
		root.pending = append(root.pending, &pendingTask{m: cm, task: ps.Task})
	}
	// A replay continues where the parked segment stopped; a live model
	// is sent the conversation.
	if sk, ok := r.cfg.Provider.(interface{ Skip(int) error }); ok {
		if err := sk.Skip(int(st.Responses)); err != nil {
			return nil, resumef("%v", err)
		}
	}
	snap := p.rec.Head().Snapshot
	parkedFor := time.Since(p.parkAt)
	// The record's totals stay within 2^53-1: a park's idle energy is
	// capped at what is left (a clock far off cannot make it refuse or
	// overflow), and so is its duration.
	idle := min(idleEnergy(parkedFor), max(canon.MaxInt-p.rec.Head().IdleUJ, 1))
	ms := min(max(parkedFor.Milliseconds(), 0), canon.MaxInt)
	if err := r.appendSegment(durable.Segment{Kind: durable.Resume, Snapshot: snap, IdleUJ: idle,
		IdleProvenance: "Estimator", ParkedMS: ms}); err != nil {
		return nil, resumef("%v", err)
	}
	if _, err := r.record(entry.RunResume{Run: st.Run, Snapshot: snap.String(), ParkedMS: ms, IdleUJ: idle, IdleProvenance: "Estimator"}); err != nil {
		return nil, err
	}
	r.auth.run = st.Run
	r.auth.next = p.next
	r.auth.state = p.auth
	r.priorDevices = devicesFromState(st.Devices)
	if err := r.startAuthority(true); err != nil {
		return nil, err
	}
	if err := r.writeRecord(); err != nil {
		return nil, err
	}
	r.logf("run %s: resumed from snapshot %s after %s parked (%s); idle energy %d µJ (Estimator)", st.Run, snap, parkedFor.Round(time.Millisecond), st.Reason, idle)
	return root, nil
}

// closeRecord ends the run's durable record: the last segment's execute
// (its energy and receipt) and the close.
func (r *run) closeRecord(e *session.Energy) error {
	if r.drec == nil {
		return nil
	}
	seg := durable.Segment{Kind: durable.Execute, Receipt: r.receiptID}
	if e != nil {
		seg.EnergyUJ = energyUJ(e)
	}
	if err := r.appendSegment(seg); err != nil {
		return err
	}
	if err := r.appendSegment(durable.Segment{Kind: durable.Close}); err != nil {
		return err
	}
	return r.writeRecord()
}
