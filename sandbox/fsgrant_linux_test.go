package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/exechash"
	"github.com/cordon-dev/cordon/tier"
)

// hostDir makes a host directory for fs grants outside /tmp (the
// sandbox's own /tmp is scratch, so host paths beneath it cannot be
// granted), readable by the sandbox's uids.
func hostDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "cordon-fsgrant-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdirMode(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(b), mode)
}

// fsGrants is testGrants with fs rules and deny.fs paths added.
func fsGrants(fs string, deny ...string) string {
	js := strings.TrimSuffix(testGrants, "}") + `,"fs":[` + fs + `]`
	if len(deny) > 0 {
		js += `,"deny":{"fs":["` + strings.Join(deny, `","`) + `"]}`
	}
	return js + "}"
}

func rule(p, access string) string { return fmt.Sprintf(`{"path":%q,"access":%q}`, p, access) }

// withMounted records what the sandbox reports to Spec.Mounted.
func withMounted(got *[]Mount) option {
	return func(s *Spec) {
		s.Mounted = func(ms []Mount) error {
			*got = append(*got, ms...)
			return nil
		}
	}
}

// TestFSGrantAccess binds host directories with each access and checks
// that the program gets exactly it: ro reads only; rx reads and
// executes; rw writes the host path but executes nothing; rwx writes and
// executes; an ungranted sibling is not there. Every bind is nosuid and
// nodev, and every one is reported before the program starts.
func TestFSGrantAccess(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/ro/data.txt", "ro data\n", 0o644)
	writeFile(t, d+"/ro/run.sh", "#!/bin/sh\necho ran\n", 0o755)
	copyFile(t, "/usr/bin/true", d+"/rx/true", 0o755)
	writeFile(t, d+"/rx/data.txt", "rx data\n", 0o644)
	mkdirMode(t, d+"/rw", 0o777)
	mkdirMode(t, d+"/rwx", 0o777)
	writeFile(t, d+"/secret/key", "host secret\n", 0o644)
	script := fmt.Sprintf(`D=%s
cat $D/ro/data.txt
echo x > $D/ro/new 2>/dev/null && echo RO-WRITABLE
$D/ro/run.sh 2>/dev/null && echo RO-EXECUTABLE
$D/rx/true && echo rx ran
cat $D/rx/data.txt
echo x > $D/rx/new 2>/dev/null && echo RX-WRITABLE
echo written > $D/rw/out.txt && echo rw wrote
cp /usr/bin/true $D/rw/t && chmod +x $D/rw/t && { $D/rw/t 2>/dev/null && echo RW-EXECUTABLE; }
cp /usr/bin/true $D/rwx/t && chmod +x $D/rwx/t && $D/rwx/t && echo rwx ran
cat $D/secret/key 2>/dev/null && echo SECRET-VISIBLE
ls $D
cat /proc/self/mountinfo
`, d)
	var mounts []Mount
	r := sandboxed(t, []string{"sh", "-c", script},
		withGrants(t, fsGrants(rule(d+"/ro", "ro")+","+rule(d+"/rx", "rx")+","+rule(d+"/rw", "rw")+","+rule(d+"/rwx", "rwx"))),
		withMounted(&mounts))
	r.mustExit(t, 0)
	for _, want := range []string{"ro data\n", "rx ran\n", "rx data\n", "rw wrote\n", "rwx ran\n", "ro\nrw\nrwx\nrx\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, bad := range []string{"RO-WRITABLE", "RO-EXECUTABLE", "RX-WRITABLE", "RW-EXECUTABLE", "SECRET-VISIBLE", "secret"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("stdout has %q:\n%s", bad, r.stdout)
		}
	}
	// The kernel's view of each bind: always nosuid and nodev; read-only
	// for ro and rx; noexec for ro and rw.
	for _, m := range []struct {
		sub  string
		ro   bool
		exec bool
	}{{"ro", true, false}, {"rx", true, true}, {"rw", false, false}, {"rwx", false, true}} {
		var line string
		for l := range strings.SplitSeq(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 5 && f[4] == d+"/"+m.sub {
				line = l
			}
		}
		if line == "" {
			t.Errorf("no mount at %s/%s in mountinfo:\n%s", d, m.sub, r.stdout)
			continue
		}
		opts := strings.Split(strings.Fields(line)[5], ",")
		if !slices.Contains(opts, "nosuid") || !slices.Contains(opts, "nodev") ||
			slices.Contains(opts, "ro") != m.ro || slices.Contains(opts, "noexec") == m.exec {
			t.Errorf("%s: mount options %v", m.sub, opts)
		}
	}
	if b, err := os.ReadFile(d + "/rw/out.txt"); err != nil || string(b) != "written\n" {
		t.Errorf("the rw host path holds %q, %v; want the program's write", b, err)
	}
	want := []Mount{
		{Kind: "bind", Path: d + "/ro", Access: "ro", Rule: "fs[0]"},
		{Kind: "bind", Path: d + "/rx", Access: "rx", Rule: "fs[1]"},
		{Kind: "bind", Path: d + "/rw", Access: "rw", Rule: "fs[2]", Writable: true},
		{Kind: "bind", Path: d + "/rwx", Access: "rwx", Rule: "fs[3]", Writable: true},
	}
	if !slices.Equal(mounts, want) {
		t.Errorf("Mounted got %+v\nwant %+v", mounts, want)
	}
}

