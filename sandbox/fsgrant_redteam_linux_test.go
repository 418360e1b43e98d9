package sandbox

// Regression tests for the red team's findings on fs grants
// (redteam/fs/README.md on branch redteam-fs, F1-F7).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/sandbox/exechash"
)

// TestFSGrantNarrowerBeneathWritableRefused (F1): a deny.fs path, or a
// rule that grants less, beneath a writable bind cannot hold (the program
// renames the parent and recreates the path), so the grant set is
// refused with both rules named; a wider rule beneath one is fine.
func TestFSGrantNarrowerBeneathWritableRefused(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/proj/.git/config", "[core]\n", 0o666)
	mkdirMode(t, d+"/proj/.git/hooks", 0o777)
	mkdirMode(t, d+"/proj", 0o777)
	mkdirMode(t, d+"/proj/.git", 0o777)
	attack := "cd " + d + "/proj && mv .git .git-old && mkdir -p .git/hooks && echo pwned > .git/config && echo pwned > .git/hooks/pre-commit"
	for _, tc := range []struct {
		fs   string
		deny []string
		want []string
	}{
		{rule(d+"/proj", "rw"), []string{d + "/proj/.git/config"}, []string{"deny.fs[0]", "fs[0] (rw " + d + "/proj)"}},
		{rule(d+"/proj", "rw"), []string{d + "/proj/.git/absent"}, []string{"deny.fs[0]", "fs[0]"}},
		{rule(d+"/proj", "rw") + "," + rule(d+"/proj/.git/hooks", "ro"), nil, []string{"fs[1] (ro " + d + "/proj/.git/hooks)", "fs[0] (rw " + d + "/proj)"}},
		{rule(d+"/proj/.git/hooks", "rx") + "," + rule(d+"/proj", "rwx"), nil, []string{"fs[0] (rx", "fs[1] (rwx"}},
		{rule(d+"/proj", "rwx") + "," + rule(d+"/proj/.git", "rw"), nil, []string{"fs[1] (rw", "fs[0] (rwx"}},
	} {
		r := sandboxed(t, []string{"sh", "-c", attack}, withGrants(t, fsGrants(tc.fs, tc.deny...)))
		r.refused(t, tc.want...)
	}
	if b, _ := os.ReadFile(d + "/proj/.git/config"); string(b) != "[core]\n" {
		t.Errorf("the denied host file holds %q", b)
	}
	// A wider rule beneath a writable one holds: it is a mount point.
	r := sandboxed(t, []string{"sh", "-c", "echo ok"}, withGrants(t, fsGrants(rule(d+"/proj", "rw")+","+rule(d+"/proj/.git/hooks", "rwx"))))
	r.mustExit(t, 0)
}

// TestFSGrantMaskReportedOnlyWhenApplied (F1): a deny.fs path that is
// not there, or not shown inside, is not reported as masked; one that is
// (a host file beneath a bind, a file of the sandbox's own /etc), is.
func TestFSGrantMaskReportedOnlyWhenApplied(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	writeFile(t, d+"/secret", "s\n", 0o644)
	var mounts []Mount
	r := sandboxed(t, []string{"sh", "-c", "cat " + d + "/secret /etc/hosts 2>/dev/null; echo end"},
		withGrants(t, fsGrants(rule(d, "ro"), d+"/absent", d+"/secret", "/home/nobody-here/x", "/etc/hosts")), withMounted(&mounts))
	r.mustExit(t, 0)
	if r.stdout != "end\n" {
		t.Errorf("stdout %q: the denied file was read", r.stdout)
	}
	want := []Mount{{Kind: "bind", Path: d, Access: "ro", Rule: "fs[0]"}, {Kind: "mask", Path: d + "/secret", Rule: "deny.fs[1]"},
		{Kind: "mask", Path: "/etc/hosts", Rule: "deny.fs[3]"}}
	if !slices.Equal(mounts, want) {
		t.Errorf("Mounted got %+v\nwant %+v", mounts, want)
	}
}

