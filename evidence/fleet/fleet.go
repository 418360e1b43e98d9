// Package fleet seals many runs of one task into one fleet record
// (docs/SPEC.md §8, conformance class C10): an RFC 6962 Merkle tree over
// one leaf per item — the item's name and the ContentId of its run's
// receipt — whose root a steward signs. Any item then proves its
// membership with an inclusion proof of about log2(n) hashes, offline,
// against the signed root.
//
// The tree and the proofs are github.com/transparency-dev/merkle's, with
// its RFC 6962 SHA-256 hasher (leaf hash SHA-256(0x00 || leaf), node hash
// SHA-256(0x01 || left || right)); nothing of the tree is written here.
// The package is pure.
package fleet

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// Types of the documents, and the DSSE payload type of a signed record.
const (
	RecordType  = "cordon.fleet.v1"
	LeafType    = "cordon.fleet-leaf.v1"
	ProofType   = "cordon.fleet-proof.v1"
	PayloadType = "application/vnd.cordon.fleet.v1+json"
)

// MaxItems bounds a fleet.
const MaxItems = 1 << 20

var (
	// ErrInvalid is wrapped by errors about a malformed leaf, record or
	// proof.
	ErrInvalid = errors.New("invalid fleet document")
	// ErrNotIncluded is wrapped when a proof does not show its leaf in
	// the record's tree.
	ErrNotIncluded = errors.New("not included in the fleet")
)

var hasher = rfc6962.DefaultHasher

// Leaf is one item of a fleet.
type Leaf struct {
	Index   uint64   // position in the fleet, from 0
	Item    string   // the item's name, unique in the fleet
	Receipt canon.ID // ContentId of the item run's receipt (its JCR-1 bytes)
}

// JCS returns the leaf's canonical form, the bytes its leaf hash covers.
func (l Leaf) JCS() []byte {
	return mustJCS(map[string]any{"type": LeafType, "index": l.Index, "item": l.Item, "receipt": l.Receipt.String()})
}

func (l Leaf) hash() []byte { return hasher.HashLeaf(l.JCS()) }

func checkItem(s string) error {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return errors.New("an item name is 1 to 256 bytes of UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("item name %q contains the control character %U", s, r)
		}
	}
	// Whatever else the canonical model refuses (noncharacters) too.
	b, _ := json.Marshal(s)
	if _, err := canon.Parse(b); err != nil {
		return fmt.Errorf("item name %q: %v", s, err)
	}
	return nil
}

// Tree is a built fleet: the task, its leaves in order, and their hashes.
type Tree struct {
	Task   canon.ID
	Leaves []Leaf
	hashes [][]byte
	root   []byte
}

// Build checks the leaves (indices 0…n-1 in order, distinct valid names)
// and builds the tree over them.
func Build(task canon.ID, leaves []Leaf) (*Tree, error) {
	if len(leaves) == 0 || len(leaves) > MaxItems {
		return nil, fmt.Errorf("%w: a fleet has 1 to %d items, not %d", ErrInvalid, MaxItems, len(leaves))
	}
	seen := make(map[string]bool, len(leaves))
	t := &Tree{Task: task, Leaves: slices.Clone(leaves), hashes: make([][]byte, len(leaves))}
	for i, l := range leaves {
		if l.Index != uint64(i) {
			return nil, fmt.Errorf("%w: leaf %d has index %d", ErrInvalid, i, l.Index)
		}
		if err := checkItem(l.Item); err != nil {
			return nil, fmt.Errorf("%w: leaf %d: %v", ErrInvalid, i, err)
		}
		if seen[l.Item] {
			return nil, fmt.Errorf("%w: item %q appears twice", ErrInvalid, l.Item)
		}
		seen[l.Item] = true
		t.hashes[i] = l.hash()
	}
	root, err := subtree(t.hashes, 0, uint64(len(leaves)))
	if err != nil {
		return nil, err
	}
	t.root = root
	return t, nil
}

var ranges = &compact.RangeFactory{Hash: hasher.HashChildren}

