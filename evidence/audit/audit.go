// Package audit is the control plane's tamper-evident audit log and its
// masked export (docs/SPEC.md §10).
//
// Every record is hash-chained to the one before. The chain is taken over
// commitments, not values: each scalar of a record's body is committed to
// as BLAKE3(context ‖ salt ‖ path ‖ value), with a salt derived from a
// per-record secret the log keeps. An export then reveals a value with its
// salt, or only its commitment (masked) — and either way the record hashes
// to the same chain link. So masking cannot shape what is verified: an
// exported chain verifies against the head the server signed exactly when
// it is the chain that was written, with every revealed value the one that
// was written; a masked value stays fixed, only unseen. Records outside a
// reader's scope (another tenant's) are exported fully masked: their
// existence and position show, nothing of their content.
//
// The package is pure: the store, the signing key and the masking policy
// belong to the caller.
package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/zeebo/blake3"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// Types and contexts.
const (
	RecordType      = "cordon.audit.v1"        // a record's chain form
	ExportType      = "cordon.audit-export.v1" // a record in an export
	HeadType        = "cordon.audit-head.v1"   // the signed head
	HeadPayloadType = "application/vnd.cordon.audit-head.v1+json"
	leafContext     = "cordon.audit.leaf.v1"
	saltContext     = "cordon audit v1 salt"
	SecretSize      = 32
	saltSize        = 16
)

var (
	// ErrBroken is wrapped when an export's chain does not verify.
	ErrBroken = errors.New("audit log broken")
	// ErrInvalid is wrapped when a record or export is malformed.
	ErrInvalid = errors.New("invalid audit document")
)

// Record is one stored audit record: the log keeps its secret, from which
// the salts of its commitments derive.
type Record struct {
	Seq    uint64
	Prev   canon.ID    // the previous record's ID; zero for the first
	Secret []byte      // SecretSize random bytes; never exported
	Body   canon.Value // the event: an object (who, what, when, …)
}

// Path is a leaf's position in a body: member names and array indices.
type Path []any

// salt derives the salt of the leaf at path.
func salt(secret []byte, path []byte) []byte {
	h, err := blake3.NewKeyed(secret)
	if err != nil {
		panic(err) // SecretSize is checked by New
	}
	h.Write([]byte(saltContext))
	h.Write(path)
	out := make([]byte, saltSize)
	h.Digest().Read(out)
	return out
}

// commit is the commitment to a leaf value at path with salt.
func commit(s, path, value []byte) canon.ID {
	var b bytes.Buffer
	b.WriteString(leafContext)
	b.WriteByte(0)
	b.Write(s)
	b.Write(path)
	b.WriteByte(0)
	b.Write(value)
	return canon.Sum(b.Bytes())
}

// New checks and returns a record.
func New(seq uint64, prev canon.ID, secret []byte, body canon.Value) (*Record, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("%w: a record secret has %d bytes, not %d", ErrInvalid, len(secret), SecretSize)
	}
	if body.Kind() != canon.KindObject {
		return nil, fmt.Errorf("%w: a record body is an object, not %s", ErrInvalid, body.Kind())
	}
	if (seq == 0) != prev.IsZero() {
		return nil, fmt.Errorf("%w: record %d: only the first record has no previous one", ErrInvalid, seq)
	}
	return &Record{Seq: seq, Prev: prev, Secret: slices.Clone(secret), Body: body}, nil
}

// node is the chain form of a body: its shape with each leaf replaced by
// its commitment.
func chainTree(v canon.Value, path []any, leaf func(path []any, v canon.Value) any) any {
	switch v.Kind() {
	case canon.KindObject:
		out := map[string]any{}
		for k, e := range v.Members() {
			out[k] = chainTree(e, append(slices.Clone(path), k), leaf)
		}
		return map[string]any{"o": out}
	case canon.KindArray:
		out := []any{}
		for i, e := range v.Elems() {
			out = append(out, chainTree(e, append(slices.Clone(path), i), leaf))
		}
		return map[string]any{"a": out}
	}
	return leaf(path, v)
}

