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

// stageIn runs In from ws into a fresh staging directory, which it returns.
func stageIn(t *testing.T, ws string, inputs []string, own Owner, lim Limits) ([]File, string, error) {
	t.Helper()
	st := t.TempDir()
	files, err := In(openDir(t, ws), openDir(t, st), inputs, own, lim)
	return files, st, err
}

func TestInCopiesDeclaredInputs(t *testing.T) {
	needRoot(t)
	ws := t.TempDir()
	write(t, ws, "src/app.py", "print(1)\n")
	write(t, ws, "src/pkg/mod.py", "x = 2\n")
	write(t, ws, "src/pkg/deep/data.bin", "\x00\x01\x02")
	write(t, ws, "tests/test_app.py", "assert True\n")
	write(t, ws, "tests/conftest.py", "undeclared sibling\n")
	write(t, ws, ".env", "SECRET=1\n")
	write(t, ws, "secrets/key", "k\n")
	write(t, ws, ".cordon/state", "state\n")
	if err := os.MkdirAll(filepath.Join(ws, "src/empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	own := Owner{UID: 1234, GID: 5678}
	files, st, err := stageIn(t, ws, []string{"tests/test_app.py", "src"}, own, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"src/",
		"src/app.py=print(1)\n",
		"src/empty/",
		"src/pkg/",
		"src/pkg/deep/",
		"src/pkg/deep/data.bin=\x00\x01\x02",
		"src/pkg/mod.py=x = 2\n",
		"tests/",
		"tests/test_app.py=assert True\n",
	}
	if got := tree(t, st); !slices.Equal(got, want) {
		t.Errorf("staged tree:\n%q\nwant\n%q", got, want)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
		content := read(t, filepath.Join(ws, f.Path))
		if f.Size != int64(len(content)) || f.ID != canon.Sum([]byte(content)) {
			t.Errorf("%s: File{Size: %d, ID: %s}, want %d, %s", f.Path, f.Size, f.ID, len(content), canon.Sum([]byte(content)))
		}
	}
	wantPaths := []string{"src/app.py", "src/pkg/deep/data.bin", "src/pkg/mod.py", "tests/test_app.py"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("files = %q, want %q", paths, wantPaths)
	}
	// Every staged entry, implied parents included, has the owner and the
	// fixed modes.
	for _, e := range []string{"src", "src/empty", "src/pkg", "src/pkg/deep", "tests",
		"src/app.py", "src/pkg/deep/data.bin", "src/pkg/mod.py", "tests/test_app.py"} {
		fi, err := os.Lstat(filepath.Join(st, e))
		if err != nil {
			t.Fatal(err)
		}
		sys := fi.Sys().(*syscall.Stat_t)
		if int(sys.Uid) != own.UID || int(sys.Gid) != own.GID {
			t.Errorf("%s: owner %d:%d, want %d:%d", e, sys.Uid, sys.Gid, own.UID, own.GID)
		}
		wantMode := os.FileMode(0o644)
		if fi.IsDir() {
			wantMode = 0o755 | os.ModeDir
		}
		if fi.Mode() != wantMode {
			t.Errorf("%s: mode %v, want %v", e, fi.Mode(), wantMode)
		}
	}
}

func TestInLeavesOwnerAlone(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a/b", "x")
	_, st, err := stageIn(t, ws, []string{"a/b"}, Owner{-1, -1}, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(st, "a/b"))
	if err != nil {
		t.Fatal(err)
	}
	if sys := fi.Sys().(*syscall.Stat_t); int(sys.Uid) != os.Getuid() || int(sys.Gid) != os.Getgid() {
		t.Errorf("owner %d:%d, want the process's %d:%d", sys.Uid, sys.Gid, os.Getuid(), os.Getgid())
	}
}

// TestInRefuses plants every kind of entry that must not be staged, either
// as a declared input or inside a declared directory.
func TestInRefuses(t *testing.T) {
	hostSecret := write(t, t.TempDir(), "secret", "host secret\n")
	for _, tc := range []struct {
		name   string
		plant  func(t *testing.T, ws string)
		inputs []string
		bad    string // the path the error must name
	}{
		{"symlink input", func(t *testing.T, ws string) {
			symlink(t, hostSecret, filepath.Join(ws, "in"))
		}, []string{"in"}, "in"},
		{"relative symlink input", func(t *testing.T, ws string) {
			write(t, ws, "real", "x")
			symlink(t, "real", filepath.Join(ws, "in"))
		}, []string{"in"}, "in"},
		{"symlink parent to /etc", func(t *testing.T, ws string) {
			symlink(t, "/etc", filepath.Join(ws, "in"))
		}, []string{"in/passwd"}, "in/passwd"},
		{"symlink parent to a host dir", func(t *testing.T, ws string) {
			symlink(t, filepath.Dir(hostSecret), filepath.Join(ws, "in"))
		}, []string{"in/secret"}, "in/secret"},
		{"symlink parent within the workspace", func(t *testing.T, ws string) {
			write(t, ws, "src/a", "x")
			symlink(t, "src", filepath.Join(ws, "alias"))
		}, []string{"alias/a"}, "alias/a"},
		{"symlink to a dir within the workspace", func(t *testing.T, ws string) {
			write(t, ws, "src/a", "x")
			symlink(t, "src", filepath.Join(ws, "alias"))
		}, []string{"alias"}, "alias"},
		{"symlink in a declared dir", func(t *testing.T, ws string) {
			write(t, ws, "src/ok", "ok")
			symlink(t, hostSecret, filepath.Join(ws, "src/link"))
		}, []string{"src"}, "src/link"},
		{"symlink to a dir in a declared dir", func(t *testing.T, ws string) {
			symlink(t, "/etc", filepath.Join(ws, "src/sub/etc"))
		}, []string{"src"}, "src/sub/etc"},
		{"dangling symlink", func(t *testing.T, ws string) {
			symlink(t, "/nonexistent", filepath.Join(ws, "src/dangling"))
		}, []string{"src"}, "src/dangling"},
		{"relative symlink out of the declared dir", func(t *testing.T, ws string) {
			write(t, ws, "secret.env", "SECRET=1\n")
			symlink(t, "../secret.env", filepath.Join(ws, "src/link"))
		}, []string{"src"}, "src/link"},
		{"relative symlink to a sibling input", func(t *testing.T, ws string) {
			write(t, ws, "other/a", "x")
			symlink(t, "../other/a", filepath.Join(ws, "src/link"))
		}, []string{"src", "other"}, "src/link"},
		{"relative chain out through a link to ..", func(t *testing.T, ws string) {
			// Lexically "sub/s/../.." is src itself; resolved, s is src,
			// and two ".." leave it.
			write(t, ws, "secret.env", "SECRET=1\n")
			symlink(t, "..", filepath.Join(ws, "src/sub/s"))
			symlink(t, "s/../../secret.env", filepath.Join(ws, "src/sub/l"))
		}, []string{"src"}, "src/sub/l"},
		{"symlink loop", func(t *testing.T, ws string) {
			symlink(t, "loop", filepath.Join(ws, "src/loop"))
		}, []string{"src"}, "src/loop"},
		{"relative dangling symlink", func(t *testing.T, ws string) {
			symlink(t, "missing", filepath.Join(ws, "src/dangling"))
		}, []string{"src"}, "src/dangling"},
		{"FIFO input", func(t *testing.T, ws string) {
			mkfifo(t, filepath.Join(ws, "fifo"))
		}, []string{"fifo"}, "fifo"},
		{"FIFO in a declared dir", func(t *testing.T, ws string) {
			mkfifo(t, filepath.Join(ws, "src/fifo"))
		}, []string{"src"}, "src/fifo"},
		{"socket", func(t *testing.T, ws string) {
			listen(t, filepath.Join(ws, "src/sock"))
		}, []string{"src"}, "src/sock"},
		{"hard link to an undeclared file", func(t *testing.T, ws string) {
			env := write(t, ws, ".env", "SECRET=1\n")
			hardlink(t, env, filepath.Join(ws, "src/innocent"))
		}, []string{"src"}, "src/innocent"},
		{"hard link input", func(t *testing.T, ws string) {
			hardlink(t, hostSecret, filepath.Join(ws, "copy"))
		}, []string{"copy"}, "copy"},
		{"device input", func(t *testing.T, ws string) {
			mknull(t, filepath.Join(ws, "null"))
		}, []string{"null"}, "null"},
		{"device in a declared dir", func(t *testing.T, ws string) {
			mknull(t, filepath.Join(ws, "src/dev/null"))
		}, []string{"src"}, "src/dev/null"},
		{"file as a parent", func(t *testing.T, ws string) {
			write(t, ws, "file", "x")
		}, []string{"file/x"}, "file/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			tc.plant(t, ws)
			st := t.TempDir()
			wsf, stf := openDir(t, ws), openDir(t, st)
			var files []File
			var err error
			noHang(t, func() { files, err = In(wsf, stf, tc.inputs, Owner{-1, -1}, DefaultLimits()) })
			if files != nil {
				t.Errorf("files = %v, want nil", files)
			}
			wantPathErr(t, err, ErrRefused, tc.bad)
			for _, e := range tree(t, st) {
				if strings.Contains(e, "host secret") || strings.Contains(e, "root:") || strings.Contains(e, "SECRET") {
					t.Errorf("staged what it must not: %q", e)
				}
			}
		})
	}
	if got := read(t, hostSecret); got != "host secret\n" {
		t.Errorf("host secret changed to %q", got)
	}
}

func TestInMissing(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a", "x")
	for _, p := range []string{"nope", "a-dir/nope"} {
		_, _, err := stageIn(t, ws, []string{"a", p}, Owner{-1, -1}, DefaultLimits())
		wantPathErr(t, err, ErrMissing, p)
	}
}

func TestInLimits(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "small", "12345")
	write(t, ws, "big", "12345678901")
	write(t, ws, "dir/a", "123456")
	write(t, ws, "dir/b", "123456")
	if err := os.MkdirAll(filepath.Join(ws, "dir/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	sparse := write(t, ws, "sparse", "")
	if err := os.Truncate(sparse, 1<<40); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		lim    Limits
		inputs []string
		bad    string // "" for success
	}{
		{"within", Limits{MaxFileBytes: 10, MaxTotalBytes: 100, MaxFiles: 10}, []string{"small", "dir"}, ""},
		{"exact", Limits{MaxFileBytes: 6, MaxTotalBytes: 17, MaxFiles: 5}, []string{"small", "dir"}, ""},
		{"file too big", Limits{MaxFileBytes: 10, MaxTotalBytes: 100, MaxFiles: 10}, []string{"small", "big"}, "big"},
		{"total", Limits{MaxFileBytes: 10, MaxTotalBytes: 16, MaxFiles: 10}, []string{"small", "dir/a", "dir/b"}, "dir/b"},
		{"too many", Limits{MaxFileBytes: 10, MaxTotalBytes: 100, MaxFiles: 4}, []string{"small", "dir"}, ""},
		{"sparse huge file", DefaultLimits(), []string{"sparse"}, "sparse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := stageIn(t, ws, tc.inputs, Owner{-1, -1}, tc.lim)
			switch {
			case tc.name == "too many":
				// The fifth entry in listing order is refused, whichever it is.
				if !errors.Is(err, ErrLimit) {
					t.Fatalf("err = %v, want ErrLimit", err)
				}
			case tc.bad == "":
				if err != nil {
					t.Fatal(err)
				}
			default:
				wantPathErr(t, err, ErrLimit, tc.bad)
			}
		})
	}
}

