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
		return setupErr("Landlock ABI %d: creating the ruleset: %v", v, err)
	}
	defer unix.Close(fd)

	read := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)
	write := handled &^ (unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	device := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE|unix.LANDLOCK_ACCESS_FS_WRITE_FILE) | handled&unix.LANDLOCK_ACCESS_FS_TRUNCATE
	exe := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE|unix.LANDLOCK_ACCESS_FS_READ_FILE) & handled

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
	for _, f := range cfg.ExecFiles {
		rules = append(rules, struct {
			path   string
			access uint64
		}{f, exe})
	}
	rules = append(rules, fsGrantRules(cfg, write, exe)...) // fsgrant_linux.go
	for _, r := range rules {
		pfd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return setupErr("Landlock rule for %s: %v", r.path, err)
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: r.access, Parent_fd: int32(pfd)}
		err = landlockAddPathRule(fd, &rule)
		unix.Close(pfd)
		if err != nil {
			return setupErr("Landlock rule for %s: %v", r.path, err)
		}
	}
	if cfg.Egress && v >= 4 {
		// The one TCP connection the program may make: to the egress
		// forwarder (the network namespace has only loopback).
		rule := landlockNetPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: ProxyPort}
		if err := landlockAddNetPortRule(fd, &rule); err != nil {
			return setupErr("Landlock rule for TCP port %d: %v", ProxyPort, err)
		}
	}
	if err := landlockRestrictSelf(fd); err != nil {
		return setupErr("Landlock restrict_self: %v", err)
	}
	return nil
}
