// Package amend is checkpoints and tighten-only amendments of a live run
// (docs/SPEC.md §3.7, conformance class C21).
//
// A run has two principals: its issuer, who grants authority (the
// operator's steward key, or a control plane on an operator's behalf),
// and its agent, the run's own key, generated for the run. The agent
// checkpoints the run's position at turn boundaries (a Checkpoint, signed
// under its own payload type); only the issuer may amend the run, and only
// to tighten (an Amendment, signed under another payload type). Apply
// decides an amendment against the authority in force: signed by the
// run's issuer, for this run, in sequence, based on the grant set in
// force, covered by it (grant.Covers), budgets not raised, and not a
// no-op. The package is pure: no I/O.
package amend

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
)

// Types and DSSE payload types (the signing contexts: an agent's
// checkpoint never opens as an issuer's amendment, nor the reverse).
const (
	CheckpointType        = "cordon.checkpoint.v1"
	AmendmentType         = "cordon.amendment.v1"
	AuthorityType         = "cordon.authority.v1"
	CheckpointPayloadType = "application/vnd.cordon.checkpoint.v1+json"
	AmendmentPayloadType  = "application/vnd.cordon.amendment.v1+json"
	// MaxSeq bounds an amendment's sequence number.
	MaxSeq = 1 << 20
)

// BudgetNames are the budgets an amendment may lower, in their JSON
// names (the manifest's, docs/SPEC.md §5).
var BudgetNames = []string{"max_turns", "max_model_calls", "max_input_tokens", "max_output_tokens", "wall_ms"}

var (
	// ErrInvalid is wrapped by errors about a malformed checkpoint or
	// amendment.
	ErrInvalid = errors.New("invalid checkpoint or amendment")
	// ErrSigner is wrapped when an amendment is not signed by the run's
	// issuer (the agent's own key, another key) or a checkpoint not by
	// the agent it names.
	ErrSigner = errors.New("wrong signer")
	// ErrRun is wrapped when an amendment is for another run.
	ErrRun = errors.New("amendment for another run")
	// ErrReplay is wrapped when an amendment's sequence number is not
	// after the last one applied (a replay, or out of order).
	ErrReplay = errors.New("amendment replayed or out of order")
	// ErrBase is wrapped when an amendment amends a grant set other than
	// the one in force.
	ErrBase = errors.New("amendment base is not the grant set in force")
	// ErrBudget is wrapped when an amendment raises a budget.
	ErrBudget = errors.New("amendment raises a budget")
	// ErrNoop is wrapped when an amendment changes nothing.
	ErrNoop = errors.New("amendment changes nothing")
)

var runID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })

// CheckRunID checks a run id: 32 lowercase hexadecimal digits (128
// random bits, drawn by the runner).
func CheckRunID(s string) error {
	if !runID().MatchString(s) {
		return fmt.Errorf("%w: run id %q is not 32 lowercase hex digits", ErrInvalid, s)
	}
	return nil
}

// Budgets maps budget names (BudgetNames) to limits or amounts spent.
type Budgets map[string]int64

func (b Budgets) check(what string, all bool) error {
	for k, v := range b {
		if !slices.Contains(BudgetNames, k) {
			return fmt.Errorf("%w: %s: unknown budget %q (budgets: %v)", ErrInvalid, what, k, BudgetNames)
		}
		if v < 0 {
			return fmt.Errorf("%w: %s: %s is negative", ErrInvalid, what, k)
		}
	}
	if all && len(b) != len(BudgetNames) {
		return fmt.Errorf("%w: %s: want every budget of %v", ErrInvalid, what, BudgetNames)
	}
	return nil
}

// State is the authority in force in a run: its grant set and budgets,
// and the last amendment applied.
type State struct {
	Run     string
	Agent   sign.PublicKey // the run's agent key: an amendment it signed is named as such
	Grants  *grant.Set
	Budgets Budgets // every name in BudgetNames
	Seq     int64   // the last amendment applied; 0 when none
}

// Authority returns the canonical form of the authority in force, the
// grant set and the budgets; its ContentId is what amendments are
// journalled before and after.
func Authority(gs *grant.Set, b Budgets) []byte {
	return jcs(map[string]any{"type": AuthorityType, "grants": json.RawMessage(gs.JCS()), "budgets": b})
}

// ID is the ContentId of the state's authority.
func (s *State) ID() canon.ID { return canon.Sum(Authority(s.Grants, s.Budgets)) }

