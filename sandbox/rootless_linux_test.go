package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/tier"
)

// rootlessUser is the unprivileged user, with subordinate ids, that the
// rootless tests run as when the suite runs as root (.ci/run creates it);
// CORDON_TEST_ROOTLESS_USER names another.
func rootlessUser() string {
	if u := os.Getenv("CORDON_TEST_ROOTLESS_USER"); u != "" {
		return u
	}
	return "cordontest"
}

// requireRoot skips a test that needs root when the suite does not run
// as root; as root it never skips.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: %s (uid %d)", why, os.Geteuid())
	}
}

// asRootless runs the named test of this package's test binary as the
// rootless user, when the suite runs as root, and fails t when it fails:
// the root pass checks the rootless sandbox too. It returns false when the
// caller already is that user (or another non-root one) and must run the
// test's body itself.
func asRootless(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	name := rootlessUser()
	u, err := user.Lookup(name)
	if err != nil {
		msg := fmt.Sprintf("the rootless tests run as user %q, with subordinate ids in /etc/subuid and /etc/subgid: %v "+
			"(.ci/run creates it; CORDON_TEST_ROOTLESS_USER names another)", name, err)
		if os.Getenv("CORDON_CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The test binary lives in a directory only root may enter: a copy
	// the user can execute, in a directory of its own.
	dir, err := os.MkdirTemp("", "cordon-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := copyFileErr(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid="+u.Uid, "--regid="+u.Gid, "--init-groups", "--reset-env",
		bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.HomeDir, "TMPDIR=" + tmp, "USER=" + name}
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	t.Logf("as %s (uid %s):\n%s", name, u.Uid, out)
	if err != nil {
		t.Fatalf("%s as %s: %v", t.Name(), name, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s did not pass as %s", t.Name(), name)
	}
	return true
}

func copyFileErr(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestRootless: as an unprivileged user the sandbox maps the caller's
// own id to init and its subordinate range above it, so the program runs
// as a host uid of that range, not the caller's; every other layer holds:
// a read-only runtime, no network, exec control, no capabilities,
// no_new_privs, seccomp and Landlock. As root, the test runs itself as
// the rootless user.
func TestRootless(t *testing.T) {
	if asRootless(t) {
		return
	}
	if err := Probe(tier.S2); err != nil {
		t.Fatalf("Probe(S2) as uid %d: %v", os.Geteuid(), err)
	}
	ids, err := callerIDs()
	if err != nil {
		t.Fatal(err)
	}
	script := `id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp|Groups):' /proc/self/status
for f in /etc/x /usr/x /x /proc/sys/kernel/hostname; do (echo x > $f) 2>/dev/null && echo "WROTE $f"; done
echo in > /work/w && cat /work/w
python3 -c '
import socket, errno
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2); print("CONNECTED")
except OSError as e: print("net", errno.errorcode.get(e.errno, e.errno))
'
uname 2>/dev/null && echo "RAN uname"
ls /proc/net/dev >/dev/null; tail -n +3 /proc/net/dev | cut -d: -f1
`
	grants := strings.Replace(testGrants, `{"name":"env"}`, `{"name":"env"},{"name":"grep"},{"name":"tail"},{"name":"cut"},{"name":"stat"}`, 1)
	r := sandboxed(t, []string{"sh", "-c", script}, withGrants(t, grants), withFiles(map[string]string{"in.txt": "staged\n"}), withInputs("in.txt"))
	r.mustExit(t, 0)
	want := fmt.Sprintf(`1000
1000
         0 %10d          1
         1 %10d      65535
         0 %10d          1
         1 %10d      65535
Groups:	 
CapEff:	0000000000000000
CapBnd:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
in
net EACCES
    lo
`, ids.uid, ids.subUID.start, ids.gid, ids.subGID.start)
	if r.stdout != want {
		t.Errorf("rootless run:\n got %q\nwant %q\nstderr %s", r.stdout, want, r.stderr)
	}
	if r.res.HostUID != ids.subUID.start+999 || r.res.HostUID == os.Geteuid() {
		t.Errorf("host uid %d, want %d (the subordinate range, not the caller's %d)", r.res.HostUID, ids.subUID.start+999, os.Geteuid())
	}
	if r.res.LandlockABI < 1 {
		t.Errorf("Landlock ABI %d", r.res.LandlockABI)
	}
	if r.res.CPUNanos <= 0 || r.res.PeakMemoryBytes <= 0 {
		t.Errorf("no resource accounting: cpu %d ns, peak %d bytes", r.res.CPUNanos, r.res.PeakMemoryBytes)
	}
	// Staged inputs belong to the program, and outputs come back.
	r = sandboxed(t, []string{"sh", "-c", "stat -c %u:%g in.txt; echo more >> in.txt; cp in.txt out.txt"}, withGrants(t, grants),
		withFiles(map[string]string{"in.txt": "staged\n"}), withInputs("in.txt"), withOutputs("out.txt"))
	r.mustExit(t, 0)
	if b, err := os.ReadFile(filepath.Join(r.ws, "out.txt")); err != nil || string(b) != "staged\nmore\n" || r.stdout != "1000:1000\n" {
		t.Errorf("staging rootless: stdout %q, output %q, %v; stderr %s", r.stdout, b, err, r.stderr)
	}
	// A program the grant set does not allow is refused.
	r = sandboxed(t, []string{"uname"})
	var ee *ExitError
	if !errors.As(r.err, &ee) || ee.Code != ExitRefused {
		t.Errorf("uname rootless: %v", r.err)
	}
	// The state directory is checked as root's is.
	r = sandboxed(t, []string{"true"}, func(s *Spec) {
		if err := os.Chmod(s.StateDir, 0o777); err != nil {
			t.Fatal(err)
		}
	})
	if !errors.As(r.err, &ee) || ee.Code != ExitRefused || !strings.Contains(r.err.Error(), "writable by nobody else") {
		t.Errorf("a state directory others may write: %v", r.err)
	}
	// S3 is not offered rootless.
	if err := Probe(tier.S3); err == nil || !strings.Contains(err.Error(), "root for S3") {
		t.Errorf("Probe(S3) rootless = %v", err)
	}
	for _, o := range Offers() {
		if o == tier.S3 {
			t.Errorf("Offers() rootless = %v", Offers())
		}
	}
}

// TestRootlessLimits: without a delegated cgroup v2 subtree a rootless
// run is refused when its grant set limits memory, and still limits its
// processes (RLIMIT_NPROC in its own user namespace).
func TestRootlessLimits(t *testing.T) {
	if asRootless(t) {
		return
	}
	if CgroupLimits() == nil {
		t.Skip("this host delegates a cgroup v2 subtree to the user: the runs have cgroup limits")
	}
	r := sandboxed(t, []string{"true"}, withGrants(t, strings.Replace(testGrants, `"confidential":false,`,
		`"confidential":false,"limits":{"memory_bytes":268435456},`, 1)))
	var ee *ExitError
	if !errors.As(r.err, &ee) || ee.Code != ExitRefused || !errors.Is(r.err, ErrUnavailable) ||
		!strings.Contains(r.err.Error(), "limits memory or CPU") {
		t.Errorf("a memory limit rootless without a cgroup: %v", r.err)
	}
	// 8 processes of the program's uid at most: sh and 7 children; the
	// eighth fork fails (and dash gives up).
	r = sandboxed(t, []string{"sh", "-c", `n=0; while [ $n -lt 20 ]; do sleep 5 & echo started; n=$((n+1)); done; wait`},
		withGrants(t, strings.Replace(testGrants, `"confidential":false,`, `"confidential":false,"limits":{"pids":8},`, 1)),
		withLimits(func(l *Limits) { l.PIDs = 8 }))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := strings.Count(r.stdout, "started"); n != 7 || !strings.Contains(r.stderr, "Cannot fork") {
		t.Errorf("20 processes under a pids limit of 8: %d started, exit %d, stderr %q", n, r.res.ExitCode, r.stderr)
	}
}

// TestRootlessHelpers: the id-mapping helpers are taken from their fixed
// paths only: a newuidmap first in the caller's PATH is never run, and a
// helper missing from its path refuses the run, naming it.
func TestRootlessHelpers(t *testing.T) {
	if asRootless(t) {
		return
	}
	if err := Probe(tier.S2); err != nil { // once per process: with the real helpers
		t.Fatal(err)
	}
	fake := t.TempDir()
	marker := filepath.Join(fake, "ran")
	for _, h := range []string{"newuidmap", "newgidmap"} {
		script := "#!/bin/sh\ntouch " + marker + "\nexit 1\n"
		if err := os.WriteFile(filepath.Join(fake, h), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", fake+":"+os.Getenv("PATH"))
	sandboxed(t, []string{"true"}).mustExit(t, 0)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the newuidmap in PATH ran")
	}

	old := idmapHelpers
	t.Cleanup(func() { idmapHelpers = old })
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", "/nonexistent/newuidmap", "/nonexistent/newuidmap: no such file or directory"},
		{"the caller's own", filepath.Join(fake, "newuidmap"), "must be owned by root"},
		{"not privileged", "/usr/bin/id", "neither set-user-ID root nor given file capabilities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idmapHelpers[0] = tc.path
			r := sandboxed(t, []string{"true"})
			if r.err == nil || !errors.Is(r.err, ErrUnavailable) || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("helper %s: %v, want %q", tc.path, r.err, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the fake helper ran")
			}
		})
	}
}

// TestRootlessSubordinateIDs: a caller whose subordinate range is absent,
// too small, or not its own alone is refused, never given a map of its
// own uid alone (init and the program would share it).
func TestRootlessSubordinateIDs(t *testing.T) {
	if asRootless(t) {
		return
	}
	// The probe reads the files once per process: first with the real ones.
	if err := Probe(tier.S2); err != nil {
		t.Fatal(err)
	}
	name := userName(os.Geteuid())
	dir := t.TempDir()
	oldSub, oldDB := subIDFiles, idDBFiles
	t.Cleanup(func() { subIDFiles, idDBFiles = oldSub, oldDB })
	idDBFiles = [2]string{filepath.Join(dir, "passwd"), filepath.Join(dir, "group")}
	for _, f := range idDBFiles {
		if err := os.WriteFile(f, []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, subuid, want string
	}{
		{"absent", "", "gives " + name},
		{"too small", name + ":300000:1000\n", "no range of 65536 ids"},
		{"overlaps another user's", name + ":300000:65536\nsomeone:360000:65536\n", "overlaps someone's"},
		{"contains root", name + ":0:65536\n", "contains id 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subIDFiles = [2]string{filepath.Join(dir, "subuid"), oldSub[1]}
			if err := os.WriteFile(subIDFiles[0], []byte(tc.subuid), 0o644); err != nil {
				t.Fatal(err)
			}
			r := sandboxed(t, []string{"true"})
			if r.err == nil || !errors.Is(r.err, ErrUnavailable) || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("subuid %q: %v, want %q", tc.subuid, r.err, tc.want)
			}
		})
	}
}

// TestKnownLimitationRootlessCountersAreTheCallers pins a documented
// limitation (docs/sandbox.md, Known limitations): rootless, the caller
// owns the run's user namespace, so a program that uses up its per-user
// counters uses up the caller's own, and the caller's other processes get
// EMFILE from inotify_init1 while it holds them (host root's are
// untouched: TestUcountsNotChargedToRoot, as root).
func TestKnownLimitationRootlessCountersAreTheCallers(t *testing.T) {
	if asRootless(t) {
		return
	}
	h := startHog(t, newEscapeSpec(t))
	if owner := nsOwner(t, h.sb.proc.pid()); owner != os.Geteuid() {
		t.Errorf("the run's user namespace is owned by host uid %d, want the caller's %d", owner, os.Geteuid())
	}
	// The caller's other processes (other test binaries, as this uid) may
	// close inotify instances while the hog holds the rest: then the
	// probe takes the freed one, and the hog tops up and it tries again.
	for try := 1; ; try++ {
		got := hostProbe(t, 0) // 0: as this process's own uid
		if strings.Contains(got, "inotify EMFILE\n") {
			break
		}
		if try == 5 {
			t.Fatalf("the caller while a rootless run holds its inotify instances (%d tries):\n%s\nwant inotify EMFILE (the limitation this test pins)", try, got)
		}
		h.topUp(t)
	}
	h.finish(t)
	if got := hostProbe(t, 0); !strings.Contains(got, "inotify ok\n") {
		t.Errorf("the caller after the run:\n%s", got)
	}
}
