package canon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"
)

var sentinels = []error{ErrSyntax, ErrBOM, ErrInvalidUTF8, ErrLoneSurrogate, ErrNoncharacter,
	ErrDuplicateKey, ErrFloat, ErrNegativeZero, ErrIntegerRange, ErrTooDeep, ErrTooLarge,
	ErrIDPrefix, ErrIDLength, ErrIDEncoding, ErrCBORMalformed, ErrCBORType, ErrNotCanonical}

// checkRefusal fails unless err is an *Error wrapping exactly one sentinel
// with an offset inside the input.
func checkRefusal(t *testing.T, in []byte, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("refusal of %q is %T, not *Error: %v", in, err, err)
	}
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("refusal of %q wraps %d sentinels: %v", in, n, err)
	}
	if e.Offset < -1 || e.Offset > int64(len(in)) {
		t.Fatalf("refusal of %q has offset %d outside the input", in, e.Offset)
	}
}

func addSeeds(f *testing.F) {
	f.Add([]byte(`{"b":[1,-2,"\u00e9\ud83d\ude02"],"a":{"":null,"x":true}}`))
	f.Add([]byte(`[9007199254740991,-9007199254740991,0]`))
	f.Add([]byte(`{"a":1,"\u0061":2}`))
	f.Add([]byte(`"\ud800"`))
	f.Add([]byte("\xef\xbb\xbf1"))
	f.Add([]byte(`-0`))
	f.Add([]byte(`1.0e3`))
	inputs, _ := filepath.Glob("testdata/rfc8785/input/*.json")
	for _, in := range inputs {
		if b, err := os.ReadFile(in); err == nil {
			f.Add(b)
		}
	}
}

// FuzzJCS: the parser never panics; every refusal is a well-formed *Error;
// every accepted input canonicalizes to a fixed point (parse → JCS → parse →
// JCS gives the same bytes), agrees with an independent RFC 8785
// implementation, and survives a CBOR round trip unchanged.
func FuzzJCS(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Parse(in)
		if err != nil {
			checkRefusal(t, in, err)
			return
		}
		c := v.AppendJCS(nil)
		v2, err := Parse(c)
		if err != nil {
			t.Fatalf("JCS output %q of %q does not parse: %v", c, in, err)
		}
		if c2 := v2.AppendJCS(nil); !bytes.Equal(c, c2) {
			t.Fatalf("JCS is not a fixed point: %q then %q", c, c2)
		}
		if ref, err := jcs.Transform(in); err != nil || !bytes.Equal(ref, c) {
			t.Fatalf("JCS(%q) = %q; gowebpki/jcs = %q, %v", in, c, ref, err)
		}
		b, err := v.CBOR()
		if err != nil {
			t.Fatalf("CBOR of accepted %q: %v", in, err)
		}
		if ref := refCBOR(nil, v); !bytes.Equal(b, ref) {
			t.Fatalf("CBOR(%q) = %x, reference %x", in, b, ref)
		}
		back, err := DecodeCBOR(b)
		if err != nil || !bytes.Equal(back.AppendJCS(nil), c) {
			t.Fatalf("CBOR round trip of %q: %q, %v", in, back.AppendJCS(nil), err)
		}
	})
}

// FuzzCheckCBOR: the strict CBOR verifier never panics, and whatever it
// accepts is exactly the canonical encoding of what it decoded.
func FuzzCheckCBOR(f *testing.F) {
	for _, h := range [][]byte{{0xa2, 0x61, 0x61, 0x01, 0x61, 0x62, 0x82, 0x02, 0x03}, {0x18, 0x17}, {0x9f, 0xff}, {0xf9, 0x3c, 0x00}, {0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		x, err := checkCBOR(in)
		if err != nil {
			checkRefusal(t, in, err)
			return
		}
		again, err := encMode.Marshal(x)
		if err != nil || !bytes.Equal(again, in) {
			t.Fatalf("accepted %x re-encodes as %x, %v", in, again, err)
		}
		v, err := DecodeCBOR(in)
		if err != nil {
			if !errors.Is(err, ErrIntegerRange) {
				t.Fatalf("DecodeCBOR(%x) refused what CheckCBOR accepted: %v", in, err)
			}
			return
		}
		if b, err := v.CBOR(); err != nil || !bytes.Equal(b, in) {
			t.Fatalf("DecodeCBOR(%x).CBOR() = %x, %v", in, b, err)
		}
	})
}

// FuzzParseID: ParseID never panics, and a ContentId has exactly one
// spelling: whatever it accepts prints back to the same string.
func FuzzParseID(f *testing.F) {
	f.Add(Sum(nil).String())
	f.Add("b3:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmJ")
	f.Add("b3:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI=")
	f.Add("sha256:abc")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			checkRefusal(t, []byte(s), err)
			return
		}
		if id.String() != s {
			t.Fatalf("ParseID(%q) accepted a second spelling of %s", s, id)
		}
	})
}
