package store

import (
	"os"
	"path/filepath"
	"testing"
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
