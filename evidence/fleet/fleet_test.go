package fleet

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
)

var task = canon.Sum([]byte("the task"))

func leaves(n int) []Leaf {
	ls := make([]Leaf, n)
	for i := range ls {
		ls[i] = Leaf{Index: uint64(i), Item: fmt.Sprintf("item-%03d", i), Receipt: canon.Sum([]byte(fmt.Sprint("receipt ", i)))}
	}
	return ls
}

// mth is RFC 6962 §2.1's Merkle Tree Hash, written from the RFC's
// definition and independent of the library: the largest power of two
// smaller than n splits the list.
func mth(d [][]byte) []byte {
	switch len(d) {
	case 0:
		s := sha256.Sum256(nil)
		return s[:]
	case 1:
		s := sha256.Sum256(append([]byte{0}, d[0]...))
		return s[:]
	}
	k := 1
	for k*2 < len(d) {
		k *= 2
	}
	s := sha256.Sum256(append(append([]byte{1}, mth(d[:k])...), mth(d[k:])...))
	return s[:]
}

// path is RFC 6962 §2.1.1's PATH(m, D[n]), independent of the library.
func path(m int, d [][]byte) [][]byte {
	if len(d) <= 1 {
		return nil
	}
	k := 1
	for k*2 < len(d) {
		k *= 2
	}
	if m < k {
		return append(path(m, d[:k]), mth(d[k:]))
	}
	return append(path(m-k, d[k:]), mth(d[:k]))
}

// TestAgainstRFC6962: for odd and even sizes, the root and every proof
// are those RFC 6962's definitions give, every item verifies, and the
// proof length grows with log2(n).
func TestAgainstRFC6962(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 50, 64, 100} {
		ls := leaves(n)
		tr, err := Build(task, ls)
		if err != nil {
			t.Fatal(err)
		}
		data := make([][]byte, n)
		for i, l := range ls {
			data[i] = l.JCS()
		}
		rec := tr.Record()
		if !bytes.Equal(rec.Root, mth(data)) {
			t.Fatalf("n=%d: root differs from RFC 6962's MTH", n)
		}
		maxLen := 0
		for i := range ls {
			p, err := tr.Prove(uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			want := path(i, data)
			if len(p.Hashes) != len(want) {
				t.Fatalf("n=%d i=%d: %d hashes, RFC 6962 PATH has %d", n, i, len(p.Hashes), len(want))
			}
			for k := range want {
				if !bytes.Equal(p.Hashes[k], want[k]) {
					t.Fatalf("n=%d i=%d: hash %d differs from RFC 6962 PATH", n, i, k)
				}
			}
			if err := Verify(rec, p); err != nil {
				t.Fatalf("n=%d i=%d: %v", n, i, err)
			}
			back, err := ParseProof(p.JCS())
			if err != nil || Verify(rec, back) != nil {
				t.Fatalf("n=%d i=%d: proof does not round trip: %v", n, i, err)
			}
			maxLen = max(maxLen, len(p.Hashes))
		}
		ceilLog := 0
		for 1<<ceilLog < n {
			ceilLog++
		}
		if maxLen != ceilLog {
			t.Fatalf("n=%d: longest proof %d hashes, want ceil(log2 n) = %d", n, maxLen, ceilLog)
		}
	}
}

// TestForeignAndChanged: a leaf not in the fleet fails on a real proof
// path; so do the right leaf at another index, a proof for another size,
// a changed receipt or name, and a dropped or extra hash. Any change of a
// leaf changes the root.
func TestForeignAndChanged(t *testing.T) {
	ls := leaves(7)
	tr, _ := Build(task, ls)
	rec := tr.Record()
	p, _ := tr.Prove(3)
	mutate := map[string]func(*Proof){
		"foreign item":    func(p *Proof) { p.Leaf.Item = "stranger" },
		"foreign receipt": func(p *Proof) { p.Leaf.Receipt = canon.Sum([]byte("forged")) },
		"other index":     func(p *Proof) { p.Leaf.Index = 2 },
		"other size":      func(p *Proof) { p.Size = 8 },
		"dropped hash":    func(p *Proof) { p.Hashes = p.Hashes[:len(p.Hashes)-1] },
		"extra hash":      func(p *Proof) { p.Hashes = append(p.Hashes, p.Hashes[0]) },
		"flipped bit":     func(p *Proof) { p.Hashes[1][0] ^= 1 },
		"swapped hashes":  func(p *Proof) { p.Hashes[0], p.Hashes[1] = p.Hashes[1], p.Hashes[0] },
	}
	for name, m := range mutate {
		q, _ := ParseProof(p.JCS())
		m(q)
		if err := Verify(rec, q); !errors.Is(err, ErrNotIncluded) {
			t.Errorf("%s: %v, want ErrNotIncluded", name, err)
		}
	}
	for i := range ls {
		changed := leaves(7)
		changed[i].Receipt = canon.Sum([]byte("other"))
		t2, _ := Build(task, changed)
		if bytes.Equal(t2.Record().Root, rec.Root) {
			t.Fatalf("changing leaf %d kept the root", i)
		}
	}
	// A proof from another fleet does not verify against this record.
	other, _ := Build(task, leaves(8))
	op, _ := other.Prove(3)
	op.Size = 7
	if err := Verify(rec, op); !errors.Is(err, ErrNotIncluded) {
		t.Fatalf("proof of another fleet: %v", err)
	}
}

