package canon

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// genJSON writes a random JSON text of the model, with random whitespace,
// member order and escapes, to b.
func genJSON(r *rand.Rand, b *strings.Builder, depth int) {
	ws := func() {
		for range r.IntN(3) {
			b.WriteByte(" \t\n\r"[r.IntN(4)])
		}
	}
	ws()
	k := r.IntN(9)
	if depth > 4 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		b.WriteString([]string{"null", "true", "false"}[r.IntN(3)])
	case 1, 2:
		n := r.Int64N(2*MaxInt+1) - MaxInt
		switch r.IntN(3) {
		case 0:
			n = r.Int64N(2000) - 1000
		case 1:
			n = []int64{0, MaxInt, -MaxInt, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32}[r.IntN(11)]
		}
		b.WriteString(strconv.FormatInt(n, 10))
	case 3, 4, 5:
		genString(r, b)
	case 6, 7:
		b.WriteByte('[')
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			genJSON(r, b, depth+1)
		}
		ws()
		b.WriteByte(']')
	case 8:
		b.WriteByte('{')
		seen := map[string]bool{}
		for i := range r.IntN(6) {
			var kb strings.Builder
			genString(r, &kb)
			key := kb.String()
			v, err := Parse([]byte(key))
			if err != nil || seen[v.Str()] {
				continue
			}
			seen[v.Str()] = true
			if i > 0 && len(seen) > 1 {
				b.WriteByte(',')
			}
			ws()
			b.WriteString(key)
			ws()
			b.WriteByte(':')
			genJSON(r, b, depth+1)
		}
		ws()
		b.WriteByte('}')
	}
	ws()
}

var genRunes = []rune{'a', 'b', 'A', 'z', '0', ' ', '"', '\\', '/', '\n', '\t', 0, 0x1f, 0x7f, 0x80, 0xe9, 0x2028, 0x20ac, 0xd7ff, 0xe000, 0xfb33, 0xfffd, 0xfeff, 0x10000, 0x1f602, 0x10fffd}

func genString(r *rand.Rand, b *strings.Builder) {
	b.WriteByte('"')
	for range r.IntN(6) {
		c := genRunes[r.IntN(len(genRunes))]
		switch {
		case c < 0x20 || c == '"' || c == '\\' || r.IntN(4) == 0:
			if c >= 0x10000 {
				hi, lo := 0xD800+(c-0x10000)>>10, 0xDC00+(c-0x10000)&0x3FF
				b.WriteString(`\u` + strconv.FormatInt(int64(hi), 16) + `\u` + strings.ToUpper(strconv.FormatInt(int64(lo), 16)))
			} else {
				b.WriteString(`\u` + leftPad(strconv.FormatInt(int64(c), 16)))
			}
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

func leftPad(s string) string { return strings.Repeat("0", 4-len(s)) + s }

// TestJCSDifferential compares JCS with an independent RFC 8785
// implementation (github.com/gowebpki/jcs) on random documents of the model,
// and deterministic CBOR with refCBOR, a reference encoder written from
// RFC 8949 §4.2.1 in this file.
func TestJCSDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		var b strings.Builder
		genJSON(r, &b, 0)
		in := []byte(b.String())
		v, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q) of a generated document: %v", in, err)
		}
		got := v.AppendJCS(nil)
		want, err := jcs.Transform(in)
		if err != nil {
			t.Fatalf("gowebpki/jcs.Transform(%q): %v", in, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("JCS(%q) =\n%q\ngowebpki/jcs:\n%q", in, got, want)
		}
		c, err := v.CBOR()
		if err != nil {
			t.Fatal(err)
		}
		if ref := refCBOR(nil, v); !bytes.Equal(c, ref) {
			t.Fatalf("CBOR(%q) = %x, reference encoder %x", in, c, ref)
		}
		back, err := DecodeCBOR(c)
		if err != nil || !bytes.Equal(back.AppendJCS(nil), got) {
			t.Fatalf("DecodeCBOR(CBOR(%q)) = %s, %v", in, back.AppendJCS(nil), err)
		}
	}
}

