package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// minLandlockABI is the oldest Landlock ABI cordon accepts. ABI 1 covers
// the file system rights cordon relies on (read, write, execute, make);
// later ABIs add layers that are applied when present: rename/link
// across directories (2), truncate (3), TCP bind/connect (4), device
// ioctls (5), abstract unix socket and signal scoping (6).
const minLandlockABI = 1

// landlockABI returns the running kernel's Landlock ABI, or an error.
func landlockABI() (int, error) {
	v, err := landlockVersion()
	if err != nil {
		return 0, fmt.Errorf("landlock: %v (is \"landlock\" in the kernel's lsm= list?)", err)
	}
	if v < minLandlockABI {
		return v, fmt.Errorf("landlock: ABI %d is below the minimum %d", v, minLandlockABI)
	}
	return v, nil
}

// landlockNetPortAttr is struct landlock_net_port_attr (ABI 4), which
// x/sys does not define.
type landlockNetPortAttr struct {
	allowedAccess uint64
	port          uint64
}

const landlockRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT

// fsRights returns the file system rights ABI v knows.
func fsRights(v int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if v >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if v >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if v >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// restrictLandlock restricts this thread (and what it forks) to: read
// everything in the new root (which holds only what cordon put there)
// but the deny.fs paths (addAround),
// write only /work, /tmp and /dev/shm, read and write the device nodes,
// execute only cfg.ExecFiles, no TCP bind or connect (ABI ≥ 4), and no
// abstract unix sockets or signals outside the sandbox (ABI ≥ 6).
func restrictLandlock(cfg *initConfig) *initErr {
	ls, e := buildLandlock(cfg)
	if e != nil {
		return e
	}
	return ls.restrict()
}

// landlockSet is a Landlock ruleset being built: restrict applies it.
type landlockSet struct {
	fd  int
	exe uint64 // the rights of an executable file
	// guard holds the directories on the way to a denied path (device
	// and inode; addAround): no rule but READ_DIR may land on one, under
	// any name.
	guard map[[2]uint64]string
	// added are the paths given a rule, in order (tests read them).
	added []string
}

// buildLandlock creates restrictLandlock's ruleset for cfg without
// applying it. A prepared sandbox's init builds it before it reports
// ready, with the prepared executables, and adds the launch's others
// (addExec) when it is started.
func buildLandlock(cfg *initConfig) (*landlockSet, *initErr) {
	v := cfg.LandlockABI
	handled := fsRights(v)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	if v >= 4 {
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if v >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	fd, err := landlockCreateRuleset(&attr, v)
	if err != nil {
		return nil, setupErr("Landlock ABI %d: creating the ruleset: %v", v, err)
	}
	ls := &landlockSet{fd: fd}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()

	read := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)
	write := handled &^ (unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	device := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE|unix.LANDLOCK_ACCESS_FS_WRITE_FILE) | handled&unix.LANDLOCK_ACCESS_FS_TRUNCATE
	ls.exe = uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE|unix.LANDLOCK_ACCESS_FS_READ_FILE) & handled

	rules := []struct {
		path   string
		access uint64
	}{
		{"/", read},
		{"/work", write},
		{"/tmp", write},
		{"/dev/shm", write},
	}
	for _, d := range devices {
		rules = append(rules, struct {
			path   string
			access uint64
		}{"/dev/" + d, device})
	}
	rules = append(rules, fsGrantRules(cfg, write, ls.exe)...) // fsgrant_linux.go
	deny := deniedPaths(cfg)
	if e := ls.guardDenied(deny); e != nil {
		return nil, e
	}
	for _, r := range rules {
		if e := ls.addAround(r.path, r.access, deny); e != nil {
			return nil, e
		}
	}
	if e := ls.addExec(cfg.ExecFiles); e != nil {
		return nil, e
	}
	if cfg.Egress && v >= 4 {
		// The one TCP connection the program may make: to the egress
		// forwarder (the network namespace has only loopback).
		rule := landlockNetPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: ProxyPort}
		if err := landlockAddNetPortRule(fd, &rule); err != nil {
			return nil, setupErr("Landlock rule for TCP port %d: %v", ProxyPort, err)
		}
	}
	ok = true
	return ls, nil
}

