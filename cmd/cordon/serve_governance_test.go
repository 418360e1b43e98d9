package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLoadSecrets: the operator's secrets file gives values and
// file:PATH entries; an entry that resolves to nothing is counted as
// configured (so a file of only such entries makes the pool fail loud)
// and reported by line and path, never by value; a file others can
// write is refused.
func TestLoadSecrets(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "one")
	os.WriteFile(one, []byte("value-from-a-file-1\n"), 0o600)
	name := filepath.Join(dir, "secrets")
	os.WriteFile(name, []byte("# operator secrets\nliteral-secret-value\n\nfile:"+one+"\nfile:"+filepath.Join(dir, "missing")+"\n"), 0o600)
	var errb bytes.Buffer
	e := &env{stderr: &errb}
	vals, n, err := loadSecrets(e, "serve", name)
	if err != nil || n != 3 || len(vals) != 2 || vals[0] != "literal-secret-value" || vals[1] != "value-from-a-file-1" {
		t.Fatalf("loadSecrets: %q, %d, %v", vals, n, err)
	}
	if !strings.Contains(errb.String(), "line 5") || strings.Contains(errb.String(), "literal-secret-value") {
		t.Fatalf("report: %s", errb.String())
	}
	os.WriteFile(name, []byte("file:"+filepath.Join(dir, "missing")+"\n"), 0o600)
	if vals, n, err := loadSecrets(e, "serve", name); err != nil || n != 1 || len(vals) != 0 {
		t.Fatalf("only unresolved entries: %q, %d, %v", vals, n, err)
	}
	if runtime.GOOS != "windows" {
		os.Chmod(name, 0o666)
		if _, _, err := loadSecrets(e, "serve", name); err == nil {
			t.Fatal("a secrets file others can write was read")
		}
	}
}
