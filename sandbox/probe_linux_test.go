package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/tier"
)

// TestProbeNamesEveryMissingFacility: a host without any facility gets
// one refusal naming each of them, never a partial sandbox.
func TestProbeNamesEveryMissingFacility(t *testing.T) {
	none := facilities{
		stat:     func(string) error { return fs.ErrNotExist },
		readFile: func(p string) ([]byte, error) { return []byte("0\n"), nil },
		euid:     1000,
		seccomp:  func() error { return errors.New("seccomp filter mode unavailable") },
		landlock: func() (int, error) { return 0, errors.New("Landlock: function not implemented") },
		cgroups:  func() error { return errors.New("cgroup: missing controllers: memory, pids") },
		helper:   func(p string) error { return fmt.Errorf("%s: %w", p, fs.ErrNotExist) },
		writable: func(string) error { return fs.ErrPermission },
		egid:     1000,
		user:     "alice",
	}
	got := strings.Join(none.missing(), "\n")
	for _, want := range []string{
		"user namespaces", "mnt namespaces", "pid namespaces", "net namespaces", "ipc namespaces",
		"uts namespaces", "cgroup namespaces", "user.max_user_namespaces is 0", "seccomp", "Landlock",
		"procfs", "unprivileged user namespaces (kernel.unprivileged_userns_clone is 0)",
		"the id-mapping helper newuidmap (/usr/bin/newuidmap: file does not exist)",
		"the id-mapping helper newgidmap (/usr/bin/newgidmap: file does not exist)",
		"subordinate ids (/etc/subuid: line 1 is malformed", "subordinate ids (/etc/subgid: line 1 is malformed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing facilities do not name %q:\n%s", want, got)
		}
	}
	none.euid = 0
	if got := strings.Join(none.missing(), "\n"); !strings.Contains(got, "cgroups (missing controllers: memory, pids)") ||
		strings.Contains(got, "subordinate") || strings.Contains(got, "newuidmap") {
		t.Errorf("as root, missing facilities:\n%s", got)
	}
	// This host's facilities as root (TestProbeThisHost probes the real
	// ones), less Landlock.
	one := hostFacilities()
	one.euid, one.cgroups = 0, func() error { return nil }
	one.landlock = none.landlock
	if m := one.missing(); len(m) != 1 || !strings.Contains(m[0], "Landlock") {
		t.Errorf("one missing facility: %q", m)
	}
}

// TestProbeRootless: a non-root caller is told exactly what running
// rootless lacks; a delegated cgroup is not among it (CgroupLimits).
func TestProbeRootless(t *testing.T) {
	files := map[string]string{
		"/etc/subuid":  "bob:100000:65536\nalice:165536:1000\n1000:200000:65536\n",
		"/etc/subgid":  "alice:100000:65536\n",
		"/etc/passwd":  "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n",
		"/etc/group":   "root:x:0:\nalice:x:1000:\n",
		"/proc/self/a": "",
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n",
	}
	h := facilities{
		euid: 1000, egid: 1001, user: "alice",
		readFile: func(p string) ([]byte, error) {
			if b, ok := files[p]; ok {
				return []byte(b), nil
			}
			return nil, fs.ErrNotExist
		},
		helper: func(string) error { return nil },
	}
	want := []string{"unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns is 1)"}
	if got := h.rootlessMissing(); !slices.Equal(got, want) {
		t.Errorf("ranges by uid and name:\n got %q\nwant %q", got, want)
	}
	files["/etc/subuid"] = "bob:100000:65536\n1000:150000:65536\n"
	got := strings.Join(h.rootlessMissing(), "\n")
	if !strings.Contains(got, "subordinate ids (/etc/subuid: the range of alice (line 2, 150000:65536) overlaps bob's (line 1, 100000:65536)") {
		t.Errorf("an overlapping range:\n%s", got)
	}
	// /etc/subgid names the user too, and the range must not hold the
	// caller's own gid.
	files["/etc/subuid"] = "alice:100000:65536\n"
	files["/etc/subgid"] = "alice:1001:65536\n"
	if got := strings.Join(h.rootlessMissing(), "\n"); !strings.Contains(got, "/etc/subgid line 1: the range 1001:65536 contains alice's own id 1001") {
		t.Errorf("a subgid range holding the caller's gid:\n%s", got)
	}
	delete(files, "/etc/subgid")
	files["/etc/subuid"] = "alice:1000:65536\n"
	got = strings.Join(h.rootlessMissing(), "\n")
	for _, w := range []string{
		"/etc/subuid line 1: the range 1000:65536 contains alice's own id 1000",
		"subordinate ids (no subordinate ids for alice (1000): file does not exist; add a line \"alice:START:65536\" to /etc/subgid",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q:\n%s", w, got)
		}
	}
}

