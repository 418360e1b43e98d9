package sandbox

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds the package's Landlock system calls, its only uses of
// unsafe (TestUnsafeConfined). Each wrapper makes one call and returns
// the kernel's errno as the error.

// landlockVersion returns the running kernel's Landlock ABI.
func landlockVersion() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// landlockCreateRuleset creates a ruleset from attr as Landlock ABI abi
// knows the struct: the file system rights (ABI 1-3), then the network
// rights (≥ 4), then the scopes (≥ 6). It returns the ruleset's fd.
func landlockCreateRuleset(attr *unix.LandlockRulesetAttr, abi int) (int, error) {
	size := unsafe.Sizeof(attr.Handled_access_fs)
	if abi >= 4 {
		size += unsafe.Sizeof(attr.Handled_access_net)
	}
	if abi >= 6 {
		size += unsafe.Sizeof(attr.Scoped)
	}
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), size, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

// landlockAddPathRule adds a path-beneath rule to the ruleset fd.
func landlockAddPathRule(ruleset int, rule *unix.LandlockPathBeneathAttr) error {
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(rule)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// landlockAddNetPortRule adds a TCP port rule (ABI ≥ 4) to the ruleset
// fd.
func landlockAddNetPortRule(ruleset int, rule *landlockNetPortAttr) error {
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), landlockRuleNetPort, uintptr(unsafe.Pointer(rule)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// landlockRestrictSelf restricts this thread, and what it forks, to the
// ruleset fd.
func landlockRestrictSelf(ruleset int) error {
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return errno
	}
	return nil
}