// Amendment tightens a run's authority.
type Amendment struct {
	Run     string
	Issuer  canon.ID // the issuer's key id: the amendment's signer
	Seq     int64    // 1, 2, …: strictly increasing in a run
	Base    canon.ID // the grant set in force that it amends
	Grants  *grant.Set
	Budgets Budgets // lowered budgets; nil or empty when none change
}

// JCS returns the amendment's canonical form.
func (a *Amendment) JCS() []byte {
	m := map[string]any{"type": AmendmentType, "run": a.Run, "issuer": a.Issuer.String(), "seq": a.Seq,
		"base": a.Base.String(), "grants": json.RawMessage(a.Grants.JCS())}
	if len(a.Budgets) > 0 {
		m["budgets"] = a.Budgets
	}
	return jcs(m)
}

// ParseAmendment reads an amendment in exactly its canonical form.
func ParseAmendment(data []byte) (*Amendment, error) {
	v, r, o, err := jsonv.Canonical(data)
	if err != nil {
		return nil, fmt.Errorf("%w: amendment: %w", ErrInvalid, err)
	}
	a := &Amendment{}
	typ, _ := o.Str("type", true)
	a.Run, _ = o.Str("run", true)
	issuer, _ := o.Str("issuer", true)
	a.Seq, _ = o.Int("seq", true)
	base, _ := o.Str("base", true)
	o.Use("grants")
	if bo, ok := o.Object("budgets", false); ok && bo != nil {
		a.Budgets = Budgets{}
		for _, k := range bo.Members() {
			a.Budgets[k], _ = bo.Int(k, true)
		}
		bo.End()
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: amendment: %w", ErrInvalid, err)
	}
	if typ != AmendmentType {
		return nil, fmt.Errorf("%w: amendment: type %q, want %q", ErrInvalid, typ, AmendmentType)
	}
	if err := CheckRunID(a.Run); err != nil {
		return nil, err
	}
	if a.Issuer, err = canon.ParseID(issuer); err != nil {
		return nil, fmt.Errorf("%w: amendment: issuer: %w", ErrInvalid, err)
	}
	if a.Base, err = canon.ParseID(base); err != nil {
		return nil, fmt.Errorf("%w: amendment: base: %w", ErrInvalid, err)
	}
	if a.Seq < 1 || a.Seq > MaxSeq {
		return nil, fmt.Errorf("%w: amendment: seq %d outside 1…%d", ErrInvalid, a.Seq, MaxSeq)
	}
	gv, _ := v.Get("grants")
	if a.Grants, err = grant.FromValue(gv); err != nil {
		return nil, fmt.Errorf("%w: amendment: grants: %w", ErrInvalid, err)
	}
	if err := a.Budgets.check("amendment budgets", false); err != nil {
		return nil, err
	}
	if a.Budgets != nil && len(a.Budgets) == 0 {
		return nil, fmt.Errorf("%w: amendment: budgets is empty; leave it out", ErrInvalid)
	}
	return a, nil
}

// Seal signs an amendment with the issuer's key, which must be the
// issuer it names.
func Seal(issuer *sign.PrivateKey, a *Amendment) ([]byte, error) {
	if issuer.Public().ID() != a.Issuer {
		return nil, fmt.Errorf("%w: the amendment names issuer %s, not %s", ErrSigner, a.Issuer, issuer.Public().ID())
	}
	return sign.Seal(issuer, AmendmentPayloadType, a.JCS()), nil
}

// Change is an accepted amendment: the authority before and after it
// (ContentIds of Authority), and the grant sets'.
type Change struct {
	Amendment    *Amendment
	Before       canon.ID
	After        canon.ID
	GrantsBefore canon.ID
	GrantsAfter  canon.ID
}

// Apply decides one signed amendment against the authority in force and
// returns the new authority. It refuses an envelope not signed by the
// run's issuer (naming the agent's own key when it signed it), an
// amendment that names another issuer, is for another run, is not after
// the last applied, amends another grant set, widens anything (not
// grant.Covers(cur, new)), raises a budget, or changes nothing.
func Apply(cur State, issuer sign.PublicKey, envelope []byte) (State, *Change, error) {
	if len(issuer.Bytes()) == 0 {
		return cur, nil, fmt.Errorf("%w: the run has no issuer, so no amendment can be accepted", ErrSigner)
	}
	payload, err := sign.Open(envelope, issuer, AmendmentPayloadType)
	if err != nil {
		if len(cur.Agent.Bytes()) > 0 {
			if _, aerr := sign.Open(envelope, cur.Agent, AmendmentPayloadType); aerr == nil {
				return cur, nil, fmt.Errorf("%w: the amendment is signed by the run's agent key %s; only the issuer %s may amend a run", ErrSigner, cur.Agent.ID(), issuer.ID())
			}
		}
		return cur, nil, fmt.Errorf("%w: the amendment is not signed by the run's issuer %s: %w", ErrSigner, issuer.ID(), err)
	}
	a, err := ParseAmendment(payload)
	if err != nil {
		return cur, nil, err
	}
	return apply(cur, issuer.ID(), a)
}