// refCBOR is a reference deterministic CBOR encoder for the model, written
// independently of fxamacker/cbor from RFC 8949 §3 and §4.2.1.
func refCBOR(dst []byte, v Value) []byte {
	head := func(dst []byte, major byte, n uint64) []byte {
		switch {
		case n < 24:
			return append(dst, major<<5|byte(n))
		case n <= 0xff:
			return append(dst, major<<5|24, byte(n))
		case n <= 0xffff:
			return binary.BigEndian.AppendUint16(append(dst, major<<5|25), uint16(n))
		case n <= 0xffffffff:
			return binary.BigEndian.AppendUint32(append(dst, major<<5|26), uint32(n))
		}
		return binary.BigEndian.AppendUint64(append(dst, major<<5|27), n)
	}
	switch v.kind {
	case KindNull:
		return append(dst, 0xf6)
	case KindBool:
		if v.b {
			return append(dst, 0xf5)
		}
		return append(dst, 0xf4)
	case KindInt:
		if v.i >= 0 {
			return head(dst, 0, uint64(v.i))
		}
		return head(dst, 1, uint64(-1-v.i))
	case KindString:
		return append(head(dst, 3, uint64(len(v.s))), v.s...)
	case KindArray:
		dst = head(dst, 4, uint64(len(v.elems)))
		for _, e := range v.elems {
			dst = refCBOR(dst, e)
		}
		return dst
	case KindObject:
		type kv struct{ k, v []byte }
		var pairs []kv
		for _, m := range v.members {
			k := refCBOR(nil, Value{kind: KindString, s: m.Name})
			pairs = append(pairs, kv{k, refCBOR(nil, m.Value)})
		}
		slices.SortFunc(pairs, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
		dst = head(dst, 5, uint64(len(pairs)))
		for _, p := range pairs {
			dst = append(append(dst, p.k...), p.v...)
		}
		return dst
	}
	panic("refCBOR: unexpected kind")
}

func TestCBORRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, hex string
		want      error
	}{
		{"non-shortest uint", "1817", ErrNotCanonical},
		{"non-shortest uint16", "190017", ErrNotCanonical},
		{"non-shortest length", "780161", ErrNotCanonical},
		{"non-shortest nint", "3800", ErrNotCanonical},
		{"unsorted keys", "a2616201616101", ErrNotCanonical},
		{"length-first order broken", "a262616101616201", ErrNotCanonical},
		{"duplicate keys", "a2616101616102", ErrCBORMalformed},
		{"indefinite array", "9f01ff", ErrCBORMalformed},
		{"trailing bytes", "0101", ErrCBORMalformed},
		{"truncated", "6261", ErrCBORMalformed},
		{"empty", "", ErrCBORMalformed},
		{"invalid utf8 text", "61ff", ErrCBORMalformed},
		{"noncharacter text", "63efbfbf", ErrNoncharacter},
		{"noncharacter map key", "a163efbfbf00", ErrNoncharacter},
		{"float16 one", "f93c00", ErrCBORType},
		{"float64 integral", "fb4000000000000000", ErrCBORType},
		{"byte string", "4161", ErrCBORType},
		{"tag 1 epoch", "c11a514b67b0", ErrCBORMalformed},
		{"integer key", "a10102", ErrCBORType},
		{"array key", "a18001", ErrCBORMalformed},
		{"undefined", "f7", ErrNotCanonical},
		{"simple 255", "f8ff", ErrCBORType},
		{"reserved additional info", "1c", ErrCBORMalformed},
	} {
		var b []byte
		for i := 0; i+1 < len(tc.hex); i += 2 {
			n, _ := strconv.ParseUint(tc.hex[i:i+2], 16, 8)
			b = append(b, byte(n))
		}
		if err := CheckCBOR(b); !errors.Is(err, tc.want) {
			t.Errorf("%s: CheckCBOR(%s) = %v, want %v", tc.name, tc.hex, err, tc.want)
		}
		if _, err := DecodeCBOR(b); err == nil {
			t.Errorf("%s: DecodeCBOR(%s) accepted", tc.name, tc.hex)
		}
	}
	deep := append(bytes.Repeat([]byte{0x81}, DefaultMaxDepth+1), 0x01)
	if err := CheckCBOR(deep); !errors.Is(err, ErrCBORMalformed) {
		t.Errorf("CheckCBOR of %d nested arrays = %v, want ErrCBORMalformed", DefaultMaxDepth+1, err)
	}
	ok := append(bytes.Repeat([]byte{0x81}, DefaultMaxDepth), 0x01)
	if err := CheckCBOR(ok); err != nil {
		t.Errorf("CheckCBOR of %d nested arrays = %v, want nil", DefaultMaxDepth, err)
	}
	// A header that claims 2^31 elements with no data behind it must fail on
	// well-formedness, not allocate.
	if err := CheckCBOR([]byte{0x9a, 0x80, 0, 0, 0}); !errors.Is(err, ErrCBORMalformed) {
		t.Errorf("CheckCBOR of a lying array header = %v", err)
	}
}
