package journal

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"
)

// benchBody is a decision-like body of about 1 KiB.
func benchBody(b *testing.B, i int) string {
	b.Helper()
	s := fmt.Sprintf(`{"grants":"b3:wBjuBeg1zml8_zmVDEBpvLxEbJl0XSFRJb2II60LziE","outcome":"allow","query":{"kind":"fs","op":"write","path":"/work/out/%06d/report.xml"},"reason":"%s","rule":"fs[0]","type":"cordon.decision.v1"}`, i, strings.Repeat("write is granted by /work (rw); ", 26))
	return s
}

func benchJournal(b *testing.B, n int) []byte {
	b.Helper()
	path := filepath.Join(b.TempDir(), "j")
	w, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := w.Append("decision", body(b, benchBody(b, i))); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	var buf bytes.Buffer
	f, _ := filepathOpen(path)
	buf.ReadFrom(f)
	f.Close()
	return buf.Bytes()
}

// BenchmarkJournalVerify verifies a journal of 1,000 entries of about
// 1 KiB against raw BLAKE3 of each of the same lines (the hashing that
// verification cannot avoid).
func BenchmarkJournalVerify(b *testing.B) {
	data := benchJournal(b, 1000)
	lines := bytes.SplitAfter(data, []byte("\n"))
	b.Run("1KiB/impl=cordon", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if h, err := Verify(bytes.NewReader(data)); err != nil || h.Count != 1000 {
				b.Fatal(h, err)
			}
		}
	})
	b.Run("1KiB/impl=blake3", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			for _, l := range lines {
				if len(l) > 0 {
					_ = blake3.Sum256(l[:len(l)-1])
				}
			}
		}
	})
}

// BenchmarkJournalAppend appends 1 KiB entries through a Writer (one write
// and one fsync each) against raw BLAKE3 of the same lines.
func BenchmarkJournalAppend(b *testing.B) {
	bodies := make([]string, 100)
	for i := range bodies {
		bodies[i] = benchBody(b, i)
	}
	vals := make([]any, len(bodies))
	_ = vals
	b.Run("1KiB/impl=cordon", func(b *testing.B) {
		w, err := Open(filepath.Join(b.TempDir(), "j"))
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		var n int64
		i := 0
		for b.Loop() {
			e, err := w.Append("decision", body(b, bodies[i%len(bodies)]))
			if err != nil {
				b.Fatal(err)
			}
			n += int64(len(e.line) + 1)
			i++
		}
		b.SetBytes(n / int64(i))
	})
	b.Run("1KiB/impl=blake3", func(b *testing.B) {
		line := []byte(bodies[0])
		b.SetBytes(int64(len(line) + 100))
		for b.Loop() {
			_ = blake3.Sum256(line)
		}
	})
}
