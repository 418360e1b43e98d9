package conformance

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gowebpki/jcs"
	lukeblake3 "lukechampine.com/blake3"

	"github.com/cordon-dev/cordon/evidence/canon"
)

func TestV1Passes(t *testing.T) {
	rep, err := Run(V1(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		for _, f := range r.Failures {
			t.Errorf("%s: %s", f.Vector, f.Reason)
		}
		if r.Advertised && r.Skipped != 0 {
			t.Errorf("%s: %d skipped in an advertised class", r.Class, r.Skipped)
		}
	}
	p, f, s := rep.Totals()
	if p < 40 || f != 0 || s != 0 {
		t.Errorf("%s", rep.Summary())
	}
	if got, want := rep.Summary(), fmt.Sprintf("conformance: %d passed, 0 failed, 0 skipped", p); got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

// TestC1Independent recomputes every C1 expectation without canon: JCS with
// github.com/gowebpki/jcs, ContentIds with lukechampine.com/blake3, CBOR
// with indepCBOR below (over encoding/json's decoding), so that the
// published vectors do not merely restate the implementation.
func TestC1Independent(t *testing.T) {
	files, err := Load(V1())
	if err != nil {
		t.Fatal(err)
	}
	idOf := func(b []byte) string {
		sum := lukeblake3.Sum256(b)
		return "b3:" + strings.TrimRight(b64url(sum[:]), "=")
	}
	checked := 0
	for _, f := range files {
		if f.Class != "C1" {
			continue
		}
		for _, v := range f.Vectors {
			if v.Expect.Error != "" {
				continue
			}
			in, _ := v.Bytes()
			switch v.Op {
			case "jcs":
				want, err := jcs.Transform(in)
				if err != nil || *v.Expect.Output != string(want) {
					t.Errorf("%s: gowebpki/jcs gives %q, %v", v.ID, want, err)
				}
				if v.Expect.ID != idOf(want) {
					t.Errorf("%s: id %s, independent %s", v.ID, v.Expect.ID, idOf(want))
				}
			case "cbor":
				dec := json.NewDecoder(bytes.NewReader(in))
				dec.UseNumber()
				var x any
				if err := dec.Decode(&x); err != nil {
					t.Fatal(err)
				}
				want := indepCBOR(nil, x)
				if *v.Expect.OutputHex != hex.EncodeToString(want) || v.Expect.ID != idOf(want) {
					t.Errorf("%s: independent CBOR %x", v.ID, want)
				}
			case "cbor-check", "id-raw":
				if v.Expect.ID != idOf(in) {
					t.Errorf("%s: id %s, independent %s", v.ID, v.Expect.ID, idOf(in))
				}
			case "id-parse":
				raw, err := base64URLStrictDecode(string(in[3:]))
				if err != nil || *v.Expect.OutputHex != hex.EncodeToString(raw) {
					t.Errorf("%s: independent decode %x, %v", v.ID, raw, err)
				}
			default:
				t.Errorf("%s: op %q has no independent check", v.ID, v.Op)
			}
			checked++
		}
	}
	if checked < 15 {
		t.Errorf("only %d positive C1 vectors checked", checked)
	}
}

func b64url(b []byte) string {
	const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var s strings.Builder
	for i := 0; i < len(b); i += 3 {
		var n uint32
		k := min(3, len(b)-i)
		for j := range 3 {
			n <<= 8
			if j < k {
				n |= uint32(b[i+j])
			}
		}
		for j := range k + 1 {
			s.WriteByte(a[n>>(18-6*j)&63])
		}
	}
	return s.String()
}

func base64URLStrictDecode(s string) ([]byte, error) {
	const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var bits, n uint32
	var out []byte
	for _, c := range []byte(s) {
		i := strings.IndexByte(a, c)
		if i < 0 {
			return nil, errors.New("bad char")
		}
		bits = bits<<6 | uint32(i)
		n += 6
		if n >= 8 {
			n -= 8
			out = append(out, byte(bits>>n))
		}
	}
	if bits&(1<<n-1) != 0 {
		return nil, errors.New("spare bits")
	}
	return out, nil
}

// indepCBOR encodes encoding/json's decoding (with UseNumber) as RFC 8949
// §4.2.1 deterministic CBOR; for text keys bytewise order of the encoded
// keys is shorter-first, then bytewise.
func indepCBOR(dst []byte, x any) []byte {
	head := func(dst []byte, major byte, n uint64) []byte {
		var size int
		switch {
		case n < 24:
			return append(dst, major<<5|byte(n))
		case n < 1<<8:
			dst, size = append(dst, major<<5|24), 1
		case n < 1<<16:
			dst, size = append(dst, major<<5|25), 2
		case n < 1<<32:
			dst, size = append(dst, major<<5|26), 4
		default:
			dst, size = append(dst, major<<5|27), 8
		}
		for i := size - 1; i >= 0; i-- {
			dst = append(dst, byte(n>>(8*i)))
		}
		return dst
	}
	switch x := x.(type) {
	case nil:
		return append(dst, 0xf6)
	case bool:
		if x {
			return append(dst, 0xf5)
		}
		return append(dst, 0xf4)
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			panic(err)
		}
		if n >= 0 {
			return head(dst, 0, uint64(n))
		}
		return head(dst, 1, uint64(-1-n))
	case string:
		return append(head(dst, 3, uint64(len(x))), x...)
	case []any:
		dst = head(dst, 4, uint64(len(x)))
		for _, e := range x {
			dst = indepCBOR(dst, e)
		}
		return dst
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if len(keys[i]) != len(keys[j]) {
				return len(keys[i]) < len(keys[j])
			}
			return keys[i] < keys[j]
		})
		dst = head(dst, 5, uint64(len(x)))
		for _, k := range keys {
			dst = indepCBOR(append(head(dst, 3, uint64(len(k))), k...), x[k])
		}
		return dst
	}
	panic(fmt.Sprintf("indepCBOR: %T", x))
}

