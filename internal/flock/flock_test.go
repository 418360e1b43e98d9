//go:build unix

package flock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestTryLock(t *testing.T) {
	name := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|NoFollow, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	if err := TryLock(a); err != nil {
		t.Fatalf("TryLock of a free lock: %v", err)
	}
	if err := TryLock(b); !errors.Is(err, ErrHeld) {
		t.Fatalf("TryLock of a held lock: %v, want ErrHeld", err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := TryLock(b); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	a.Close()
	if err := TryLock(open()); !errors.Is(err, ErrHeld) {
		t.Fatalf("TryLock while another file holds it: %v, want ErrHeld", err)
	}
}