// add allows access beneath path.
func (ls *landlockSet) add(path string, access uint64) *initErr {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return setupErr("Landlock rule for %s: %v", path, err)
	}
	defer unix.Close(pfd)
	return ls.addFD(pfd, path, access)
}

// addFD allows access beneath the file pfd (an O_PATH descriptor of p).
// It refuses a rule granting more than READ_DIR on a directory that is
// on the way to a denied path (guardDenied), whatever it is called here:
// the rule would cover the denied path.
func (ls *landlockSet) addFD(pfd int, p string, access uint64) *initErr {
	if len(ls.guard) > 0 && access&^uint64(unix.LANDLOCK_ACCESS_FS_READ_DIR) != 0 {
		st, err := fstatFD(pfd)
		if err != nil {
			return setupErr("Landlock rule for %s: %v", p, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if on, ok := ls.guard[[2]uint64{st.Dev, st.Ino}]; ok {
				return setupErr("Landlock rule for %s: it is the same directory as %s, which leads to a deny.fs path (a bind mount, or a tree granted twice): a rule on it would cover the denied path; grant only one of them", p, on)
			}
		}
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	if err := landlockAddPathRule(ls.fd, &rule); err != nil {
		return setupErr("Landlock rule for %s: %v", p, err)
	}
	ls.added = append(ls.added, p)
	return nil
}

// Bounds of addAround: a directory on the way to a denied path may hold
// at most maxAroundEntries entries, and one ruleset at most
// maxAroundRules rules; beyond either the run is refused.
const (
	maxAroundEntries = 4096
	maxAroundRules   = 16384
)

// deniedPaths are cfg's deny.fs paths that addAround keeps out of every
// rule: those not beneath the sandbox's own /proc and /dev (nothing on
// the host replaces what they show, and /proc's entries come and go with
// the processes). Hashes hidden by exec.deny are masks only.
func deniedPaths(cfg *initConfig) []string {
	var out []string
	for _, m := range cfg.Masks {
		if !strings.HasPrefix(m.Rule, "deny.fs[") || beneath("/proc", m.Path) || beneath("/dev", m.Path) {
			continue
		}
		out = append(out, m.Path)
	}
	return out
}

// guardDenied records the directories on the way to each denied path,
// from / to its parent, as far as they exist now (addFD).
func (ls *landlockSet) guardDenied(deny []string) *initErr {
	for _, d := range deny {
		dirs := []string{"/"}
		for p := path.Dir(d); p != "/"; p = path.Dir(p) {
			dirs = append(dirs, p)
		}
		slices.Reverse(dirs[1:]) // from / down to the parent
		for _, p := range dirs {
			fd, err := openNoSymlinks("/", p)
			if err != nil {
				break // not there (or a link): nothing beneath to guard
			}
			st, err := fstatFD(fd)
			unix.Close(fd)
			if err != nil {
				return setupErr("Landlock: %s: %v", p, err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				break
			}
			if ls.guard == nil {
				ls.guard = map[[2]uint64]string{}
			}
			ls.guard[[2]uint64{st.Dev, st.Ino}] = p
		}
	}
	return nil
}

// addAround allows access beneath p, except beneath the denied paths
// (deny.fs; docs/sandbox.md, "deny.fs wins"). Without a denied path
// beneath p it is one rule on p. Otherwise p gets only READ_DIR (when
// access has it), and each directory from p down to a denied path's
// parent is listed: every entry that does not lead to a denied path gets
// access (the file rights of it on a file), the entries that lead to one
// are listed in turn, and the denied entry gets nothing. Landlock rules
// attach to the inodes there now, so a file later renamed over a denied
// name, a directory recreated there, a denied path created after this,
// or any new entry in a directory on the way, has no rule and is
// refused. A rule on a denied path (or beneath one) is dropped.
func (ls *landlockSet) addAround(p string, access uint64, deny []string) *initErr {
	var below [][]string
	for _, d := range deny {
		if beneath(d, p) {
			return nil // deny.fs wins
		}
		if beneath(p, d) {
			below = append(below, strings.Split(strings.TrimPrefix(strings.TrimPrefix(d, p), "/"), "/"))
		}
	}
	if len(below) == 0 {
		return ls.add(p, access)
	}
	if r := access & unix.LANDLOCK_ACCESS_FS_READ_DIR; r != 0 {
		if e := ls.add(p, r); e != nil {
			return e
		}
	}
	fd, err := openNoSymlinks("/", p)
	if err != nil {
		return setupErr("Landlock rule for %s: %v", p, err)
	}
	defer unix.Close(fd)
	return ls.around(fd, p, access, below)
}

// landlockFileRights are the rights a rule on a file (not a directory)
// may hold.
const landlockFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE

// around gives access to each entry of the directory dfd (at dir) that
// leads to none of the denied paths below (relative, split at "/"), and
// descends into those that lead to one.
func (ls *landlockSet) around(dfd int, dir string, access uint64, below [][]string) *initErr {
	lfd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return setupErr("Landlock: listing %s, on the way to denied path %s: %v", dir, path.Join(dir, strings.Join(below[0], "/")), err)
	}
	f := os.NewFile(uintptr(lfd), dir)
	names, err := f.Readdirnames(maxAroundEntries + 1)
	f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return setupErr("Landlock: listing %s: %v", dir, err)
	}
	if len(names) > maxAroundEntries {
		return setupErr("Landlock: %s has more than %d entries: too many to grant one by one around denied path %s; narrow the grant (grant the directories beneath it that the program needs) or deny a path in a smaller directory", dir, maxAroundEntries, path.Join(dir, strings.Join(below[0], "/")))
	}
	for _, name := range names {
		var rest [][]string
		denied := false
		for _, b := range below {
			if b[0] != name {
				continue
			}
			if len(b) == 1 {
				denied = true
			} else {
				rest = append(rest, b[1:])
			}
		}
		if denied {
			continue // the denied entry: no rule
		}
		p := path.Join(dir, name)
		efd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if err == unix.ENOENT {
				continue // gone since the listing
			}
			return setupErr("Landlock rule for %s: %v", p, err)
		}
		e := ls.entry(efd, p, access, rest)
		unix.Close(efd)
		if e != nil {
			return e
		}
	}
	return nil
}

