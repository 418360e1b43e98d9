package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type nameRow string

func (n nameRow) Scan(dest ...any) error { *dest[0].(*string) = string(n); return nil }

// TestHotSameFile: the lock is refused when the file SQLite reports it
// opened is not the file locked (whatever the alias), and accepted when
// it is, by another name (a hard link).
func TestHotSameFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	os.WriteFile(a, nil, 0o600)
	os.WriteFile(b, nil, 0o600)
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &Store{}
	if err := s.sameFile(nameRow(b), f); err == nil {
		t.Fatal("another file than the one locked was accepted")
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Link(a, link); err != nil {
		t.Fatal(err)
	}
	if err := s.sameFile(nameRow(link), f); err != nil {
		t.Fatalf("the locked file by another name: %v", err)
	}
}

// TestHotBoundedAllocated: the bound on the snapshots' bytes counts what
// the cache holds allocated, not only their lengths: a snapshot just
// over a size class (32 KiB + 1 takes 40 KiB) would let the cache hold
// a quarter more than hotMaxRunBytes. Red team, finding 3.
func TestHotBoundedAllocated(t *testing.T) {
	h := &hotReads{keys: map[string]hotKey{}, runs: map[string]hotRun{}}
	now := time.Now()
	snap := make([]byte, 32<<10+1)
	for i := range 2 * hotMaxRunBytes / len(snap) {
		h.putRun(&Run{ID: fmt.Sprintf("run_%d", i), Config: snap}, 0, 0, now)
		held := 0
		for _, e := range h.runs {
			held += cap(e.r.Config)
		}
		if held > hotMaxRunBytes {
			t.Fatalf("after %d runs the cache holds %d bytes of snapshots, over its bound %d (it counts %d)", i+1, held, hotMaxRunBytes, h.runBytes)
		}
	}
}
