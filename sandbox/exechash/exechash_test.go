package exechash

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// settle makes files look old enough to be cached: the cache's clock is
// moved past the racy window.
func settle(c *Cache) { c.now = func() time.Time { return time.Now().Add(2 * RacyWindow) } }

func (c *Cache) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hashed
}

func TestSumIsContentAddressed(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	write(t, bin, "#!/bin/sh\necho denied\n")
	want := canon.Sum([]byte("#!/bin/sh\necho denied\n"))
	c := New(16)
	settle(c)
	got, err := c.Sum(bin)
	if err != nil || got != want {
		t.Fatalf("Sum = %s, %v; want %s", got, err, want)
	}
	// Rename, move, copy, symlink and hard link: the same bytes, the same id.
	renamed := filepath.Join(dir, "innocent")
	if err := os.Rename(bin, renamed); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	moved := filepath.Join(sub, "elsewhere")
	if err := os.Rename(renamed, moved); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "copy")
	write(t, copied, "#!/bin/sh\necho denied\n")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(moved, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(moved, hard); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{moved, copied, link, hard} {
		if got, err := c.Sum(p); err != nil || got != want {
			t.Errorf("Sum(%s) = %s, %v; want %s", p, got, err, want)
		}
	}
}

func TestCacheNeverServesAStaleHash(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	write(t, bin, "good")
	c := New(16)
	settle(c)
	first, err := c.Sum(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sum(bin); err != nil || c.count() != 1 {
		t.Fatalf("second Sum of an unchanged file hashed again (%d hashes, %v)", c.count(), err)
	}
	// Same size, same mtime restored: only ctime tells the change. (The
	// cache's clock is moved forward, so only the key protects here; wait a
	// few clock ticks so that the kernel's coarse ctime moves.)
	time.Sleep(30 * time.Millisecond)
	st, _ := os.Stat(bin)
	write(t, bin, "evil")
	if err := os.Chtimes(bin, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	got, err := c.Sum(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got == first || got != canon.Sum([]byte("evil")) {
		t.Fatalf("after rewriting the file with its old size and mtime, Sum = %s (first %s)", got, first)
	}
	// Replaced by rename: a new inode.
	tmp := filepath.Join(dir, "tmp")
	write(t, tmp, "eviler")
	os.Rename(tmp, bin)
	if got, _ := c.Sum(bin); got != canon.Sum([]byte("eviler")) {
		t.Fatalf("after replacing the file, Sum = %s", got)
	}
}

func TestRacilyCleanFilesAreNotCached(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tool")
	write(t, bin, "fresh")
	c := New(16) // real clock: the file was changed just now
	for range 3 {
		if got, err := c.Sum(bin); err != nil || got != canon.Sum([]byte("fresh")) {
			t.Fatalf("Sum = %s, %v", got, err)
		}
	}
	if c.count() != 3 {
		t.Fatalf("a file changed within RacyWindow was served from the cache (%d hashes for 3 calls)", c.count())
	}
}

func TestChangeDuringHashingIsRefused(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tool")
	write(t, bin, "before")
	c := New(16)
	settle(c)
	c.testHookHashed = func(f *os.File) {
		if err := os.WriteFile(bin, []byte("after!"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := c.Sum(bin); !errors.Is(err, ErrChanged) {
		t.Fatalf("Sum of a file rewritten while hashed = %s, %v; want ErrChanged", id, err)
	}
}

func TestNotRegular(t *testing.T) {
	c := New(4)
	for _, p := range []string{t.TempDir(), "/dev/null"} {
		if _, err := c.Sum(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Sum(%s) err = %v, want ErrNotRegular", p, err)
		}
	}
	if _, err := c.Sum(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Sum(missing) err = %v", err)
	}
}

func TestCacheBound(t *testing.T) {
	dir := t.TempDir()
	c := New(2)
	settle(c)
	for i := range 5 {
		p := filepath.Join(dir, string(rune('a'+i)))
		write(t, p, p)
		if _, err := c.Sum(p); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	if n > 2 {
		t.Fatalf("cache holds %d entries, bound 2", n)
	}
}