func pathBytes(path []any) []byte {
	b, err := json.Marshal(path)
	if err != nil {
		panic(err)
	}
	return b
}

func mustJCS(doc any) []byte {
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

// chainForm returns the record's chain form: the bytes its ID is taken
// over, in which every leaf is a commitment.
func (r *Record) chainForm() []byte {
	body := chainTree(r.Body, nil, func(path []any, v canon.Value) any {
		p := pathBytes(path)
		return map[string]any{"c": commit(salt(r.Secret, p), p, v.AppendJCS(nil)).String()}
	})
	return chainDoc(r.Seq, r.Prev, body)
}

func chainDoc(seq uint64, prev canon.ID, body any) []byte {
	doc := map[string]any{"type": RecordType, "seq": seq, "body": body}
	if !prev.IsZero() {
		doc["prev"] = prev.String()
	}
	return mustJCS(doc)
}

// ID is the record's chain link: the ContentId of its chain form.
func (r *Record) ID() canon.ID { return canon.Sum(r.chainForm()) }

// Reveal decides, for each leaf of a record being exported, whether its
// value is shown. A record out of the reader's scope is exported with
// every leaf hidden (Export's scope function).
type Reveal func(path Path, v canon.Value) bool

// Export returns the record's export line: each leaf revealed with its
// salt, or masked to its commitment. inScope false masks every leaf.
func (r *Record) Export(inScope bool, reveal Reveal) []byte {
	body := chainTree(r.Body, nil, func(path []any, v canon.Value) any {
		p := pathBytes(path)
		s := salt(r.Secret, p)
		if inScope && reveal(Path(slices.Clone(path)), v) {
			return map[string]any{"v": json.RawMessage(v.AppendJCS(nil)), "s": base64.RawURLEncoding.EncodeToString(s)}
		}
		return map[string]any{"m": commit(s, p, v.AppendJCS(nil)).String()}
	})
	doc := map[string]any{"type": ExportType, "seq": r.Seq, "body": body}
	if !r.Prev.IsZero() {
		doc["prev"] = r.Prev.String()
	}
	return mustJCS(doc)
}

// Head is the log's head: how many records, and the last one's ID.
type Head struct {
	Count uint64
	Head  canon.ID
}

// JCS is the head's canonical form.
func (h Head) JCS() []byte {
	return mustJCS(map[string]any{"type": HeadType, "count": h.Count, "head": h.Head.String()})
}

// Seal signs the head (the server's key).
func (h Head) Seal(k *sign.PrivateKey) []byte { return sign.Seal(k, HeadPayloadType, h.JCS()) }

// Exported is a verified export record: its revealed leaves, by path.
type Exported struct {
	Seq      uint64
	ID       canon.ID
	Revealed map[string]canon.Value // JSON path (as pathBytes) → value
	Masked   int                    // leaves shown only as commitments
}

// Verify checks an export: every line is an export record in canonical
// form, numbered from 0 and linked to the line before through the chain
// form its revealed and masked leaves rebuild; the last line is the head
// signed by pub, which the chain must reach exactly (a truncated,
// extended, reordered or edited export fails).
func Verify(export []byte, pub sign.PublicKey) ([]Exported, error) {
	lines := bytes.Split(bytes.TrimSuffix(export, []byte("\n")), []byte("\n"))
	if len(export) == 0 || export[len(export)-1] != '\n' || len(lines) < 1 {
		return nil, fmt.Errorf("%w: an export is lines ended by newlines, the last one the signed head", ErrInvalid)
	}
	payload, err := sign.Open(lines[len(lines)-1], pub, HeadPayloadType)
	if err != nil {
		return nil, fmt.Errorf("the signed head (last line): %w", err)
	}
	var out []Exported
	var prev canon.ID
	for i, line := range lines[:len(lines)-1] {
		e, err := verifyLine(line, uint64(i), prev)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, *e)
		prev = e.ID
	}
	got := Head{Count: uint64(len(out)), Head: prev}
	if !bytes.Equal(got.JCS(), payload) {
		return nil, fmt.Errorf("%w: the export ends at %d records, head %s; the signed head is %s (truncated, extended or rewritten)", ErrBroken, got.Count, got.Head, payload)
	}
	return out, nil
}

