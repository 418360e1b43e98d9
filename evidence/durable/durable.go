// Package durable is the durable run record (docs/SPEC.md §9, conformance
// class C6): a run as a hash-chained list of segments — execute, suspend,
// resume, …, close — so that a run parked today and resumed tomorrow, on
// this host or another, is one record whose head recomputes from its
// genesis.
//
// Each segment names the run's manifest, grant set and environment
// address, which never change; a suspend names the snapshot the run was
// parked with, and the resume must name the same one; a resume carries the
// idle energy accrued while parked. Append refuses what the record forbids
// (an execute while parked, a resume from another snapshot or with another
// manifest, grant set or environment, anything after close), and Parse
// refuses a record whose chain is broken or that Append would have
// refused. The package is pure.
package durable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// Types of the documents and the DSSE payload type of a signed head.
const (
	SegmentType     = "cordon.segment.v1"
	HeadType        = "cordon.record-head.v1"
	HeadPayloadType = "application/vnd.cordon.record-head.v1+json"
)

// Kinds of segment.
const (
	Execute = "execute" // work ran; carries its energy (and receipt)
	Suspend = "suspend" // the run parked with a snapshot
	Resume  = "resume"  // the run continued from that snapshot; carries the idle energy
	Close   = "close"   // the run ended; nothing may follow
)

// States of a record.
const (
	Running = "running"
	Parked  = "parked"
	Closed  = "closed"
)

// Limits.
const (
	MaxSegments = 1 << 20
	MaxLine     = 64 << 10
)

var (
	// ErrBroken is wrapped when a record's wire form is not a chain: a
	// line not in canonical form, an unknown member, a wrong sequence
	// number or link.
	ErrBroken = errors.New("durable record broken")
	// ErrRefused is wrapped when a segment breaks the record's rules.
	ErrRefused = errors.New("durable record refused")
)

// Segment is one step of a run.
type Segment struct {
	Seq  uint64
	Prev canon.ID // ContentId of the previous segment's JCS; zero for the genesis
	Kind string
	// The run's fixed identity: every segment names the same three.
	Manifest, Grants, Env canon.ID
	// Snapshot: the run's state when parked (suspend), or the state it
	// continued from (resume).
	Snapshot canon.ID
	// EnergyUJ is the work's energy (execute).
	EnergyUJ int64
	// IdleUJ and IdleProvenance: the energy accrued while parked, and
	// how it was known ("HwShunt" measured, "Estimator" estimated); on a
	// resume, and on a close of a parked run.
	IdleUJ         int64
	IdleProvenance string
	ParkedMS       int64    // how long the run was parked (resume, close of a parked run)
	Receipt        canon.ID // the work's receipt (execute), optional
}

// JCS returns the segment's canonical form.
func (s *Segment) JCS() []byte {
	doc := map[string]any{"type": SegmentType, "seq": s.Seq, "kind": s.Kind,
		"manifest": s.Manifest.String(), "grants": s.Grants.String(), "env": s.Env.String()}
	if !s.Prev.IsZero() {
		doc["prev"] = s.Prev.String()
	}
	switch s.Kind {
	case Execute:
		doc["energy_uj"] = s.EnergyUJ
		if !s.Receipt.IsZero() {
			doc["receipt"] = s.Receipt.String()
		}
	case Suspend:
		doc["snapshot"] = s.Snapshot.String()
	case Resume:
		doc["snapshot"] = s.Snapshot.String()
		doc["idle_uj"], doc["idle_provenance"], doc["parked_ms"] = s.IdleUJ, s.IdleProvenance, s.ParkedMS
	case Close:
		if s.IdleProvenance != "" {
			doc["idle_uj"], doc["idle_provenance"], doc["parked_ms"] = s.IdleUJ, s.IdleProvenance, s.ParkedMS
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err) // strings and checked integers only
	}
	return c
}

