package sandbox

// Red-team tests of prepared sandboxes (warm pools; docs/security/redteam-pool.md).
// Each asserts the secure behaviour: a test that fails here is an attack
// that succeeded.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
)

// rtSpec is a prepared spec for the grant set js.
func rtSpec(t *testing.T, js string) *Spec {
	t.Helper()
	gs, err := grant.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{Grants: gs, Tier: tier.S2, StateDir: t.TempDir(), Limits: DefaultLimits()}
	s.Limits.Wall = 30 * time.Second
	s.Limits.CgroupOptional = true
	return s
}

// rtWarm prepares a sandbox for js, calls between (the attacker's window
// while the slot is parked), then starts argv in it.
func rtWarm(t *testing.T, js string, argv []string, between func(p *Prepared)) (outcome, *Result) {
	t.Helper()
	ctx := context.Background()
	p, err := Prepare(ctx, rtSpec(t, js))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	if between != nil {
		between(p)
	}
	var out, errb bytes.Buffer
	o := outcome{}
	if err := p.Start(ctx, &Launch{Argv: argv, Workspace: t.TempDir(), Stdout: &out, Stderr: &errb}); err != nil {
		o.err = err
		return o, nil
	}
	res, err := p.Wait()
	o.res, o.err, o.stdout, o.stderr = res, err, out.String(), errb.String()
	return o, res
}

// TestRedteamPreparedDenyFSCreatedWhileParked: a deny.fs path beneath a
// granted tree that appears on the host after the slot was prepared (but
// before it is claimed) must be hidden from the warm run, as a cold run
// started at the claim hides it. The masks are applied when the root is
// built: in a cold run milliseconds before the program, in a prepared
// one up to --max-idle (10 min) before.
func TestRedteamPreparedDenyFSCreatedWhileParked(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	js := fsGrants(rule(d, "ro"), d+"/secret")
	argv := []string{"sh", "-c", "cat " + d + "/secret 2>/dev/null; echo end"}

	warm, _ := rtWarm(t, js, argv, func(*Prepared) {
		writeFile(t, d+"/secret", "s3cret\n", 0o644)
	})
	if warm.err != nil {
		t.Fatalf("warm run: %v (stderr %s)", warm.err, warm.stderr)
	}
	cold := sandboxed(t, argv, withGrants(t, js))
	cold.mustExit(t, 0)
	if cold.stdout != "end\n" {
		t.Fatalf("cold run read the denied file: %q", cold.stdout)
	}
	if warm.stdout != cold.stdout {
		t.Errorf("FINDING: the warm run read a deny.fs file created while its slot was parked: stdout %q, cold %q", warm.stdout, cold.stdout)
	}
}

// TestRedteamPreparedProgramSwappedWhileParked: when the grant set pins
// no hash, a prepared slot binds the allowed names' files executable at
// Prepare (the inode of that moment), while Start resolves and hashes the
// program from the host's current path. A program replaced (renamed
// over, as a package upgrade does) while the slot is parked must not run
// bytes other than those whose hash the run records (Result.Program.B3,
// the decision in the journal).
func TestRedteamPreparedProgramSwappedWhileParked(t *testing.T) {
	requireRoot(t, "writes a uniquely named program to /usr/local/bin")
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	name := "cordon-rt-" + hex.EncodeToString(rb[:])
	path := "/usr/local/bin/" + name
	if err := os.MkdirAll("/usr/local/bin", 0o755); err != nil {
		t.Fatal(err)
	}
	copyExe := func(src, dst string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		tmp := dst + ".new"
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			t.Fatal(err)
		}
	}
	copyExe("/usr/bin/true", path)
	t.Cleanup(func() { os.Remove(path); os.Remove(path + ".new") })
	js := strings.Replace(testGrants, `{"name":"env"}`, `{"name":"env"},{"name":"`+name+`"}`, 1)

	warm, res := rtWarm(t, js, []string{name}, func(*Prepared) {
		copyExe("/usr/bin/false", path) // the "upgrade": another file at the same path
	})
	if res == nil {
		// Refused or not executable (the file bind made at Prepare is
		// dropped when its dentry is replaced, and the new file lies in a
		// noexec directory): fail closed. Held.
		var ee *ExitError
		if !errors.As(warm.err, &ee) || ee.Code == 0 {
			t.Fatalf("warm run: %v", warm.err)
		}
		return
	}
	falseB3 := b3Of(t, "/usr/bin/false")
	if res.Program.B3.String() != falseB3 {
		t.Fatalf("the run recorded %s, not the hash of the program at Start (%s)", res.Program.B3, falseB3)
	}
	if res.ExitCode != 1 {
		t.Errorf("FINDING: the run records the hash of %s as it was at the claim (false, exit 1) but ran the bytes bound at Prepare (exit %d)", path, res.ExitCode)
	}
}

