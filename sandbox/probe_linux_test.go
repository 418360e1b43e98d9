package sandbox

import (
	"errors"
	"io/fs"
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
	}
	got := strings.Join(none.missing(), "\n")
	for _, want := range []string{
		"user namespaces", "mnt namespaces", "pid namespaces", "net namespaces", "ipc namespaces",
		"uts namespaces", "cgroup namespaces", "user.max_user_namespaces is 0", "seccomp", "Landlock",
		"cgroups (missing controllers: memory, pids)", "procfs", "root (only root",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing facilities do not name %q:\n%s", want, got)
		}
	}
	one := hostFacilities()
	one.landlock = none.landlock
	if m := one.missing(); len(m) != 1 || !strings.Contains(m[0], "Landlock") {
		t.Errorf("one missing facility: %q", m)
	}
}

// TestProbeThisHost: CI and this machine have every facility; a probe
// failure here is a failure, never a skip.
func TestProbeThisHost(t *testing.T) {
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