// ID is the segment's address.
func (s *Segment) ID() canon.ID { return canon.Sum(s.JCS()) }

// Record is a run's segments from genesis, checked.
type Record struct {
	segs   []Segment
	wire   bytes.Buffer
	head   canon.ID
	state  string
	energy int64
	idle   int64
	parks  int
	parked canon.ID // the snapshot of the last suspend, while parked
}

// New returns an empty record; its first segment must be an execute.
func New() *Record { return &Record{} }

// Append checks s against the record and adds it, setting its Seq and
// Prev. Nothing is added when it is refused.
func (r *Record) Append(s Segment) (canon.ID, error) {
	s.Seq, s.Prev = uint64(len(r.segs)), r.head
	if err := r.check(&s); err != nil {
		return canon.ID{}, err
	}
	r.apply(&s)
	return r.head, nil
}

func refusef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRefused}, args...)...)
}

// check applies the record's rules to the next segment s.
func (r *Record) check(s *Segment) error {
	if r.state == Closed {
		return refusef("segment %d: append after close", s.Seq)
	}
	if len(r.segs) >= MaxSegments {
		return refusef("a record holds at most %d segments", MaxSegments)
	}
	for _, m := range []struct {
		name string
		id   canon.ID
	}{{"manifest", s.Manifest}, {"grants", s.Grants}, {"env", s.Env}} {
		if m.id.IsZero() {
			return refusef("segment %d: no %s address", s.Seq, m.name)
		}
	}
	if s.EnergyUJ < 0 || s.IdleUJ < 0 || s.ParkedMS < 0 {
		return refusef("segment %d: a negative energy or duration", s.Seq)
	}
	// Integers the canonical form carries exactly, and totals Parse
	// accepts: what Append takes, Parse takes back.
	if s.EnergyUJ > canon.MaxInt || s.IdleUJ > canon.MaxInt || s.ParkedMS > canon.MaxInt {
		return refusef("segment %d: an energy or duration above %d (2^53-1), which the record cannot carry", s.Seq, int64(canon.MaxInt))
	}
	if r.energy+s.EnergyUJ > canon.MaxInt || r.idle+s.IdleUJ > canon.MaxInt {
		return refusef("segment %d: the record's energy totals would pass %d (2^53-1)", s.Seq, int64(canon.MaxInt))
	}
	if len(r.segs) == 0 {
		if s.Kind != Execute {
			return refusef("the first segment is an execute, not %s", s.Kind)
		}
	} else {
		g := r.segs[0]
		switch {
		case s.Manifest != g.Manifest:
			return refusef("segment %d: manifest %s, but the run's manifest is %s; a run continues only with its own manifest", s.Seq, s.Manifest, g.Manifest)
		case s.Grants != g.Grants:
			return refusef("segment %d: grant set %s, but the run's is %s; a run continues only under its own grants", s.Seq, s.Grants, g.Grants)
		case s.Env != g.Env:
			return refusef("segment %d: environment %s, but the run's is %s; a run continues only in its own environment", s.Seq, s.Env, g.Env)
		}
	}
	extra := func(cond bool, what string) error {
		if cond {
			return refusef("segment %d: a %s segment carries no %s", s.Seq, s.Kind, what)
		}
		return nil
	}
	idle := func() error {
		if s.IdleProvenance != "HwShunt" && s.IdleProvenance != "Estimator" {
			return refusef("segment %d: idle energy provenance %q, want HwShunt or Estimator", s.Seq, s.IdleProvenance)
		}
		return nil
	}
	switch s.Kind {
	case Execute:
		if r.state == Parked {
			return refusef("segment %d: execute while parked; resume first", s.Seq)
		}
		if err := extra(!s.Snapshot.IsZero(), "snapshot"); err != nil {
			return err
		}
		return extra(s.IdleProvenance != "" || s.IdleUJ != 0 || s.ParkedMS != 0, "idle energy")
	case Suspend:
		if r.state != Running {
			return refusef("segment %d: suspend while %s", s.Seq, r.state)
		}
		if s.Snapshot.IsZero() {
			return refusef("segment %d: a suspend names the snapshot the run parks with", s.Seq)
		}
		if err := extra(s.EnergyUJ != 0 || !s.Receipt.IsZero(), "energy or receipt"); err != nil {
			return err
		}
		return extra(s.IdleProvenance != "" || s.IdleUJ != 0 || s.ParkedMS != 0, "idle energy")
	case Resume:
		if r.state != Parked {
			return refusef("segment %d: resume while %s", s.Seq, r.state)
		}
		if s.Snapshot != r.parked {
			return refusef("segment %d: resumes from snapshot %s, but the run parked with %s", s.Seq, s.Snapshot, r.parked)
		}
		if err := extra(s.EnergyUJ != 0 || !s.Receipt.IsZero(), "work energy or receipt"); err != nil {
			return err
		}
		return idle()
	case Close:
		if err := extra(s.EnergyUJ != 0 || !s.Receipt.IsZero() || !s.Snapshot.IsZero(), "work energy, receipt or snapshot"); err != nil {
			return err
		}
		switch r.state {
		case Running:
			return extra(s.IdleProvenance != "" || s.IdleUJ != 0 || s.ParkedMS != 0, "idle energy (the run was not parked)")
		case Parked:
			return idle() // the last park's idle energy is accounted for
		}
		return refusef("segment %d: close of an empty record", s.Seq)
	case "":
		return refusef("segment %d: no kind", s.Seq)
	}
	return refusef("segment %d: unknown kind %q", s.Seq, s.Kind)
}