// TestFSGrantScratchExec: /work and /tmp stay noexec unless a rule
// grants them rwx; then what the run builds there runs.
func TestFSGrantScratchExec(t *testing.T) {
	script := `cp /usr/bin/true /work/t && chmod +x /work/t && /work/t && echo work ran
cp /usr/bin/true /tmp/t && chmod +x /tmp/t && /tmp/t && echo tmp ran`
	r := sandboxed(t, []string{"sh", "-c", script})
	r.mustExit(t, 126)
	if strings.Contains(r.stdout, "ran") {
		t.Errorf("a built program ran without an rwx grant: %s", r.stdout)
	}
	var mounts []Mount
	r = sandboxed(t, []string{"sh", "-c", script},
		withGrants(t, fsGrants(rule("/work", "rwx")+","+rule("/tmp", "rwx"))), withMounted(&mounts))
	r.mustExit(t, 0)
	if r.stdout != "work ran\ntmp ran\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	want := []Mount{{Kind: "scratch", Path: "/work", Access: "rwx", Rule: "fs[0]"}, {Kind: "scratch", Path: "/tmp", Access: "rwx", Rule: "fs[1]"}}
	if !slices.Equal(mounts, want) {
		t.Errorf("Mounted got %+v, want %+v", mounts, want)
	}
	// rw on /work (the SPEC's own example) changes nothing.
	r = sandboxed(t, []string{"sh", "-c", script}, withGrants(t, fsGrants(rule("/work", "rw"))))
	r.mustExit(t, 126)
}

// refused requires a run refused before the program started, with an
// error that says all of want.
func (r outcome) refused(t *testing.T, want ...string) {
	t.Helper()
	var ee *ExitError
	if !errors.As(r.err, &ee) || ee.Code != ExitRefused {
		t.Fatalf("Run = %v, %v; want a refusal (125)\nstdout: %s", r.res, r.err, r.stdout)
	}
	for _, w := range want {
		if !strings.Contains(r.err.Error(), w) {
			t.Errorf("error %q does not say %q", r.err, w)
		}
	}
	if r.stdout != "" {
		t.Errorf("the program ran: %q", r.stdout)
	}
}