// TestRedteamPreparedProgramUpgradedWhileParked: a program upgraded
// on the host (renamed over) while a slot is parked is refused at the
// claim as not executable (126): fail closed, but the claim fails where
// a cold run succeeds, for every parked slot, for up to --max-idle; the
// pool does not evict the stale slot and retry. (Availability.)
func TestRedteamPreparedProgramUpgradedWhileParked(t *testing.T) {
	requireRoot(t, "writes a uniquely named program to /usr/local/bin")
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	name := "cordon-rt-" + hex.EncodeToString(rb[:])
	path := "/usr/local/bin/" + name
	b, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	install := func() {
		t.Helper()
		if err := os.WriteFile(path+".new", b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	install()
	t.Cleanup(func() { os.Remove(path); os.Remove(path + ".new") })
	js := strings.Replace(testGrants, `{"name":"env"}`, `{"name":"env"},{"name":"`+name+`"}`, 1)
	warm, res := rtWarm(t, js, []string{name}, func(*Prepared) { install() }) // same bytes, new inode
	cold := sandboxed(t, []string{name}, withGrants(t, js))
	cold.mustExit(t, 0)
	if res == nil || res.ExitCode != 0 {
		t.Errorf("FINDING (availability): a program reinstalled while the slot was parked fails warm (%v) where it runs cold", warm.err)
	}
}

// TestRedteamPreparedMaskedFileReplacedWhileParked: a deny.fs file that
// exists when the slot is prepared is masked (/dev/null bound over it).
// If the host replaces the file while the slot is parked the way editors
// and package managers do (write a new file, rename it over the old), the
// mask must still hide it from the warm run. The kernel drops a mount
// whose dentry is unlinked or renamed over in another mount namespace,
// so the mask made at Prepare may silently go.
func TestRedteamPreparedMaskedFileReplacedWhileParked(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/secret", "old\n", 0o644)
	js := fsGrants(rule(d, "ro"), d+"/secret")
	argv := []string{"sh", "-c", "cat " + d + "/secret 2>/dev/null; echo end"}
	warm, _ := rtWarm(t, js, argv, func(*Prepared) {
		writeFile(t, d+"/secret.new", "s3cret\n", 0o644)
		if err := os.Rename(d+"/secret.new", d+"/secret"); err != nil {
			t.Fatal(err)
		}
	})
	if warm.err != nil {
		return // refused: fail closed
	}
	if warm.stdout != "end\n" {
		t.Errorf("FINDING: the warm run read a deny.fs file replaced (renamed over) while its slot was parked: stdout %q", warm.stdout)
	}
}

// TestRedteamPreparedMaskedDirReplacedWhileParked: a deny.fs directory
// masked at Prepare (an empty tmpfs over it) that the host moves aside
// and recreates while the slot is parked (a checkout, an extraction)
// must still be hidden: the mask follows the moved dentry, not the name.
func TestRedteamPreparedMaskedDirReplacedWhileParked(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	mkdirMode(t, d+"/keys", 0o755)
	writeFile(t, d+"/keys/k", "old\n", 0o644)
	js := fsGrants(rule(d, "ro"), d+"/keys")
	argv := []string{"sh", "-c", "cat " + d + "/keys/k 2>/dev/null; echo end"}
	warm, _ := rtWarm(t, js, argv, func(*Prepared) {
		if err := os.Rename(d+"/keys", d+"/keys.old"); err != nil {
			t.Fatal(err)
		}
		mkdirMode(t, d+"/keys", 0o755)
		writeFile(t, d+"/keys/k", "s3cret\n", 0o644)
	})
	if warm.err != nil {
		return // refused: fail closed
	}
	if warm.stdout != "end\n" {
		t.Errorf("FINDING: the warm run read a deny.fs directory recreated while its slot was parked: stdout %q", warm.stdout)
	}
}

// TestRedteamColdMaskedFileReplacedDuringRun is the same replacement
// during a cold run (control: not specific to pools, but it says whether
// the warm finding above is only a longer window).
func TestRedteamColdMaskedFileReplacedDuringRun(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/secret", "old\n", 0o644)
	js := fsGrants(rule(d, "ro"), d+"/secret")
	go func() {
		time.Sleep(300 * time.Millisecond)
		writeFile(t, d+"/secret.new", "s3cret\n", 0o644)
		_ = os.Rename(d+"/secret.new", d+"/secret")
	}()
	r := sandboxed(t, []string{"sh", "-c", "sleep 1; cat " + d + "/secret 2>/dev/null; echo end"}, withGrants(t, js))
	r.mustExit(t, 0)
	if r.stdout != "end\n" {
		t.Errorf("FINDING: a cold run read a deny.fs file replaced (renamed over) while it ran: stdout %q", r.stdout)
	}
}

// rtProbe prints what a program is given: credentials, capabilities,
// no_new_privs, seccomp, rlimits, mounts (point and options), the
// environment and the cgroup.
const rtProbe = `while IFS= read -r l; do case "$l" in Uid*|Gid*|Groups*|Cap*|NoNewPrivs*|Seccomp*) echo "$l";; esac; done < /proc/self/status
for o in -c -d -f -l -n -s -t -u -v; do echo "ulimit $o $(ulimit $o 2>&1)"; done
while read -r _ _ _ _ mp opts _; do echo "mount $mp $opts"; done < /proc/self/mountinfo
env
while IFS= read -r l; do echo "cgroup $l"; done < /proc/self/cgroup
echo "pwd $(pwd) umask $(umask)"
for f in /proc/self/fd/*; do echo "fd $f"; done
cat /proc/1/environ >/dev/null 2>&1 && echo "init environ readable"
ls /proc/1/fd >/dev/null 2>&1 && echo "init fds listable"
kill -0 1 2>/dev/null && echo "init signalable"
for p in /bin/sh /usr/bin/cat /usr/bin/tail /usr/bin/id /usr/bin/env /usr/bin/python3 /usr/bin/perl /usr/bin/grep; do if [ -x "$p" ]; then echo "x $p"; fi; done`

// TestRedteamPreparedSamePolicyAsCold: the same probe, cold and warm,
// sees the same credentials, capabilities, seccomp, rlimits, mounts,
// environment and cgroup: nothing of the policy differs with the way the
// sandbox was started. (The hostname is the run's and the mount IDs
// differ; neither is printed.)
func TestRedteamPreparedSamePolicyAsCold(t *testing.T) {
	argv := []string{"sh", "-c", rtProbe}
	cold := sandboxed(t, argv)
	cold.mustExit(t, 0)
	warm, res := rtWarm(t, testGrants, argv, nil)
	if warm.err != nil || res.ExitCode != 0 {
		t.Fatalf("warm probe: %v, %+v, stderr %s", warm.err, res, warm.stderr)
	}
	t.Logf("warm probe:\n%s", warm.stdout)
	norm := func(s string) string {
		s = regexp.MustCompile(`HOSTNAME=\S*`).ReplaceAllString(s, "HOSTNAME=*")
		lines := strings.Split(s, "\n")
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}
	c, w := norm(cold.stdout), norm(warm.stdout)
	if c != w {
		cl, wl := map[string]bool{}, map[string]bool{}
		for _, l := range strings.Split(c, "\n") {
			cl[l] = true
		}
		for _, l := range strings.Split(w, "\n") {
			wl[l] = true
		}
		for l := range cl {
			if !wl[l] {
				t.Errorf("cold only: %s", l)
			}
		}
		for l := range wl {
			if !cl[l] {
				t.Errorf("warm only: %s", l)
			}
		}
	}
}

// TestRedteamPreparedEnvLikeCold: the launch's environment is decided as
// a cold run's: the variables a cold run refuses (the loader's) are
// refused warm, and one with a newline or '=' in its name cannot smuggle
// a second variable into the launch line.
func TestRedteamPreparedEnvLikeCold(t *testing.T) {
	ctx := context.Background()
	for _, env := range []map[string]string{
		{"LD_PRELOAD": "/tmp/evil.so"},
		{"LD_LIBRARY_PATH": "/tmp"},
		{"A\nLD_PRELOAD": "x"},
		{"A=B": "x"},
		{"A": "x\x00LD_PRELOAD=/tmp/evil.so"},
	} {
		s := rtSpec(t, testGrants)
		cs := *s
		cs.Argv, cs.Env, cs.Workspace = []string{"env"}, env, t.TempDir()
		var cout bytes.Buffer
		cs.Stdout, cs.Stderr = &cout, io.Discard
		cres, cerr := Run(ctx, &cs)
		p, err := Prepare(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		var wout bytes.Buffer
		werr := p.Start(ctx, &Launch{Argv: []string{"env"}, Env: env, Workspace: t.TempDir(), Stdout: &wout, Stderr: io.Discard})
		var wres *Result
		if werr == nil {
			wres, werr = p.Wait()
		}
		p.Destroy()
		if (cerr == nil) != (werr == nil) {
			t.Errorf("env %q: cold %v, warm %v", env, cerr, werr)
			continue
		}
		if cerr == nil && (cres.ExitCode != wres.ExitCode || strings.Contains(wout.String(), "LD_PRELOAD") != strings.Contains(cout.String(), "LD_PRELOAD")) {
			t.Errorf("env %q: cold exit %d %q, warm exit %d %q", env, cres.ExitCode, cout.String(), wres.ExitCode, wout.String())
		}
		if strings.Contains(wout.String(), "LD_PRELOAD=") {
			t.Errorf("FINDING: env %q put LD_PRELOAD in the warm program's environment: %q", env, wout.String())
		}
	}
}

// TestRedteamPreparedStoppedInitRefused: an init stopped (SIGSTOP by the
// host user, or a debugger) while parked cannot run a program: Check
// must refuse the slot so that the pool evicts it, rather than hand it
// to a claim that then hangs until the wall clock.
func TestRedteamPreparedStoppedInitRefused(t *testing.T) {
	ctx := context.Background()
	p, err := Prepare(ctx, rtSpec(t, testGrants))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	if err := syscall.Kill(p.InitPID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(p.InitPID(), syscall.SIGCONT)
	time.Sleep(50 * time.Millisecond)
	if err := p.Check(); err == nil {
		t.Errorf("FINDING: Check passes a prepared sandbox whose init is stopped")
	}
}

// TestRedteamPreparedLaunchArgvHostile: argv with NULs, newlines and a
// large size cannot break the launch line (one JSON line to init): the
// run is refused or the program receives exactly the arguments given.
func TestRedteamPreparedLaunchArgvHostile(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("A", 2<<20) // over init's 1 MiB launch line
	for _, argv := range [][]string{
		{"echo", "a\nb", `"}` + "\n" + `{"argv":["id"]}`},
		{"echo", "x\x00y"},
		{"echo", big},
	} {
		p, err := Prepare(ctx, rtSpec(t, testGrants))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = p.Start(ctx, &Launch{Argv: argv, Workspace: t.TempDir(), Stdout: &out, Stderr: io.Discard})
		var res *Result
		if err == nil {
			res, err = p.Wait()
		}
		p.Destroy()
		if err != nil {
			continue // refused: held
		}
		want := strings.Join(argv[1:], " ") + "\n"
		if res.ExitCode == 0 && out.String() != want {
			t.Errorf("argv %.40q: the program printed %.80q, want the arguments", argv, out.String())
		}
	}
}
