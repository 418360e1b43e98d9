package sandbox

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInterpreterMatchesDebugELF(t *testing.T) {
	n := 0
	for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			got, err := interpreter(p)
			want := ""
			if f, ferr := elf.Open(p); ferr == nil {
				for _, pr := range f.Progs {
					if pr.Type == elf.PT_INTERP {
						b := make([]byte, pr.Filesz)
						pr.ReadAt(b, 0)
						want = strings.TrimRight(string(b), "\x00")
					}
				}
				f.Close()
			}
			if err != nil || got != want {
				t.Errorf("%s: got %q %v, want %q", p, got, err, want)
			}
			n++
		}
	}
	if n < 100 {
		t.Fatalf("only %d files", n)
	}
}
