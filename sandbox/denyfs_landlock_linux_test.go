package sandbox

// deny.fs kept out of every Landlock rule (landlockSet.addAround;
// docs/sandbox.md, "deny.fs wins"): what the host puts at a denied name,
// or next to it, after the ruleset is built is refused inside.

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDenyFSAroundWhileParked: beneath a read-only grant with deny.fs
// paths, a prepared slot's program reads the siblings that were there
// at Prepare (in any directory, the denied path's own siblings
// included, even after their directory was renamed), and is refused a
// sibling created while it was parked, a denied path whose ancestor was
// renamed away and recreated (x → y, a new x/secret), the moved denied
// file itself, and a denied path that did not exist at Prepare; the
// directories on the way stay listable.
func TestDenyFSAroundWhileParked(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/ok", "ok\n", 0o644)
	writeFile(t, d+"/sub/deep/f", "deep\n", 0o644)
	writeFile(t, d+"/x/ok2", "ok2\n", 0o644)
	writeFile(t, d+"/x/secret", "old secret\n", 0o644)
	js := fsGrants(rule(d, "ro"), d+"/x/secret", d+"/token")
	argv := []string{"sh", "-c", fmt.Sprintf(`D=%s
for f in ok sub/deep/f y/ok2 new y/new2 x/secret y/secret token; do echo "$f: $(cat $D/$f 2>/dev/null || echo no)"; done
echo $(ls $D)`, d)}
	warm, _ := rtWarm(t, js, argv, func(*Prepared) {
		writeFile(t, d+"/new", "new sibling\n", 0o644)
		writeFile(t, d+"/x/new2", "new in x\n", 0o644)
		if err := os.Rename(d+"/x", d+"/y"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, d+"/x/secret", "new secret\n", 0o644)
		writeFile(t, d+"/token", "new token\n", 0o644)
	})
	if warm.err != nil {
		t.Fatalf("warm run: %v\nstderr %s", warm.err, warm.stderr)
	}
	// y/secret is the denied file, moved with its directory: the mask
	// went with it and shows it empty; it has no rule either.
	want := "ok: ok\nsub/deep/f: deep\ny/ok2: ok2\nnew: no\ny/new2: no\nx/secret: no\ny/secret: \ntoken: no\nnew ok sub token x y\n"
	if warm.stdout != want {
		t.Errorf("warm run:\n got %q\nwant %q\nstderr %s", warm.stdout, want, warm.stderr)
	}
}

// TestDenyFSAroundCold: the same in a cold run, with an executable
// grant (rx) holding a denied file: the siblings read and run, the denied
// file is hidden (the mask), and a file renamed over it while the program
// runs is refused (no rule), as is a sibling created then.
func TestDenyFSAroundCold(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	copyFile(t, "/usr/bin/true", d+"/bin/true", 0o755)
	writeFile(t, d+"/bin/secret", "old\n", 0o644)
	writeFile(t, d+"/data", "data\n", 0o644)
	js := fsGrants(rule(d, "rx"), d+"/bin/secret")
	script := fmt.Sprintf(`D=%s
cat $D/data; $D/bin/true && echo ran
echo "secret: $(cat $D/bin/secret)"
echo replace
i=0; while [ ! -e $D/bin/ready ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
for f in bin/secret bin/ready; do echo "$f: $(cat $D/$f 2>/dev/null || echo no)"; done`, d)
	out := &onLine{line: "replace", do: func() {
		writeFile(t, d+"/bin/secret.new", "s3cret\n", 0o644)
		if err := os.Rename(d+"/bin/secret.new", d+"/bin/secret"); err != nil {
			t.Error(err)
		}
		writeFile(t, d+"/bin/ready", "new\n", 0o644)
	}}
	r := sandboxed(t, []string{"sh", "-c", script}, withGrants(t, js), func(s *Spec) { s.Stdout = out })
	r.mustExit(t, 0)
	if want := "data\nran\nsecret: \nreplace\nbin/secret: no\nbin/ready: no\n"; out.b.String() != want {
		t.Errorf("cold run:\n got %q\nwant %q\nstderr %s", out.b.String(), want, r.stderr)
	}
}

// onLine is a Stdout that calls do, once, when the program has written
// line.
type onLine struct {
	mu   sync.Mutex
	b    strings.Builder
	line string
	do   func()
	done bool
}

