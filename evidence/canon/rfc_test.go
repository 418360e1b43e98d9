package canon

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRFC8785Reference runs the RFC 8785 reference test data (the
// cyberphone/json-canonicalization testdata, see testdata/README.md). Files
// whose numbers are all integers must reproduce byte for byte under the
// strict rules; files with fractions or exponents must be refused under the
// strict rules with ErrFloat and reproduce byte for byte under
// RFC8785Numbers.
func TestRFC8785Reference(t *testing.T) {
	inputs, err := filepath.Glob("testdata/rfc8785/input/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no RFC 8785 test data: %v", err)
	}
	floats := map[string]bool{"structures.json": true, "values.json": true}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata/rfc8785/output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := JCS(src)
			if floats[name] {
				if !errors.Is(err, ErrFloat) {
					t.Errorf("strict JCS(%s) = %q, %v; want ErrFloat", name, got, err)
				}
			} else if err != nil || !bytes.Equal(got, want) {
				t.Errorf("strict JCS(%s) =\n%s, %v\nwant\n%s", name, got, err, want)
			}
			v, err := Options{RFC8785Numbers: true}.Parse(src)
			if err != nil {
				t.Fatalf("RFC8785Numbers Parse(%s): %v", name, err)
			}
			if got := v.AppendJCS(nil); !bytes.Equal(got, want) {
				t.Errorf("RFC8785Numbers JCS(%s) =\n%s\nwant\n%s", name, got, want)
			}
			if floats[name] {
				if _, err := v.ID(); !errors.Is(err, ErrFloat) {
					t.Errorf("ID of a value with RFC 8785 numbers: err = %v, want ErrFloat", err)
				}
				if _, err := v.CBOR(); !errors.Is(err, ErrFloat) {
					t.Errorf("CBOR of a value with RFC 8785 numbers: err = %v, want ErrFloat", err)
				}
			}
		})
	}
}

// TestES6Numbers checks number serialization against the table of RFC 8785
// Appendix B (IEEE-754 bit patterns and their expected text).
func TestES6Numbers(t *testing.T) {
	for _, tc := range []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	} {
		b, err := hex.DecodeString(tc.bits)
		if err != nil {
			t.Fatal(err)
		}
		var u uint64
		for _, c := range b {
			u = u<<8 | uint64(c)
		}
		f := math.Float64frombits(u)
		if got := string(appendES6(nil, f)); got != tc.want {
			t.Errorf("appendES6(%s = %v) = %q, want %q", tc.bits, f, got, tc.want)
		}
		// The text must read back, under RFC8785Numbers, to the same number.
		v, err := Options{RFC8785Numbers: true}.Parse([]byte(tc.want))
		if err != nil || (v.f != f && !(f == 0 && v.f == 0)) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.want, v.f, err, f)
		}
	}
}

