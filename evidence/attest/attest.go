// Package attest implements cordon's attestations as specified in
// docs/SPEC.md §4.5: a JCS core that binds a receipt, the tier, the device
// classes the receipt meters, facts about the host, an optional journal
// root and, at S6, TEE evidence; signed as a DSSE envelope with the
// attestation context, so a third party can verify it offline.
package attest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/tier"
)

// Type is the type of an attestation core.
const Type = "cordon.attestation.v1"

var (
	// ErrInvalid: the attestation is malformed or not canonical.
	ErrInvalid = errors.New("attestation: invalid")
	// ErrBinding: the attestation does not match the receipt it names
	// (receipt id, tier, device classes, journal root).
	ErrBinding = errors.New("attestation: does not match the receipt")
	// ErrTEE: an S6 attestation without TEE evidence.
	ErrTEE = errors.New("attestation: S6 requires TEE evidence")
	// ErrJournal: the journal does not replay Consistent against the root.
	ErrJournal = errors.New("attestation: journal does not replay Consistent")
)

// Host are facts about the host that made the run.
type Host struct {
	Kernel string   `json:"kernel"`
	Cordon string   `json:"cordon"`
	Tiers  []string `json:"tiers"` // tiers the host offers
}

// TEE is evidence from a trusted execution environment.
type TEE struct {
	Kind     string `json:"kind"`     // e.g. "sev-snp", "tdx"
	Evidence string `json:"evidence"` // standard base64 of the report
}

// Core is an attestation core.
type Core struct {
	Type        string   `json:"type"`
	Receipt     string   `json:"receipt"`
	Tier        string   `json:"tier"`
	Devices     []string `json:"devices"`
	Host        Host     `json:"host"`
	JournalRoot string   `json:"journal_root,omitempty"`
	TEE         *TEE     `json:"tee,omitempty"`
}

// For builds the attestation core of a verified receipt.
func For(rc *receipt.Core, host Host) *Core {
	return &Core{Type: Type, Receipt: rc.ID().String(), Tier: rc.Tier, Devices: rc.Classes(), Host: host, JournalRoot: rc.JournalRoot}
}

// JCS returns the canonical bytes of the core.
func (c *Core) JCS() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	j, err := canon.JCS(b)
	if err != nil {
		panic(err) // strings only, built by this package or decoded strictly
	}
	return j
}

// Validate checks a core on its own (SPEC §4.5).
func (c *Core) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if c.Type != Type {
		return bad("type %q, want %q", c.Type, Type)
	}
	if _, err := canon.ParseID(c.Receipt); err != nil {
		return bad("receipt: %v", err)
	}
	t, err := tier.Parse(c.Tier)
	if err != nil {
		return bad("%v", err)
	}
	if len(c.Devices) == 0 || !slices.IsSorted(c.Devices) || len(slices.Compact(slices.Clone(c.Devices))) != len(c.Devices) {
		return bad("devices must be non-empty, distinct and sorted")
	}
	if c.Host.Kernel == "" || c.Host.Cordon == "" {
		return bad("host.kernel and host.cordon are required")
	}
	offered := false
	for _, s := range c.Host.Tiers {
		ht, err := tier.Parse(s)
		if err != nil {
			return bad("host.tiers: %v", err)
		}
		offered = offered || ht == t
	}
	if !offered {
		return bad("tier %s is not among the tiers the host offers %v", c.Tier, c.Host.Tiers)
	}
	if c.JournalRoot != "" {
		id, err := canon.ParseID(c.JournalRoot)
		if err != nil {
			return bad("journal_root: %v", err)
		}
		if id.IsZero() {
			return bad("journal_root is the zero ContentId, which no journal has")
		}
	}
	switch {
	case t == tier.S6 && c.TEE == nil:
		return ErrTEE
	case t != tier.S6 && c.TEE != nil:
		return bad("tee evidence belongs to S6 attestations only")
	case c.TEE != nil:
		ev, err := base64.StdEncoding.Strict().DecodeString(c.TEE.Evidence)
		if c.TEE.Kind == "" || err != nil || len(ev) == 0 || base64.StdEncoding.EncodeToString(ev) != c.TEE.Evidence {
			return fmt.Errorf("%w: tee needs a kind and non-empty canonical base64 evidence", ErrTEE)
		}
	}
	return nil
}

// Sign validates c and returns its signed envelope.
func Sign(k *sign.PrivateKey, c *Core) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return sign.Seal(k, sign.PayloadAttestation, c.JCS()), nil
}

