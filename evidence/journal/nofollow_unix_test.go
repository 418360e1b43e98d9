//go:build unix

package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSymlinkRefused: a symbolic link planted at a journal's path is
// never followed, so a privileged writer cannot be made to create or
// extend a file somewhere else.
func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	link := filepath.Join(dir, "journal.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Append(link, "note", body(t, `{"n":1}`)); err == nil {
		t.Errorf("Append followed a symbolic link")
	}
	if w, err := Open(link); err == nil {
		w.Close()
		t.Errorf("Open followed a symbolic link")
	}
	if _, err := Repair(link); err == nil {
		t.Errorf("Repair followed a symbolic link")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("the link's target was created: %v", err)
	}
}
