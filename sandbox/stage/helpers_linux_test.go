package stage

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needRoot skips a test that needs root when the suite runs as another
// user (CI runs it once as root, where it never skips, and once as an
// unprivileged user).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skipf("needs root: mknod and chown (uid %d)", os.Getuid())
	}
}

func openDir(t *testing.T, dir string) *os.File {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// write creates the file name under dir with content, and its parents.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// listen creates a listening unix socket at p, closed at cleanup.
func listen(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
	st, err := os.Lstat(p)
	if err != nil || st.Mode().Type() != fs.ModeSocket {
		t.Fatalf("%s is not a socket: %v, %v", p, st, err)
	}
}

// mknull creates a character device like /dev/null at p.
func mknull(t *testing.T, p string) {
	t.Helper()
	needRoot(t)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
}

func hardlink(t *testing.T, old, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(old, p); err != nil {
		t.Fatal(err)
	}
}

// tree lists every entry beneath dir as "path" for a file with its
// content, "path/" for a directory and "path -> target" for a symlink,
// sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch d.Type() {
		case fs.ModeDir:
			out = append(out, rel+"/")
		case fs.ModeSymlink:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" -> "+target)
		case 0:
			out = append(out, rel+"="+read(t, p))
		default:
			out = append(out, rel+" "+d.Type().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// wantPathErr checks that err wraps target inside a *PathError naming p.
func wantPathErr(t *testing.T, err, target error, p string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
	pe, ok := errors.AsType[*PathError](err)
	if !ok || pe.Path != p {
		t.Fatalf("err = %v, want a *PathError naming %q", err, p)
	}
}

// noHang runs f, failing the test if it has not returned after ten
// seconds; f must not use t. A FIFO opened without O_NONBLOCK blocks until
// a writer comes, which in these tests is never.
func noHang(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("hung, probably opening a FIFO for reading")
	}
}

func noTemps(t *testing.T, dir string) {
	t.Helper()
	for _, e := range tree(t, dir) {
		if strings.Contains(e, tempPrefix) {
			t.Errorf("temporary entry left behind: %s", e)
		}
	}
}