func verifyLine(line []byte, seq uint64, prev canon.ID) (*Exported, error) {
	v, r, o, err := jsonv.Canonical(line)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	typ, _ := o.Str("type", true)
	n, _ := o.Int("seq", true)
	p, hasPrev := o.Str("prev", false)
	o.Use("body")
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if typ != ExportType {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrInvalid, typ, ExportType)
	}
	if n < 0 || uint64(n) != seq {
		return nil, fmt.Errorf("%w: seq %d, want %d (a record missing, added or moved)", ErrBroken, n, seq)
	}
	var linked canon.ID
	if hasPrev {
		if linked, err = canon.ParseID(p); err != nil {
			return nil, fmt.Errorf("%w: prev: %w", ErrInvalid, err)
		}
	}
	if linked != prev {
		return nil, fmt.Errorf("%w: prev %s does not name the record before (%s)", ErrBroken, linked, prev)
	}
	body, _ := v.Get("body")
	e := &Exported{Seq: seq, Revealed: map[string]canon.Value{}}
	tree, err := rebuild(body, nil, e)
	if err != nil {
		return nil, err
	}
	e.ID = canon.Sum(chainDoc(seq, prev, tree))
	return e, nil
}

// rebuild turns an export body back into the chain form's body, checking
// each revealed value against its salt.
func rebuild(n canon.Value, path []any, e *Exported) (any, error) {
	bad := func(format string, args ...any) (any, error) {
		return nil, fmt.Errorf("%w: body at %s: %s", ErrInvalid, pathBytes(path), fmt.Sprintf(format, args...))
	}
	if n.Kind() != canon.KindObject || n.Len() < 1 || n.Len() > 2 {
		return bad("a node is an object with o, a, c-less v+s, or m")
	}
	if o, ok := n.Get("o"); ok && n.Len() == 1 {
		if o.Kind() != canon.KindObject {
			return bad("o is not an object")
		}
		out := map[string]any{}
		for k, c := range o.Members() {
			x, err := rebuild(c, append(slices.Clone(path), k), e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return map[string]any{"o": out}, nil
	}
	if a, ok := n.Get("a"); ok && n.Len() == 1 {
		if a.Kind() != canon.KindArray {
			return bad("a is not an array")
		}
		out := []any{}
		for i, c := range a.Elems() {
			x, err := rebuild(c, append(slices.Clone(path), i), e)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return map[string]any{"a": out}, nil
	}
	if m, ok := n.Get("m"); ok && n.Len() == 1 {
		if m.Kind() != canon.KindString {
			return bad("m is not a string")
		}
		id, err := canon.ParseID(m.Str())
		if err != nil {
			return bad("m: %v", err)
		}
		e.Masked++
		return map[string]any{"c": id.String()}, nil
	}
	val, okv := n.Get("v")
	s, oks := n.Get("s")
	if !okv || !oks || n.Len() != 2 || s.Kind() != canon.KindString {
		return bad("a node is {o}, {a}, {m} or {v, s}")
	}
	if val.Kind() == canon.KindObject || val.Kind() == canon.KindArray {
		return bad("a revealed leaf is a scalar")
	}
	sb, err := base64.RawURLEncoding.Strict().DecodeString(s.Str())
	if err != nil || len(sb) != saltSize {
		return bad("s is not a %d-byte salt in unpadded base64url", saltSize)
	}
	p := pathBytes(path)
	e.Revealed[string(p)] = val
	return map[string]any{"c": commit(sb, p, val.AppendJCS(nil)).String()}, nil
}
