package stage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// copyOut runs Out from st into ws.
func copyOut(t *testing.T, st, ws string, outputs []string, lim Limits) ([]File, error) {
	t.Helper()
	return Out(openDir(t, st), openDir(t, ws), outputs, lim)
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestOutCopiesDeclaredOutputs(t *testing.T) {
	st, ws := t.TempDir(), t.TempDir()
	write(t, st, "out/report.xml", "<new/>")
	write(t, st, "out/sub/x.txt", "x")
	write(t, st, "result.txt", "42\n")
	write(t, st, "deep/new/dir/f", "f")
	write(t, st, "evil.txt", "undeclared")
	write(t, st, "src/app.py", "rewritten by the sandbox")
	write(t, st, ".cordon/state", "forged")
	if err := os.MkdirAll(filepath.Join(st, "out/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The workspace has an older report (executable, to see its mode kept),
	// a file the sandbox did not produce, and undeclared files.
	write(t, ws, "out/report.xml", "<old/>")
	if err := os.Chmod(filepath.Join(ws, "out/report.xml"), 0o750); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "out/keep", "kept")
	write(t, ws, "src/app.py", "original")
	files, err := copyOut(t, st, ws, []string{"result.txt", "out", "deep/new/dir/f"}, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deep/",
		"deep/new/",
		"deep/new/dir/",
		"deep/new/dir/f=f",
		"out/",
		"out/empty/",
		"out/keep=kept",
		"out/report.xml=<new/>",
		"out/sub/",
		"out/sub/x.txt=x",
		"result.txt=42\n",
		"src/",
		"src/app.py=original",
	}
	if got := tree(t, ws); !slices.Equal(got, want) {
		t.Errorf("workspace:\n%q\nwant\n%q", got, want)
	}
	wantFiles := []File{
		{"deep/new/dir/f", 1, canon.Sum([]byte("f"))},
		{"out/report.xml", 6, canon.Sum([]byte("<new/>"))},
		{"out/sub/x.txt", 1, canon.Sum([]byte("x"))},
		{"result.txt", 3, canon.Sum([]byte("42\n"))},
	}
	if !slices.Equal(files, wantFiles) {
		t.Errorf("files = %v, want %v", files, wantFiles)
	}
	for p, want := range map[string]os.FileMode{
		"out/report.xml": 0o750,
		"result.txt":     0o644,
		"out/sub/x.txt":  0o644,
		"out/sub":        0o755 | os.ModeDir,
		"deep":           0o755 | os.ModeDir,
		"deep/new/dir":   0o755 | os.ModeDir,
	} {
		if got := mode(t, filepath.Join(ws, p)); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
}

// TestOutReplacesSymlinkWithoutFollowing: a symlink at an output's path in
// the workspace is replaced by the output, and its target is not written.
func TestOutReplacesSymlinkWithoutFollowing(t *testing.T) {
	host := write(t, t.TempDir(), "secret", "host")
	st, ws := t.TempDir(), t.TempDir()
	write(t, st, "out.txt", "new")
	write(t, st, "out/dangling", "new")
	symlink(t, host, filepath.Join(ws, "out.txt"))
	symlink(t, "/nonexistent/file", filepath.Join(ws, "out/dangling"))
	if _, err := copyOut(t, st, ws, []string{"out.txt", "out/dangling"}, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if got := read(t, host); got != "host" {
		t.Errorf("symlink target = %q, want it untouched", got)
	}
	for _, p := range []string{"out.txt", "out/dangling"} {
		if m := mode(t, filepath.Join(ws, p)); !m.IsRegular() || m.Perm() != 0o644 {
			t.Errorf("%s: mode %v, want a regular file 0644", p, m)
		}
		if got := read(t, filepath.Join(ws, p)); got != "new" {
			t.Errorf("%s = %q, want %q", p, got, "new")
		}
	}
	noTemps(t, ws)
}

// TestOutRefuses plants, in staging or in the workspace, each thing Out
// must refuse, and checks that the workspace and the host are untouched.
func TestOutRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plant   func(t *testing.T, st, ws, host string)
		outputs []string
		bad     string // the path the error must name
	}{
		{"symlink output to a host file", func(t *testing.T, st, ws, host string) {
			symlink(t, filepath.Join(host, "secret"), filepath.Join(st, "out.txt"))
		}, []string{"out.txt"}, "out.txt"},
		{"symlink output to a workspace file", func(t *testing.T, st, ws, host string) {
			symlink(t, "../"+filepath.Base(ws)+"/keep", filepath.Join(st, "out.txt"))
		}, []string{"out.txt"}, "out.txt"},
		{"symlink parent in staging to /etc", func(t *testing.T, st, ws, host string) {
			symlink(t, "/etc", filepath.Join(st, "out"))
		}, []string{"out/passwd"}, "out/passwd"},
		{"symlink parent in staging to a host dir", func(t *testing.T, st, ws, host string) {
			symlink(t, host, filepath.Join(st, "out"))
		}, []string{"out/secret"}, "out/secret"},
		{"declared dir is a symlink in staging", func(t *testing.T, st, ws, host string) {
			symlink(t, host, filepath.Join(st, "out"))
		}, []string{"out"}, "out"},
		{"symlink parent within staging", func(t *testing.T, st, ws, host string) {
			write(t, st, "real/x", "x")
			symlink(t, "real", filepath.Join(st, "out"))
		}, []string{"out/x"}, "out/x"},
		{"symlink parent within the workspace", func(t *testing.T, st, ws, host string) {
			write(t, st, "out/x", "x")
			write(t, ws, "real/x", "kept")
			symlink(t, "real", filepath.Join(ws, "out"))
		}, []string{"out/x"}, "out"},
		{"symlink in a declared dir", func(t *testing.T, st, ws, host string) {
			write(t, st, "out/ok", "ok")
			symlink(t, filepath.Join(host, "secret"), filepath.Join(st, "out/link"))
		}, []string{"out"}, "out/link"},
		{"hard link", func(t *testing.T, st, ws, host string) {
			write(t, st, "a", "x")
			hardlink(t, filepath.Join(st, "a"), filepath.Join(st, "out.txt"))
		}, []string{"out.txt"}, "out.txt"},
		{"hard link in a declared dir", func(t *testing.T, st, ws, host string) {
			write(t, st, "a", "x")
			hardlink(t, filepath.Join(st, "a"), filepath.Join(st, "out/b"))
		}, []string{"out"}, "out/b"},
		{"socket", func(t *testing.T, st, ws, host string) {
			listen(t, filepath.Join(st, "out.sock"))
		}, []string{"out.sock"}, "out.sock"},
		{"FIFO in a declared dir", func(t *testing.T, st, ws, host string) {
			mkfifo(t, filepath.Join(st, "out/fifo"))
		}, []string{"out"}, "out/fifo"},
		{"device", func(t *testing.T, st, ws, host string) {
			mknull(t, filepath.Join(st, "out/null"))
		}, []string{"out/null"}, "out/null"},
		{"symlink parent in the workspace", func(t *testing.T, st, ws, host string) {
			write(t, st, "out/secret", "overwritten")
			symlink(t, host, filepath.Join(ws, "out"))
		}, []string{"out/secret"}, "out"},
		{"symlink grandparent in the workspace", func(t *testing.T, st, ws, host string) {
			write(t, st, "a/b/secret", "overwritten")
			symlink(t, filepath.Dir(host), filepath.Join(ws, "a"))
		}, []string{"a/b/secret"}, "a"},
		{"declared dir is a symlink in the workspace", func(t *testing.T, st, ws, host string) {
			write(t, st, "out/secret", "overwritten")
			symlink(t, host, filepath.Join(ws, "out"))
		}, []string{"out"}, "out"},
		{"directory in the workspace where staging has a file", func(t *testing.T, st, ws, host string) {
			write(t, st, "out", "file")
			write(t, ws, "out/inner", "kept")
		}, []string{"out"}, "out"},
		{"file in the workspace where staging has a directory", func(t *testing.T, st, ws, host string) {
			write(t, st, "out/x", "x")
			write(t, ws, "out", "kept")
		}, []string{"out"}, "out"},
		{"FIFO in the workspace at the output", func(t *testing.T, st, ws, host string) {
			write(t, st, "out", "x")
			mkfifo(t, filepath.Join(ws, "out"))
		}, []string{"out"}, "out"},
		{"undeclared path", func(t *testing.T, st, ws, host string) {
			write(t, st, "ok", "x")
		}, []string{"ok", "../HOST/secret"}, "../HOST/secret"},
		{"reserved path", func(t *testing.T, st, ws, host string) {
			write(t, st, ".cordon/state", "forged")
		}, []string{".cordon/state"}, ".cordon/state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := t.TempDir()
			write(t, host, "secret", "host")
			st, ws := t.TempDir(), t.TempDir()
			write(t, ws, "keep", "kept")
			tc.plant(t, st, ws, host)
			before := tree(t, ws)
			// HOST stands for the host directory's name.
			bad := strings.Replace(tc.bad, "HOST", filepath.Base(host), 1)
			var outputs []string
			for _, p := range tc.outputs {
				outputs = append(outputs, strings.Replace(p, "HOST", filepath.Base(host), 1))
			}
			stf, wsf := openDir(t, st), openDir(t, ws)
			var files []File
			var err error
			noHang(t, func() { files, err = Out(stf, wsf, outputs, DefaultLimits()) })
			if files != nil {
				t.Errorf("files = %v, want nil", files)
			}
			wantPathErr(t, err, ErrRefused, bad)
			if after := tree(t, ws); !slices.Equal(after, before) {
				t.Errorf("workspace changed:\n%q\nwas\n%q", after, before)
			}
			if got := tree(t, host); !slices.Equal(got, []string{"secret=host"}) {
				t.Errorf("host dir changed: %q", got)
			}
		})
	}
}

// TestOutFIFO: a FIFO at a declared output is refused at once; opening it
// for reading must not wait for a writer.
func TestOutFIFO(t *testing.T) {
	st, ws := t.TempDir(), t.TempDir()
	mkfifo(t, filepath.Join(st, "out.txt"))
	stf, wsf := openDir(t, st), openDir(t, ws)
	var err error
	noHang(t, func() { _, err = Out(stf, wsf, []string{"out.txt"}, DefaultLimits()) })
	wantPathErr(t, err, ErrRefused, "out.txt")
}

func TestOutMissing(t *testing.T) {
	st, ws := t.TempDir(), t.TempDir()
	write(t, st, "a", "x")
	write(t, ws, "a", "old")
	for _, p := range []string{"b", "dir/b"} {
		_, err := copyOut(t, st, ws, []string{"a", p}, DefaultLimits())
		wantPathErr(t, err, ErrMissing, p)
		if got := read(t, filepath.Join(ws, "a")); got != "old" {
			t.Errorf("a = %q after a failed Out, want %q", got, "old")
		}
		noTemps(t, ws)
	}
}

// TestOutAtomic: when any output is bad, no output is written, whatever
// came before it, and no temporary entry is left behind.
func TestOutAtomic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plant  func(t *testing.T, st string)
		lim    Limits
		target error
	}{
		{"symlink", func(t *testing.T, st string) {
			symlink(t, "/etc/passwd", filepath.Join(st, "z/bad"))
		}, DefaultLimits(), ErrRefused},
		{"too big", func(t *testing.T, st string) {
			write(t, st, "z/bad", strings.Repeat("x", 101))
		}, Limits{MaxFileBytes: 100, MaxTotalBytes: 1000, MaxFiles: 100}, ErrLimit},
		{"missing", func(t *testing.T, st string) {}, DefaultLimits(), ErrMissing},
		{"hard link", func(t *testing.T, st string) {
			write(t, st, "z/bad", "x")
			hardlink(t, filepath.Join(st, "z/bad"), filepath.Join(st, "z/bad2"))
		}, DefaultLimits(), ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ws := t.TempDir(), t.TempDir()
			write(t, ws, "a.txt", "old a")
			write(t, ws, "dir/b.txt", "old b")
			write(t, st, "a.txt", "new a")
			write(t, st, "dir/b.txt", "new b")
			write(t, st, "dir/c.txt", "new c")
			write(t, st, "new/deep/d.txt", "new d")
			tc.plant(t, st)
			before := tree(t, ws)
			_, err := copyOut(t, st, ws, []string{"a.txt", "dir", "new/deep/d.txt", "z/bad"}, tc.lim)
			wantPathErr(t, err, tc.target, "z/bad")
			if after := tree(t, ws); !slices.Equal(after, before) {
				t.Errorf("workspace changed:\n%q\nwas\n%q", after, before)
			}
		})
	}
}

