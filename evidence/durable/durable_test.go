package durable

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
)

var (
	man  = canon.Sum([]byte("manifest"))
	gr   = canon.Sum([]byte("grants"))
	env  = canon.Sum([]byte("environment"))
	snap = canon.Sum([]byte("snapshot 1"))
	snp2 = canon.Sum([]byte("snapshot 2"))
)

func seg(kind string) Segment { return Segment{Kind: kind, Manifest: man, Grants: gr, Env: env} }

func exec(uj int64) Segment { s := seg(Execute); s.EnergyUJ = uj; return s }
func suspend(id canon.ID) Segment {
	s := seg(Suspend)
	s.Snapshot = id
	return s
}
func resume(id canon.ID, idle int64) Segment {
	s := seg(Resume)
	s.Snapshot, s.IdleUJ, s.IdleProvenance, s.ParkedMS = id, idle, "Estimator", 1000
	return s
}

func build(t *testing.T, segs ...Segment) *Record {
	t.Helper()
	r := New()
	for i, s := range segs {
		if _, err := r.Append(s); err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
	}
	return r
}

// TestChain: a run that parks twice; the head advances with each segment,
// totals add up, and the wire form recomputes the same head from genesis.
func TestChain(t *testing.T) {
	r := New()
	var heads []canon.ID
	for _, s := range []Segment{exec(100), suspend(snap), resume(snap, 5), exec(200), suspend(snp2), resume(snp2, 7), exec(1), seg(Close)} {
		h, err := r.Append(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, prev := range heads {
			if prev == h {
				t.Fatal("the head did not advance")
			}
		}
		heads = append(heads, h)
	}
	h := r.Head()
	if h.Count != 8 || h.State != Closed || h.EnergyUJ != 301 || h.IdleUJ != 12 || h.Parks != 2 || h.Head != heads[7] {
		t.Fatalf("head %+v", h)
	}
	back, err := Parse(r.Wire())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Head().JCS(), h.JCS()) || !bytes.Equal(back.Wire(), r.Wire()) {
		t.Fatal("the wire form does not recompute the head")
	}
	// Each line's prev is the previous line's ContentId.
	lines := bytes.Split(bytes.TrimSuffix(r.Wire(), []byte("\n")), []byte("\n"))
	for i := 1; i < len(lines); i++ {
		if !bytes.Contains(lines[i], []byte(`"prev":"`+canon.Sum(lines[i-1]).String()+`"`)) {
			t.Fatalf("line %d does not link to line %d", i+1, i)
		}
	}
	// A parked record says which snapshot a resume must name.
	p := build(t, exec(1), suspend(snap))
	if p.Head().State != Parked || p.Head().Snapshot != snap {
		t.Fatalf("parked head %+v", p.Head())
	}
	// A parked run may be closed; its last park's idle energy is counted.
	c := seg(Close)
	c.IdleUJ, c.IdleProvenance = 9, "HwShunt"
	if _, err := p.Append(c); err != nil || p.Head().IdleUJ != 9 {
		t.Fatalf("close while parked: %v %+v", err, p.Head())
	}
}

// TestRefusals: each rule of the record, attacked.
func TestRefusals(t *testing.T) {
	other := func(f func(*Segment)) Segment { s := resume(snap, 1); f(&s); return s }
	closed := build(t, exec(1), seg(Close))
	parked := func() *Record { return build(t, exec(1), suspend(snap)) }
	running := func() *Record { return build(t, exec(1)) }
	badProv := resume(snap, 1)
	badProv.IdleProvenance = "Guess"
	closeNoIdle := seg(Close)
	execSnap := exec(1)
	execSnap.Snapshot = snap
	suspendEnergy := suspend(snap)
	suspendEnergy.EnergyUJ = 5
	runClosedIdle := seg(Close)
	runClosedIdle.IdleUJ, runClosedIdle.IdleProvenance = 1, "Estimator"
	neg := exec(-1)
	cases := []struct {
		name string
		r    *Record
		s    Segment
		want string
	}{
		{"resume from another snapshot", parked(), resume(snp2, 1), "parked with"},
		{"execute while parked", parked(), exec(1), "execute while parked"},
		{"suspend while parked", parked(), suspend(snp2), "suspend while parked"},
		{"resume while running", running(), resume(snap, 1), "resume while running"},
		{"execute after close", closed, exec(1), "append after close"},
		{"suspend after close", closed, suspend(snap), "append after close"},
		{"close after close", closed, seg(Close), "append after close"},
		{"another manifest", parked(), other(func(s *Segment) { s.Manifest = canon.Sum([]byte("x")) }), "own manifest"},
		{"another grant set", parked(), other(func(s *Segment) { s.Grants = canon.Sum([]byte("x")) }), "own grants"},
		{"another environment", parked(), other(func(s *Segment) { s.Env = canon.Sum([]byte("x")) }), "own environment"},
		{"genesis not execute", New(), suspend(snap), "first segment is an execute"},
		{"suspend without snapshot", running(), seg(Suspend), "names the snapshot"},
		{"idle provenance", parked(), badProv, "provenance"},
		{"close of parked without idle", parked(), closeNoIdle, "provenance"},
		{"idle on a running close", running(), runClosedIdle, "not parked"},
		{"snapshot on execute", running(), execSnap, "carries no snapshot"},
		{"energy on suspend", running(), suspendEnergy, "carries no energy"},
		{"negative energy", running(), neg, "negative"},
		{"unknown kind", running(), seg("checkpoint"), "unknown kind"},
		{"no environment", running(), other(func(s *Segment) { s.Kind, s.Env, s.Snapshot, s.IdleProvenance = Execute, canon.ID{}, canon.ID{}, "" }), "no env"},
	}
	for _, c := range cases {
		before := c.r.Head()
		_, err := c.r.Append(c.s)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrRefused mentioning %q", c.name, err, c.want)
		}
		if after := c.r.Head(); !bytes.Equal(after.JCS(), before.JCS()) {
			t.Errorf("%s: a refused segment changed the record", c.name)
		}
	}
}

