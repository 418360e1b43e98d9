package memory

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// gitPath is the host git, found once before any test changes PATH. CI has
// git, so its absence is a failure, not a skip.
var gitPath, gitPathErr = exec.LookPath("git")

func needGit(t *testing.T) string {
	t.Helper()
	if gitPathErr != nil {
		t.Fatalf("git is required for these tests: %v", gitPathErr)
	}
	return gitPath
}

// tgit runs the test's own git in dir with a clean environment and returns
// trimmed stdout. It pins hooks and fsmonitor off, so it never runs what a
// test planted.
func tgit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := tgitErr(t, dir, args...)
	if err != nil {
		t.Fatalf("git %v in %s: %v", args, dir, err)
	}
	return out
}

func tgitErr(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(needGit(t), append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = testEnv(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.New(err.Error() + ": " + stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func testEnv(t *testing.T) []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + t.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
	}
}

// commits returns the number of commits on HEAD in repo (0 when none).
func commits(t *testing.T, repo string) int {
	t.Helper()
	out, err := tgitErr(t, repo, "rev-list", "--count", "HEAD")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("rev-list --count: %q", out)
	}
	return n
}

// newRepo makes a git repository with one commit at dir.
func newRepo(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tgit(t, dir, "init", "-q")
	writeTestFile(t, filepath.Join(dir, "README"), "hello\n")
	tgit(t, dir, "add", "README")
	tgit(t, dir, "commit", "-q", "-m", "initial")
}

// marker returns a script that creates a marker file when run, and the
// marker's path.
func marker(t *testing.T) (script, mark string) {
	t.Helper()
	dir := t.TempDir()
	mark = filepath.Join(dir, "RAN")
	script = filepath.Join(dir, "evil.sh")
	writeTestFile(t, script, "#!/bin/sh\ntouch '"+mark+"'\ncat\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	return script, mark
}

func assertNotRan(t *testing.T, mark string) {
	t.Helper()
	if _, err := os.Lstat(mark); err == nil {
		t.Fatalf("planted program ran: %s exists", mark)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t *testing.T, ws string, opts Options) *Store {
	t.Helper()
	if opts.Git == "" && !opts.NoGit {
		opts.Git = needGit(t)
	}
	s, err := Open(t.Context(), ws, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", ws, err)
	}
	return s
}

func wantUnsafe(t *testing.T, err error, mention string) {
	t.Helper()
	if !errors.Is(err, ErrUnsafe) {
		t.Fatalf("err = %v, want ErrUnsafe", err)
	}
	if !strings.Contains(err.Error(), mention) {
		t.Fatalf("err = %q, want it to mention %q", err, mention)
	}
	if !strings.Contains(err.Error(), "remove") && !strings.Contains(err.Error(), "use a clean relative path") {
		t.Fatalf("err = %q gives no hint of what to do", err)
	}
}

// assertEmptyDir fails unless dir exists and is empty.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("%s was written to: %v", dir, ents)
	}
}

func bothKinds(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Run("git", func(t *testing.T) { f(t, Options{Git: needGit(t)}) })
	t.Run("file", func(t *testing.T) { f(t, Options{NoGit: true}) })
}

func TestOpenFreshStore(t *testing.T) {
	needGit(t)
	ws := t.TempDir()
	s := mustOpen(t, ws, Options{})
	if s.Kind() != KindGit || s.Reason() != "" {
		t.Fatalf("Kind, Reason = %q, %q; want git, \"\"", s.Kind(), s.Reason())
	}
	if want := filepath.Join(ws, ".cordon", "mem"); s.Dir() != want {
		t.Fatalf("Dir = %q, want %q", s.Dir(), want)
	}
	for _, d := range []string{filepath.Join(ws, ".cordon"), s.Dir(), filepath.Join(s.Dir(), ".git")} {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: not a directory (%v)", d, err)
		}
		if d != filepath.Join(s.Dir(), ".git") && fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	// Reopening an existing store works and keeps it.
	mustOpen(t, ws, Options{})
}

func TestOpenFindsGitOnPath(t *testing.T) {
	needGit(t)
	s, err := Open(t.Context(), t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != KindGit {
		t.Fatalf("Kind = %q, Reason = %q; want git", s.Kind(), s.Reason())
	}
}

func TestWriteCommitsOncePerCall(t *testing.T) {
	ws := t.TempDir()
	s := mustOpen(t, ws, Options{})
	files := map[string][]byte{"notes/today.md": []byte("remember\n"), "index": []byte("1")}
	for i, step := range []struct {
		files map[string][]byte
		msg   string
	}{
		{files, "first"},
		{files, "identical content"},
		{map[string][]byte{"index": []byte("2")}, "one change"},
		{nil, "nothing at all"},
	} {
		id, err := s.Write(t.Context(), step.files, step.msg)
		if err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		if n := commits(t, s.Dir()); n != i+1 {
			t.Fatalf("after Write %d: %d commits, want %d", i, n, i+1)
		}
		if head := tgit(t, s.Dir(), "rev-parse", "HEAD"); id != head {
			t.Fatalf("Write returned %q, HEAD is %q", id, head)
		}
		if msg := tgit(t, s.Dir(), "log", "-1", "--format=%B"); msg != step.msg {
			t.Fatalf("commit message %q, want %q", msg, step.msg)
		}
		if who := tgit(t, s.Dir(), "log", "-1", "--format=%an <%ae> %cn <%ce>"); who != "cordon <cordon@localhost> cordon <cordon@localhost>" {
			t.Fatalf("commit identity %q", who)
		}
	}
	if got := tgit(t, s.Dir(), "show", "HEAD~1:index"); got != "2" {
		t.Fatalf("committed index = %q", got)
	}
	b, err := s.Read("notes/today.md")
	if err != nil || string(b) != "remember\n" {
		t.Fatalf("Read = %q, %v", b, err)
	}
	fi, err := os.Lstat(filepath.Join(s.Dir(), "notes", "today.md"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	// No temporary files are left behind.
	if out := tgit(t, s.Dir(), "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Fatalf("worktree not clean after Write: %q", out)
	}
}

func TestWriteCommitsOnlyItsFiles(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{})
	if _, err := s.Write(t.Context(), map[string][]byte{"a": []byte("a")}, "one"); err != nil {
		t.Fatal(err)
	}
	// Something staged by someone else stays out of the store's commit.
	writeTestFile(t, filepath.Join(s.Dir(), "planted"), "x")
	tgit(t, s.Dir(), "add", "planted")
	if _, err := s.Write(t.Context(), map[string][]byte{"b": []byte("b")}, "two"); err != nil {
		t.Fatal(err)
	}
	if got := tgit(t, s.Dir(), "show", "--format=", "--name-only", "HEAD"); got != "b" {
		t.Fatalf("HEAD changed %q, want only b", got)
	}
}

func TestWriteRefusesEmptyMessage(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{})
	if _, err := s.Write(t.Context(), map[string][]byte{"a": nil}, " \n"); err == nil {
		t.Fatal("Write with a blank message succeeded")
	}
}

// TestCancelledContextStopsGit: the caller's context bounds every git
// invocation, and its cause is what the error wraps.
func TestCancelledContextStopsGit(t *testing.T) {
	ws := t.TempDir()
	s := mustOpen(t, ws, Options{Git: needGit(t)})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Write(ctx, map[string][]byte{"a": []byte("x")}, "m"); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := Open(ctx, ws, Options{Git: needGit(t)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := Open(ctx, t.TempDir(), Options{Git: needGit(t)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Open of a new store with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestOpenRefusesStoreDirectories(t *testing.T) {
	cases := []struct {
		name    string
		plant   func(t *testing.T, ws, elsewhere string)
		mention string
	}{
		{"cordon symlink", func(t *testing.T, ws, elsewhere string) {
			symlink(t, elsewhere, filepath.Join(ws, ".cordon"))
		}, `.cordon" is a symlink`},
		{"cordon symlink inside workspace", func(t *testing.T, ws, elsewhere string) {
			os.Mkdir(filepath.Join(ws, "real"), 0o700)
			symlink(t, "real", filepath.Join(ws, ".cordon"))
		}, `.cordon" is a symlink`},
		{"cordon file", func(t *testing.T, ws, elsewhere string) {
			writeTestFile(t, filepath.Join(ws, ".cordon"), "x")
		}, `.cordon" is a regular file`},
		{"mem symlink", func(t *testing.T, ws, elsewhere string) {
			symlink(t, elsewhere, filepath.Join(ws, ".cordon", "mem"))
		}, `mem" is a symlink`},
		{"mem dangling symlink", func(t *testing.T, ws, elsewhere string) {
			symlink(t, filepath.Join(elsewhere, "new"), filepath.Join(ws, ".cordon", "mem"))
		}, `mem" is a symlink`},
		{"mem file", func(t *testing.T, ws, elsewhere string) {
			writeTestFile(t, filepath.Join(ws, ".cordon", "mem"), "x")
		}, `mem" is a regular file`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bothKinds(t, func(t *testing.T, opts Options) {
				ws, elsewhere := t.TempDir(), t.TempDir()
				c.plant(t, ws, elsewhere)
				_, err := Open(t.Context(), ws, opts)
				wantUnsafe(t, err, c.mention)
				assertEmptyDir(t, elsewhere)
			})
		})
	}
}

func TestOpenRefusesGitFile(t *testing.T) {
	ws, elsewhere := t.TempDir(), t.TempDir()
	newRepo(t, elsewhere)
	cfg, _ := os.ReadFile(filepath.Join(elsewhere, ".git", "config"))
	writeTestFile(t, filepath.Join(ws, ".cordon", "mem", ".git"), "gitdir: "+filepath.Join(elsewhere, ".git")+"\n")
	_, err := Open(t.Context(), ws, Options{Git: needGit(t)})
	wantUnsafe(t, err, "gitdir: pointer")
	if n := commits(t, elsewhere); n != 1 {
		t.Fatalf("elsewhere repository has %d commits, want 1", n)
	}
	if cfg2, _ := os.ReadFile(filepath.Join(elsewhere, ".git", "config")); !bytes.Equal(cfg, cfg2) {
		t.Fatal("elsewhere repository's config changed")
	}
}

func TestOpenRefusesGitSymlink(t *testing.T) {
	ws, elsewhere := t.TempDir(), t.TempDir()
	newRepo(t, elsewhere)
	symlink(t, filepath.Join(elsewhere, ".git"), filepath.Join(ws, ".cordon", "mem", ".git"))
	_, err := Open(t.Context(), ws, Options{Git: needGit(t)})
	wantUnsafe(t, err, `.git" is a symlink`)
	if n := commits(t, elsewhere); n != 1 {
		t.Fatalf("elsewhere repository has %d commits, want 1", n)
	}
}

func TestOpenRefusesGitOtherType(t *testing.T) {
	ws := t.TempDir()
	symlink(t, "/dev/null", filepath.Join(ws, ".cordon", "mem", ".git"))
	_, err := Open(t.Context(), ws, Options{Git: needGit(t)})
	wantUnsafe(t, err, `.git" is a symlink`)
}

// An empty mem/.git is not a repository, so git's discovery walks up to
// the workspace's own repository; Open must notice and touch nothing.
func TestOpenRefusesEnclosingRepository(t *testing.T) {
	ws := t.TempDir()
	newRepo(t, ws)
	script, mark := marker(t)
	tgit(t, ws, "config", "core.fsmonitor", script)
	writeTestFile(t, filepath.Join(ws, ".git", "hooks", "post-commit"), "#!/bin/sh\n"+script+"\n")
	os.Chmod(filepath.Join(ws, ".git", "hooks", "post-commit"), 0o755)
	if err := os.MkdirAll(filepath.Join(ws, ".cordon", "mem", ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), ws, Options{Git: needGit(t)})
	wantUnsafe(t, err, "enclosing repository")
	if !strings.Contains(err.Error(), filepath.Join(ws, ".git")) {
		t.Errorf("error %q does not name the enclosing repository", err)
	}
	if n := commits(t, ws); n != 1 {
		t.Fatalf("enclosing repository has %d commits, want 1", n)
	}
	assertNotRan(t, mark)
}

// A mem directory that is itself laid out as a bare repository must not be
// taken for the store either.
func TestOpenRefusesBareMem(t *testing.T) {
	ws := t.TempDir()
	mem := filepath.Join(ws, ".cordon", "mem")
	tgit(t, t.TempDir(), "init", "-q", "--bare", mem)
	if err := os.Mkdir(filepath.Join(mem, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), ws, Options{Git: needGit(t)})
	wantUnsafe(t, err, "uses the repository")
}

// plantCases each tamper with an existing store's repository; Open and
// Write must both refuse it, and no planted program may run.
func plantCases(t *testing.T) []struct {
	name    string
	plant   func(t *testing.T, mem, script string)
	mention string
} {
	config := func(kv ...string) func(t *testing.T, mem, script string) {
		return func(t *testing.T, mem, script string) {
			for i := 0; i < len(kv); i += 2 {
				v := strings.ReplaceAll(kv[i+1], "SCRIPT", script)
				tgit(t, mem, "config", "--file", filepath.Join(mem, ".git", "config"), "--add", kv[i], v)
			}
		}
	}
	return []struct {
		name    string
		plant   func(t *testing.T, mem, script string)
		mention string
	}{
		{"core.fsmonitor", config("core.fsmonitor", "SCRIPT"), `"core.fsmonitor"`},
		{"filter driver", config("filter.x.clean", "SCRIPT", "filter.x.smudge", "SCRIPT"), `"filter.x.clean"`},
		{"include.path", func(t *testing.T, mem, script string) {
			inc := filepath.Join(t.TempDir(), "inc")
			writeTestFile(t, inc, "[core]\n\tfsmonitor = "+script+"\n")
			config("include.path", inc)(t, mem, script)
		}, `"include.path"`},
		{"includeIf", config("includeIf.gitdir:/.path", "/tmp/x"), `"includeif.gitdir:/.path"`},
		{"core.hooksPath", func(t *testing.T, mem, script string) {
			hooks := t.TempDir()
			for _, h := range []string{"pre-commit", "post-commit", "commit-msg"} {
				writeTestFile(t, filepath.Join(hooks, h), "#!/bin/sh\n"+script+"\n")
				os.Chmod(filepath.Join(hooks, h), 0o755)
			}
			config("core.hooksPath", hooks)(t, mem, script)
		}, `"core.hookspath"`},
		{"gpg.program", config("gpg.program", "SCRIPT", "commit.gpgSign", "true"), `"gpg.program"`},
		{"core.sshCommand", config("core.sshCommand", "SCRIPT"), `"core.sshcommand"`},
		{"diff.external", config("diff.external", "SCRIPT"), `"diff.external"`},
		{"core.pager", config("core.pager", "SCRIPT"), `"core.pager"`},
		{"core.worktree", config("core.worktree", "/tmp"), `"core.worktree"`},
		{"worktreeConfig", config("extensions.worktreeConfig", "true"), `"extensions.worktreeconfig"`},
		{"bare", config("core.bare", "true"), `"core.bare"`},
		{"format version", config("core.repositoryformatversion", "2"), `"core.repositoryformatversion"`},
		{"object format", config("extensions.objectFormat", "sha512"), `"extensions.objectformat"`},
		{"unparsable config", func(t *testing.T, mem, script string) {
			writeTestFile(t, filepath.Join(mem, ".git", "config"), "[core\n")
		}, "cannot be read as git config"},
		{"hook", func(t *testing.T, mem, script string) {
			p := filepath.Join(mem, ".git", "hooks", "pre-commit")
			writeTestFile(t, p, "#!/bin/sh\n"+script+"\n")
			os.Chmod(p, 0o755)
		}, "is a hook"},
		{"hook directory", func(t *testing.T, mem, script string) {
			writeTestFile(t, filepath.Join(mem, ".git", "hooks", "x.d", "y"), "")
		}, "is a hook"},
		{".gitattributes", func(t *testing.T, mem, script string) {
			writeTestFile(t, filepath.Join(mem, ".gitattributes"), "* filter=x\n")
		}, `.gitattributes" exists`},
		{".GITATTRIBUTES", func(t *testing.T, mem, script string) {
			writeTestFile(t, filepath.Join(mem, ".GITATTRIBUTES"), "* filter=x\n")
		}, `.GITATTRIBUTES" exists`},
		{"info/attributes", func(t *testing.T, mem, script string) {
			writeTestFile(t, filepath.Join(mem, ".git", "info", "attributes"), "* filter=x\n")
		}, `attributes" exists`},
		{"commondir", func(t *testing.T, mem, script string) {
			writeTestFile(t, filepath.Join(mem, ".git", "commondir"), t.TempDir()+"\n")
		}, `commondir" exists`},
		{"alternates", func(t *testing.T, mem, script string) {
			writeTestFile(t, filepath.Join(mem, ".git", "objects", "info", "alternates"), t.TempDir()+"\n")
		}, `alternates" exists`},
		{"symlinked refs", func(t *testing.T, mem, script string) {
			os.RemoveAll(filepath.Join(mem, ".git", "refs", "heads"))
			symlink(t, t.TempDir(), filepath.Join(mem, ".git", "refs", "heads"))
		}, "is a symlink"},
		{"symlinked config", func(t *testing.T, mem, script string) {
			cfg := filepath.Join(t.TempDir(), "config")
			writeTestFile(t, cfg, "[core]\n\tbare = false\n")
			os.Remove(filepath.Join(mem, ".git", "config"))
			symlink(t, cfg, filepath.Join(mem, ".git", "config"))
		}, "is a symlink"},
	}
}

func TestOpenRefusesPlantedRepository(t *testing.T) {
	for _, c := range plantCases(t) {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			s := mustOpen(t, ws, Options{})
			if _, err := s.Write(t.Context(), map[string][]byte{"a": []byte("1")}, "before"); err != nil {
				t.Fatal(err)
			}
			script, mark := marker(t)
			c.plant(t, s.Dir(), script)

			_, err := Open(t.Context(), ws, Options{Git: needGit(t)})
			wantUnsafe(t, err, c.mention)
			// The store opened before the plant re-checks before writing.
			_, err = s.Write(t.Context(), map[string][]byte{"a": []byte("2")}, "after")
			wantUnsafe(t, err, c.mention)
			assertNotRan(t, mark)
			if b, _ := os.ReadFile(filepath.Join(s.Dir(), "a")); string(b) != "1" {
				t.Fatalf("refused Write changed a file: %q", b)
			}
		})
	}
}

// The fixtures above are live: plain git, without the store's defenses,
// runs the planted programs. Without this, "marker absent" proves nothing.
func TestPlantedFixturesAreLive(t *testing.T) {
	run := func(t *testing.T, plant func(mem, script string), args ...string) {
		t.Helper()
		mem := t.TempDir()
		tgit(t, mem, "init", "-q")
		script, mark := marker(t)
		plant(mem, script)
		writeTestFile(t, filepath.Join(mem, "f"), "x")
		cmd := exec.Command(needGit(t), args...)
		cmd.Dir, cmd.Env = mem, testEnv(t)
		cmd.Run() // the planted programs' output may make git fail; only the marker matters
		if _, err := os.Lstat(mark); err != nil {
			t.Fatalf("git %v did not run the planted program", args)
		}
	}
	t.Run("filter", func(t *testing.T) {
		run(t, func(mem, script string) {
			tgit(t, mem, "config", "filter.x.clean", script)
			writeTestFile(t, filepath.Join(mem, ".gitattributes"), "* filter=x\n")
		}, "add", "f")
	})
	t.Run("hook", func(t *testing.T) {
		run(t, func(mem, script string) {
			p := filepath.Join(mem, ".git", "hooks", "pre-commit")
			writeTestFile(t, p, "#!/bin/sh\n"+script+" </dev/null\n")
			os.Chmod(p, 0o755)
			writeTestFile(t, filepath.Join(mem, "g"), "x")
			tgit(t, mem, "add", "g")
		}, "commit", "-q", "-m", "m")
	})
	t.Run("fsmonitor", func(t *testing.T) {
		run(t, func(mem, script string) {
			tgit(t, mem, "config", "core.fsmonitor", script)
		}, "status")
	})
}

func TestSHA256StoreAccepted(t *testing.T) {
	ws := t.TempDir()
	mem := filepath.Join(ws, ".cordon", "mem")
	if err := os.MkdirAll(mem, 0o700); err != nil {
		t.Fatal(err)
	}
	tgit(t, mem, "init", "-q", "--object-format=sha256")
	s := mustOpen(t, ws, Options{})
	id, err := s.Write(t.Context(), map[string][]byte{"a": []byte("x")}, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 64 {
		t.Fatalf("commit id %q is not sha256", id)
	}
}

var badNames = []string{
	"", "../x", "/abs", ".git", ".git/config", ".GIT/x", ".Git/HEAD", "sub/.git/config",
	".gitattributes", ".gitmodules", "a//b", "a/./b", "a/../b", "a/", ".", "..",
	"a\x00b", "a\nb", "a\tb", "a\x7fb", "a\u0085b", "a\\b", "\xff",
}

func TestWriteRefusesBadNames(t *testing.T) {
	bothKinds(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, t.TempDir(), opts)
		before := 0
		if s.Kind() == KindGit {
			before = commits(t, s.Dir())
		}
		for _, name := range badNames {
			// A good name alongside shows that nothing is written when
			// any name is bad.
			_, err := s.Write(t.Context(), map[string][]byte{name: []byte("x"), "good": []byte("x")}, "m")
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("Write(%q) = %v, want ErrUnsafe", name, err)
			}
			if _, err := s.Read(name); !errors.Is(err, ErrUnsafe) {
				t.Errorf("Read(%q) = %v, want ErrUnsafe", name, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(s.Dir(), "good")); err == nil {
			t.Error("a refused Write wrote a file")
		}
		if s.Kind() == KindGit && commits(t, s.Dir()) != before {
			t.Error("a refused Write made a commit")
		}
		if _, err := os.Lstat(filepath.Join(s.Dir(), ".git", "x")); err == nil {
			t.Error("a refused Write wrote into .git")
		}
	})
}

func TestSymlinkInStoreRefused(t *testing.T) {
	bothKinds(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, t.TempDir(), opts)
		outDir := t.TempDir()
		outFile := filepath.Join(t.TempDir(), "secret")
		writeTestFile(t, outFile, "secret")
		if err := os.Mkdir(filepath.Join(s.Dir(), "real"), 0o700); err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(s.Dir(), "real", "f"), "inside")
		symlink(t, outDir, filepath.Join(s.Dir(), "notes"))
		symlink(t, outFile, filepath.Join(s.Dir(), "leak"))
		symlink(t, "real", filepath.Join(s.Dir(), "inner"))
		symlink(t, "f", filepath.Join(s.Dir(), "real", "g"))

		for _, name := range []string{"notes/a", "notes/sub/a", "leak", "inner/f", "real/g"} {
			_, err := s.Write(t.Context(), map[string][]byte{name: []byte("pwned")}, "m")
			wantUnsafe(t, err, "is a symlink")
			b, err := s.Read(name)
			wantUnsafe(t, err, "is a symlink")
			if b != nil {
				t.Fatalf("Read(%q) returned %q", name, b)
			}
		}
		assertEmptyDir(t, outDir)
		if b, _ := os.ReadFile(outFile); string(b) != "secret" {
			t.Fatalf("outside file changed: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(s.Dir(), "real", "f")); string(b) != "inside" {
			t.Fatalf("symlink target inside the store changed: %q", b)
		}
	})
}

func TestPathThroughFileRefused(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{NoGit: true})
	if _, err := s.Write(t.Context(), map[string][]byte{"a": []byte("x")}, ""); err != nil {
		t.Fatal(err)
	}
	_, err := s.Write(t.Context(), map[string][]byte{"a/b": []byte("x")}, "")
	wantUnsafe(t, err, "not a directory")
}

func TestReadMissing(t *testing.T) {
	bothKinds(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, t.TempDir(), opts)
		for _, name := range []string{"absent", "no/such/dir"} {
			if _, err := s.Read(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Read(%q) = %v, want ErrNotExist", name, err)
			}
		}
	})
}

