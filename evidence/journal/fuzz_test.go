package journal

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzScan: Scan never panics; an accepted journal is exactly its entries'
// lines, and its head is its last entry.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"body":{},"index":0,"type":"decision"}` + "\n"))
	f.Add([]byte(`{"body":{"a":[1,"x"]},"index":0,"type":"t"}` + "\n" + `{"body":{},"index":1,"prev":"b3:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI","type":"t"}` + "\n"))
	f.Add([]byte("{\"body\":{},\"index\":0,\"type\":\"decision\"}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		entries, h, err := Scan(bytes.NewReader(in))
		if err != nil {
			return
		}
		var b strings.Builder
		for _, e := range entries {
			b.Write(e.Line())
			b.WriteByte('\n')
			_ = e.Body()
		}
		if b.String() != string(in) || int(h.Count) != len(entries) || (len(entries) > 0 && h.ID != entries[len(entries)-1].ID()) {
			t.Fatalf("accepted %q but it is not its entries", in)
		}
	})
}