func apply(cur State, issuer canon.ID, a *Amendment) (State, *Change, error) {
	if a.Issuer != issuer {
		return cur, nil, fmt.Errorf("%w: the amendment names issuer %s, but the run's issuer is %s", ErrSigner, a.Issuer, issuer)
	}
	if a.Run != cur.Run {
		return cur, nil, fmt.Errorf("%w: the amendment is for run %s, this is run %s", ErrRun, a.Run, cur.Run)
	}
	if a.Seq <= cur.Seq {
		return cur, nil, fmt.Errorf("%w: sequence %d, but %d was applied already; the next must be greater", ErrReplay, a.Seq, cur.Seq)
	}
	if a.Base != cur.Grants.ID() {
		return cur, nil, fmt.Errorf("%w: it amends %s, the grant set in force is %s", ErrBase, a.Base, cur.Grants.ID())
	}
	if err := grant.Covers(cur.Grants, a.Grants); err != nil {
		return cur, nil, fmt.Errorf("the amendment widens the grant set in force: %w", err)
	}
	next := State{Run: cur.Run, Agent: cur.Agent, Grants: a.Grants, Budgets: maps.Clone(cur.Budgets), Seq: a.Seq}
	for _, k := range slices.Sorted(maps.Keys(a.Budgets)) {
		have, ok := cur.Budgets[k]
		if !ok {
			return cur, nil, fmt.Errorf("%w: the run has no %s budget", ErrInvalid, k)
		}
		if a.Budgets[k] > have {
			return cur, nil, fmt.Errorf("%w: %s %d is above the %d in force", ErrBudget, k, a.Budgets[k], have)
		}
		next.Budgets[k] = a.Budgets[k]
	}
	ch := &Change{Amendment: a, Before: cur.ID(), After: next.ID(), GrantsBefore: cur.Grants.ID(), GrantsAfter: a.Grants.ID()}
	if ch.Before == ch.After {
		return cur, nil, fmt.Errorf("%w: the authority in force stays %s", ErrNoop, ch.Before)
	}
	return next, ch, nil
}

// Head is a journal's position: its entry count and the ContentId of its
// last entry.
type Head struct {
	Count int64
	ID    canon.ID
}

// Checkpoint is a run's position at a turn boundary, signed by the
// run's agent.
type Checkpoint struct {
	Run     string
	Agent   canon.ID // the agent's key id: the checkpoint's signer
	Turn    int64    // turns taken in the run so far
	Journal Head     // the journal before the checkpoint's own entry
	Grants  canon.ID // the grant set in force
	Budgets Budgets  // the budgets in force
	Spent   Budgets  // what the run has used of each
	Seq     int64    // the last amendment applied; 0 when none
}

// JCS returns the checkpoint's canonical form.
func (c *Checkpoint) JCS() []byte {
	return jcs(map[string]any{"type": CheckpointType, "run": c.Run, "agent": c.Agent.String(), "turn": c.Turn,
		"journal": map[string]any{"count": c.Journal.Count, "head": c.Journal.ID.String()},
		"grants":  c.Grants.String(), "budgets": c.Budgets, "spent": c.Spent, "seq": c.Seq})
}