// TestOutRollback fails each move of the commit phase in turn and checks
// that the moves already made are undone.
func TestOutRollback(t *testing.T) {
	t.Cleanup(func() { testHookMove = nil })
	st := t.TempDir()
	write(t, st, "a.txt", "new a")
	write(t, st, "link", "new link")
	write(t, st, "new/d.txt", "new d")
	write(t, st, "c.txt", "new c")
	outputs := []string{"a.txt", "link", "new/d.txt", "c.txt"}
	host := write(t, t.TempDir(), "secret", "host")
	for fail := range 4 {
		ws := t.TempDir()
		write(t, ws, "a.txt", "old a")
		symlink(t, host, filepath.Join(ws, "link"))
		before := tree(t, ws)
		moves := 0
		testHookMove = func(i int) error {
			moves++
			if i == fail {
				return errors.New("injected failure")
			}
			return nil
		}
		_, err := copyOut(t, st, ws, outputs, DefaultLimits())
		if err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("move %d failing: err = %v", fail, err)
		}
		if strings.Contains(err.Error(), "LEFT CHANGED") {
			t.Errorf("move %d failing: undo failed: %v", fail, err)
		}
		if moves != fail+1 {
			t.Errorf("move %d failing: %d moves tried", fail, moves)
		}
		if after := tree(t, ws); !slices.Equal(after, before) {
			t.Errorf("move %d failing: workspace changed:\n%q\nwas\n%q", fail, after, before)
		}
	}
	if got := read(t, host); got != "host" {
		t.Errorf("symlink target changed to %q", got)
	}
	// With no failure, the same outputs go in place.
	testHookMove = nil
	ws := t.TempDir()
	write(t, ws, "a.txt", "old a")
	symlink(t, host, filepath.Join(ws, "link"))
	if _, err := copyOut(t, st, ws, outputs, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.txt=new a", "c.txt=new c", "link=new link", "new/", "new/d.txt=new d"}
	if got := tree(t, ws); !slices.Equal(got, want) {
		t.Errorf("workspace:\n%q\nwant\n%q", got, want)
	}
}

