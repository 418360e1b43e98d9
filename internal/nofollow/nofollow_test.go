//go:build unix

package nofollow

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRefusesWhatIsNotAFile: a symbolic link, a FIFO (without blocking)
// and a directory are refused; a file over the limit is refused; a
// regular file is read.
func TestRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(file, 5); err != nil || string(b) != "hello" {
		t.Fatalf("Read(file) = %q, %v", b, err)
	}
	if _, err := Read(file, 4); err == nil || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Fatalf("over the limit: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo, 5); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was read")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	for _, p := range []string{link, dir} {
		if _, err := Open(p); err == nil {
			t.Errorf("Open(%s) succeeded", p)
		}
	}
	if got := Describe(os.ModeNamedPipe); got != "a named pipe" {
		t.Errorf("Describe(pipe) = %q", got)
	}
}