// TestTamper: edits, deletions, reorderings and torn lines of the wire
// form are caught; a segment that Append would refuse cannot be forged
// into a record either.
func TestTamper(t *testing.T) {
	r := build(t, exec(100), suspend(snap), resume(snap, 5), exec(200), seg(Close))
	wire := string(r.Wire())
	lines := strings.SplitAfter(wire, "\n")
	lines = lines[:len(lines)-1]
	cases := map[string]string{
		"edited energy":   strings.Replace(wire, `"energy_uj":200`, `"energy_uj":2`, 1),
		"edited idle":     strings.Replace(wire, `"idle_uj":5`, `"idle_uj":0`, 1),
		"deleted middle":  lines[0] + lines[1] + lines[3] + lines[4],
		"deleted genesis": lines[1] + lines[2] + lines[3] + lines[4],
		"reordered":       lines[0] + lines[2] + lines[1] + lines[3] + lines[4],
		"duplicated":      lines[0] + lines[0] + lines[1],
		"torn":            strings.TrimSuffix(wire, "\n"),
		"whitespace":      strings.Replace(wire, `{"env"`, `{ "env"`, 1),
		"extra member":    strings.Replace(lines[0], `"kind":"execute"`, `"kind":"execute","x":1`, 1),
		"blank line":      lines[0] + "\n" + lines[1],
		"empty":           "",
	}
	for name, w := range cases {
		if _, err := Parse([]byte(w)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A forged but well-linked record that breaks a rule: the rule holds.
	f := New()
	f.apply(&Segment{Kind: Execute, Manifest: man, Grants: gr, Env: env, EnergyUJ: 1})
	s2 := suspend(snap)
	s2.Seq, s2.Prev = 1, f.head
	f.apply(&s2)
	s3 := resume(snp2, 1) // another snapshot
	s3.Seq, s3.Prev = 2, f.head
	f.apply(&s3)
	if _, err := Parse(f.Wire()); !errors.Is(err, ErrRefused) {
		t.Fatalf("well-linked record resuming another snapshot: %v", err)
	}
}

// TestSignedHead: a truncated record is a valid shorter record; the head
// the steward signed is what catches it.
func TestSignedHead(t *testing.T) {
	k, _ := sign.Generate()
	r := build(t, exec(1), suspend(snap), resume(snap, 2), seg(Close))
	env := r.Head().Seal(k)
	signed, err := OpenHead(env, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	wire := r.Wire()
	short := wire[:bytes.LastIndexByte(wire[:len(wire)-1], '\n')+1]
	tr, err := Parse(short)
	if err != nil {
		t.Fatalf("a prefix is a record: %v", err)
	}
	if bytes.Equal(tr.Head().JCS(), signed) {
		t.Fatal("a truncated record matches the signed head")
	}
	full, _ := Parse(wire)
	if !bytes.Equal(full.Head().JCS(), signed) {
		t.Fatal("the full record does not match its signed head")
	}
}

// FuzzParse: Parse never panics, and what it accepts re-encodes exactly.
func FuzzParse(f *testing.F) {
	f.Add(build(&testing.T{}, exec(100), suspend(snap), resume(snap, 5), seg(Close)).Wire())
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrBroken) && !errors.Is(err, ErrRefused) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		if !bytes.Equal(r.Wire(), data) {
			t.Fatalf("accepted %q but re-encodes to %q", data, r.Wire())
		}
	})
}