// TestSubordinate: the caller's range is its first entry of 65536 ids or
// more, by name or uid, and must be its alone.
func TestSubordinate(t *testing.T) {
	for _, tc := range []struct {
		name, subuid, passwd string
		want                 int
		err                  string
	}{
		{"by name", "alice:100000:65536\n", "", 100000, ""},
		{"by uid", "1000:100000:70000\n", "", 100000, ""},
		{"first big enough", "alice:100000:10\nalice:200000:65536\n", "", 200000, ""},
		{"comments and blank lines", "# x\n\nalice:100000:65536\n", "", 100000, ""},
		{"another's", "bob:100000:65536\n", "", 0, "no range of 65536 ids"},
		{"malformed", "alice:100000\n", "", 0, "line 1 is malformed"},
		{"negative", "alice:-1:65536\n", "", 0, "line 1 is malformed"},
		{"beyond 32 bits", "alice:4294967000:65536\n", "", 0, "line 1 is malformed"},
		{"overlap", "alice:100000:65536\nbob:165534:10\n", "", 0, "overlaps bob's"},
		{"touching is fine", "alice:100000:65536\nbob:165535:10\n", "", 100000, ""},
		{"an account's id", "alice:100000:65536\n", "svc:x:120000:120000::/:/bin/sh\n", 0, `contains the id 120000 of "svc"`},
		{"root", "alice:0:65536\n", "", 0, "contains id 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"sub": tc.subuid, "db": "root:x:0:0::/:/bin/sh\n" + tc.passwd}
			read := func(p string) ([]byte, error) { return []byte(files[p]), nil }
			got, err := subordinate(read, "sub", "db", 1000, "alice", 1000)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("subordinate = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != (subRange{tc.want, rangeSize - 1}) {
				t.Fatalf("subordinate = %v, %v; want start %d", got, err, tc.want)
			}
		})
	}
}

// TestCheckHelper: only a root-owned, privileged helper in root-owned
// directories passes.
func TestCheckHelper(t *testing.T) {
	for _, h := range idmapHelpers {
		if err := checkHelper(h); err != nil {
			t.Errorf("checkHelper(%s): %v", h, err)
		}
	}
	dir := t.TempDir()
	own := filepath.Join(dir, "newuidmap")
	if err := os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(own, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(idmapHelpers[0], link); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		own:               "must be owned by root",
		link:              "not a regular file",
		"/usr/bin/id":     "neither set-user-ID root nor given file capabilities",
		"/nonexistent/xy": "no such file or directory",
	} {
		if os.Geteuid() == 0 && p == own {
			want = "its directory " + dir + " must be owned by root" // root owns the file; t.TempDir's parent is sticky-writable
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		if err := checkHelper(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkHelper(%s) = %v, want %q", p, err, want)
		}
	}
}

// TestProbeThisHost: CI and this machine have every facility; a probe
// failure here is a failure, never a skip. As a non-root user (with the
// subordinate ids CI gives it) S2 is offered and S3 refused, naming why.
func TestProbeThisHost(t *testing.T) {
	if os.Geteuid() != 0 {
		if err := Probe(tier.S2); err != nil {
			t.Errorf("Probe(S2) as uid %d: %v", os.Geteuid(), err)
		}
		if err := Probe(tier.S3); err == nil || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), s3Rootless) {
			t.Errorf("Probe(S3) as uid %d = %v, want the rootless refusal", os.Geteuid(), err)
		}
		if got := Offers(); !slices.Contains(got, tier.S2) || slices.Contains(got, tier.S3) {
			t.Errorf("Offers() as uid %d = %v, want S2 and not S3", os.Geteuid(), got)
		}
		return
	}
	for _, tr := range []tier.Tier{tier.S2, tier.S3} {
		if err := Probe(tr); err != nil {
			t.Errorf("Probe(%s): %v", tr, err)
		}
	}
	if err := Probe(tier.S1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Probe(S1) = %v, want ErrUnavailable", err)
	}
	want := 2
	if Probe(tier.S4) == nil { // runsc installed and working (gvisor_linux_test.go)
		want = 3
	}
	if got := Offers(); len(got) != want {
		t.Errorf("Offers() = %v", got)
	}
}