// TestFSGrantSymlinkRefused: a granted path that is a symbolic link (to
// /etc), or passes through one, is refused with the rule named; nothing
// of /etc is bound.
func TestFSGrantSymlinkRefused(t *testing.T) {
	d := hostDir(t)
	if err := os.Symlink("/etc", d+"/etc"); err != nil {
		t.Fatal(err)
	}
	mkdirMode(t, d+"/real/sub", 0o755)
	if err := os.Symlink("real", d+"/alias"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d + "/etc", d + "/alias/sub"} {
		r := sandboxed(t, []string{"cat", p + "/passwd"}, withGrants(t, fsGrants(rule(p, "ro"))))
		r.refused(t, "fs[0]", p, "symbolic link")
	}
}

// TestFSGrantDotDot: a ".." in a granted path never reaches the sandbox:
// the grant set is refused, and the resolver refuses it too.
func TestFSGrantDotDot(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	if _, err := grant.Parse([]byte(fsGrants(rule(d+"/../../etc", "ro")))); err == nil {
		t.Errorf("grant.Parse accepted a path with ..")
	}
	if fd, err := openNoSymlinks("/", d+"/../../etc"); err == nil {
		t.Errorf("openNoSymlinks opened a path with .. (fd %d)", fd)
	}
	// A directory named ".." cannot exist; a symlink pointing at ".." is
	// a symlink, refused above. A "..." component is an ordinary name.
	mkdirMode(t, d+"/.../x", 0o755)
	writeFile(t, d+"/.../x/f", "dots\n", 0o644)
	r := sandboxed(t, []string{"cat", d + "/.../x/f"}, withGrants(t, fsGrants(rule(d+"/.../x", "ro"))))
	r.mustExit(t, 0)
}

// TestFSGrantRaceReplacedBySymlink replaces a granted directory with a
// symbolic link to /etc after the decision, before init binds it: the
// sandbox sees the directory that was decided on, never /etc.
func TestFSGrantRaceReplacedBySymlink(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/data/marker", "decided\n", 0o644)
	hookCreate(t, func(sb *Sandbox, step string) error {
		if step != "prepared" {
			return nil
		}
		if err := os.Rename(d+"/data", d+"/data.old"); err != nil {
			return err
		}
		return os.Symlink("/etc", d+"/data")
	})
	r := sandboxed(t, []string{"sh", "-c", "cat " + d + "/data/marker; cat " + d + "/data/passwd 2>/dev/null && echo ETC-VISIBLE; true"},
		withGrants(t, fsGrants(rule(d+"/data", "ro"))))
	r.mustExit(t, 0)
	if r.stdout != "decided\n" {
		t.Errorf("stdout %q, want only the decided directory's marker", r.stdout)
	}
	if fi, err := os.Lstat(d + "/data"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the hook did not swap the directory: %v, %v", fi, err)
	}
	// A mount placed over the granted path after the decision does not
	// redirect the bind either.
	writeFile(t, d+"/mnt/marker", "decided\n", 0o644)
	hookCreate(t, func(sb *Sandbox, step string) error {
		if step != "prepared" {
			return nil
		}
		if err := unix.Mount("tmpfs", d+"/mnt", "tmpfs", 0, "size=64k"); err != nil {
			return err
		}
		t.Cleanup(func() { unix.Unmount(d+"/mnt", unix.MNT_DETACH) })
		return os.WriteFile(d+"/mnt/marker", []byte("mounted over\n"), 0o644)
	})
	r = sandboxed(t, []string{"cat", d + "/mnt/marker"}, withGrants(t, fsGrants(rule(d+"/mnt", "ro"))))
	r.mustExit(t, 0)
	if r.stdout != "decided\n" {
		t.Errorf("stdout %q, want the decided directory's marker", r.stdout)
	}
	if b, _ := os.ReadFile(d + "/mnt/marker"); string(b) != "mounted over\n" {
		t.Fatalf("the hook did not mount over the path: the host reads %q", b)
	}
	// Swapped before the decision, the same path is refused.
	hookCreate(t, nil)
	r = sandboxed(t, []string{"cat", d + "/data/passwd"}, withGrants(t, fsGrants(rule(d+"/data", "ro"))))
	r.refused(t, "fs[0]", "symbolic link")
}