func (o *onLine) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	if !o.done && strings.Contains(o.b.String(), o.line+"\n") {
		o.done = true
		o.do()
	}
	return len(p), nil
}

// newTestRuleset is a ruleset handling every file system right of this
// kernel, never applied.
func newTestRuleset(t *testing.T) *landlockSet {
	t.Helper()
	v, err := landlockABI()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := landlockCreateRuleset(&unix.LandlockRulesetAttr{Handled_access_fs: fsRights(v)}, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &landlockSet{fd: fd}
}

const testRead = uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)

// TestDenyFSAroundRules: without a denied path beneath it, a grant is
// one rule on its path, as before; with one, the path gets only
// READ_DIR, every entry not on the way to a denied path its own rule
// (symbolic links none), the directories on the way none, the denied
// entry none; a rule on or beneath a denied path is dropped.
func TestDenyFSAroundRules(t *testing.T) {
	d := t.TempDir()
	writeFile(t, d+"/a", "a\n", 0o644)
	writeFile(t, d+"/b/c", "c\n", 0o644)
	writeFile(t, d+"/x/y/secret", "s\n", 0o644)
	writeFile(t, d+"/x/y/sib", "s\n", 0o644)
	writeFile(t, d+"/x/z/f", "f\n", 0o644)
	writeFile(t, d+"/x/file", "f\n", 0o644)
	if err := os.Symlink("a", d+"/link"); err != nil {
		t.Fatal(err)
	}

	ls := newTestRuleset(t)
	if e := ls.addAround(d, testRead, nil); e != nil {
		t.Fatal(e.err)
	}
	if e := ls.addAround("/", testRead, []string{"/elsewhere/x"}[:0]); e != nil {
		t.Fatal(e.err)
	}
	if want := []string{d, "/"}; !slices.Equal(ls.added, want) {
		t.Errorf("without deny.fs: rules on %q, want %q", ls.added, want)
	}

	ls = newTestRuleset(t)
	deny := []string{d + "/x/y/secret", d + "/b/c"}
	if e := ls.guardDenied(deny); e != nil {
		t.Fatal(e.err)
	}
	if e := ls.addAround(d, testRead, deny); e != nil {
		t.Fatal(e.err)
	}
	got := slices.Clone(ls.added)
	slices.Sort(got)
	want := []string{d, d + "/a", d + "/x/file", d + "/x/y/sib", d + "/x/z"}
	if !slices.Equal(got, want) {
		t.Errorf("around %q: rules on\n %q\nwant\n %q", deny, got, want)
	}
	// A rule on or beneath a denied path adds nothing.
	n := len(ls.added)
	if e := ls.addAround(d+"/x/y/secret", ls.exe|testRead, deny); e != nil || len(ls.added) != n {
		t.Errorf("a rule on a denied path: %v, rules %q", e, ls.added[n:])
	}
	// No rule but READ_DIR on a directory on the way to a denied path,
	// under any name.
	if e := ls.add(d+"/x/y", testRead); e == nil || !strings.Contains(e.err.Error(), "leads to a deny.fs path") {
		t.Errorf("a rule on %s/x/y: %v", d, e)
	}
}