// subtree returns the RFC 6962 hash of leaves [begin, end): the whole
// tree's root when begin is 0, else a perfect subtree's (a proof node).
func subtree(hashes [][]byte, begin, end uint64) ([]byte, error) {
	r := ranges.NewEmptyRange(begin)
	for _, h := range hashes[begin:end] {
		if err := r.Append(h, nil); err != nil {
			return nil, err
		}
	}
	if begin == 0 {
		return r.GetRootHash(nil)
	}
	if hs := r.Hashes(); len(hs) == 1 {
		return hs[0], nil
	}
	return nil, fmt.Errorf("leaves [%d, %d) are not a perfect subtree", begin, end)
}

// Record is the fleet's signed summary.
type Record struct {
	Task canon.ID // ContentId of the task every item ran (its manifest)
	Size uint64   // number of items
	Root []byte   // RFC 6962 root hash (32 bytes)
}

// Record returns the tree's record.
func (t *Tree) Record() Record {
	return Record{Task: t.Task, Size: uint64(len(t.Leaves)), Root: slices.Clone(t.root)}
}

// JCS returns the record's canonical form.
func (r Record) JCS() []byte {
	return mustJCS(map[string]any{"type": RecordType, "task": r.Task.String(), "size": r.Size, "root": hex.EncodeToString(r.Root)})
}

// ID is the record's address.
func (r Record) ID() canon.ID { return canon.Sum(r.JCS()) }

// Seal signs the record in a DSSE envelope.
func (r Record) Seal(k *sign.PrivateKey) []byte { return sign.Seal(k, PayloadType, r.JCS()) }

// OpenRecord verifies a signed record against pub and returns it.
func OpenRecord(envelope []byte, pub sign.PublicKey) (Record, error) {
	payload, err := sign.Open(envelope, pub, PayloadType)
	if err != nil {
		return Record{}, err
	}
	return ParseRecord(payload)
}

// ParseRecord reads a record in exactly its canonical form.
func ParseRecord(data []byte) (Record, error) {
	o, r, _, err := readCanonical(data)
	if err != nil {
		return Record{}, err
	}
	typ, _ := o.Str("type", true)
	task, _ := o.Str("task", true)
	size, _ := o.Int("size", true)
	root, _ := o.Str("root", true)
	o.End()
	if err := r.Err(); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if typ != RecordType {
		return Record{}, fmt.Errorf("%w: type %q, want %q", ErrInvalid, typ, RecordType)
	}
	rec := Record{Size: uint64(size)}
	if rec.Task, err = canon.ParseID(task); err != nil {
		return Record{}, fmt.Errorf("%w: task: %w", ErrInvalid, err)
	}
	if size < 1 || size > MaxItems {
		return Record{}, fmt.Errorf("%w: size %d outside 1…%d", ErrInvalid, size, MaxItems)
	}
	if rec.Root, err = hash32(root); err != nil {
		return Record{}, fmt.Errorf("%w: root: %v", ErrInvalid, err)
	}
	return rec, nil
}

// Proof shows one leaf's membership in a fleet of Size items.
type Proof struct {
	Leaf   Leaf
	Size   uint64
	Hashes [][]byte // the RFC 6962 audit path, leaf to root
}

// Prove returns the inclusion proof of leaf i.
func (t *Tree) Prove(i uint64) (*Proof, error) {
	n := uint64(len(t.Leaves))
	if i >= n {
		return nil, fmt.Errorf("%w: no item %d in a fleet of %d", ErrInvalid, i, n)
	}
	nodes, err := proof.Inclusion(i, n)
	if err != nil {
		return nil, err
	}
	hs := make([][]byte, len(nodes.IDs))
	for k, id := range nodes.IDs {
		begin, end := id.Coverage()
		if hs[k], err = subtree(t.hashes, begin, end); err != nil {
			return nil, err
		}
	}
	path, err := nodes.Rehash(hs, hasher.HashChildren)
	if err != nil {
		return nil, err
	}
	return &Proof{Leaf: t.Leaves[i], Size: n, Hashes: path}, nil
}

// Find returns the index of the named item.
func (t *Tree) Find(item string) (uint64, bool) {
	for i, l := range t.Leaves {
		if l.Item == item {
			return uint64(i), true
		}
	}
	return 0, false
}