// TestFSGrantSetuidIgnored: a setuid-root program beneath an rx path runs
// with the program's own ids: the bind is nosuid (and no_new_privs and
// the unmapped owner would stop it too).
func TestFSGrantSetuidIgnored(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	copyFile(t, "/usr/bin/id", d+"/bin/id", 0o755)
	if err := os.Chmod(d+"/bin/id", 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d + "/bin/id"); fi.Mode()&os.ModeSetuid == 0 {
		t.Fatal("the copy is not setuid")
	}
	r := sandboxed(t, []string{"sh", "-c", d + "/bin/id -u; " + d + "/bin/id -ru; cat /proc/self/mountinfo"},
		withGrants(t, fsGrants(rule(d, "rx"))))
	r.mustExit(t, 0)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 3 || lines[0] != "1000" || lines[1] != "1000" {
		t.Fatalf("ids %q, want 1000 and 1000", r.stdout)
	}
	found := false
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 5 && f[4] == d {
			found = true
			if opts := strings.Split(f[5], ","); !slices.Contains(opts, "nosuid") {
				t.Errorf("the rx bind is not nosuid: %v", opts)
			}
		}
	}
	if !found {
		t.Errorf("no mount at %s:\n%s", d, r.stdout)
	}
}

// TestFSGrantDenyUnderAllowed: deny.fs wins beneath an allowed rule: a
// denied directory shows empty, a denied file empty, the rest reads; a
// rule beneath a denied path binds nothing.
func TestFSGrantDenyUnderAllowed(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/ok.txt", "ok\n", 0o644)
	writeFile(t, d+"/secret/key", "host secret\n", 0o644)
	writeFile(t, d+"/token", "host token\n", 0o644)
	mkdirMode(t, d+"/secret/out", 0o777)
	var mounts []Mount
	r := sandboxed(t, []string{"sh", "-c", "cat " + d + "/ok.txt; ls -A " + d + "/secret; cat " + d + "/token; echo x > " + d + "/secret/out/f 2>/dev/null && echo WROTE; true"},
		withGrants(t, fsGrants(rule(d, "ro")+","+rule(d+"/secret/out", "rw"), d+"/secret", d+"/token")), withMounted(&mounts))
	r.mustExit(t, 0)
	if r.stdout != "ok\n" {
		t.Errorf("stdout %q, want only ok", r.stdout)
	}
	if _, err := os.Stat(d + "/secret/out/f"); err == nil {
		t.Errorf("the program wrote beneath a denied path")
	}
	want := []Mount{
		{Kind: "bind", Path: d, Access: "ro", Rule: "fs[0]"},
		{Kind: "mask", Path: d + "/secret", Rule: "deny.fs[0]"},
		{Kind: "mask", Path: d + "/token", Rule: "deny.fs[1]"},
	}
	if !slices.Equal(mounts, want) {
		t.Errorf("Mounted got %+v\nwant %+v", mounts, want)
	}
	// A denied runtime path is hidden too, and a program beneath one is
	// refused before anything starts.
	r = sandboxed(t, []string{"sh", "-c", "ls -A /usr/share/zoneinfo; ls /usr/share | head -1"}, withGrants(t, fsGrants("", "/usr/share/zoneinfo")))
	r.mustExit(t, 0)
	if strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("a denied runtime directory lists %q entries", r.stdout)
	}
	r = sandboxed(t, []string{"cat", "/etc/hostname"}, withGrants(t, fsGrants("", "/usr/bin")))
	r.refused(t, "deny.fs[0]")
}

