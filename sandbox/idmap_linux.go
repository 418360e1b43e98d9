package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/sandbox/cgroup"
)

// Rootless runs (docs/sandbox.md, "Rootless"). A caller that is not root
// cannot map a range of host ids into a user namespace itself; the setuid
// helpers newuidmap and newgidmap (shadow's, Debian's package uidmap) map,
// for it, the caller's own id and the subordinate ranges the
// administrator gave it in /etc/subuid and /etc/subgid, as rootless
// Podman does. Inside, id 0 (sandbox init) is the caller's own host id
// and ids 1..rangeSize-1 are the first rangeSize-1 ids of its
// subordinate range: the program's uid 1000 is a host id that belongs to
// no one else, never the caller's.

// idmapHelpers are newuidmap and newgidmap, at fixed paths: the caller's
// PATH is never consulted, since a helper found there could be anyone's
// program and would decide the run's ids. Tests point them elsewhere.
var idmapHelpers = [2]string{"/usr/bin/newuidmap", "/usr/bin/newgidmap"}

// subIDFiles are the subordinate uid and gid files; idDBFiles the files
// whose ids a subordinate range must not contain (a range overlapping a
// real account's id would let the program act as that account). Tests
// point them elsewhere.
var (
	subIDFiles = [2]string{"/etc/subuid", "/etc/subgid"}
	idDBFiles  = [2]string{"/etc/passwd", "/etc/group"}
)

// subRange is the part of a subordinate range a rootless run maps: ids
// start..start+rangeSize-2 on the host are 1..rangeSize-1 inside.
type subRange struct{ start, count int }

// rootlessIDs are a rootless run's ids: the caller's own uid and gid
// (init's inside 0) and the subordinate ranges mapped above them.
type rootlessIDs struct {
	uid, gid       int
	subUID, subGID subRange
}

// programUID is the host uid of inside uid 1000.
func (r *rootlessIDs) programUID() int { return r.subUID.start + insideUID - 1 }

// lookupRootless returns the rootless ids of the caller (uid, gid and
// user name), read with readFile from the subordinate id files, or an
// error that names the file and says what to do. Both files name the
// user, as newuidmap and newgidmap read them.
func lookupRootless(readFile func(string) ([]byte, error), uid, gid int, user string) (*rootlessIDs, error) {
	su, err := subordinate(readFile, subIDFiles[0], idDBFiles[0], uid, user, uid)
	if err != nil {
		return nil, err
	}
	sg, err := subordinate(readFile, subIDFiles[1], idDBFiles[1], uid, user, gid)
	if err != nil {
		return nil, err
	}
	return &rootlessIDs{uid: uid, gid: gid, subUID: su, subGID: sg}, nil
}

// subEntry is one line of /etc/subuid or /etc/subgid: owner:start:count.
type subEntry struct {
	owner        string
	start, count int
	line         int
}

func parseSubIDs(file string, b []byte) ([]subEntry, error) {
	var out []subEntry
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, ":")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("%s: line %d is malformed: %q", file, i+1, l)
		}
		start, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || start < 0 || count < 0 || start > 1<<32-1-count {
			return nil, fmt.Errorf("%s: line %d is malformed: %q", file, i+1, l)
		}
		out = append(out, subEntry{owner: f[0], start: start, count: count, line: i + 1})
	}
	return out, nil
}