func TestInDepth(t *testing.T) {
	ws := t.TempDir()
	deep := strings.Repeat("d/", maxDepth+1) + "f"
	write(t, ws, deep, "x")
	_, _, err := stageIn(t, ws, []string{"d"}, Owner{-1, -1}, DefaultLimits())
	wantPathErr(t, err, ErrLimit, strings.Repeat("d/", maxDepth)+"d")
	// One level less is fine.
	_, _, err = stageIn(t, ws, []string{"d/d"}, Owner{-1, -1}, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
}

func TestInBadArguments(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a/b", "x")
	for _, tc := range []struct {
		name   string
		inputs []string
		own    Owner
		lim    Limits
		bad    string // the path a refusal names; "" for another error
	}{
		{"zero limits", []string{"a"}, Owner{-1, -1}, Limits{}, ""},
		{"bad owner", []string{"a"}, Owner{-2, 0}, DefaultLimits(), ""},
		{"absolute", []string{"/etc/passwd"}, Owner{-1, -1}, DefaultLimits(), "/etc/passwd"},
		{"dot-dot", []string{"../x"}, Owner{-1, -1}, DefaultLimits(), "../x"},
		{"root", []string{"."}, Owner{-1, -1}, DefaultLimits(), "."},
		{"reserved", []string{".cordon/keys"}, Owner{-1, -1}, DefaultLimits(), ".cordon/keys"},
		{"overlap", []string{"a", "a/b"}, Owner{-1, -1}, DefaultLimits(), "a/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, st, err := stageIn(t, ws, tc.inputs, tc.own, tc.lim)
			if err == nil || files != nil {
				t.Fatalf("In = %v, %v; want an error", files, err)
			}
			if tc.bad != "" {
				wantPathErr(t, err, ErrRefused, tc.bad)
			}
			if got := tree(t, st); len(got) != 0 {
				t.Errorf("staged %q before checking its arguments", got)
			}
		})
	}
}