var update = flag.Bool("update", false, "add new vectors to conformance/published.txt")

// TestPublishedVectorsNeverChange holds every published vector to the
// ContentId recorded in published.txt when it was published: editing or
// removing one fails. New vectors are recorded with go test -update, which
// never rewrites an existing line.
func TestPublishedVectorsNeverChange(t *testing.T) {
	files, err := Load(V1())
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]string{}
	var order []string
	for _, f := range files {
		for _, v := range f.Vectors {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			c, err := canon.JCS(b)
			if err != nil {
				t.Fatal(err)
			}
			current["v1/"+v.ID] = canon.Sum(c).String()
			order = append(order, "v1/"+v.ID)
		}
	}
	raw, err := os.ReadFile("published.txt")
	if err != nil && !(*update && errors.Is(err, os.ErrNotExist)) {
		t.Fatal(err)
	}
	published := map[string]string{}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			lines = append(lines, line)
			continue
		}
		id, sum, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("published.txt: malformed line %q", line)
		}
		published[id] = sum
		lines = append(lines, line)
		got, exists := current[id]
		switch {
		case !exists:
			t.Errorf("published vector %s was removed; publish a new version directory instead", id)
		case got != sum:
			t.Errorf("published vector %s was edited (%s, published %s); vectors are never edited", id, got, sum)
		}
	}
	var added []string
	for _, id := range order {
		if _, ok := published[id]; !ok {
			added = append(added, id+" "+current[id])
		}
	}
	if len(added) == 0 {
		return
	}
	if !*update {
		t.Fatalf("%d vectors are not in published.txt (first: %s); run go test ./conformance -run Published -update", len(added), added[0])
	}
	lines = slices.DeleteFunc(lines, func(s string) bool { return s == "" })
	if len(lines) == 0 {
		lines = append(lines, "# Published conformance vectors: id and ContentId of the vector's JCS form. Lines are only ever added.")
	}
	lines = append(lines, added...)
	if err := os.WriteFile("published.txt", []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, body := range files {
		m[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return m
}

const goodVector = `{"id":"C1-x","class":"C1","description":"d","op":"id-raw","input":"","expect":{"id":"b3:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI"}}`

func TestRunCounts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		files         map[string]string
		opts          Options
		p, f, s       int
		wantErr       error
		wantErrSubstr string
		allClasses    bool // run without a class filter
	}{
		{
			name:  "pass",
			files: map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` + goodVector + `]}`},
			p:     1,
		},
		{
			name: "wrong expectation fails",
			files: map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` +
				strings.Replace(goodVector, "MmI", "MmA", 1) + `]}`},
			f: 1,
		},
		{
			name: "unimplemented op in an advertised class fails, not skips",
			files: map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` +
				strings.Replace(goodVector, `"id-raw"`, `"teleport"`, 1) + `]}`},
			f: 1,
		},
		{
			name: "expected error that does not occur fails",
			files: map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` +
				`{"id":"C1-e","class":"C1","description":"d","op":"jcs","input":"[1]","expect":{"error":"float"}}]}`},
			f: 1,
		},
		{
			name: "wrong error kind fails",
			files: map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` +
				`{"id":"C1-e","class":"C1","description":"d","op":"jcs","input":"[1.5]","expect":{"error":"syntax"}}]}`},
			f: 1,
		},
		{
			name: "class not advertised is skipped; missing advertised class fails",
			files: map[string]string{"C99.json": `{"format":"cordon-conformance-v1","class":"C99","title":"t","vectors":[` +
				strings.ReplaceAll(goodVector, `"C1`, `"C99`) + `]}`},
			f: len(Classes()), s: 1, allClasses: true,
		},
		{
			name:    "asking for a class not advertised is an error",
			files:   map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` + goodVector + `]}`},
			opts:    Options{Classes: []string{"C7"}},
			wantErr: ErrUnknownClass,
		},
		{
			name:          "duplicate member name in a vector file",
			files:         map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","class":"C1","title":"t","vectors":[]}`},
			wantErrSubstr: "duplicate member name",
		},
		{
			name:          "unknown field in a vector",
			files:         map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` + strings.Replace(goodVector, `"op"`, `"skip":true,"op"`, 1) + `]}`},
			wantErrSubstr: "unknown field",
		},
		{
			name:          "class does not match the file name",
			files:         map[string]string{"C2.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` + goodVector + `]}`},
			wantErrSubstr: "does not match the file name",
		},
		{
			name:          "unknown error kind",
			files:         map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[{"id":"C1-e","class":"C1","description":"d","op":"jcs","input":"1","expect":{"error":"whatever"}}]}`},
			wantErrSubstr: "unknown error kind",
		},
		{
			name:          "both input forms",
			files:         map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` + strings.Replace(goodVector, `"input":""`, `"input":"","input_hex":""`, 1) + `]}`},
			wantErrSubstr: "exactly one of input and input_hex",
		},
		{
			name:          "duplicate vector ids across files",
			files:         map[string]string{"C1.json": `{"format":"cordon-conformance-v1","class":"C1","title":"t","vectors":[` + goodVector + `,` + goodVector + `]}`},
			wantErrSubstr: "already used",
		},
		{
			name:          "no files",
			files:         map[string]string{"README": "x"},
			wantErrSubstr: "no vector files",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts.Classes == nil && !tc.allClasses {
				opts.Classes = []string{"C1"}
			}
			rep, err := Run(mapFS(tc.files), opts)
			if tc.wantErr != nil || tc.wantErrSubstr != "" {
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("Run error = %v, want %v %q", err, tc.wantErr, tc.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, f, s := rep.Totals()
			if p != tc.p || f != tc.f || s != tc.s {
				t.Errorf("%s; want %d passed, %d failed, %d skipped", rep.Summary(), tc.p, tc.f, tc.s)
			}
			if rep.OK() != (tc.f == 0) {
				t.Errorf("OK() = %v with %d failed", rep.OK(), f)
			}
		})
	}
}