func TestOutLimits(t *testing.T) {
	st := t.TempDir()
	write(t, st, "small", "12345")
	write(t, st, "big", "12345678901")
	write(t, st, "dir/a", "123456")
	write(t, st, "dir/b", "123456")
	sparse := write(t, st, "sparse", "")
	if err := os.Truncate(sparse, 1<<40); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		lim     Limits
		outputs []string
		bad     string // "" for success, "*" for any path
	}{
		{"within", Limits{MaxFileBytes: 10, MaxTotalBytes: 100, MaxFiles: 10}, []string{"small", "dir"}, ""},
		{"exact", Limits{MaxFileBytes: 6, MaxTotalBytes: 17, MaxFiles: 4}, []string{"small", "dir"}, ""},
		{"file too big", Limits{MaxFileBytes: 10, MaxTotalBytes: 100, MaxFiles: 10}, []string{"small", "big"}, "big"},
		{"total", Limits{MaxFileBytes: 10, MaxTotalBytes: 16, MaxFiles: 10}, []string{"small", "dir/a", "dir/b"}, "dir/b"},
		{"too many", Limits{MaxFileBytes: 10, MaxTotalBytes: 100, MaxFiles: 3}, []string{"small", "dir"}, "*"},
		{"sparse huge file", DefaultLimits(), []string{"sparse"}, "sparse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			_, err := copyOut(t, st, ws, tc.outputs, tc.lim)
			switch tc.bad {
			case "":
				if err != nil {
					t.Fatal(err)
				}
				return
			case "*":
				if !errors.Is(err, ErrLimit) {
					t.Fatalf("err = %v, want ErrLimit", err)
				}
			default:
				wantPathErr(t, err, ErrLimit, tc.bad)
			}
			if got := tree(t, ws); len(got) != 0 {
				t.Errorf("workspace changed: %q", got)
			}
		})
	}
}

