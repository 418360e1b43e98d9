package canon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/zeebo/blake3"
)

// The benchmarks come in pairs, cordon against the baseline named in
// docs/PERFORMANCE.md; scripts/bench runs them together and prints ratios.

func benchInput(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// BenchmarkContentID compares the ContentId (BLAKE3-256 and its "b3:" text)
// with raw BLAKE3-256 of the same bytes.
func BenchmarkContentID(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"64B", 64}, {"1MiB", 1 << 20}} {
		in := benchInput(size.n)
		b.Run(size.name+"/impl=cordon", func(b *testing.B) {
			b.SetBytes(int64(size.n))
			for b.Loop() {
				_ = Sum(in).String()
			}
		})
		b.Run(size.name+"/impl=blake3", func(b *testing.B) {
			b.SetBytes(int64(size.n))
			for b.Loop() {
				_ = blake3.Sum256(in)
			}
		})
	}
}

// jsonDoc returns a deterministic JSON document of about n bytes: an array
// of records with names, integers, nested arrays, non-ASCII text and escapes.
func jsonDoc(n int) []byte {
	var b strings.Builder
	b.WriteString("[\n")
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `  {"id": %d, "name": "unit-%d", "path": "/work/src/pkg%d/file_%d.go", `+
			`"sizes": [%d, %d, %d], "ok": %t, "owner": null, "note": "caf\u00e9 \"quoted\" %d\n", `+
			`"meta": {"tier": "S2", "zeta": -%d, "alpha": "\ud83d\ude02"}}`,
			i, i, i%97, i, i*31, i*17, i%7, i%3 == 0, i, i+1)
	}
	b.WriteString("\n]\n")
	return []byte(b.String())
}

// BenchmarkJCS compares JCS of a ~1 MiB document with encoding/json decoding
// the same document into an interface value and encoding it again.
func BenchmarkJCS(b *testing.B) {
	doc := jsonDoc(1 << 20)
	if _, err := JCS(doc); err != nil {
		b.Fatal(err)
	}
	b.Run("1MiB/impl=cordon", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := JCS(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("1MiB/impl=encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := json.Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