// entry gives access to the entry efd at p, or descends into it when it
// is a directory that leads to a denied path (rest).
func (ls *landlockSet) entry(efd int, p string, access uint64, rest [][]string) *initErr {
	st, err := fstatFD(efd)
	if err != nil {
		return setupErr("Landlock rule for %s: %v", p, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return nil // never followed by a rule: its target has its own
	case unix.S_IFDIR:
		if len(rest) > 0 {
			return ls.around(efd, p, access, rest)
		}
	default:
		access &= landlockFileRights
	}
	if access == 0 {
		return nil
	}
	if len(ls.added) >= maxAroundRules {
		return setupErr("Landlock: more than %d rules to grant around the deny.fs paths (at %s); narrow the grants that contain denied paths", maxAroundRules, p)
	}
	return ls.addFD(efd, p, access)
}

// addExec allows files to be executed (and read).
func (ls *landlockSet) addExec(files []string) *initErr {
	for _, f := range files {
		if e := ls.add(f, ls.exe); e != nil {
			return e
		}
	}
	return nil
}

// restrict applies the ruleset to this thread and closes it.
func (ls *landlockSet) restrict() *initErr {
	fd := ls.fd
	defer unix.Close(fd)
	if err := landlockRestrictSelf(fd); err != nil {
		return setupErr("Landlock restrict_self: %v", err)
	}
	return nil
}