func (r *Record) apply(s *Segment) {
	if r.state == Closed {
		panic("durable: apply after close") // check refuses it
	}
	line := s.JCS()
	r.wire.Write(line)
	r.wire.WriteByte('\n')
	r.head = canon.Sum(line)
	r.segs = append(r.segs, *s)
	r.energy += s.EnergyUJ
	r.idle += s.IdleUJ
	switch s.Kind {
	case Execute, Resume:
		r.state = Running
	case Suspend:
		r.state, r.parked = Parked, s.Snapshot
		r.parks++
	case Close:
		r.state = Closed
	}
}

// Wire returns the record's wire form: each segment's JCS and a newline.
func (r *Record) Wire() []byte { return bytes.Clone(r.wire.Bytes()) }

// Segments returns the record's segments.
func (r *Record) Segments() []Segment { return append([]Segment(nil), r.segs...) }

// Head summarizes a record.
type Head struct {
	Count    uint64
	Head     canon.ID
	State    string
	EnergyUJ int64 // the sum of the execute segments' energy
	IdleUJ   int64 // the sum of the idle energy of every park
	Parks    int
	Snapshot canon.ID // while parked: the snapshot a resume must name
	// The run's identity.
	Manifest, Grants, Env canon.ID
}

// Head returns the record's head.
func (r *Record) Head() Head {
	h := Head{Count: uint64(len(r.segs)), Head: r.head, State: r.state, EnergyUJ: r.energy, IdleUJ: r.idle, Parks: r.parks}
	if r.state == Parked {
		h.Snapshot = r.parked
	}
	if len(r.segs) > 0 {
		h.Manifest, h.Grants, h.Env = r.segs[0].Manifest, r.segs[0].Grants, r.segs[0].Env
	}
	return h
}

// JCS returns the head's canonical form.
func (h Head) JCS() []byte {
	doc := map[string]any{"type": HeadType, "count": h.Count, "head": h.Head.String(), "state": h.State,
		"energy_uj": h.EnergyUJ, "idle_uj": h.IdleUJ, "parks": h.Parks,
		"manifest": h.Manifest.String(), "grants": h.Grants.String(), "env": h.Env.String()}
	if !h.Snapshot.IsZero() {
		doc["snapshot"] = h.Snapshot.String()
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err)
	}
	return c
}

