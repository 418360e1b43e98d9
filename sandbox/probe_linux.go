package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cordon-dev/cordon/sandbox/cgroup"
	"github.com/cordon-dev/cordon/sandbox/seccomp"

	"github.com/cordon-dev/cordon/tier"
)

var probeOnce = sync.OnceValue(probe)

// Probe reports whether this host provides every facility tier t needs.
// The error names each missing facility, wraps ErrUnavailable and says
// what to do; it is nil only when all are present.
func Probe(t tier.Tier) error {
	if t == tier.S4 {
		if err := gvisorProbeOnce(); err != nil {
			return fmt.Errorf("%w for S4: %v", ErrUnavailable, err)
		}
		return nil
	}
	if t != tier.S2 && t != tier.S3 {
		return fmt.Errorf("%w: the sandbox provides S2, S3 and S4, not %s", ErrUnavailable, t)
	}
	missing := probeOnce()

	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w for %s: %s", ErrUnavailable, t, strings.Join(missing, "; "))
}

// Offers returns the tiers this host can provide: S2 and S3 when every
// facility is present and cordon runs as root, S4 when a program has
// really run under gVisor here (probed once per process), nothing
// otherwise.
func Offers() []tier.Tier {
	var out []tier.Tier
	for _, t := range []tier.Tier{tier.S2, tier.S3, tier.S4} {
		if Probe(t) == nil {
			out = append(out, t)
		}
	}
	return out
}

// facilities is what the probe asks of the host; tests replace it.
type facilities struct {
	stat     func(string) error
	readFile func(string) ([]byte, error)
	euid     int
	seccomp  func() error
	landlock func() (int, error)
	cgroups  func() error
}

func hostFacilities() facilities {
	return facilities{
		stat:     func(p string) error { _, err := os.Stat(p); return err },
		readFile: os.ReadFile,
		euid:     os.Geteuid(),
		seccomp:  seccomp.Supported,
		landlock: landlockABI,
		cgroups:  cgroup.Probe,
	}
}

func probe() []string { return hostFacilities().missing() }

// missing names every facility the sandbox needs that h lacks.
func (h facilities) missing() []string {
	var missing []string
	if h.euid != 0 {
		missing = append(missing, "root (only root can map the sandbox's host uid ranges, which keep init and the program apart)")
	}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if err := h.stat("/proc/self/ns/" + ns); err != nil {
			missing = append(missing, ns+" namespaces ("+err.Error()+")")
		}
	}
	if b, err := h.readFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		missing = append(missing, "user namespaces (user.max_user_namespaces is 0)")
	}
	if err := h.seccomp(); err != nil {
		missing = append(missing, "seccomp ("+err.Error()+")")
	}
	if _, err := h.landlock(); err != nil {
		missing = append(missing, err.Error())
	}
	if err := h.cgroups(); err != nil {
		missing = append(missing, "cgroups ("+strings.TrimPrefix(err.Error(), "cgroup: ")+")")
	}
	if err := h.stat("/proc/self/fd"); errors.Is(err, os.ErrNotExist) {
		missing = append(missing, "procfs at /proc")
	}
	return missing
}
