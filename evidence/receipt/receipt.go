// Package receipt implements cordon's execution receipts as specified in
// docs/SPEC.md §4.4: a receipt core in deterministic CBOR (what ran, under
// which grants, at which tier, for how long, producing what, on which
// devices, for how much energy), wrapped in a JCR-1 envelope signed by the
// host's steward key.
//
// Verify refuses a receipt unless the envelope and the core are canonical
// (decoded strictly, re-encoded, compared byte for byte), a signature by
// the given key verifies, each device record couples its provenance and
// measured figure (HwShunt has one, Estimator never), the total is the
// field-wise sum of the records, and total.measured_uj is present exactly
// when every record is measured.
package receipt

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/tier"
)

// Types of the core and of the envelope.
const (
	Type         = "cordon.receipt.v1"
	EnvelopeType = "cordon.jcr.v1" // JCR-1
)

// Provenances of an energy figure.
const (
	HwShunt   = "HwShunt"   // a hardware meter of the device: RAPL, NVML, a shunt
	Estimator = "Estimator" // a model; never a measurement
)

var (
	// ErrInvalid: the receipt is malformed or not canonical.
	ErrInvalid = errors.New("receipt: invalid")
	// ErrCoupling: a record's provenance and measured figure disagree.
	ErrCoupling = errors.New("receipt: provenance and measured_uj disagree")
	// ErrSum: the total is not the field-wise sum of the records.
	ErrSum = errors.New("receipt: total is not the sum of the device records")
	// ErrCoverage: total.measured_uj is present although a record is not
	// measured (or absent although all are), or a device class the run
	// used has no record.
	ErrCoverage = errors.New("receipt: coverage")
)

// Core is the receipt core (SPEC §2.6.3, §4.4).
type Core struct {
	Type        string            `cbor:"type"`
	Unit        string            `cbor:"unit"`
	Grants      string            `cbor:"grants"`
	Tier        string            `cbor:"tier"`
	StartNS     uint64            `cbor:"start_ns"`
	EndNS       uint64            `cbor:"end_ns"`
	Exit        int64             `cbor:"exit"`
	Outputs     map[string]string `cbor:"outputs"`
	Devices     []Device          `cbor:"devices"`
	Total       Total             `cbor:"total"`
	JournalRoot string            `cbor:"journal_root,omitempty"`
	Prev        string            `cbor:"prev,omitempty"`
}

// Device is the energy record of one device class.
type Device struct {
	Class       string       `cbor:"class"`
	Provenance  string       `cbor:"provenance"`
	EstimatedUJ uint64       `cbor:"estimated_uj"`
	MeasuredUJ  *uint64      `cbor:"measured_uj,omitempty"`
	BusyNS      uint64       `cbor:"busy_ns"`
	Attribution *Attribution `cbor:"attribution,omitempty"`
}

// Attribution marks a measured figure that is a share of a counter the
// run did not own alone (a package counter shared with other processes):
// measured_uj is the counter's delta times Num/Den, by Method.
type Attribution struct {
	Method string `cbor:"method"` // e.g. "cpu-time-share"
	Num    uint64 `cbor:"num"`
	Den    uint64 `cbor:"den"`
}

// Total is the field-wise sum of the device records.
type Total struct {
	EstimatedUJ uint64  `cbor:"estimated_uj"`
	MeasuredUJ  *uint64 `cbor:"measured_uj,omitempty"`
	BusyNS      uint64  `cbor:"busy_ns"`
}

var (
	encMode = mustEnc()
	decMode = mustDec()
)

func mustEnc() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return em
}

func mustDec() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxNestedLevels:   16,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}

// Encode returns the deterministic CBOR of c. It does not validate c.
func (c *Core) Encode() []byte {
	b, err := encMode.Marshal(c)
	if err != nil {
		panic(err) // strings, integers, maps: cannot fail
	}
	return b
}

// ID returns the receipt's ContentId: that of its core's CBOR bytes.
func (c *Core) ID() canon.ID { return canon.Sum(c.Encode()) }

// Classes returns the device classes the receipt meters, in order.
func (c *Core) Classes() []string {
	var out []string
	for _, d := range c.Devices {
		out = append(out, d.Class)
	}
	return out
}

// Finish computes Total from the records. Builders call it; verifiers do
// not.
func (c *Core) Finish() {
	var t Total
	measured, all := uint64(0), len(c.Devices) > 0
	for _, d := range c.Devices {
		t.EstimatedUJ += d.EstimatedUJ
		t.BusyNS += d.BusyNS
		if d.MeasuredUJ == nil {
			all = false
		} else {
			measured += *d.MeasuredUJ
		}
	}
	if all {
		t.MeasuredUJ = &measured
	}
	c.Total = t
}

