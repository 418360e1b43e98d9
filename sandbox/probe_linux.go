package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

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
	if t == tier.S3 && os.Geteuid() != 0 {
		missing = append(missing[:len(missing):len(missing)], s3Rootless)
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w for %s: %s", ErrUnavailable, t, strings.Join(missing, "; "))
}

// s3Rootless is why a rootless caller is not offered S3.
const s3Rootless = "root for S3 (each tenant needs a host id range of its own from the host-wide registry; " +
	"a rootless caller has one subordinate range, its own, which all its runs share, so rootless runs are single-tenant: S2)"

// Offers returns the tiers this host can provide: S2 and S3 when every
// facility is present and cordon runs as root, S2 alone when it runs
// rootless (CgroupLimits says whether its runs have cgroup limits), and S4 once Probe(tier.S4)
// has passed in this process — a program really ran under gVisor. Offers
// never runs that probe itself (it costs a gVisor start, about a tenth of
// a second, and most runs never need S4): callers that may need S4 probe
// it first (session.Open does when the grant set requires S4, `cordon
// tier` always does).
func Offers() []tier.Tier {
	var out []tier.Tier
	for _, t := range []tier.Tier{tier.S2, tier.S3} {
		if Probe(t) == nil {
			out = append(out, t)
		}
	}
	if gvisorPassed.Load() {
		out = append(out, tier.S4)
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
	// For a non-root caller (rootlessMissing).
	helper   func(string) error // checkHelper
	writable func(string) error
	egid     int
	user     string // the caller's user name, or ""
}

func hostFacilities() facilities {
	euid := os.Geteuid()
	name := ""
	if euid != 0 {
		// Only the rootless checks read it (/etc/subuid may name the
		// user); a lookup can cost a name-service round trip, so root
		// skips it.
		name = userName(euid)
	}
	return facilities{
		stat:     func(p string) error { _, err := os.Stat(p); return err },
		readFile: os.ReadFile,
		euid:     euid,
		seccomp:  seccomp.Supported,
		landlock: landlockABI,
		cgroups:  cgroup.Probe,
		helper:   checkHelper,
		writable: func(p string) error { return unix.Access(p, unix.W_OK) },
		egid:     os.Getegid(),
		user:     name,
	}
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return ""
}

func probe() []string { return hostFacilities().missing() }

// missing names every facility the sandbox needs that h lacks.
func (h facilities) missing() []string {
	var missing []string
	if h.euid != 0 {
		missing = append(missing, h.rootlessMissing()...)
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
	// A rootless run without cgroups is S2 all the same (docs/tiers.md);
	// CgroupLimits says so, and a grant set that limits memory or CPU is
	// refused (checkUncgrouped).
	if err := h.cgroups(); err != nil && h.euid == 0 {
		missing = append(missing, "cgroups ("+strings.TrimPrefix(err.Error(), "cgroup: ")+")")
	}
	if err := h.stat("/proc/self/fd"); errors.Is(err, os.ErrNotExist) {
		missing = append(missing, "procfs at /proc")
	}
	return missing
}

// rootlessMissing names, for a caller that is not root, what running
// the sandbox rootless needs and this host lacks: unprivileged user
// namespaces, the id-mapping helpers at their fixed paths (checkHelper),
// and a subordinate uid and gid range of the caller's own
// (subordinate). Rootless, as rootless Podman, cordon maps the caller's
// own ids to init and the subordinate range above them, so that init and
// the program still run as different host uids; a caller without a
// subordinate range is refused rather than given a map of its own uid
// alone, in which init and the program would share it.
func (h facilities) rootlessMissing() []string {
	var missing []string
	for _, c := range []struct{ file, bad, name string }{
		{"/proc/sys/kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone"},
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1", "kernel.apparmor_restrict_unprivileged_userns"},
	} {
		if b, err := h.readFile(c.file); err == nil && strings.TrimSpace(string(b)) == c.bad {
			missing = append(missing, fmt.Sprintf("unprivileged user namespaces (%s is %s)", c.name, c.bad))
		}
	}
	for _, helper := range idmapHelpers {
		if err := h.helper(helper); err != nil {
			missing = append(missing, "the id-mapping helper "+filepath.Base(helper)+" ("+err.Error()+")")
		}
	}
	for i, own := range []int{h.euid, h.egid} {
		if _, err := subordinate(h.readFile, subIDFiles[i], idDBFiles[i], h.euid, h.user, own); err != nil {
			missing = append(missing, "subordinate ids ("+err.Error()+")")
		}
	}
	return missing
}

// delegatedCgroup says what the caller's cgroup v2 subtree lacks, or ""
// when the caller's cgroup is on cgroup v2, has the memory, pids and cpu
// controllers and is writable by the caller.
func (h facilities) delegatedCgroup() string {
	b, err := h.readFile("/proc/self/mounts")
	if err != nil {
		return "cannot read /proc/self/mounts: " + err.Error()
	}
	mnt := ""
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[2] == "cgroup2" {
			mnt = f[1]
			break
		}
	}
	if mnt == "" {
		return "no cgroup v2 hierarchy is mounted"
	}
	b, err = h.readFile("/proc/self/cgroup")
	if err != nil {
		return "cannot read /proc/self/cgroup: " + err.Error()
	}
	rel := ""
	for l := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			rel = p
		}
	}
	dir := filepath.Join(mnt, rel)
	b, err = h.readFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "cannot read " + filepath.Join(dir, "cgroup.controllers") + ": " + err.Error()
	}
	have := strings.Fields(string(b))
	var lack []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(have, c) {
			lack = append(lack, c)
		}
	}
	if len(lack) > 0 {
		return fmt.Sprintf("the cgroup v2 group %s lacks the %s controllers (not enabled for it, or bound to "+
			"cgroup v1, which is not delegated)", dir, strings.Join(lack, ", "))
	}
	if err := h.writable(dir); err != nil {
		return fmt.Sprintf("the cgroup v2 group %s is not delegated to uid %d: %v", dir, h.euid, err)
	}
	return ""
}