func TestInNotADirectory(t *testing.T) {
	ws := t.TempDir()
	f := write(t, ws, "file", "x")
	_, err := In(openDir(t, f), openDir(t, t.TempDir()), []string{"a"}, Owner{-1, -1}, DefaultLimits())
	if !errors.Is(err, ErrRefused) {
		t.Errorf("In from a file = %v, want ErrRefused", err)
	}
}

// TestMountPoints: no lookup crosses a mount point, here from / into
// /proc, which is a mount point on every Linux system.
func TestMountPoints(t *testing.T) {
	root := openDir(t, "/")
	wantMount := func(t *testing.T, err error, p string) {
		t.Helper()
		wantPathErr(t, err, ErrRefused, p)
		if pe, _ := errors.AsType[*PathError](err); !strings.Contains(pe.Reason, "mount point") {
			t.Errorf("reason %q, want it to name the mount point", pe.Reason)
		}
	}
	_, err := In(root, openDir(t, t.TempDir()), []string{"proc/version"}, Owner{-1, -1}, DefaultLimits())
	wantMount(t, err, "proc/version")
	_, err = In(root, openDir(t, t.TempDir()), []string{"proc"}, Owner{-1, -1}, DefaultLimits())
	wantMount(t, err, "proc")
	_, err = Out(root, openDir(t, t.TempDir()), []string{"proc/version"}, DefaultLimits())
	wantMount(t, err, "proc/version")
	st := t.TempDir()
	write(t, st, "proc/cordon-stage-test", "x")
	_, err = Out(openDir(t, st), root, []string{"proc/cordon-stage-test"}, DefaultLimits())
	wantMount(t, err, "proc")
}

