package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
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

	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w for %s: %s", ErrUnavailable, t, strings.Join(missing, "; "))
}

// Offers returns the tiers this host can provide: S2 and S3 when every
// facility is present and cordon runs as root, and S4 once Probe(tier.S4)
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
	lookPath func(string) (string, error)
	writable func(string) error
	user     string // the caller's user name, or ""
}

func hostFacilities() facilities {
	euid := os.Geteuid()
	name := ""
	if euid != 0 {
		// Only the rootless checks read it (/etc/subuid may name the user);
		// a lookup can cost a name-service round trip, so root skips it.
		name = userName(euid)
	}
	return facilities{
		stat:     func(p string) error { _, err := os.Stat(p); return err },
		readFile: os.ReadFile,
		euid:     euid,
		seccomp:  seccomp.Supported,
		landlock: landlockABI,
		cgroups:  cgroup.Probe,
		lookPath: exec.LookPath,
		writable: func(p string) error { return unix.Access(p, unix.W_OK) },
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
	// For a non-root caller rootlessMissing named what the cgroup limits
	// lack.
	if err := h.cgroups(); err != nil && h.euid == 0 {
		missing = append(missing, "cgroups ("+strings.TrimPrefix(err.Error(), "cgroup: ")+")")
	}
	if err := h.stat("/proc/self/fd"); errors.Is(err, os.ErrNotExist) {
		missing = append(missing, "procfs at /proc")
	}
	return missing
}

// rootlessMissing names, for a caller that is not root, what running the
// sandbox rootless would need and this host or cordon lacks. cordon maps
// a run's host uid range only as root: a non-root caller could map only
// its own uid, and init and the program would share it. The rootless way
// (rootless Podman's) maps a subordinate id range through the setuid
// helpers newuidmap and newgidmap, and enforces the cgroup limits in a
// cgroup v2 subtree delegated to the user. Every tier the sandbox offers
// enforces its cgroup limits, so without such a subtree no tier is
// offered rootless, never a tier without them.
func (h facilities) rootlessMissing() []string {
	missing := []string{"root (cordon maps the sandbox's host uid ranges, which keep init and the program apart, " +
		"only as root; rootless runs through subordinate id ranges and newuidmap/newgidmap are not implemented)"}
	for _, c := range []struct{ file, bad, name string }{
		{"/proc/sys/kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone"},
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1", "kernel.apparmor_restrict_unprivileged_userns"},
	} {
		if b, err := h.readFile(c.file); err == nil && strings.TrimSpace(string(b)) == c.bad {
			missing = append(missing, fmt.Sprintf("unprivileged user namespaces (%s is %s)", c.name, c.bad))
		}
	}
	for _, helper := range []string{"newuidmap", "newgidmap"} {
		if _, err := h.lookPath(helper); err != nil {
			missing = append(missing, helper+" (not installed; Debian's package uidmap)")
		}
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if !h.hasSubordinate(f) {
			missing = append(missing, fmt.Sprintf("a subordinate range of %d ids for uid %d (%s) in %s", rangeSize, h.euid, h.user, f))
		}
	}
	if m := h.delegatedCgroup(); m != "" {
		missing = append(missing, "cgroup limits ("+m+"; a non-root user can enforce the memory, pids and CPU limits "+
			"only in a cgroup v2 subtree delegated to it, so S2 and S3 are not offered rootless)")
	}
	return missing
}

// hasSubordinate reports whether file (/etc/subuid or /etc/subgid) gives
// the caller a range of at least rangeSize ids.
func (h facilities) hasSubordinate(file string) bool {
	b, err := h.readFile(file)
	if err != nil {
		return false
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Split(strings.TrimSpace(l), ":")
		if len(f) != 3 || (f[0] != strconv.Itoa(h.euid) && (h.user == "" || f[0] != h.user)) {
			continue
		}
		if n, err := strconv.Atoi(f[2]); err == nil && n >= rangeSize {
			return true
		}
	}
	return false
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