func TestBuildRefuses(t *testing.T) {
	ls := leaves(3)
	cases := map[string][]Leaf{
		"empty":        nil,
		"duplicate":    {ls[0], {Index: 1, Item: ls[0].Item, Receipt: ls[1].Receipt}},
		"out of order": {ls[1], ls[0]},
		"gap":          {ls[0], ls[2]},
		"control":      {{Index: 0, Item: "a\nb", Receipt: ls[0].Receipt}},
		"noncharacter": {{Index: 0, Item: "a\ufdd0", Receipt: ls[0].Receipt}},
		"long":         {{Index: 0, Item: strings.Repeat("x", 257), Receipt: ls[0].Receipt}},
		"empty name":   {{Index: 0, Item: "", Receipt: ls[0].Receipt}},
	}
	for name, c := range cases {
		if _, err := Build(task, c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestRecord: the record reads back only in its canonical form, and a
// signed record opens only under its key and unaltered.
func TestRecord(t *testing.T) {
	tr, _ := Build(task, leaves(5))
	rec := tr.Record()
	back, err := ParseRecord(rec.JCS())
	if err != nil || back.ID() != rec.ID() {
		t.Fatalf("round trip: %v", err)
	}
	j := string(rec.JCS())
	for _, bad := range []string{
		strings.Replace(j, `"size":5`, `"size":0`, 1),
		strings.Replace(j, `"size":5`, `"size":5,"x":1`, 1),
		strings.Replace(j, `"type":"cordon.fleet.v1"`, `"type":"cordon.fleet.v2"`, 1),
		strings.Replace(j, `{"root"`, `{ "root"`, 1),
		strings.Replace(j, `"root":"`, `"root":"A`, 1),
		j + "\n",
	} {
		if _, err := ParseRecord([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRecord(%s) = %v", bad, err)
		}
	}
	k, _ := sign.Generate()
	k2, _ := sign.Generate()
	env := rec.Seal(k)
	if got, err := OpenRecord(env, k.Public()); err != nil || got.ID() != rec.ID() {
		t.Fatalf("OpenRecord: %v", err)
	}
	if _, err := OpenRecord(env, k2.Public()); err == nil {
		t.Fatal("opened with another key")
	}
}

func TestParseProofRefuses(t *testing.T) {
	tr, _ := Build(task, leaves(5))
	p, _ := tr.Prove(2)
	j := string(p.JCS())
	for _, bad := range []string{
		strings.Replace(j, `"index":2`, `"index":5`, 1),
		strings.Replace(j, `"index":2`, `"index":-1`, 1),
		strings.Replace(j, `"type":"cordon.fleet-leaf.v1"`, `"type":"x"`, 1),
		strings.Replace(j, `"hashes":["`, `"hashes":["0`, 1),
		strings.Replace(j, `"item":"item-002"`, `"item":"item-002","extra":true`, 1),
		strings.Replace(j, `{"hashes"`, `{ "hashes"`, 1),
	} {
		if _, err := ParseProof([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseProof(%s) = %v", bad, err)
		}
	}
}

// FuzzParseProof: no input panics the parser, and what it accepts
// re-encodes to the same bytes.
func FuzzParseProof(f *testing.F) {
	tr, _ := Build(task, leaves(5))
	p, _ := tr.Prove(4)
	f.Add(p.JCS())
	f.Add(tr.Record().JCS())
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProof(data)
		if err == nil && !bytes.Equal(p.JCS(), data) {
			t.Fatalf("accepted a non-canonical proof: %q", data)
		}
		r, err := ParseRecord(data)
		if err == nil && !bytes.Equal(r.JCS(), data) {
			t.Fatalf("accepted a non-canonical record: %q", data)
		}
	})
}
