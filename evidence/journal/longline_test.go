package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	for _, n := range []int{100, 70000, 200000, 1000} {
		if _, err := Append(path, "decision", body(t, `{"x":"`+strings.Repeat("a", n)+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := os.Open(path)
	defer f.Close()
	h, err := Verify(f)
	if err != nil || h.Count != 4 {
		t.Fatalf("Verify = %+v, %v", h, err)
	}
}
