package sandbox

import (
	"fmt"

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
// everything in the new root (which holds only what cordon put there),
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
	for _, r := range rules {
		if e := ls.add(r.path, r.access); e != nil {
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
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	err = landlockAddPathRule(ls.fd, &rule)
	unix.Close(pfd)
	if err != nil {
		return setupErr("Landlock rule for %s: %v", path, err)
	}
	return nil
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