// DecodeCore decodes a receipt core strictly: duplicate keys, indefinite
// lengths, tags and unknown members are refused while decoding into Core's
// typed fields (so no float, byte string or other type can stand in for a
// member), and the core must re-encode to the same bytes (canonical form,
// no missing members). Validate checks the text of the members.
func DecodeCore(b []byte) (*Core, error) {
	if len(b) > canon.DefaultMaxSize {
		return nil, fmt.Errorf("%w: core of %d bytes", ErrInvalid, len(b))
	}
	var c Core
	if err := decMode.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: core: %v", ErrInvalid, err)
	}
	if again := c.Encode(); !bytes.Equal(again, b) {
		return nil, fmt.Errorf("%w: core: a required member is missing or a member has the wrong type (it does not re-encode to the same bytes)", ErrInvalid)
	}
	return &c, nil
}

// Validate checks the rules of SPEC §4.4 on a decoded core.
func (c *Core) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	ident := func(s string) bool {
		if s == "" || len(s) > 64 || !('a' <= s[0] && s[0] <= 'z') {
			return false
		}
		for i := 0; i < len(s); i++ {
			x := s[i]
			if !('a' <= x && x <= 'z' || '0' <= x && x <= '9' || x == '-' || x == '_' || x == '.') {
				return false
			}
		}
		return true
	}
	if c.Type != Type {
		return bad("type %q, want %q", c.Type, Type)
	}
	for _, m := range [...]struct {
		name, v  string
		optional bool
	}{{"unit", c.Unit, false}, {"grants", c.Grants, false}, {"journal_root", c.JournalRoot, true}, {"prev", c.Prev, true}} {
		if m.optional && m.v == "" {
			continue
		}
		id, err := canon.ParseID(m.v)
		if err != nil {
			return bad("%s: %v", m.name, err)
		}
		if id.IsZero() {
			return bad("%s is the zero ContentId", m.name)
		}
	}
	if _, err := tier.Parse(c.Tier); err != nil {
		return bad("%v", err)
	}
	if c.EndNS < c.StartNS {
		return bad("end_ns %d is before start_ns %d", c.EndNS, c.StartNS)
	}
	if c.Outputs == nil {
		return bad("outputs must be a map (empty when the unit declares none)")
	}
	for p, id := range c.Outputs {
		if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || !plainText(p) {
			return bad("outputs: %q is not a canonical relative path", p)
		}
		if _, err := canon.ParseID(id); err != nil {
			return bad("outputs[%q]: %v", p, err)
		}
	}
	if len(c.Devices) == 0 {
		return bad("no device records: every run uses at least one device class")
	}
	for i, d := range c.Devices {
		if !ident(d.Class) {
			return bad("devices[%d]: class %q (want a lower-case identifier)", i, d.Class)
		}
		if i > 0 && c.Devices[i-1].Class >= d.Class {
			return bad("devices: classes must be distinct and sorted (%q after %q)", d.Class, c.Devices[i-1].Class)
		}
		switch d.Provenance {
		case HwShunt:
			if d.MeasuredUJ == nil {
				return fmt.Errorf("%w: devices[%d] (%s) is HwShunt without measured_uj", ErrCoupling, i, d.Class)
			}
		case Estimator:
			if d.MeasuredUJ != nil {
				return fmt.Errorf("%w: devices[%d] (%s) is an Estimator carrying measured_uj", ErrCoupling, i, d.Class)
			}
			if d.Attribution != nil {
				return fmt.Errorf("%w: devices[%d] (%s): only a measured figure can be attributed", ErrCoupling, i, d.Class)
			}
		default:
			return bad("devices[%d]: provenance %q (want HwShunt or Estimator)", i, d.Provenance)
		}
		if a := d.Attribution; a != nil && (!ident(a.Method) || a.Den == 0 || a.Num > a.Den) {
			return bad("devices[%d]: attribution must have a method and 0 ≤ num ≤ den, den > 0", i)
		}
	}
	var est, busy, meas uint64
	all := true
	var carry uint64
	for _, d := range c.Devices {
		var c1, c2 uint64
		est, c1 = bits.Add64(est, d.EstimatedUJ, 0)
		busy, c2 = bits.Add64(busy, d.BusyNS, 0)
		carry |= c1 | c2
		if d.MeasuredUJ == nil {
			all = false
		} else {
			var c3 uint64
			meas, c3 = bits.Add64(meas, *d.MeasuredUJ, 0)
			carry |= c3
		}
	}
	if carry != 0 {
		return fmt.Errorf("%w: the sum overflows 64 bits", ErrSum)
	}
	if c.Total.EstimatedUJ != est {
		return fmt.Errorf("%w: total.estimated_uj %d, records sum to %d", ErrSum, c.Total.EstimatedUJ, est)
	}
	if c.Total.BusyNS != busy {
		return fmt.Errorf("%w: total.busy_ns %d, records sum to %d", ErrSum, c.Total.BusyNS, busy)
	}
	switch {
	case all && c.Total.MeasuredUJ == nil:
		return fmt.Errorf("%w: every record is measured but total.measured_uj is absent", ErrCoverage)
	case !all && c.Total.MeasuredUJ != nil:
		return fmt.Errorf("%w: total.measured_uj is present but not every record is measured", ErrCoverage)
	case all && *c.Total.MeasuredUJ != meas:
		return fmt.Errorf("%w: total.measured_uj %d, records sum to %d", ErrSum, *c.Total.MeasuredUJ, meas)
	}
	return nil
}