// subordinate finds the caller's range in file (/etc/subuid or
// /etc/subgid) by its uid or user name: the first entry of at least
// rangeSize ids. The rangeSize-1 ids the run maps must be the caller's
// alone: they may not contain id 0, the caller's own id own (its uid or
// gid), an id of an account or group in db (/etc/passwd or /etc/group),
// or overlap another owner's entry.
func subordinate(readFile func(string) ([]byte, error), file, db string, id int, name string, own int) (subRange, error) {
	b, err := readFile(file)
	if err != nil {
		return subRange{}, fmt.Errorf("no subordinate ids for %s (%d): %w; add a line %q to %s (usermod --add-subuids/--add-subgids)",
			name, id, err, fmt.Sprintf("%s:START:%d", nameOr(name, id), rangeSize), file)
	}
	es, err := parseSubIDs(file, b)
	if err != nil {
		return subRange{}, err
	}
	mine := func(e subEntry) bool { return e.owner == strconv.Itoa(id) || (name != "" && e.owner == name) }
	var r *subEntry
	for i := range es {
		if mine(es[i]) && es[i].count >= rangeSize {
			r = &es[i]
			break
		}
	}
	if r == nil {
		return subRange{}, fmt.Errorf("%s gives %s (%d) no range of %d ids: add a line %q with a START no one else's range covers (usermod --add-subuids/--add-subgids)",
			file, nameOr(name, id), id, rangeSize, fmt.Sprintf("%s:START:%d", nameOr(name, id), rangeSize))
	}
	used := subRange{start: r.start, count: rangeSize - 1}
	in := func(x int) bool { return x >= used.start && x < used.start+used.count }
	overlaps := func(e subEntry) bool { return e.start < used.start+used.count && used.start < e.start+e.count }
	switch {
	case in(0):
		return subRange{}, fmt.Errorf("%s line %d: the range %d:%d contains id 0", file, r.line, r.start, r.count)
	case in(own):
		return subRange{}, fmt.Errorf("%s line %d: the range %d:%d contains %s's own id %d", file, r.line, r.start, r.count, nameOr(name, id), own)
	}
	for _, e := range es {
		if !mine(e) && overlaps(e) {
			return subRange{}, fmt.Errorf("%s: the range of %s (line %d, %d:%d) overlaps %s's (line %d, %d:%d): the program's ids would be another user's; give each user a range of its own",
				file, nameOr(name, id), r.line, r.start, r.count, e.owner, e.line, e.start, e.count)
		}
	}
	dbb, err := readFile(db)
	if err != nil {
		return subRange{}, fmt.Errorf("checking the subordinate range against %s: %w", db, err)
	}
	for l := range strings.SplitSeq(string(dbb), "\n") {
		f := strings.Split(l, ":")
		if len(f) < 3 {
			continue
		}
		if x, err := strconv.Atoi(f[2]); err == nil && in(x) {
			return subRange{}, fmt.Errorf("%s line %d: the range %d:%d contains the id %d of %q in %s", file, r.line, r.start, r.count, x, f[0], db)
		}
	}
	return used, nil
}

func nameOr(name string, id int) string {
	if name != "" {
		return name
	}
	return strconv.Itoa(id)
}

// checkHelper requires the id-mapping helper at path to be a regular file
// (not a link) owned by root, writable by no one else, in directories
// owned by root and writable by no one else, and privileged: set-user-ID
// root or carrying file capabilities. Anything else could be a program
// that maps whatever it likes.
func checkHelper(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fmt.Errorf("%s: %w (Debian's package uidmap installs it)", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s: not a regular file", path)
	case st.Uid != 0 || st.Mode&0o022 != 0:
		return fmt.Errorf("%s: must be owned by root and writable by no one else (owner %d, mode %o)", path, st.Uid, st.Mode&0o7777)
	}
	if st.Mode&unix.S_ISUID == 0 {
		if _, err := unix.Lgetxattr(path, "security.capability", nil); err != nil {
			return fmt.Errorf("%s: neither set-user-ID root nor given file capabilities: it cannot map ids", path)
		}
	}
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		if err := unix.Stat(p, &st); err != nil {
			return fmt.Errorf("%s: %s: %w", path, p, err)
		}
		if st.Uid != 0 || st.Mode&0o022 != 0 {
			return fmt.Errorf("%s: its directory %s must be owned by root and writable by no one else (owner %d, mode %o)", path, p, st.Uid, st.Mode&0o7777)
		}
		if p == "/" {
			return nil
		}
	}
}

// mapIDs writes the user namespace of process pid's id maps through the
// helpers: inside 0 is the caller's own id, 1..rangeSize-1 its
// subordinate range. The helpers get an empty environment.
func (r *rootlessIDs) mapIDs(ctx context.Context, pid int) error {
	for i, m := range []struct {
		own int
		sub subRange
	}{{r.uid, r.subUID}, {r.gid, r.subGID}} {
		if err := checkHelper(idmapHelpers[i]); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, idmapHelpers[i], strconv.Itoa(pid),
			"0", strconv.Itoa(m.own), "1",
			"1", strconv.Itoa(m.sub.start), strconv.Itoa(m.sub.count))
		cmd.Env = []string{}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %v: %s", idmapHelpers[i], err, strings.TrimSpace(out.String()))
		}
	}
	return nil
}

// rootlessWait is argv[1] of a rootless init's first stage.
const rootlessWait = "rootless-wait"

// initEnv is init's whole environment: in a race-detector build it would
// otherwise sleep a second at exit.
var initEnv = []string{"GORACE=atexit_sleep_ms=0"}

