// Package standing is standing grants (docs/SPEC.md §3.6, conformance
// class C20): a mint policy, signed by the issuer, lets a named holder
// turn a held grant set into children minted on demand — each covered by
// the policy's bounds through the attenuation path (grant.Covers), each
// triggered by a matching event, no more than the policy's total and rate
// allow, and only inside its validity window.
//
// The package decides; it does not count. How many children a policy has
// minted, in total and in the current window, is state the caller keeps
// durably and exactly (package standing/mintdb); Mint takes those counts
// and refuses past them. The package is pure.
package standing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
)

// Types and DSSE payload types.
const (
	PolicyType          = "cordon.mint-policy.v1"
	EventType           = "cordon.event.v1"
	MintedType          = "cordon.minted.v1"
	PolicyPayloadType   = "application/vnd.cordon.mint-policy.v1+json"
	MintedPayloadType   = "application/vnd.cordon.minted.v1+json"
	MaxChildren         = 1 << 20
	maxTriggers         = 64
	maxMatch            = 32
	maxWindowMS         = 366 * 24 * 3600 * 1000
	maxValidityWindowMS = 10 * 366 * 24 * 3600 * 1000
)

var (
	// ErrInvalid is wrapped by errors about a malformed policy, event or
	// minted child.
	ErrInvalid = errors.New("invalid standing grant document")
	// ErrSigner is wrapped when a policy is not signed by the issuer it
	// names, or a minted child not by the policy's holder.
	ErrSigner = errors.New("wrong signer")
	// ErrUnmatched is wrapped when an event matches none of the
	// policy's triggers.
	ErrUnmatched = errors.New("event does not match the policy")
	// ErrExpired is wrapped when a mint falls outside the policy's
	// validity window.
	ErrExpired = errors.New("policy not valid at this time")
	// ErrRate is wrapped when a mint would exceed the policy's rate.
	ErrRate = errors.New("mint rate exceeded")
	// ErrExhausted is wrapped when the policy has minted all it may.
	ErrExhausted = errors.New("policy exhausted")
)

// Trigger is an event type and the fields it must carry, exactly.
type Trigger struct {
	Type  string
	Match map[string]string
}

// Policy is a mint policy.
type Policy struct {
	Issuer      canon.ID   // the issuer's key id: the policy's signer
	Holder      canon.ID   // the key id that mints children
	Parent      *grant.Set // the held grant set
	Bounds      *grant.Set // every child is covered by it; it is covered by Parent
	MaxChildren int64      // children in total
	RateCount   int64      // children per window …
	RateWindow  int64      // … of this many ms
	Triggers    []Trigger
	NotBefore   int64 // validity window, unix ms: [NotBefore, NotAfter)
	NotAfter    int64
	jcs         []byte
}