// plainText reports whether s is valid UTF-8 without control characters
// or noncharacters.
func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE {
			return false
		}
	}
	return true
}

// CheckUsed checks that every device class the run used has its own
// record: energy of an accelerator must not be folded into another
// class's record.
func (c *Core) CheckUsed(used []string) error {
	for _, u := range used {
		if !slices.Contains(c.Classes(), u) {
			return fmt.Errorf("%w: the run used %q but the receipt has no record for it (folded into %v?)", ErrCoverage, u, c.Classes())
		}
	}
	return nil
}

type envelope struct {
	Type string          `cbor:"type"`
	Core cbor.RawMessage `cbor:"core"`
	Sigs []signature     `cbor:"sigs"`
}

type signature struct {
	KeyID string `cbor:"kid"`
	Sig   string `cbor:"sig"` // unpadded base64url of the 64-byte signature
}

// Seal validates c, signs its CBOR with k in the receipt context and
// returns the JCR-1 envelope and the receipt's ContentId.
func Seal(k *sign.PrivateKey, c *Core) ([]byte, canon.ID, error) {
	if err := c.Validate(); err != nil {
		return nil, canon.ID{}, err
	}
	core := c.Encode()
	env := envelope{Type: EnvelopeType, Core: core, Sigs: []signature{{
		KeyID: k.Public().ID().String(),
		Sig:   base64.RawURLEncoding.EncodeToString(k.Sign(sign.PayloadReceipt, core)),
	}}}
	b, err := encMode.Marshal(env)
	if err != nil {
		return nil, canon.ID{}, err
	}
	return b, canon.Sum(core), nil
}

// Verify checks a JCR-1 envelope under pub and returns the core and its
// ContentId. See the package documentation for what is checked.
func Verify(b []byte, pub sign.PublicKey) (*Core, canon.ID, error) {
	if len(b) > canon.DefaultMaxSize {
		return nil, canon.ID{}, fmt.Errorf("%w: envelope of %d bytes", ErrInvalid, len(b))
	}
	var env envelope
	if err := decMode.Unmarshal(b, &env); err != nil {
		return nil, canon.ID{}, fmt.Errorf("%w: envelope: %v", ErrInvalid, err)
	}
	if again, err := encMode.Marshal(env); err != nil || !bytes.Equal(again, b) {
		return nil, canon.ID{}, fmt.Errorf("%w: envelope does not round-trip to the same bytes", ErrInvalid)
	}
	if env.Type != EnvelopeType {
		return nil, canon.ID{}, fmt.Errorf("%w: envelope type %q, want %q", ErrInvalid, env.Type, EnvelopeType)
	}
	if len(env.Sigs) == 0 {
		return nil, canon.ID{}, fmt.Errorf("%w: no signatures", ErrInvalid)
	}
	want := pub.ID().String()
	ok := false
	seen := map[string]bool{}
	for i, s := range env.Sigs {
		if _, err := canon.ParseID(s.KeyID); err != nil {
			return nil, canon.ID{}, fmt.Errorf("%w: sigs[%d].kid: %w", ErrInvalid, i, err)
		}
		if seen[s.KeyID] {
			return nil, canon.ID{}, fmt.Errorf("%w: sigs[%d]: a second signature by %s", ErrInvalid, i, s.KeyID)
		}
		seen[s.KeyID] = true
		sig, err := base64.RawURLEncoding.Strict().DecodeString(s.Sig)
		if err != nil || base64.RawURLEncoding.EncodeToString(sig) != s.Sig {
			return nil, canon.ID{}, fmt.Errorf("%w: sigs[%d].sig is not canonical base64url", ErrInvalid, i)
		}
		if s.KeyID == want && pub.Verify(sign.PayloadReceipt, env.Core, sig) == nil {
			ok = true
		}
	}
	if !ok {
		return nil, canon.ID{}, fmt.Errorf("%w: no signature by %s verifies", sign.ErrBadSignature, want)
	}
	c, err := DecodeCore(env.Core)
	if err != nil {
		return nil, canon.ID{}, err
	}
	if err := c.Validate(); err != nil {
		return nil, canon.ID{}, err
	}
	return c, canon.Sum(env.Core), nil
}