// ParseCheckpoint reads a checkpoint in exactly its canonical form.
func ParseCheckpoint(data []byte) (*Checkpoint, error) {
	_, r, o, err := jsonv.Canonical(data)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %w", ErrInvalid, err)
	}
	c := &Checkpoint{}
	typ, _ := o.Str("type", true)
	c.Run, _ = o.Str("run", true)
	agent, _ := o.Str("agent", true)
	c.Turn, _ = o.Int("turn", true)
	var head string
	if jo, ok := o.Object("journal", true); ok && jo != nil {
		c.Journal.Count, _ = jo.Int("count", true)
		head, _ = jo.Str("head", true)
		jo.End()
	}
	gs, _ := o.Str("grants", true)
	c.Budgets = budgets(o, "budgets")
	c.Spent = budgets(o, "spent")
	c.Seq, _ = o.Int("seq", true)
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %w", ErrInvalid, err)
	}
	if typ != CheckpointType {
		return nil, fmt.Errorf("%w: checkpoint: type %q, want %q", ErrInvalid, typ, CheckpointType)
	}
	if err := CheckRunID(c.Run); err != nil {
		return nil, err
	}
	for what, p := range map[string]struct {
		s  string
		id *canon.ID
	}{"agent": {agent, &c.Agent}, "journal.head": {head, &c.Journal.ID}, "grants": {gs, &c.Grants}} {
		if *p.id, err = canon.ParseID(p.s); err != nil {
			return nil, fmt.Errorf("%w: checkpoint: %s: %w", ErrInvalid, what, err)
		}
	}
	if c.Turn < 0 || c.Journal.Count < 1 || c.Seq < 0 || c.Seq > MaxSeq {
		return nil, fmt.Errorf("%w: checkpoint: turn, journal.count (≥ 1) or seq out of range", ErrInvalid)
	}
	if err := c.Budgets.check("checkpoint budgets", true); err != nil {
		return nil, err
	}
	if err := c.Spent.check("checkpoint spent", true); err != nil {
		return nil, err
	}
	return c, nil
}

func budgets(o *jsonv.Obj, name string) Budgets {
	bo, ok := o.Object(name, true)
	if !ok || bo == nil {
		return nil
	}
	b := Budgets{}
	for _, k := range bo.Members() {
		b[k], _ = bo.Int(k, true)
	}
	bo.End()
	return b
}

// SealCheckpoint signs a checkpoint with the agent's key, which must be
// the agent it names.
func SealCheckpoint(agent *sign.PrivateKey, c *Checkpoint) ([]byte, error) {
	if agent.Public().ID() != c.Agent {
		return nil, fmt.Errorf("%w: the checkpoint names agent %s, not %s", ErrSigner, c.Agent, agent.Public().ID())
	}
	return sign.Seal(agent, CheckpointPayloadType, c.JCS()), nil
}

// OpenCheckpoint verifies a signed checkpoint: signed by agent, naming
// agent.
func OpenCheckpoint(envelope []byte, agent sign.PublicKey) (*Checkpoint, error) {
	payload, err := sign.Open(envelope, agent, CheckpointPayloadType)
	if err != nil {
		return nil, err
	}
	c, err := ParseCheckpoint(payload)
	if err != nil {
		return nil, err
	}
	if c.Agent != agent.ID() {
		return nil, fmt.Errorf("%w: the checkpoint names agent %s but is signed by %s", ErrSigner, c.Agent, agent.ID())
	}
	return c, nil
}

// VerifyCheckpoint checks a checkpoint's signature given as its
// canonical bytes and a raw Ed25519 signature (as a journal entry holds
// them), and parses it.
func VerifyCheckpoint(payload, sig []byte, agent sign.PublicKey) (*Checkpoint, error) {
	if err := agent.Verify(CheckpointPayloadType, payload, sig); err != nil {
		return nil, err
	}
	c, err := ParseCheckpoint(payload)
	if err != nil {
		return nil, err
	}
	if c.Agent != agent.ID() {
		return nil, fmt.Errorf("%w: the checkpoint names agent %s but is signed by %s", ErrSigner, c.Agent, agent.ID())
	}
	return c, nil
}

func jcs(m map[string]any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err)
	}
	return bytes.Clone(c)
}