var word = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`) })

// ParsePolicy reads a policy in exactly its canonical form and checks it:
// the bounds are covered by the parent, counts and windows are positive
// and bounded, triggers are well formed.
func ParsePolicy(data []byte) (*Policy, error) {
	o, r, v, err := readCanonical(data)
	if err != nil {
		return nil, err
	}
	p := &Policy{jcs: bytes.Clone(data)}
	typ, _ := o.Str("type", true)
	issuer, _ := o.Str("issuer", true)
	holder, _ := o.Str("holder", true)
	o.Use("parent")
	o.Use("bounds")
	p.MaxChildren, _ = o.Int("max_children", true)
	ro, _ := o.Object("rate", true)
	if ro != nil {
		p.RateCount, _ = ro.Int("count", true)
		p.RateWindow, _ = ro.Int("window_ms", true)
		ro.End()
	}
	trig, _ := o.Array("triggers", true)
	p.NotBefore, _ = o.Int("not_before_ms", true)
	p.NotAfter, _ = o.Int("not_after_ms", true)
	o.End()
	for i, t := range trig {
		to := r.Object(t, fmt.Sprintf("triggers[%d]", i))
		var tr Trigger
		tr.Type, _ = to.Str("type", true)
		mo, _ := to.Object("match", true)
		if mo != nil {
			tr.Match = map[string]string{}
			for _, k := range mo.Members() {
				tr.Match[k], _ = mo.Str(k, true)
			}
			mo.End()
		}
		to.End()
		p.Triggers = append(p.Triggers, tr)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	bad := func(format string, args ...any) (*Policy, error) {
		return nil, fmt.Errorf("%w: policy: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if typ != PolicyType {
		return bad("type %q, want %q", typ, PolicyType)
	}
	if p.Issuer, err = canon.ParseID(issuer); err != nil {
		return bad("issuer: %v", err)
	}
	if p.Holder, err = canon.ParseID(holder); err != nil {
		return bad("holder: %v", err)
	}
	if p.Issuer == p.Holder {
		return bad("the holder is the issuer: a standing grant gives authority to another principal")
	}
	pv, _ := v.Get("parent")
	bv, _ := v.Get("bounds")
	if p.Parent, err = grant.FromValue(pv); err != nil {
		return bad("parent: %v", err)
	}
	if p.Bounds, err = grant.FromValue(bv); err != nil {
		return bad("bounds: %v", err)
	}
	if err := grant.Covers(p.Parent, p.Bounds); err != nil {
		return nil, fmt.Errorf("%w: policy: the bounds are wider than the held grant set: %w", ErrInvalid, err)
	}
	switch {
	case p.MaxChildren < 1 || p.MaxChildren > MaxChildren:
		return bad("max_children %d outside 1…%d", p.MaxChildren, MaxChildren)
	case p.RateCount < 1 || p.RateCount > p.MaxChildren:
		return bad("rate.count %d outside 1…max_children", p.RateCount)
	case p.RateWindow < 1 || p.RateWindow > maxWindowMS:
		return bad("rate.window_ms %d outside 1…%d", p.RateWindow, maxWindowMS)
	case p.NotBefore < 0 || p.NotAfter <= p.NotBefore || p.NotAfter-p.NotBefore > maxValidityWindowMS:
		return bad("validity [%d, %d) is empty, negative or longer than ten years", p.NotBefore, p.NotAfter)
	case len(p.Triggers) < 1 || len(p.Triggers) > maxTriggers:
		return bad("%d triggers, want 1…%d", len(p.Triggers), maxTriggers)
	}
	for i, t := range p.Triggers {
		if !word().MatchString(t.Type) {
			return bad("triggers[%d].type %q is not an event type", i, t.Type)
		}
		if len(t.Match) > maxMatch {
			return bad("triggers[%d]: more than %d conditions", i, maxMatch)
		}
		for k := range t.Match {
			if !word().MatchString(k) {
				return bad("triggers[%d].match: %q is not a field name", i, k)
			}
		}
	}
	return p, nil
}

// JCS returns the policy's canonical bytes, and ID its address.
func (p *Policy) JCS() []byte  { return bytes.Clone(p.jcs) }
func (p *Policy) ID() canon.ID { return canon.Sum(p.jcs) }

// OpenPolicy verifies a signed policy: the envelope is signed by issuer,
// and the policy names issuer as its issuer.
func OpenPolicy(envelope []byte, issuer sign.PublicKey) (*Policy, error) {
	payload, err := sign.Open(envelope, issuer, PolicyPayloadType)
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(payload)
	if err != nil {
		return nil, err
	}
	if p.Issuer != issuer.ID() {
		return nil, fmt.Errorf("%w: the policy names issuer %s but is signed by %s", ErrSigner, p.Issuer, issuer.ID())
	}
	return p, nil
}

// Event is something that happened, which may trigger a mint.
type Event struct {
	Kind   string
	ID     string // unique per source: an event mints at most once
	AtMS   int64
	Fields map[string]string
	jcs    []byte
}

// ParseEvent reads an event in exactly its canonical form.
func ParseEvent(data []byte) (*Event, error) {
	o, r, _, err := readCanonical(data)
	if err != nil {
		return nil, err
	}
	e := &Event{jcs: bytes.Clone(data), Fields: map[string]string{}}
	typ, _ := o.Str("type", true)
	e.Kind, _ = o.Str("kind", true)
	e.ID, _ = o.Str("id", true)
	e.AtMS, _ = o.Int("at_ms", true)
	fo, _ := o.Object("fields", true)
	if fo != nil {
		for _, k := range fo.Members() {
			e.Fields[k], _ = fo.Str(k, true)
		}
		fo.End()
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: event: %w", ErrInvalid, err)
	}
	if typ != EventType || !word().MatchString(e.Kind) || e.ID == "" || len(e.ID) > 256 || e.AtMS < 0 {
		return nil, fmt.Errorf("%w: event: want type %q, a kind, an id of 1–256 bytes and at_ms ≥ 0", ErrInvalid, EventType)
	}
	return e, nil
}

// ContentID is the event's address.
func (e *Event) ContentID() canon.ID { return canon.Sum(e.jcs) }

// Matches reports the first trigger the event matches.
func (p *Policy) Matches(e *Event) (int, bool) {
	for i, t := range p.Triggers {
		if t.Type != e.Kind {
			continue
		}
		ok := true
		for k, v := range t.Match {
			if got, has := e.Fields[k]; !has || got != v {
				ok = false
				break
			}
		}
		if ok {
			return i, true
		}
	}
	return 0, false
}

// Counts is what a policy has minted so far: in total, and within the
// rate window that ends at the mint's time.
type Counts struct {
	Total    int64
	InWindow int64
}

// Minted is a child grant set minted under a policy.
type Minted struct {
	Policy canon.ID
	Event  canon.ID
	Seq    int64 // the child's number under the policy, from 0
	AtMS   int64 // when it was minted
	Grants *grant.Set
}

// JCS returns the minted child's canonical form.
func (m *Minted) JCS() []byte {
	b, err := json.Marshal(map[string]any{"type": MintedType, "policy": m.Policy.String(), "event": m.Event.String(),
		"seq": m.Seq, "at_ms": m.AtMS, "grants": json.RawMessage(m.Grants.JCS())})
	if err != nil {
		panic(err)
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err)
	}
	return c
}

// Mint decides one mint at time nowMS: the policy must be valid then, the
// event must match a trigger, the child (nil: the bounds themselves) must
// be covered by the bounds, and the counts must leave room. It returns
// the child to sign; the caller records the mint (and its counts)
// durably before handing the child out.
func Mint(p *Policy, e *Event, child *grant.Set, nowMS int64, c Counts) (*Minted, error) {
	if nowMS < p.NotBefore || nowMS >= p.NotAfter {
		return nil, fmt.Errorf("%w: now %d is outside [%d, %d)", ErrExpired, nowMS, p.NotBefore, p.NotAfter)
	}
	if _, ok := p.Matches(e); !ok {
		kinds := []string{}
		for _, t := range p.Triggers {
			kinds = append(kinds, t.Type)
		}
		slices.Sort(kinds)
		return nil, fmt.Errorf("%w: event %q of kind %q matches no trigger (kinds %v, with their field conditions)", ErrUnmatched, e.ID, e.Kind, slices.Compact(kinds))
	}
	if child == nil {
		child = p.Bounds
	}
	if err := grant.Covers(p.Bounds, child); err != nil {
		return nil, fmt.Errorf("the child is wider than the policy's bounds: %w", err)
	}
	if c.Total >= p.MaxChildren {
		return nil, fmt.Errorf("%w: %d of %d children minted", ErrExhausted, c.Total, p.MaxChildren)
	}
	if c.InWindow >= p.RateCount {
		return nil, fmt.Errorf("%w: %d children in the last %d ms, the policy allows %d", ErrRate, c.InWindow, p.RateWindow, p.RateCount)
	}
	return &Minted{Policy: p.ID(), Event: e.ContentID(), Seq: c.Total, AtMS: nowMS, Grants: child}, nil
}

// Seal signs a minted child with the holder's key, which must be the
// policy's holder.
func Seal(p *Policy, m *Minted, holder *sign.PrivateKey) ([]byte, error) {
	if holder.Public().ID() != p.Holder {
		return nil, fmt.Errorf("%w: the policy's holder is %s, not %s", ErrSigner, p.Holder, holder.Public().ID())
	}
	return sign.Seal(holder, MintedPayloadType, m.JCS()), nil
}

// OpenMinted verifies a minted child against its policy: signed by the
// policy's holder, naming the policy, covered by its bounds.
func OpenMinted(envelope []byte, p *Policy, holder sign.PublicKey) (*Minted, error) {
	if holder.ID() != p.Holder {
		return nil, fmt.Errorf("%w: the policy's holder is %s, not %s", ErrSigner, p.Holder, holder.ID())
	}
	payload, err := sign.Open(envelope, holder, MintedPayloadType)
	if err != nil {
		return nil, err
	}
	o, r, v, err := readCanonical(payload)
	if err != nil {
		return nil, err
	}
	typ, _ := o.Str("type", true)
	pol, _ := o.Str("policy", true)
	ev, _ := o.Str("event", true)
	m := &Minted{}
	m.Seq, _ = o.Int("seq", true)
	m.AtMS, _ = o.Int("at_ms", true)
	o.Use("grants")
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: minted: %w", ErrInvalid, err)
	}
	if typ != MintedType {
		return nil, fmt.Errorf("%w: minted: type %q", ErrInvalid, typ)
	}
	if m.Policy, err = canon.ParseID(pol); err != nil || m.Policy != p.ID() {
		return nil, fmt.Errorf("%w: minted under policy %q, not %s", ErrInvalid, pol, p.ID())
	}
	if m.Event, err = canon.ParseID(ev); err != nil {
		return nil, fmt.Errorf("%w: minted: event: %w", ErrInvalid, err)
	}
	gv, _ := v.Get("grants")
	if m.Grants, err = grant.FromValue(gv); err != nil {
		return nil, fmt.Errorf("%w: minted: grants: %w", ErrInvalid, err)
	}
	if err := grant.Covers(p.Bounds, m.Grants); err != nil {
		return nil, fmt.Errorf("minted child wider than the policy's bounds: %w", err)
	}
	if m.Seq < 0 || m.Seq >= p.MaxChildren || m.AtMS < p.NotBefore || m.AtMS >= p.NotAfter {
		return nil, fmt.Errorf("%w: minted child %d at %d is outside the policy's count or window", ErrInvalid, m.Seq, m.AtMS)
	}
	return m, nil
}

func readCanonical(data []byte) (*jsonv.Obj, *jsonv.Reader, canon.Value, error) {
	v, r, o, err := jsonv.Canonical(data)
	if err != nil {
		return nil, nil, canon.Value{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return o, r, v, nil
}