// ParseLeaf reads a leaf in exactly its canonical form.
func ParseLeaf(data []byte) (Leaf, error) {
	o, r, _, err := readCanonical(data)
	if err != nil {
		return Leaf{}, err
	}
	l, err := readLeaf(r, o)
	if err != nil {
		return Leaf{}, err
	}
	o.End()
	if err := r.Err(); err != nil {
		return Leaf{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return l, nil
}

// readLeaf reads a leaf object's members (not End).
func readLeaf(r *jsonv.Reader, o *jsonv.Obj) (Leaf, error) {
	typ, _ := o.Str("type", true)
	index, _ := o.Int("index", true)
	item, _ := o.Str("item", true)
	receipt, _ := o.Str("receipt", true)
	if err := r.Err(); err != nil {
		return Leaf{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if typ != LeafType {
		return Leaf{}, fmt.Errorf("%w: leaf type %q, want %q", ErrInvalid, typ, LeafType)
	}
	if index < 0 || index >= MaxItems {
		return Leaf{}, fmt.Errorf("%w: leaf index %d", ErrInvalid, index)
	}
	if err := checkItem(item); err != nil {
		return Leaf{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	rid, err := canon.ParseID(receipt)
	if err != nil {
		return Leaf{}, fmt.Errorf("%w: receipt: %w", ErrInvalid, err)
	}
	return Leaf{Index: uint64(index), Item: item, Receipt: rid}, nil
}

// JCS returns the proof's canonical form.
func (p *Proof) JCS() []byte {
	hs := make([]string, len(p.Hashes))
	for i, h := range p.Hashes {
		hs[i] = hex.EncodeToString(h)
	}
	return mustJCS(map[string]any{"type": ProofType, "leaf": json.RawMessage(p.Leaf.JCS()), "size": p.Size, "hashes": hs})
}

// ParseProof reads a proof in exactly its canonical form.
func ParseProof(data []byte) (*Proof, error) {
	o, r, _, err := readCanonical(data)
	if err != nil {
		return nil, err
	}
	typ, _ := o.Str("type", true)
	size, _ := o.Int("size", true)
	hs, _ := o.Strings("hashes", true)
	lo, _ := o.Object("leaf", true)
	var leaf Leaf
	if lo != nil {
		if leaf, err = readLeaf(r, lo); err != nil {
			return nil, err
		}
		lo.End()
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if typ != ProofType {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrInvalid, typ, ProofType)
	}
	if size < 1 || size > MaxItems || leaf.Index >= uint64(size) {
		return nil, fmt.Errorf("%w: index %d and size %d", ErrInvalid, leaf.Index, size)
	}
	if len(hs) > 64 {
		return nil, fmt.Errorf("%w: %d hashes; a path has at most 64", ErrInvalid, len(hs))
	}
	p := &Proof{Leaf: leaf, Size: uint64(size)}
	for i, h := range hs {
		b, err := hash32(h)
		if err != nil {
			return nil, fmt.Errorf("%w: hashes[%d]: %v", ErrInvalid, i, err)
		}
		p.Hashes = append(p.Hashes, b)
	}
	return p, nil
}

// Verify checks that p shows its leaf, at its own index, in the tree rec
// names. The proof's size must be the record's.
func Verify(rec Record, p *Proof) error {
	if p.Size != rec.Size {
		return fmt.Errorf("%w: the proof is for a fleet of %d items, the record has %d", ErrNotIncluded, p.Size, rec.Size)
	}
	if err := proof.VerifyInclusion(hasher, p.Leaf.Index, p.Size, p.Leaf.hash(), p.Hashes, rec.Root); err != nil {
		return fmt.Errorf("%w: item %q at %d: %v", ErrNotIncluded, p.Leaf.Item, p.Leaf.Index, err)
	}
	return nil
}

func hash32(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 || hex.EncodeToString(b) != s {
		return nil, fmt.Errorf("%q is not 64 lower-case hex digits", s)
	}
	return b, nil
}

// readCanonical parses data and requires it to be its own JCS form.
func readCanonical(data []byte) (*jsonv.Obj, *jsonv.Reader, canon.Value, error) {
	v, r, o, err := jsonv.Canonical(data)
	if err != nil {
		return nil, nil, canon.Value{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return o, r, v, nil
}

func mustJCS(doc map[string]any) []byte {
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err) // strings, integers and canonical leaves only
	}
	return c
}