// RunEntries returns the entries of the last run in entries, a journal
// that ends at a receipt's journal_root: one journal may hold several
// runs appended one after another (cordon exec --journal appends), and a
// receipt covers only its own. A run's entries end with its command
// entry (then its meter entries); a run that never got its command entry
// is closed by a command.unfinished entry. So the last run's entries are
// those after the last command or command.unfinished entry that lies
// before the last command entry — all of them when there is none.
// Entries after the last command entry (its meters) are the run's.
func RunEntries(entries []journal.Entry) []journal.Entry {
	last := -1
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Type == "command" {
			last = i
			break
		}
	}
	if last < 0 {
		return entries
	}
	for i := last - 1; i >= 0; i-- {
		if t := entries[i].Type; t == "command" || t == "command.unfinished" {
			return entries[i+1:]
		}
	}
	return entries
}

// UsedClasses returns the device classes a run's journal shows it used:
// the classes of allowed device requests in its decision records
// (grant.DecisionType entries of type "decision"), sorted and distinct.
// Only the journal's last run counts (RunEntries): entries must end at
// the receipt's journal_root.
func UsedClasses(entries []journal.Entry) []string {
	var out []string
	for _, e := range RunEntries(entries) {
		if e.Type != "decision" {
			continue
		}
		body := e.Body()
		if outcome, _ := body.Get("outcome"); outcome.Str() != "allow" {
			continue
		}
		q, _ := body.Get("query")
		kind, _ := q.Get("kind")
		class, _ := q.Get("class")
		if kind.Str() == "device" && class.Str() != "" && !slices.Contains(out, class.Str()) {
			out = append(out, class.Str())
		}
	}
	slices.Sort(out)
	return out
}

// PoolIdleClass is the class of the record that charges a run with the
// idle energy of the warm pool slot it started in (docs/SPEC.md §12.4):
// provenance Estimator, estimated_uj the charge, busy_ns 0. It is summed
// into the total as every record is; being an estimate, a receipt that
// carries it has no total.measured_uj.
const PoolIdleClass = "pool-idle"

// ErrIdle: a receipt's pool-idle record and its journal's pool.claim
// entries disagree.
var ErrIdle = errors.New("receipt: the pool idle record does not match the journal's pool.claim entries")

// CheckPoolIdle checks the receipt's pool-idle record against the
// pool.claim entries of the receipt's run — the journal's last run
// (RunEntries); entries must end at the receipt's journal_root, which
// the caller checks: with no claim there is no record; with claims, the
// record's estimated_uj is the sum of their idle_uj, every claim's
// idle_provenance is the record's provenance, and the record carries no
// busy time. Another run's claims in the same journal count for nothing.
func (c *Core) CheckPoolIdle(entries []journal.Entry) error {
	var (
		claims int
		sum    uint64
		provs  []string
	)
	for _, e := range RunEntries(entries) {
		if e.Type != "pool.claim" {
			continue
		}
		body := e.Body()
		uj, _ := body.Get("idle_uj")
		prov, _ := body.Get("idle_provenance")
		if uj.Kind() != canon.KindInt || uj.Int() <= 0 {
			return fmt.Errorf("%w: pool.claim entry %d: idle_uj is not a positive integer", ErrIdle, e.Index)
		}
		var carry uint64
		sum, carry = bits.Add64(sum, uint64(uj.Int()), 0)
		if carry != 0 {
			return fmt.Errorf("%w: the claims' idle energy overflows", ErrIdle)
		}
		provs = append(provs, prov.Str())
		claims++
	}
	var rec *Device
	for i := range c.Devices {
		if c.Devices[i].Class == PoolIdleClass {
			rec = &c.Devices[i]
		}
	}
	switch {
	case claims == 0 && rec == nil:
		return nil
	case claims == 0:
		return fmt.Errorf("%w: the receipt charges %d µJ of pool idle energy, but the journal records no pool.claim", ErrIdle, rec.EstimatedUJ)
	case rec == nil:
		return fmt.Errorf("%w: the journal records %d pool.claim entries (%d µJ idle) but the receipt has no %s record", ErrIdle, claims, sum, PoolIdleClass)
	}
	if rec.EstimatedUJ != sum {
		return fmt.Errorf("%w: the receipt's %s record is %d µJ, the journal's claims sum to %d µJ", ErrIdle, PoolIdleClass, rec.EstimatedUJ, sum)
	}
	if rec.BusyNS != 0 {
		return fmt.Errorf("%w: the %s record carries busy_ns %d: idle energy has no busy time", ErrIdle, PoolIdleClass, rec.BusyNS)
	}
	for _, p := range provs {
		if p != rec.Provenance {
			return fmt.Errorf("%w: a pool.claim's idle_provenance is %q, the record's %q", ErrIdle, p, rec.Provenance)
		}
	}
	return nil
}