// VerifyJournal checks every checkpoint in a journal (docs/SPEC.md
// §3.7): each follows its run's `run.principals` entry, verifies under
// the agent key in force at its position, names that run and agent, and
// records the journal exactly as it stood before its own entry. The key
// in force is the latest principals' before the checkpoint: a run has one
// principals entry after its run.start and, when it parked and resumed
// (§9.4), one more right after each run.resume, marked resume and naming
// the same run — a principals entry anywhere else is refused, and a
// checkpoint between a run.resume and its principals has no key. A
// run.park names the current run and ends its segment: nothing but that
// run's run.resume (or a new run: run.unfinished, run.start) may follow
// it, and a run.resume must directly follow such a run.park, once. It
// returns how many checkpoints it checked.
func VerifyJournal(es []journal.Entry) (int, error) {
	var (
		run      string
		agent    sign.PublicKey
		n        int
		prevType string
		waiting  bool // a run.resume was seen; its principals must follow
		parked   bool // the run's run.park ended its segment; only its run.resume (or a new run) may follow
	)
	for _, e := range es {
		typ := e.Type
		prev := prevType
		prevType = typ
		if waiting && typ != "run.principals" {
			return n, fmt.Errorf("%w: entry %d: %s right after a run.resume; the resumed run's run.principals comes first", ErrInvalid, e.Index, typ)
		}
		if parked && typ != "run.resume" && typ != "run.start" && typ != "run.unfinished" {
			// An abandoned parked run is followed by a new run (run.start,
			// after run.unfinished saying its entries did not finish).
			return n, fmt.Errorf("%w: entry %d: %s after run %s's run.park; a parked run's segment is over, only its run.resume (or a new run) may follow", ErrInvalid, e.Index, typ, run)
		}
		switch typ {
		case "run.start":
			run, agent, parked = "", sign.PublicKey{}, false
		case "run.park":
			var body struct {
				Run string `json:"run"`
			}
			if err := json.Unmarshal(e.Body().AppendJCS(nil), &body); err != nil || run == "" || body.Run != run {
				return n, fmt.Errorf("%w: entry %d: a run.park of run %q, in run %q", ErrInvalid, e.Index, body.Run, run)
			}
			parked = true
		case "run.resume":
			var body struct {
				Run string `json:"run"`
			}
			if err := json.Unmarshal(e.Body().AppendJCS(nil), &body); err != nil || run == "" || body.Run != run {
				return n, fmt.Errorf("%w: entry %d: a run.resume of run %q, in run %q", ErrInvalid, e.Index, body.Run, run)
			}
			if !parked || prev != "run.park" {
				return n, fmt.Errorf("%w: entry %d: a run.resume of run %s that does not directly follow its run.park (after %s); a run resumes once per park, at the start of its next segment", ErrInvalid, e.Index, run, prev)
			}
			agent, waiting, parked = sign.PublicKey{}, true, false
		case "run.principals":
			_, r, o, err := jsonv.Canonical(e.Body().AppendJCS(nil))
			if err != nil {
				return n, fmt.Errorf("%w: entry %d: %w", ErrInvalid, e.Index, err)
			}
			o.Str("type", true)
			id0, _ := o.Str("run", true)
			id, _ := o.Str("agent", true)
			key, _ := o.Str("agent_key", true)
			o.Str("issuer", false)
			resume, _ := o.Bool("resume", false)
			o.End()
			if err := r.Err(); err != nil {
				return n, fmt.Errorf("%w: entry %d: %w", ErrInvalid, e.Index, err)
			}
			switch {
			case resume && (!waiting || prev != "run.resume"):
				return n, fmt.Errorf("%w: entry %d: a resume's run.principals with no run.resume right before it", ErrInvalid, e.Index)
			case resume && id0 != run:
				return n, fmt.Errorf("%w: entry %d: a resume's run.principals names run %s; the run is %s", ErrInvalid, e.Index, id0, run)
			case !resume && run != "":
				return n, fmt.Errorf("%w: entry %d: a second run.principals for run %s without a run.resume before it: a key change mid-segment", ErrInvalid, e.Index, run)
			}
			waiting = false
			run = id0
			raw, err := base64.RawURLEncoding.DecodeString(key)
			if err == nil {
				agent, err = sign.PublicKeyFromBytes(raw)
			}
			if err != nil || agent.ID().String() != id {
				return n, fmt.Errorf("%w: entry %d: agent_key is not the key %s names", ErrInvalid, e.Index, id)
			}
		case "checkpoint":
			if run == "" {
				return n, fmt.Errorf("%w: entry %d: a checkpoint with no run.principals before it", ErrInvalid, e.Index)
			}
			b := e.Body()
			cv, ok1 := b.Get("checkpoint")
			sv, ok2 := b.Get("sig")
			if !ok1 || !ok2 || sv.Kind() != canon.KindString {
				return n, fmt.Errorf("%w: entry %d: a checkpoint entry needs checkpoint and sig", ErrInvalid, e.Index)
			}
			sig, err := base64.RawURLEncoding.DecodeString(sv.Str())
			if err != nil {
				return n, fmt.Errorf("%w: entry %d: sig: %w", ErrInvalid, e.Index, err)
			}
			c, err := VerifyCheckpoint(cv.AppendJCS(nil), sig, agent)
			if err != nil {
				return n, fmt.Errorf("entry %d: %w", e.Index, err)
			}
			if c.Run != run || c.Journal.Count != e.Index || c.Journal.ID != e.Prev {
				return n, fmt.Errorf("%w: entry %d: the checkpoint names run %s at entry %d after %s; it stands in run %s at entry %d after %s",
					ErrInvalid, e.Index, c.Run, c.Journal.Count, c.Journal.ID, run, e.Index, e.Prev)
			}
			n++
		}
	}
	return n, nil
}