// TestBLAKE3Vectors checks Sum against the official BLAKE3 test vectors
// (testdata/blake3/test_vectors.json): the first 32 bytes of each "hash".
func TestBLAKE3Vectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/blake3/test_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var tv struct {
		Cases []struct {
			InputLen int    `json:"input_len"`
			Hash     string `json:"hash"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &tv); err != nil {
		t.Fatal(err)
	}
	if len(tv.Cases) < 30 {
		t.Fatalf("only %d BLAKE3 cases", len(tv.Cases))
	}
	for _, c := range tv.Cases {
		in := make([]byte, c.InputLen)
		for i := range in {
			in[i] = byte(i % 251)
		}
		id := Sum(in)
		if got := hex.EncodeToString(id[:]); got != c.Hash[:64] {
			t.Errorf("Sum(%d bytes) = %s, want %s", c.InputLen, got, c.Hash[:64])
		}
	}
}

// TestRFC8949AppendixA checks the deterministic CBOR encoder against the
// examples of RFC 8949 Appendix A that fall in the JSON model (integers
// within ±(2^53−1), strings, arrays, maps with text keys, true, false,
// null), and that the strict decoder reads each back to the same JCS text.
// Examples outside the model must be refused by the parser or the decoder.
func TestRFC8949AppendixA(t *testing.T) {
	for _, tc := range []struct{ json, hex string }{
		{`0`, "00"},
		{`1`, "01"},
		{`10`, "0a"},
		{`23`, "17"},
		{`24`, "1818"},
		{`25`, "1819"},
		{`100`, "1864"},
		{`1000`, "1903e8"},
		{`1000000`, "1a000f4240"},
		{`1000000000000`, "1b000000e8d4a51000"},
		{`-1`, "20"},
		{`-10`, "29"},
		{`-100`, "3863"},
		{`-1000`, "3903e7"},
		{`false`, "f4"},
		{`true`, "f5"},
		{`null`, "f6"},
		{`""`, "60"},
		{`"a"`, "6161"},
		{`"IETF"`, "6449455446"},
		{`"\"\\"`, "62225c"},
		{`"\u00fc"`, "62c3bc"},
		{`"\u6c34"`, "63e6b0b4"},
		{`"\ud800\udd51"`, "64f0908591"},
		{`[]`, "80"},
		{`[1,2,3]`, "83010203"},
		{`[1,[2,3],[4,5]]`, "8301820203820405"},
		{`[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]`,
			"98190102030405060708090a0b0c0d0e0f101112131415161718181819"},
		{`{}`, "a0"},
		{`{"a":1,"b":[2,3]}`, "a26161016162820203"},
		{`["a",{"b":"c"}]`, "826161a161626163"},
		{`{"a":"A","b":"B","c":"C","d":"D","e":"E"}`, "a56161614161626142616361436164614461656145"},
	} {
		want, _ := hex.DecodeString(tc.hex)
		got, err := CBOR([]byte(tc.json))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("CBOR(%s) = %x, %v; want %s", tc.json, got, err, tc.hex)
			continue
		}
		v, err := DecodeCBOR(want)
		if err != nil {
			t.Errorf("DecodeCBOR(%s): %v", tc.hex, err)
			continue
		}
		canon, _ := JCS([]byte(tc.json))
		if got := v.AppendJCS(nil); !bytes.Equal(got, canon) {
			t.Errorf("DecodeCBOR(%s) = %s, want %s", tc.hex, got, canon)
		}
	}
	// Integers of Appendix A beyond the JSON model: the parser refuses them;
	// CheckCBOR accepts the 64-bit ones, DecodeCBOR refuses them.
	for _, tc := range []struct{ json, hex string }{
		{`18446744073709551615`, "1bffffffffffffffff"},
		{`-18446744073709551616`, "3bffffffffffffffff"},
	} {
		if _, err := CBOR([]byte(tc.json)); !errors.Is(err, ErrIntegerRange) {
			t.Errorf("CBOR(%s): err = %v, want ErrIntegerRange", tc.json, err)
		}
		b, _ := hex.DecodeString(tc.hex)
		if err := CheckCBOR(b); err != nil {
			t.Errorf("CheckCBOR(%s) = %v, want nil", tc.hex, err)
		}
		if _, err := DecodeCBOR(b); !errors.Is(err, ErrIntegerRange) {
			t.Errorf("DecodeCBOR(%s): err = %v, want ErrIntegerRange", tc.hex, err)
		}
	}
	// Examples the strict decoder must refuse: floats, tags (bignums, dates),
	// undefined, simple values, byte strings, integer map keys and every
	// indefinite-length form.
	for _, tc := range []struct {
		hex  string
		want error
	}{
		{"f90000", ErrCBORType},                                            // 0.0
		{"fb3ff199999999999a", ErrCBORType},                                // 1.1
		{"f97c00", ErrCBORType},                                            // Infinity
		{"c249010000000000000000", ErrCBORMalformed},                       // bignum 18446744073709551616
		{"c074323031332d30332d32315432303a30343a30305a", ErrCBORMalformed}, // tag 0
		{"f7", ErrNotCanonical},                                            // undefined reads as nil, re-encodes as null
		{"f0", ErrCBORType},                                                // simple(16)
		{"40", ErrCBORType},                                                // h''
		{"4401020304", ErrCBORType},                                        // h'01020304'
		{"a201020304", ErrCBORType},                                        // {1: 2, 3: 4}
		{"5f42010243030405ff", ErrCBORMalformed},
		{"7f657374726561646d696e67ff", ErrCBORMalformed},
		{"9fff", ErrCBORMalformed},
		{"9f018202039f0405ffff", ErrCBORMalformed},
		{"83018202039f0405ff", ErrCBORMalformed},
		{"bf61610161629f0203ffff", ErrCBORMalformed},
		{"bf6346756ef563416d7421ff", ErrCBORMalformed},
	} {
		b, _ := hex.DecodeString(tc.hex)
		if err := CheckCBOR(b); !errors.Is(err, tc.want) {
			t.Errorf("CheckCBOR(%s) = %v, want %v", tc.hex, err, tc.want)
		}
	}
}

func TestTestdataProvenance(t *testing.T) {
	// The README names where every external file came from; keep it honest.
	readme, err := os.ReadFile("testdata/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rfc8785/", "blake3/test_vectors.json", "Apache", "CC0"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("testdata/README.md does not mention %q", want)
		}
	}
}
