package sandbox

import (
	"errors"
	"io/fs"
	"os"
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
		lookPath: func(string) (string, error) { return "", fs.ErrNotExist },
		writable: func(string) error { return fs.ErrPermission },
		user:     "alice",
	}
	got := strings.Join(none.missing(), "\n")
	for _, want := range []string{
		"user namespaces", "mnt namespaces", "pid namespaces", "net namespaces", "ipc namespaces",
		"uts namespaces", "cgroup namespaces", "user.max_user_namespaces is 0", "seccomp", "Landlock",
		"procfs", "root (cordon maps", "rootless runs through subordinate id ranges and newuidmap/newgidmap are not implemented",
		"unprivileged user namespaces (kernel.unprivileged_userns_clone is 0)",
		"newuidmap (not installed", "newgidmap (not installed",
		"a subordinate range of 65536 ids for uid 1000 (alice) in /etc/subuid",
		"a subordinate range of 65536 ids for uid 1000 (alice) in /etc/subgid",
		"cgroup limits (no cgroup v2 hierarchy is mounted", "so S2 and S3 are not offered rootless",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing facilities do not name %q:\n%s", want, got)
		}
	}
	none.euid = 0
	if got := strings.Join(none.missing(), "\n"); !strings.Contains(got, "cgroups (missing controllers: memory, pids)") ||
		strings.Contains(got, "root (") || strings.Contains(got, "subordinate") {
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
// rootless lacks, the cgroup v2 delegation included.
func TestProbeRootless(t *testing.T) {
	files := map[string]string{
		"/etc/subuid":       "bob:100000:65536\nalice:165536:1000\n1000:200000:65536\n",
		"/etc/subgid":       "alice:100000:65536\n",
		"/proc/self/mounts": "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
		"/proc/self/cgroup": "0::/user.slice/user-1000.slice/app.slice\n",
		"/sys/fs/cgroup/user.slice/user-1000.slice/app.slice/cgroup.controllers": "cpu memory pids\n",
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns":                 "1\n",
	}
	h := facilities{
		euid: 1000, user: "alice",
		readFile: func(p string) ([]byte, error) {
			if b, ok := files[p]; ok {
				return []byte(b), nil
			}
			return nil, fs.ErrNotExist
		},
		lookPath: func(p string) (string, error) { return "/usr/bin/" + p, nil },
		writable: func(string) error { return nil },
	}
	want := []string{
		"root (cordon maps the sandbox's host uid ranges, which keep init and the program apart, only as root; " +
			"rootless runs through subordinate id ranges and newuidmap/newgidmap are not implemented)",
		"unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns is 1)",
	}
	if got := h.rootlessMissing(); !slices.Equal(got, want) {
		t.Errorf("delegated v2 subtree, ranges by uid and name:\n got %q\nwant %q", got, want)
	}
	files["/sys/fs/cgroup/user.slice/user-1000.slice/app.slice/cgroup.controllers"] = "cpu\n"
	h.writable = func(string) error { return fs.ErrPermission }
	got := strings.Join(h.rootlessMissing(), "\n")
	if !strings.Contains(got, "cgroup limits (the cgroup v2 group /sys/fs/cgroup/user.slice/user-1000.slice/app.slice lacks the memory, pids controllers") {
		t.Errorf("v2 without controllers:\n%s", got)
	}
	files["/sys/fs/cgroup/user.slice/user-1000.slice/app.slice/cgroup.controllers"] = "cpu memory pids\n"
	got = strings.Join(h.rootlessMissing(), "\n")
	if !strings.Contains(got, "app.slice is not delegated to uid 1000: permission denied") {
		t.Errorf("v2 not writable:\n%s", got)
	}
}

// TestProbeThisHost: CI and this machine have every facility; a probe
// failure here is a failure, never a skip. As a non-root user the probe
// must refuse both tiers, naming root and the cgroup limits.
func TestProbeThisHost(t *testing.T) {
	if os.Geteuid() != 0 {
		for _, tr := range []tier.Tier{tier.S2, tier.S3} {
			err := Probe(tr)
			if err == nil || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "root (cordon maps") ||
				!strings.Contains(err.Error(), "cgroup limits (") {
				t.Errorf("Probe(%s) as uid %d = %v, want the rootless refusal", tr, os.Geteuid(), err)
			}
		}
		if got := Offers(); len(got) != 0 {
			t.Errorf("Offers() as uid %d = %v, want none", os.Geteuid(), got)
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