// TestFSGrantPath: PATH inside puts the bin directories of granted rx
// paths first; exec.allow still decides what cordon starts by name, and
// an exec.deny hash is refused wherever the name is found.
func TestFSGrantPath(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/tool/bin/hello", "#!/bin/sh\necho hello from the tool\n", 0o755)
	base := `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"fs":[` + rule(d+"/tool", "rx") + `],"exec":{"allow":[{"name":"hello"},{"name":"sh"},{"name":"env"}]%s}}`
	r := sandboxed(t, []string{"hello"}, withGrants(t, fmt.Sprintf(base, "")))
	r.mustExit(t, 0)
	if r.stdout != "hello from the tool\n" || r.res.Program.Path != d+"/tool/bin/hello" {
		t.Errorf("stdout %q, program %q", r.stdout, r.res.Program.Path)
	}
	r = sandboxed(t, []string{"env"}, withGrants(t, fmt.Sprintf(base, "")))
	r.mustExit(t, 0)
	if !strings.Contains(r.stdout, "PATH="+d+"/tool/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin\n") {
		t.Errorf("env: %s", r.stdout)
	}
	id, err := exechash.New(1).Sum(d + "/tool/bin/hello")
	if err != nil {
		t.Fatal(err)
	}
	r = sandboxed(t, []string{"hello"}, withGrants(t, fmt.Sprintf(base, `,"deny":["`+id.String()+`"]`)))
	r.refused(t, "exec.deny[0]")
	// Found by name inside (by sh's own PATH lookup), under any name, a
	// file with a denied hash is hidden: it cannot run.
	copyFile(t, d+"/tool/bin/hello", d+"/tool/bin/hello2", 0o755)
	var mounts []Mount
	r = sandboxed(t, []string{"sh", "-c", "hello; hello2; " + d + "/tool/bin/hello; echo end"},
		withGrants(t, fmt.Sprintf(base, `,"deny":["`+id.String()+`"]`)), withMounted(&mounts))
	r.mustExit(t, 0)
	if r.stdout != "end\n" {
		t.Errorf("stdout %q: a denied file ran", r.stdout)
	}
	want := []Mount{{Kind: "bind", Path: d + "/tool", Access: "rx", Rule: "fs[0]"},
		{Kind: "mask", Path: d + "/tool/bin/hello", Rule: "exec.deny[0]"}, {Kind: "mask", Path: d + "/tool/bin/hello2", Rule: "exec.deny[0]"}}
	if !slices.Equal(mounts, want) {
		t.Errorf("Mounted got %+v\nwant %+v", mounts, want)
	}
	// Not allowed by name: found, but refused.
	r = sandboxed(t, []string{"hello"}, withGrants(t, strings.Replace(fmt.Sprintf(base, ""), `{"name":"hello"},`, "", 1)))
	r.refused(t, "hello")
}

// TestFSGrantRefusals: paths the sandbox cannot grant, and tiers that
// refuse host paths.
func TestFSGrantRefusals(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	for _, tc := range []struct {
		fs   string
		deny []string
		want string
	}{
		{rule("/", "ro"), nil, "fs[0]"},
		{rule("/etc", "ro"), nil, "fs[0]"},
		{rule("/proc/1", "ro"), nil, "beneath /proc"},
		{rule("/sys", "ro"), nil, "beneath /sys"},
		{rule("/work/x", "ro"), nil, "stage it as an input"},
		{rule(d+"/missing", "ro"), nil, "fs[0]"},
		{"", []string{"/"}, "deny.fs[0]"},
		{"", []string{"/work/secret"}, "deny.fs[0]"},
	} {
		r := sandboxed(t, []string{"true"}, withGrants(t, fsGrants(tc.fs, tc.deny...)))
		r.refused(t, tc.want)
	}
	// At S3 a writable host path is refused: tenants would share it.
	mkdirMode(t, d+"/shared", 0o777)
	js := strings.Replace(fsGrants(rule(d+"/shared", "rw")), `"tenancy":"single"`, `"tenancy":"multi"`, 1)
	r := sandboxed(t, []string{"true"}, withGrants(t, js), func(s *Spec) { s.Tenant = "t1" })
	r.refused(t, "refused at S3")
}