// TestDenyFSAroundLimit: a directory on the way to a denied path with
// more than maxAroundEntries entries refuses the run at setup, naming it
// and saying to narrow the grant; the same grant without deny.fs runs.
func TestDenyFSAroundLimit(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	for i := range maxAroundEntries {
		if err := os.WriteFile(fmt.Sprintf("%s/f%d", d, i), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, d+"/secret", "s\n", 0o644)
	r := sandboxed(t, []string{"echo", "ran"}, withGrants(t, fsGrants(rule(d, "ro"), d+"/secret")))
	r.refused(t, d+" has more than 4096 entries", "denied path "+d+"/secret", "narrow the grant")
	r = sandboxed(t, []string{"echo", "ran"}, withGrants(t, fsGrants(rule(d, "ro"))))
	r.mustExit(t, 0)
	// At the limit it runs.
	if err := os.Remove(d + "/f0"); err != nil {
		t.Fatal(err)
	}
	r = sandboxed(t, []string{"cat", d + "/f1"}, withGrants(t, fsGrants(rule(d, "ro"), d+"/secret")))
	r.mustExit(t, 0)

	ls := newTestRuleset(t)
	ls.added = make([]string, maxAroundRules)
	if e := ls.addAround(d, testRead, []string{d + "/secret"}); e == nil || !strings.Contains(e.err.Error(), "narrow the grants") {
		t.Errorf("over %d rules: %v", maxAroundRules, e)
	}
}

// rootlessDenyDir is the runtime directory TestRootlessDenyFSAround
// uses: a rootless run cannot bind host paths, so it denies one in the
// runtime (/usr), made by the root pass for the rootless user.
const rootlessDenyDir = "/usr/local/share/cordon-test-denyfs"

// TestRootlessDenyFSAround: rootless, a deny.fs path in the runtime is
// kept out of Landlock's rules as well: a prepared slot reads a sibling,
// and is refused a file renamed over the denied name and a sibling
// created while it was parked.
func TestRootlessDenyFSAround(t *testing.T) {
	if os.Geteuid() == 0 {
		u, err := user.Lookup(rootlessUser())
		if err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			os.RemoveAll(rootlessDenyDir)
			mkdirMode(t, rootlessDenyDir, 0o755)
			t.Cleanup(func() { os.RemoveAll(rootlessDenyDir) })
			if err := os.Chown(rootlessDenyDir, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	if asRootless(t) {
		return
	}
	d := rootlessDenyDir
	if _, err := os.Stat(d); os.Geteuid() != 0 && err != nil {
		// Run by the unprivileged suite directly, not as the root pass's
		// child: the runtime directory it needs is root's to make.
		t.Skipf("needs root: it makes %s, a runtime path the rootless user may write, and runs this test as that user (uid %d)", d, os.Geteuid())
	}
	writeFile(t, d+"/ok", "ok\n", 0o644)
	writeFile(t, d+"/secret", "old\n", 0o644)
	js := fsGrants("", d+"/secret")
	argv := []string{"sh", "-c", "for f in ok secret new; do cat " + d + "/$f 2>/dev/null || echo no $f; done"}
	p, err := Prepare(context.Background(), rtSpec(t, js))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	writeFile(t, d+"/secret.new", "s3cret\n", 0o644)
	if err := os.Rename(d+"/secret.new", d+"/secret"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, d+"/new", "new\n", 0o644)
	var out strings.Builder
	if err := p.Start(context.Background(), &Launch{Argv: argv, Workspace: t.TempDir(), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("rootless warm run: %v, %+v", err, res)
	}
	if want := "ok\nno secret\nno new\n"; out.String() != want {
		t.Errorf("rootless warm run: got %q, want %q", out.String(), want)
	}
}

// TestDenyFSAroundAliasRefused: a directory on the way to a denied path
// that is also granted under another name (here a host bind mount of it)
// refuses the run: a rule on the other name would be on the same inode
// and cover the denied path.
func TestDenyFSAroundAliasRefused(t *testing.T) {
	requireRoot(t, "bind-mounts a host directory")
	d := hostDir(t)
	alias := hostDir(t)
	writeFile(t, d+"/x/secret", "s\n", 0o644)
	writeFile(t, d+"/x/ok", "ok\n", 0o644)
	if err := unix.Mount(d+"/x", alias, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(alias, unix.MNT_DETACH) })
	r := sandboxed(t, []string{"cat", alias + "/secret"}, withGrants(t, fsGrants(rule(d, "ro")+","+rule(alias, "ro"), d+"/x/secret")))
	r.refused(t, "Landlock rule for "+alias, "same directory as "+d+"/x", "leads to a deny.fs path")
}

// TestKnownLimitationDenyFSMovedSibling: rules follow inodes, so a file
// that was in the tree when the ruleset was built and that the host
// moves to a denied name while a slot is parked keeps its rule there
// (the rename drops the mask): what the host wrote into it shows.
// CLAIMS.md, Known limitations.
func TestKnownLimitationDenyFSMovedSibling(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/secret", "old\n", 0o644)
	writeFile(t, d+"/template", "template\n", 0o644)
	js := fsGrants(rule(d, "ro"), d+"/secret")
	warm, _ := rtWarm(t, js, []string{"cat", d + "/secret"}, func(*Prepared) {
		if err := os.Rename(d+"/template", d+"/secret"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d+"/secret", []byte("written later\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if warm.err != nil || warm.stdout != "written later\n" {
		t.Errorf("the limitation no longer holds (update CLAIMS.md and docs/sandbox.md): %v, stdout %q, stderr %s", warm.err, warm.stdout, warm.stderr)
	}
}
