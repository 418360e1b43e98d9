package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/cgroup"
)

// Inside the sandbox the program runs as uid and gid 1000; sandbox init
// runs as 0. Both map into the run's host range.
const (
	insideUID = 1000
	insideGID = 1000
)

// runtimeBinds lists the runtime directories and links that exist here.
func runtimeBinds() []string {
	var out []string
	for _, p := range slices.Concat(runtimeRoots, []string{alternatives}) {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// existingDirs returns the directories of dirs that exist here (resolved
// the same way inside, since the runtime is bound at the same paths).
func existingDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mkdirParents creates the missing parent directories of the
// workspace-relative path p beneath dir, following no symbolic link.
func mkdirParents(dir *os.File, p string) error {
	parts := strings.Split(p, "/")
	fd, err := unix.Dup(int(dir.Fd()))
	if err != nil {
		return err
	}
	for _, name := range parts[:len(parts)-1] {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return err
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
		fd = next
	}
	return unix.Close(fd)
}

// asOwner runs f with its file system ids set to uid and gid, so that
// what f creates in the sandbox's /work belongs to the program: a tmpfs
// mounted in the run's user namespace refuses creation by an id it does
// not map, such as host root. The file capabilities that changing fsuid
// drops from the effective set are raised again, so that f still reads
// the workspace as root does. f runs on a thread of its own that is
// locked and never unlocked: Go ends it when f returns, so no other
// goroutine ever runs with these ids.
func asOwner(uid, gid int, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		done <- asOwnerLocked(uid, gid, f)
	}()
	return <-done
}

func asOwnerLocked(uid, gid int, f func() error) error {
	if err := setfsid(unix.SYS_SETFSGID, gid); err != nil {
		return refusedf("setfsgid(%d): %v", gid, err)
	}
	if err := setfsid(unix.SYS_SETFSUID, uid); err != nil {
		return refusedf("setfsuid(%d): %v", uid, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return refusedf("capget: %v", err)
	}
	for i := range data {
		data[i].Effective = data[i].Permitted
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return refusedf("capset: %v", err)
	}
	return f()
}

// waitBounded calls wait and returns when it does or after d, whichever
// is first.
func waitBounded(wait func(), d time.Duration) {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

var errTimeout = errors.New("sandbox: wall-clock limit reached")

func readStats(cg *cgroup.Group, res *Result) {
	if cg == nil {
		return // a rootless run without a cgroup (CgroupLimits)
	}
	st, err := cg.Stats()
	if err != nil {
		return
	}
	res.CPUNanos = st.CPUNanos
	res.PeakMemoryBytes = st.PeakMemoryBytes
	res.OOMKills = st.OOMKills
}

// openWorkspace opens the host workspace directory without following a
// symbolic link at its last component; "" means no workspace.
func openWorkspace(dir string) (*os.File, error) {
	if dir == "" {
		return nil, nil
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: workspace %s: %w", ErrRefused, dir, err)}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// buildEnv is the program's environment: PATH, HOME, LANG and TERM, then
// the granted variables the caller gave values for.
// decide plans the program's execution under the spec's grants and
// reports the exec decision to Spec.Decided before anything runs (a
// failed report refuses the run), then builds its environment: what
// every tier does before it starts a program.
func decide(s *Spec) (*execPlan, []string, error) { return decideFS(s, nil) }

// decideFS is decide for a run whose fs rules are already planned (fsp;
// nil: plan them here).
func decideFS(s *Spec, fsp *fsPlan) (*execPlan, []string, error) {
	if fsp == nil {
		var err error
		if fsp, err = planFS(s.Grants, s.Tier); err != nil { // fsgrant_linux.go: empty without fs rules
			return nil, nil, err
		}
	}
	return decideIn(s, fsp, true, nil)
}

// decideIn is decideFS in the fs plan fsp. hide: hide the denied
// executables on the runtime's path here, after the program is decided
// (a prepared sandbox hid them when it was prepared, since init applies
// the masks while it builds the root). names: the allowed names as a
// prepared sandbox resolved them (planNames), or nil.
func decideIn(s *Spec, fsp *fsPlan, hide bool, names *preparedNames) (*execPlan, []string, error) {
	enf := grant.New(s.Grants)
	plan, err := planExecNames(enf, s.Argv, fsp, names)
	if err != nil {
		return nil, nil, err
	}
	plan.fs = fsp
	if hide {
		if err := fsp.hideDeniedOnPath(s.Grants.ExecDeny); err != nil { // fsgrant_linux.go
			return nil, nil, err
		}
	}
	if s.Decided != nil {
		if err := s.Decided(plan.program.Decision); err != nil {
			return nil, nil, refusedf("recording the exec decision: %v", err)
		}
	}
	if s.Mounted != nil && len(fsp.mounts) > 0 {
		if err := s.Mounted(fsp.mounts); err != nil {
			return nil, nil, refusedf("recording the fs grants' mounts: %v", err)
		}
	}
	env, err := buildEnv(enf, s.Env)
	if err != nil {
		return nil, nil, err
	}
	env[0] = fsp.pathEnv() // the granted bin directories, then the runtime's
	return plan, env, nil
}

func buildEnv(e *grant.Enforcer, vars map[string]string) ([]string, error) {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=/work",
		"LANG=C.UTF-8",
		"TERM=dumb",
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch name {
		case "PATH", "HOME", "LANG", "TERM", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
			"http_proxy", "https_proxy", "all_proxy", "no_proxy":
			return nil, refusedf("environment variable %s is fixed by the sandbox", name)
		}
		d := e.Decide(grant.Query{Kind: grant.KindEnv, Name: name})
		if !d.Allow {
			return nil, refusedf("environment variable %s: %s", name, d.Reason)
		}
		env = append(env, name+"="+vars[name])
	}
	return env, nil
}