// rootlessInit runs the first stage of a rootless init (argv[1] is
// rootlessWait), what the kernel ran in the new user namespace before
// its ids were mapped, without capabilities there; done reports that the
// process must exit with code. It waits until the parent has mapped the
// ids and written the configuration (fd 3 becomes readable; the parent
// writes it only after the helpers succeeded), checks it is now uid 0
// inside, and executes cordon again, as plain init, through the
// descriptor named in argv[2]: that execution, as uid 0 in its own user
// namespace, gets the full capability set there. Its configuration says
// it is rootless, and initMain calls rootlessMapped.
func rootlessInit(args []string) (code int, done bool) {
	fail := func(format string, a ...any) (int, bool) {
		// A raw write: an *os.File for fd 5 would close it when collected.
		b, _ := json.Marshal(initMessage{Error: fmt.Sprintf("sandbox init: "+format, a...), Code: ExitRefused})
		_, _ = unix.Write(5, append(b, '\n'))
		return ExitRefused, true
	}
	if len(args) != 2 || args[0] != rootlessWait {
		return fail("unknown arguments %q", args)
	}
	fd, err := strconv.Atoi(args[1])
	if err != nil || fd < 6 {
		return fail("malformed rootless arguments %q", args)
	}
	fds := []unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				return fail("waiting for the id maps: %v", err)
			}
			break
		}
	}
	if fds[0].Revents&unix.POLLIN == 0 {
		return ExitRefused, true // the parent gave up
	}
	if os.Getuid() != 0 || os.Getgid() != 0 {
		return fail("the id maps were not written (uid %d, gid %d)", os.Getuid(), os.Getgid())
	}
	err = syscall.Exec("/proc/self/fd/"+strconv.Itoa(fd), []string{InitArg0}, initEnv)
	return fail("executing cordon again with the mapped ids: %v", err)
}

// rootlessMapped is a rootless init's first step once configured: it
// drops the caller's supplementary groups (the helpers leave setgroups
// allowed), and sets the parent-death signal again, which the execution
// that raised the capabilities cleared; if the parent died before that,
// the control pipe (fd 4) has hung up, and init exits.
func rootlessMapped() *initErr {
	if err := syscall.Setgroups([]int{}); err != nil {
		return setupErr("sandbox init: dropping supplementary groups: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return setupErr("sandbox init: PR_SET_PDEATHSIG: %v", err)
	}
	fds := []unix.PollFd{{Fd: 4, Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, 0); err != nil || fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
		return setupErr("sandbox init: the parent is gone")
	}
	return nil
}

// chownWork gives everything in /work to the program's uid and gid. In
// a rootless run the parent stages the inputs as init's uid (the caller's
// own: it cannot take the program's, having no CAP_SETFSUID on the host),
// so init hands them over before the program starts; nothing of the
// program's runs yet, and no link is followed.
func chownWork(uid, gid int) error {
	return filepath.WalkDir("/work", func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// callerIDs returns this process's rootless ids, read from the host's
// files.
func callerIDs() (*rootlessIDs, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	return lookupRootless(os.ReadFile, uid, gid, userName(uid))
}

// CgroupLimits reports whether this process's sandbox runs enforce the
// memory limit, the CPU bandwidth and the pids limit in a cgroup of
// their own: as root always (Probe requires it), and rootless only in a
// cgroup v2 subtree delegated to the caller. Otherwise the error names
// what is missing. Without a cgroup, a rootless run keeps every other
// layer, limits its processes by RLIMIT_NPROC in its own user namespace,
// and is refused when its grant set limits memory or CPU.
func CgroupLimits() error {
	if os.Geteuid() == 0 {
		return nil
	}
	return rootlessCgroupOnce()
}

var rootlessCgroupOnce = sync.OnceValue(func() error {
	if m := hostFacilities().delegatedCgroup(); m != "" {
		return fmt.Errorf("no delegated cgroup: %s", m)
	}
	if err := cgroup.Probe(); err != nil {
		return fmt.Errorf("no delegated cgroup: %w", err)
	}
	return nil
})

// checkUncgrouped refuses a run without a cgroup whose grant set limits
// what only a cgroup enforces, its memory or CPU, or whose caller did not
// make the cgroup optional (Limits.CgroupOptional). why says why there is
// no cgroup.
func checkUncgrouped(s *Spec, why error) error {
	hint := "run as root, or delegate a cgroup v2 subtree to the user and run cordon in it (systemd-run --user --scope -p Delegate=yes)"
	if g := s.Grants.Limits; g.MemoryBytes != nil || g.CPUMS != nil {
		return &ExitError{Code: ExitRefused, Err: fmt.Errorf(
			"%w: the grant set limits memory or CPU, which a rootless run enforces only in a cgroup of its own (%v); %s",
			ErrUnavailable, why, hint)}
	}
	if !s.Limits.CgroupOptional {
		return &ExitError{Code: ExitRefused, Err: fmt.Errorf(
			"%w: the run's memory and CPU limits need a cgroup of its own (%v), and the caller did not make them optional (Limits.CgroupOptional); %s",
			ErrUnavailable, why, hint)}
	}
	return nil
}

// rusageStats fills a run without a cgroup's resources from init's
// rusage, which counts init and every process it reaped, the program's
// whole tree: CPU time in user and system mode, and the peak resident
// size of the largest one of them (not of all together, as a cgroup's
// peak is).
func rusageStats(ru *syscall.Rusage, res *Result) {
	if ru == nil {
		return
	}
	res.CPUNanos = syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)
	res.PeakMemoryBytes = ru.Maxrss << 10
}