// Seal signs the head.
func (h Head) Seal(k *sign.PrivateKey) []byte { return sign.Seal(k, HeadPayloadType, h.JCS()) }

// OpenHead verifies a signed head and returns its canonical bytes.
func OpenHead(envelope []byte, pub sign.PublicKey) ([]byte, error) {
	return sign.Open(envelope, pub, HeadPayloadType)
}

// Parse verifies a record's wire form from its genesis: every line is a
// segment in canonical form, numbered in order, linked to the previous
// line's ContentId, and allowed by the rules Append applies.
func Parse(wire []byte) (*Record, error) {
	if len(wire) == 0 {
		return nil, fmt.Errorf("%w: empty record", ErrBroken)
	}
	if wire[len(wire)-1] != '\n' {
		return nil, fmt.Errorf("%w: the last line has no newline (a torn write?)", ErrBroken)
	}
	r := New()
	for n, line := range bytes.Split(wire[:len(wire)-1], []byte{'\n'}) {
		if len(line) > MaxLine {
			return nil, fmt.Errorf("%w: line %d: longer than %d bytes", ErrBroken, n+1, MaxLine)
		}
		s, err := parseSegment(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if s.Seq != uint64(len(r.segs)) {
			return nil, fmt.Errorf("%w: line %d: seq %d, want %d", ErrBroken, n+1, s.Seq, len(r.segs))
		}
		if s.Prev != r.head {
			return nil, fmt.Errorf("%w: line %d: prev %s does not name the previous segment %s", ErrBroken, n+1, s.Prev, r.head)
		}
		if err := r.check(s); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		r.apply(s)
		if r.energy > canon.MaxInt || r.idle > canon.MaxInt {
			return nil, fmt.Errorf("%w: line %d: energy totals overflow", ErrBroken, n+1)
		}
	}
	return r, nil
}

// parseSegment reads one line: exactly a segment's canonical form.
func parseSegment(line []byte) (*Segment, error) {
	_, r, o, err := jsonv.Canonical(line)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroken, err)
	}
	typ, _ := o.Str("type", true)
	seq, _ := o.Int("seq", true)
	s := &Segment{}
	s.Kind, _ = o.Str("kind", true)
	ids := map[string]*canon.ID{"manifest": &s.Manifest, "grants": &s.Grants, "env": &s.Env}
	for _, name := range []string{"manifest", "grants", "env"} {
		str, _ := o.Str(name, true)
		if r.Err() == nil {
			if *ids[name], err = canon.ParseID(str); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBroken, name, err)
			}
		}
	}
	optID := func(name string, dst *canon.ID) {
		if str, ok := o.Str(name, false); ok && r.Err() == nil {
			id, err := canon.ParseID(str)
			if err != nil {
				r.Fail(name, "%v", err)
			}
			*dst = id
		}
	}
	optID("prev", &s.Prev)
	optID("snapshot", &s.Snapshot)
	optID("receipt", &s.Receipt)
	s.EnergyUJ, _ = o.Int("energy_uj", false)
	s.IdleUJ, _ = o.Int("idle_uj", false)
	s.ParkedMS, _ = o.Int("parked_ms", false)
	s.IdleProvenance, _ = o.Str("idle_provenance", false)
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroken, err)
	}
	if typ != SegmentType {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrBroken, typ, SegmentType)
	}
	if seq < 0 {
		return nil, fmt.Errorf("%w: seq %d", ErrBroken, seq)
	}
	s.Seq = uint64(seq)
	// A member the segment's kind does not carry would be dropped by JCS:
	// refuse it, so the line is exactly the segment.
	if !bytes.Equal(s.JCS(), line) {
		return nil, fmt.Errorf("%w: a %s segment with members its kind does not carry", ErrRefused, s.Kind)
	}
	return s, nil
}