func TestOutBadArguments(t *testing.T) {
	st, ws := t.TempDir(), t.TempDir()
	write(t, st, "a/b", "x")
	for _, tc := range []struct {
		name    string
		outputs []string
		lim     Limits
		bad     string // the path a refusal names; "" for another error
	}{
		{"zero limits", []string{"a"}, Limits{}, ""},
		{"absolute", []string{"/etc/passwd"}, DefaultLimits(), "/etc/passwd"},
		{"dot-dot", []string{"a/../../x"}, DefaultLimits(), "a/../../x"},
		{"root", []string{"."}, DefaultLimits(), "."},
		{"duplicate", []string{"a/b", "a/b"}, DefaultLimits(), "a/b"},
		{"overlap", []string{"a/b", "a"}, DefaultLimits(), "a/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := copyOut(t, st, ws, tc.outputs, tc.lim)
			if err == nil || files != nil {
				t.Fatalf("Out = %v, %v; want an error", files, err)
			}
			if tc.bad != "" {
				wantPathErr(t, err, ErrRefused, tc.bad)
			}
			if got := tree(t, ws); len(got) != 0 {
				t.Errorf("workspace changed: %q", got)
			}
		})
	}
}

func TestOutDepth(t *testing.T) {
	st := t.TempDir()
	write(t, st, strings.Repeat("d/", maxDepth+1)+"f", "x")
	ws := t.TempDir()
	_, err := copyOut(t, st, ws, []string{"d"}, DefaultLimits())
	wantPathErr(t, err, ErrLimit, strings.Repeat("d/", maxDepth)+"d")
	if got := tree(t, ws); len(got) != 0 {
		t.Errorf("workspace changed: %q", got)
	}
	// One level less is fine.
	if _, err := copyOut(t, st, ws, []string{"d/d"}, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
}

// TestOutGivesFilesToTheWorkspaceOwner: run as root, Out gives what it
// creates to the workspace's owner and keeps a replaced file's owner,
// rather than leaving root-owned files in a user's workspace.
func TestOutGivesFilesToTheWorkspaceOwner(t *testing.T) {
	needRoot(t)
	st, ws := t.TempDir(), t.TempDir()
	write(t, st, "new.txt", "n")
	write(t, st, "dir/sub/f", "f")
	write(t, st, "old.txt", "replaced")
	write(t, ws, "old.txt", "original")
	if err := os.Chown(ws, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(ws, "old.txt"), 5151, 5252); err != nil {
		t.Fatal(err)
	}
	if _, err := copyOut(t, st, ws, []string{"new.txt", "dir/sub/f", "old.txt"}, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]uint32{
		"new.txt": {4242, 4343}, "dir": {4242, 4343}, "dir/sub": {4242, 4343}, "dir/sub/f": {4242, 4343},
		"old.txt": {5151, 5252},
	} {
		fi, err := os.Lstat(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		sys := fi.Sys().(*syscall.Stat_t)
		if sys.Uid != want[0] || sys.Gid != want[1] {
			t.Errorf("%s is owned by %d:%d, want %d:%d", name, sys.Uid, sys.Gid, want[0], want[1])
		}
	}
}

// TestOutPresentSkipsOnlyMissing: OutPresent copies the outputs that
// exist and skips missing ones, but a symlink at a declared path still
// refuses the whole copy and leaves the workspace unchanged.
func TestOutPresentSkipsOnlyMissing(t *testing.T) {
	st, ws := t.TempDir(), t.TempDir()
	write(t, st, "a", "new")
	write(t, ws, "a", "old")
	files, err := OutPresent(openDir(t, st), openDir(t, ws), []string{"a", "b", "dir/c"}, DefaultLimits())
	if err != nil || len(files) != 1 || files[0].Path != "a" {
		t.Fatalf("OutPresent = %v, %v", files, err)
	}
	if got := read(t, filepath.Join(ws, "a")); got != "new" {
		t.Fatalf("a = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(ws, "dir")); err == nil {
		t.Fatal("a missing output's parent was created")
	}
	write(t, st, "a", "newer")
	symlink(t, "/etc/passwd", filepath.Join(st, "b"))
	_, err = OutPresent(openDir(t, st), openDir(t, ws), []string{"a", "b"}, DefaultLimits())
	wantPathErr(t, err, ErrRefused, "b")
	if got := read(t, filepath.Join(ws, "a")); got != "new" {
		t.Fatalf("a = %q after a refused copy", got)
	}
	// A declared output file turned into a tree of undeclared files
	// (a nested repository with hooks, say) is refused whole.
	write(t, st, "c/.git/hooks/pre-commit", "#!/bin/sh\n")
	write(t, st, "c/extra", "x")
	_, err = OutPresent(openDir(t, st), openDir(t, ws), []string{"a", "c"}, DefaultLimits())
	wantPathErr(t, err, ErrRefused, "c")
	if _, err := os.Lstat(filepath.Join(ws, "c")); err == nil {
		t.Fatal("a directory came back at a declared file path")
	}
}