// b3Of is the content hash of the file at p.
func b3Of(t *testing.T, p string) string {
	t.Helper()
	id, err := exechash.New(1).Sum(p)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// TestFSGrantExecDenyInRuntimeBind (F2, F7): exec.deny holds inside an
// rx bind over a runtime directory (the denied file is masked, whatever
// name runs it), a single runtime file granted rx with a denied hash is
// refused, and a denied file without execute bits (which ld.so would run)
// is masked too.
func TestFSGrantExecDenyInRuntimeBind(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	idPath, err := filepath.EvalSymlinks("/usr/bin/id")
	if err != nil {
		t.Fatal(err)
	}
	idHash := b3Of(t, idPath)
	gs := func(fs string) string {
		return `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"sh"}],"deny":["` + idHash + `"]},"fs":[` + fs + `]}`
	}
	var mounts []Mount
	r := sandboxed(t, []string{"sh", "-c", "id; " + idPath + "; echo end"}, withGrants(t, gs(rule(filepath.Dir(idPath), "rx"))), withMounted(&mounts))
	r.mustExit(t, 0)
	if r.stdout != "end\n" {
		t.Errorf("stdout %q: the denied id ran", r.stdout)
	}
	if !slices.Contains(mounts, Mount{Kind: "mask", Path: idPath, Rule: "exec.deny[0]"}) {
		t.Errorf("no exec.deny mask for %s in %+v", idPath, mounts)
	}
	r = sandboxed(t, []string{"sh", "-c", "id"}, withGrants(t, gs(rule(idPath, "rx"))))
	r.refused(t, "fs[0]", idPath, "exec.deny[0]")

	d := hostDir(t)
	copyFile(t, idPath, d+"/t7/bin/id644", 0o644)
	ld, err := filepath.EvalSymlinks("/lib64/ld-linux-x86-64.so.2")
	if err != nil {
		t.Skipf("no x86-64 loader: %v", err)
	}
	mounts = nil
	r = sandboxed(t, []string{"sh", "-c", ld + " " + d + "/t7/bin/id644; echo end"}, withGrants(t, gs(rule(d+"/t7", "rx"))), withMounted(&mounts))
	r.mustExit(t, 0)
	if strings.Contains(r.stdout, "uid=") {
		t.Errorf("stdout %q: the denied file ran through the loader", r.stdout)
	}
	if !slices.Contains(mounts, Mount{Kind: "mask", Path: d + "/t7/bin/id644", Rule: "exec.deny[0]"}) {
		t.Errorf("no exec.deny mask for the 0644 copy in %+v", mounts)
	}
}

// TestFSGrantSubmountNotBound (F3): a host procfs mounted beneath a
// granted path does not come along: the program sees the directory it
// covers on the host (empty here).
func TestFSGrantSubmountNotBound(t *testing.T) {
	requireRoot(t, "mounts a procfs beneath a granted directory")
	d := hostDir(t)
	writeFile(t, d+"/chroot/etc/marker", "m\n", 0o644)
	mkdirMode(t, d+"/chroot/proc", 0o755)
	if err := unix.Mount("proc", d+"/chroot/proc", "proc", 0, ""); err != nil {
		t.Fatalf("mounting proc: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(d+"/chroot/proc", unix.MNT_DETACH) })
	if _, err := os.Stat(d + "/chroot/proc/1/cmdline"); err != nil {
		t.Fatalf("the host procfs is not there: %v", err)
	}
	r := sandboxed(t, []string{"sh", "-c", "cat " + d + "/chroot/etc/marker; ls -A " + d + "/chroot/proc; cat " + d + "/chroot/proc/1/cmdline 2>/dev/null && echo HOST-PROC; echo end"},
		withGrants(t, fsGrants(rule(d+"/chroot", "ro"))))
	r.mustExit(t, 0)
	if r.stdout != "m\nend\n" {
		t.Errorf("stdout %q, want the marker and an empty proc directory", r.stdout)
	}
	// Granted directly, the procfs mount is refused, named by its rule.
	r = sandboxed(t, []string{"true"}, withGrants(t, fsGrants(rule(d+"/chroot/proc", "ro"))))
	r.refused(t, "fs[0]", "on a proc file system")
}

// TestFSGrantSocketDirsRefused (F4): /run and /var/run hold host
// services' unix sockets, which a bind of any access makes connectable.
func TestFSGrantSocketDirsRefused(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	for _, p := range []string{"/run", "/run/user", "/var/run"} {
		r := sandboxed(t, []string{"true"}, withGrants(t, fsGrants(rule(p, "ro"))))
		r.refused(t, "fs[0]")
	}
	r := sandboxed(t, []string{"true"}, withGrants(t, fsGrants(rule("/run", "ro"))))
	r.refused(t, "beneath /run", "unix sockets")
}

// TestFSGrantNoSetIDOnHost (F5): through an rw bind the program cannot
// make a set-user-ID or set-group-ID file (or set-group-ID directory) on
// the host.
func TestFSGrantNoSetIDOnHost(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	mkdirMode(t, d+"/rw", 0o777)
	script := fmt.Sprintf(`D=%s/rw
cp /usr/bin/true $D/s
chmod 4755 $D/s 2>/dev/null && echo CHMOD-SUID
chmod 2755 $D/s 2>/dev/null && echo CHMOD-SGID
mkdir -m 2775 $D/dir 2>/dev/null && echo MKDIR-SGID
python3 -c 'import os; os.close(os.open("'$D'/o", os.O_CREAT|os.O_WRONLY, 0o4755))' 2>/dev/null && echo OPEN-SUID
chmod 755 $D/s && echo plain chmod
echo end
`, d)
	r := sandboxed(t, []string{"sh", "-c", script}, withGrants(t, fsGrants(rule(d+"/rw", "rw"))))
	r.mustExit(t, 0)
	if r.stdout != "plain chmod\nend\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	for _, f := range []string{"s", "dir", "o"} {
		if fi, err := os.Stat(d + "/rw/" + f); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s on the host is %v", f, fi.Mode())
		}
	}
}

// TestFSGrantFIFONamedLikeProgram (F6): a FIFO where cordon looks up an
// allowed program is refused at once, not waited on.
func TestFSGrantFIFONamedLikeProgram(t *testing.T) {
	requireRoot(t, "host paths are bound into the sandbox as root")
	d := hostDir(t)
	mkdirMode(t, d+"/t6/bin", 0o755)
	if err := unix.Mkfifo(d+"/t6/bin/prog", 0o777); err != nil {
		t.Fatal(err)
	}
	js := `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"prog"},{"name":"sh"}],"deny":["` + b3Of(t, "/usr/bin/true") + `"]},"fs":[` + rule(d+"/t6", "rx") + `]}`
	for _, argv := range [][]string{{"prog"}, {"sh", "-c", "true"}} {
		done := make(chan outcome, 1)
		go func() { done <- sandboxed(t, argv, withGrants(t, js)) }()
		select {
		case r := <-done:
			var ee *ExitError
			if argv[0] == "prog" && (!errors.As(r.err, &ee) || !strings.Contains(r.err.Error(), "not a regular file")) {
				t.Errorf("%v: Run = %v, want a refusal saying the FIFO is not a regular file", argv, r.err)
			}
		case <-time.After(20 * time.Second):
			// Unblock the open so that the goroutine ends.
			if f, err := os.OpenFile(d+"/t6/bin/prog", os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			<-done
			t.Fatalf("%v: cordon hung on the FIFO", argv)
		}
	}
}