// TestInStagesLinksInsideTheInput stages, as links, the symbolic links a
// virtualenv or node_modules holds: each resolves inside its own declared
// directory.
func TestInStagesLinksInsideTheInput(t *testing.T) {
	needRoot(t)
	ws := t.TempDir()
	write(t, ws, "venv/lib/python3/site.py", "x = 1\n")
	write(t, ws, "venv/bin/python3", "#!interp\n")
	symlink(t, "lib", filepath.Join(ws, "venv/lib64"))
	symlink(t, "python3", filepath.Join(ws, "venv/bin/python"))
	write(t, ws, "venv/node_modules/pkg/cli.js", "js\n")
	symlink(t, "../pkg/cli.js", filepath.Join(ws, "venv/node_modules/.bin/cli"))
	symlink(t, "sub/..", filepath.Join(ws, "venv/self"))
	if err := os.MkdirAll(filepath.Join(ws, "venv/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	own := Owner{UID: 1234, GID: 5678}
	files, st, err := stageIn(t, ws, []string{"venv"}, own, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"venv/", "venv/bin/", "venv/bin/python -> python3", "venv/bin/python3=#!interp\n",
		"venv/lib/", "venv/lib/python3/", "venv/lib/python3/site.py=x = 1\n", "venv/lib64 -> lib",
		"venv/node_modules/", "venv/node_modules/.bin/", "venv/node_modules/.bin/cli -> ../pkg/cli.js",
		"venv/node_modules/pkg/", "venv/node_modules/pkg/cli.js=js\n", "venv/self -> sub/..", "venv/sub/",
	}
	if got := tree(t, st); !slices.Equal(got, want) {
		t.Errorf("staged tree:\n%q\nwant\n%q", got, want)
	}
	if len(files) != 3 {
		t.Errorf("files = %v, want the 3 regular files (links are not files)", files)
	}
	fi, err := os.Lstat(filepath.Join(st, "venv/lib64"))
	if err != nil {
		t.Fatal(err)
	}
	if sys := fi.Sys().(*syscall.Stat_t); int(sys.Uid) != own.UID || int(sys.Gid) != own.GID {
		t.Errorf("staged link owner %d:%d, want %d:%d", sys.Uid, sys.Gid, own.UID, own.GID)
	}
}

// TestInKeepsOwnerExecuteBit: a staged file is 0755 when the workspace
// file's owner may execute it, else 0644; no other bit crosses.
func TestInKeepsOwnerExecuteBit(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "d/tool", "#!/bin/sh\n")
	write(t, ws, "d/data", "x")
	write(t, ws, "d/setuid", "y")
	for name, mode := range map[string]os.FileMode{"d/tool": 0o700, "d/data": 0o666, "d/setuid": 0o4755 | os.ModeSetuid} {
		if err := os.Chmod(filepath.Join(ws, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	_, st, err := stageIn(t, ws, []string{"d"}, Owner{-1, -1}, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"d/tool": 0o755, "d/data": 0o644, "d/setuid": 0o755} {
		fi, err := os.Lstat(filepath.Join(st, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
	}
}