// Options name what else to check an attestation against.
type Options struct {
	// Receipt, when set, is the verified receipt core the attestation must
	// bind: its id, tier, device classes and journal root.
	Receipt *receipt.Core
	// Journal, when not nil, are the run's journal entries: they must
	// verify and end at the attestation's journal root. A non-nil empty
	// slice is an empty journal, which never replays Consistent; callers
	// that read a journal file must pass a non-nil slice even when the
	// file is empty.
	Journal []journal.Entry
}

// Verify checks a signed attestation under pub and returns its core.
func Verify(envelope []byte, pub sign.PublicKey, opts Options) (*Core, error) {
	payload, err := sign.Open(envelope, pub, sign.PayloadAttestation)
	if err != nil {
		return nil, err
	}
	c, err := decode(payload)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if rc := opts.Receipt; rc != nil {
		switch {
		case c.Receipt != rc.ID().String():
			return nil, fmt.Errorf("%w: it names receipt %s, not %s", ErrBinding, c.Receipt, rc.ID())
		case c.Tier != rc.Tier:
			return nil, fmt.Errorf("%w: tier %s, receipt %s", ErrBinding, c.Tier, rc.Tier)
		case !slices.Equal(c.Devices, rc.Classes()):
			for _, d := range rc.Classes() {
				if !slices.Contains(c.Devices, d) {
					return nil, fmt.Errorf("%w: it omits device class %q, which the receipt metered", ErrBinding, d)
				}
			}
			return nil, fmt.Errorf("%w: devices %v, receipt %v", ErrBinding, c.Devices, rc.Classes())
		case c.JournalRoot != rc.JournalRoot:
			return nil, fmt.Errorf("%w: journal_root %q, receipt %q", ErrBinding, c.JournalRoot, rc.JournalRoot)
		}
	}
	if opts.Journal != nil {
		if c.JournalRoot == "" {
			return nil, fmt.Errorf("%w: a journal was given but the attestation has no journal_root", ErrJournal)
		}
		if r := ReplayRoot(opts.Journal, c.JournalRoot); r.Status != journal.Consistent {
			return nil, fmt.Errorf("%w: %s", ErrJournal, r)
		}
	}
	return c, nil
}

// ReplayRoot compares a journal with an attested root: Consistent when the
// chain verifies and ends at root; Truncated when root is an earlier entry
// (the journal has grown or the attestation is of a prefix) or the
// journal is a prefix of nothing attested; Diverged otherwise, at the
// first entry that breaks the chain or, for an intact chain, at its end.
func ReplayRoot(entries []journal.Entry, root string) journal.Result {
	var buf bytes.Buffer
	for _, e := range entries {
		buf.Write(e.Line())
		buf.WriteByte('\n')
	}
	_, h, err := journal.Scan(&buf)
	var je *journal.Error
	if errors.As(err, &je) {
		return journal.Result{Status: journal.Diverged, Index: je.Index}
	}
	if h.Count == 0 {
		return journal.Result{Status: journal.Diverged} // an empty journal has no root
	}
	if h.ID.String() == root {
		return journal.Result{Status: journal.Consistent}
	}
	for i, e := range entries {
		if e.ID().String() == root {
			return journal.Result{Status: journal.Truncated, Index: int64(i + 1)}
		}
	}
	return journal.Result{Status: journal.Diverged, Index: h.Count}
}

func decode(payload []byte) (*Core, error) {
	v, err := canon.Parse(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !bytes.Equal(v.AppendJCS(nil), payload) {
		return nil, fmt.Errorf("%w: payload is not in JCS form", ErrInvalid)
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	c := &Core{}
	c.Type, _ = o.Str("type", true)
	c.Receipt, _ = o.Str("receipt", true)
	c.Tier, _ = o.Str("tier", true)
	c.Devices, _ = o.Strings("devices", true)
	h, _ := o.Object("host", true)
	c.Host.Kernel, _ = h.Str("kernel", true)
	c.Host.Cordon, _ = h.Str("cordon", true)
	c.Host.Tiers, _ = h.Strings("tiers", true)
	h.End()
	c.JournalRoot, _ = o.Str("journal_root", false)
	if t, ok := o.Object("tee", false); ok {
		c.TEE = &TEE{}
		c.TEE.Kind, _ = t.Str("kind", true)
		c.TEE.Evidence, _ = t.Str("evidence", true)
		t.End()
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if o.Has("journal_root") && c.JournalRoot == "" {
		return nil, fmt.Errorf("%w: journal_root is empty", ErrInvalid)
	}
	return c, nil
}