func TestWriteReplacesHardLinkRatherThanWritingThrough(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{NoGit: true})
	other := filepath.Join(s.Dir(), "..", "other")
	writeTestFile(t, other, "keep")
	if err := os.Link(other, filepath.Join(s.Dir(), "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(t.Context(), map[string][]byte{"a": []byte("new")}, ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(other); string(b) != "keep" {
		t.Fatalf("Write wrote through a hard link: %q", b)
	}
}

func TestFileStore(t *testing.T) {
	ws := t.TempDir()
	s := mustOpen(t, ws, Options{NoGit: true})
	if s.Kind() != KindFile || s.Reason() == "" {
		t.Fatalf("Kind, Reason = %q, %q", s.Kind(), s.Reason())
	}
	id, err := s.Write(t.Context(), map[string][]byte{"x/y": []byte("z")}, "")
	if err != nil || id != "" {
		t.Fatalf("Write = %q, %v", id, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".cordon", "mem", "x", "y")); err != nil || string(b) != "z" {
		t.Fatalf("file = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(), ".git")); err == nil {
		t.Fatal("file store made a .git")
	}
}

func TestGitMissingFallsBackToFile(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	s, err := Open(t.Context(), t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != KindFile || !strings.Contains(s.Reason(), "git not found on PATH") {
		t.Fatalf("Kind, Reason = %q, %q", s.Kind(), s.Reason())
	}
}

func TestOpenArguments(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "f")
	writeTestFile(t, file, "")
	for _, c := range []struct {
		ws   string
		opts Options
	}{
		{"relative", Options{NoGit: true}},
		{filepath.Join(ws, "absent"), Options{NoGit: true}},
		{file, Options{NoGit: true}},
		{ws, Options{Git: "git"}},
	} {
		if _, err := Open(t.Context(), c.ws, c.opts); err == nil {
			t.Errorf("Open(%q, %+v) succeeded", c.ws, c.opts)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, ".cordon")); err == nil {
		t.Error("a refused Open created .cordon")
	}
}

// The process environment must not reach git: none of these variables may
// change which repository is used, which config is read or what runs.
func TestEnvironmentIgnored(t *testing.T) {
	git := needGit(t)
	evil := t.TempDir()
	newRepo(t, evil)
	script, mark := marker(t)
	hooks := t.TempDir()
	for _, h := range []string{"pre-commit", "post-commit", "commit-msg", "post-checkout"} {
		writeTestFile(t, filepath.Join(hooks, h), "#!/bin/sh\n"+script+"\n")
		os.Chmod(filepath.Join(hooks, h), 0o755)
	}
	home := t.TempDir()
	gitconfig := "[core]\n\tfsmonitor = " + script + "\n\thooksPath = " + hooks + "\n[filter \"x\"]\n\tclean = " + script + "\n"
	writeTestFile(t, filepath.Join(home, ".gitconfig"), gitconfig)
	writeTestFile(t, filepath.Join(home, ".config", "git", "config"), gitconfig)
	writeTestFile(t, filepath.Join(home, ".config", "git", "attributes"), "* filter=x\n")
	template := t.TempDir()
	writeTestFile(t, filepath.Join(template, "hooks", "post-commit"), "#!/bin/sh\n"+script+"\n")
	os.Chmod(filepath.Join(template, "hooks", "post-commit"), 0o755)

	for k, v := range map[string]string{
		"GIT_DIR":               filepath.Join(evil, ".git"),
		"GIT_WORK_TREE":         evil,
		"GIT_INDEX_FILE":        filepath.Join(evil, ".git", "index"),
		"GIT_OBJECT_DIRECTORY":  filepath.Join(evil, ".git", "objects"),
		"GIT_COMMON_DIR":        filepath.Join(evil, ".git"),
		"GIT_CONFIG":            filepath.Join(home, ".gitconfig"),
		"GIT_CONFIG_GLOBAL":     filepath.Join(home, ".gitconfig"),
		"GIT_CONFIG_SYSTEM":     filepath.Join(home, ".gitconfig"),
		"GIT_CONFIG_NOSYSTEM":   "",
		"GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='" + script + "'",
		"GIT_CONFIG_COUNT":      "1",
		"GIT_CONFIG_KEY_0":      "core.hooksPath",
		"GIT_CONFIG_VALUE_0":    hooks,
		"GIT_TEMPLATE_DIR":      template,
		"GIT_EXEC_PATH":         t.TempDir(),
		"GIT_AUTHOR_NAME":       "evil",
		"GIT_COMMITTER_EMAIL":   "evil@example.com",
		"GIT_EDITOR":            script,
		"GIT_SSH_COMMAND":       script,
		"HOME":                  home,
		"XDG_CONFIG_HOME":       filepath.Join(home, ".config"),
		"HOOK":                  script,
		"PATH":                  filepath.Dir(script),
	} {
		t.Setenv(k, v)
	}

	ws := t.TempDir()
	s, err := Open(t.Context(), ws, Options{Git: git})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(t.Context(), map[string][]byte{"a": []byte("x")}, "m"); err != nil {
		t.Fatal(err)
	}
	if n := commits(t, s.Dir()); n != 1 {
		t.Fatalf("store has %d commits, want 1", n)
	}
	if n := commits(t, evil); n != 1 {
		t.Fatalf("GIT_DIR repository has %d commits, want 1", n)
	}
	if who := tgit(t, s.Dir(), "log", "-1", "--format=%an %ce"); who != "cordon cordon@localhost" {
		t.Fatalf("commit identity %q", who)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(), ".git", "hooks", "post-commit")); err == nil {
		t.Fatal("GIT_TEMPLATE_DIR was used by git init")
	}
	assertNotRan(t, mark)
}

// Defense in depth: even on a repository that skipped the checks, the
// store's git invocations run no hook, fsmonitor, signing program or pager.
func TestRunGitPinsProgramsOff(t *testing.T) {
	dir := t.TempDir()
	tgit(t, dir, "init", "-q")
	script, mark := marker(t)
	for _, kv := range [][2]string{
		{"core.fsmonitor", script},
		{"commit.gpgSign", "true"},
		{"gpg.program", script},
		{"core.pager", script},
		{"pager.log", "true"},
	} {
		tgit(t, dir, "config", kv[0], kv[1])
	}
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "prepare-commit-msg"} {
		p := filepath.Join(dir, ".git", "hooks", h)
		writeTestFile(t, p, "#!/bin/sh\n"+script+" </dev/null\n")
		os.Chmod(p, 0o755)
	}
	writeTestFile(t, filepath.Join(dir, "f"), "x")
	s := &Store{git: needGit(t)}
	for _, args := range [][]string{
		{"status"},
		{"add", "f"},
		{"commit", "-q", "-m", "m"},
		{"log", "-1"},
	} {
		if _, err := s.runGit(t.Context(), dir, args...); err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
	}
	assertNotRan(t, mark)
}