// TestFSGrantMountedFailureRefuses: a mount that cannot be recorded
// refuses the run.
func TestFSGrantMountedFailureRefuses(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	r := sandboxed(t, []string{"echo", "ran"}, withGrants(t, fsGrants(rule(d, "ro"))), func(s *Spec) {
		s.Mounted = func([]Mount) error { return errors.New("journal full") }
	})
	r.refused(t, "journal full")
}

// TestFSGrantNoRulesNoMounts: without fs rules nothing is reported and
// the plan is empty.
func TestFSGrantNoRulesNoMounts(t *testing.T) {
	called := false
	r := sandboxed(t, []string{"true"}, func(s *Spec) {
		s.Mounted = func([]Mount) error { called = true; return nil }
	})
	r.mustExit(t, 0)
	if called {
		t.Errorf("Mounted was called for a grant set without fs rules")
	}
}

// TestFSGrantFilesAndRuntime: a rule may name one regular file (rw and rx
// on files get only the rights a file has); plain ro rules in the
// runtime, even nested, change nothing, so the allowed programs in its
// program directories still run; an ro rule beneath an rx rule narrows
// it.
func TestFSGrantFilesAndRuntime(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/notes.txt", "old\n", 0o666)
	copyFile(t, "/usr/bin/true", d+"/tool", 0o755)
	copyFile(t, "/usr/bin/true", d+"/tree/bin/t", 0o755)
	copyFile(t, "/usr/bin/true", d+"/tree/lib/t", 0o755)
	r := sandboxed(t, []string{"sh", "-c", "echo new > " + d + "/notes.txt && " + d + "/tool && echo tool ran && " + d + "/tree/bin/t && echo bin ran; " + d + "/tree/lib/t 2>/dev/null && echo LIB-RAN; cat /etc/hostname >/dev/null && echo runtime ok"},
		withGrants(t, fsGrants(rule(d+"/notes.txt", "rw")+","+rule(d+"/tool", "rx")+","+rule("/usr", "ro")+","+rule("/usr/bin", "ro")+","+
			rule(d+"/tree", "rx")+","+rule(d+"/tree/lib", "ro"))))
	r.mustExit(t, 0)
	if r.stdout != "tool ran\nbin ran\nruntime ok\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if b, _ := os.ReadFile(d + "/notes.txt"); string(b) != "new\n" {
		t.Errorf("the rw file holds %q", b)
	}
}

// TestPlanFSAtS4: at S4 a rule that would bind a host path, make /work
// executable or mask a path is refused; a plain ro rule on the runtime
// (a no-op) is not.
func TestPlanFSAtS4(t *testing.T) {
	d := hostDir(t)
	for _, tc := range []struct {
		js   string
		want string // "" when planned
	}{
		{fsGrants(rule(d, "ro")), "not bound at S4"},
		{fsGrants(rule("/work", "rwx")), "not applied at S4"},
		{fsGrants(rule("/usr", "ro"), "/usr/share/doc"), "not applied at S4"},
		{fsGrants(rule("/usr", "ro") + "," + rule("/work", "rw")), ""},
	} {
		gs, err := grant.Parse([]byte(tc.js))
		if err != nil {
			t.Fatal(err)
		}
		p, err := planFS(gs, tier.S4)
		switch {
		case tc.want == "" && (err != nil || len(p.mounts) != 0):
			t.Errorf("%s: planFS = %+v, %v; want an empty plan", tc.js, p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: planFS error %v, want one saying %q", tc.js, err, tc.want)
		}
	}
}

// TestFSGrantRootlessRefused: a rootless run never silently drops a
// granted host path: the grant is refused, naming the rule and what to do.
func TestFSGrantRootlessRefused(t *testing.T) {
	if asRootless(t) {
		return
	}
	r := sandboxed(t, []string{"true"}, withGrants(t, fsGrants(rule("/var/tmp", "ro"))))
	r.refused(t, "fs[0]: host paths are bound into the sandbox only when cordon runs as root")
}
