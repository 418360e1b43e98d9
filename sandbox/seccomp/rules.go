package seccomp

import (
	"fmt"
	"sync"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
)

// Rule is one explicit denial of the filter: a system call, the errno a
// denied call answers, and the condition under which it is denied. Calls
// that Allowed does not name are denied too (EPERM, or ENOSYS above the
// newest call the table knows); a Rule records a reviewed decision about
// one of them, or a condition under which an allowed call is refused.
type Rule struct {
	Syscall string // name in the kernel's syscall table, e.g. "mount"
	Errno   string // "EPERM" or "ENOSYS"
	When    string // the condition in words; "" means every call
	GOARCH  string // "" on every supported GOARCH; otherwise only on this one
}

// rule is a Rule with its condition in go-seccomp-bpf's terms, which
// compare all 64 bits of an argument. All of cond must hold (AND); several
// rules for one system call are alternatives (OR). A nil cond denies every
// call.
type rule struct {
	Rule
	cond seccompbpf.ArgumentConditions
	// quiet marks a call denied only so that the table names every call
	// go-seccomp-bpf knows: obsolete, unimplemented or of no use to a
	// program. The behavioural tests need no probe for it.
	quiet bool
}

// Linux ABI values. They are the same on amd64 and arm64 (both use the
// asm-generic numbers for these), which lets the table be built and tested
// on any GOOS; a Linux test checks them against golang.org/x/sys/unix.
const (
	errnoEPERM  = 1
	errnoENOSYS = 38

	afUnix  = 1
	afInet  = 2
	afInet6 = 10

	prSetMemoryMerge = 67
	madvMergeable    = 12

	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	// cloneNamespaces is every namespace flag clone(2) can carry.
	// CLONE_NEWTIME (0x80) is not one: in clone(2) the low byte is the exit
	// signal, so the kernel cannot be asked for a time namespace there. It
	// is reachable only through clone3 and unshare, which are denied.
	cloneNamespaces = cloneNewNS | cloneNewCgroup | cloneNewUTS | cloneNewIPC |
		cloneNewUser | cloneNewPID | cloneNewNet

	tiocsti   = 0x5412
	tioclinux = 0x541C

	rlimitCore = 4

	// above32 is the least value with a bit above the low 32 set.
	above32 = 0x1_00000000

	// The set-user-ID and set-group-ID mode bits, and the open flags
	// that create a file (O_CREAT, and __O_TMPFILE, which O_TMPFILE
	// includes); the same on amd64 and arm64.
	setIDBits = 0o6000
	oCreate   = 0o100 | 0o20000000

	perLinux     = 0x00000000
	personaQuery = 0xffffffff
)

func always(name string) rule {
	return rule{Rule: Rule{Syscall: name, Errno: "EPERM"}}
}

func amd64Only(name string) rule {
	r := always(name)
	r.GOARCH = "amd64"
	return r
}

func quiet(r rule) rule {
	r.quiet = true
	return r
}

// newer answers ENOSYS: a call newer than an allowed equivalent that its
// callers fall back to when the kernel lacks it.
func newer(name string) rule {
	return rule{Rule: Rule{Syscall: name, Errno: "ENOSYS"}}
}

// familyNotAllowed denies every address family but AF_UNIX, AF_INET and
// AF_INET6. The comparison is on all 64 bits, so a family with any high
// bit set is denied even though the kernel would read only the low 32.
var familyNotAllowed = seccompbpf.ArgumentConditions{
	{Argument: 0, Operation: seccompbpf.NotEqual, Value: afUnix},
	{Argument: 0, Operation: seccompbpf.NotEqual, Value: afInet},
	{Argument: 0, Operation: seccompbpf.NotEqual, Value: afInet6},
}

// table is the policy. The package documentation explains each entry;
// TestDocListsRules keeps the two in step.
// It is built on first use, not at package initialisation, which
// sandbox init (the same binary) would pay for nothing: cordon assembles
// the filter and hands it to init.
var table = sync.OnceValue(func() []rule {
	t := []rule{
		// Mounts and the file system view (CVE-2021-41133 for the new API).
		always("mount"),
		always("umount2"),
		always("pivot_root"),
		always("chroot"),
		always("open_tree"),
		always("open_tree_attr"),
		always("move_mount"),
		always("fsopen"),
		always("fsconfig"),
		always("fsmount"),
		always("fspick"),
		always("mount_setattr"),

		// Namespaces.
		always("unshare"),
		always("setns"),
		{Rule: Rule{Syscall: "clone", Errno: "EPERM",
			When: "flags (argument 0) include CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET or CLONE_NEWCGROUP"},
			cond: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.BitsSet, Value: cloneNamespaces}}},
		{Rule: Rule{Syscall: "clone3", Errno: "ENOSYS"}},

		// Other processes.
		always("ptrace"),
		always("process_vm_readv"),
		always("process_vm_writev"),
		always("pidfd_getfd"),

		// Kernel code, kernel instrumentation, the keyring.
		always("init_module"),
		always("finit_module"),
		always("delete_module"),
		always("kexec_load"),
		always("kexec_file_load"),
		always("bpf"),
		always("perf_event_open"),
		always("keyctl"),
		always("add_key"),
		always("request_key"),

		// Kernel exploitation aids and seccomp bypasses.
		always("userfaultfd"),
		always("open_by_handle_at"),
		always("name_to_handle_at"),
		always("io_uring_setup"),
		always("io_uring_enter"),
		always("io_uring_register"),
		{Rule: Rule{Syscall: "personality", Errno: "EPERM",
			When: "persona (argument 0) is not 0 (PER_LINUX) or 0xffffffff (query), zero- or sign-extended"},
			cond: seccompbpf.ArgumentConditions{
				{Argument: 0, Operation: seccompbpf.NotEqual, Value: perLinux},
				{Argument: 0, Operation: seccompbpf.NotEqual, Value: personaQuery},
				{Argument: 0, Operation: seccompbpf.NotEqual, Value: 0xFFFFFFFF_00000000 | personaQuery},
			}},
		amd64Only("modify_ldt"),
		amd64Only("iopl"),
		amd64Only("ioperm"),

		// Host administration.
		always("acct"),
		always("quotactl"),
		always("quotactl_fd"),
		always("syslog"),
		always("swapon"),
		always("swapoff"),
		always("reboot"),
		always("vhangup"),
		always("fanotify_init"),

		// NUMA memory placement.
		always("mbind"),
		always("set_mempolicy"),
		always("set_mempolicy_home_node"),
		always("move_pages"),
		always("migrate_pages"),

		// The host clock.
		always("settimeofday"),
		always("clock_settime"),
		always("clock_adjtime"),
		always("adjtimex"),

		// Obsolete.
		always("lookup_dcookie"),
		always("nfsservctl"),
		amd64Only("uselib"),

		// Terminals (CVE-2019-10063, CVE-2017-5226, CVE-2023-28100).
		{Rule: Rule{Syscall: "ioctl", Errno: "EPERM",
			When: "request (argument 1) is not a 32-bit value zero- or sign-extended: it is in [0x1_00000000, 0xFFFFFFFF_80000000)"},
			cond: seccompbpf.ArgumentConditions{
				{Argument: 1, Operation: seccompbpf.GreaterOrEqual, Value: 0x1_00000000},
				{Argument: 1, Operation: seccompbpf.LessThan, Value: 0xFFFFFFFF_80000000},
			}},
		{Rule: Rule{Syscall: "ioctl", Errno: "EPERM",
			When: "request (argument 1) is TIOCSTI (0x5412)"},
			cond: seccompbpf.ArgumentConditions{{Argument: 1, Operation: seccompbpf.Equal, Value: tiocsti}}},
		{Rule: Rule{Syscall: "ioctl", Errno: "EPERM",
			When: "request (argument 1) is TIOCLINUX (0x541C)"},
			cond: seccompbpf.ArgumentConditions{{Argument: 1, Operation: seccompbpf.Equal, Value: tioclinux}}},

		// Memory files: code from outside every mount cordon controls.
		always("memfd_create"),
		always("memfd_secret"),

		// Host writeback.
		always("sync"),
		always("syncfs"),

		// Core dumps: RLIMIT_CORE stays 1, which aborts a pipe core dump.
		// Memory merging (KSM): no program opts in, so no page it holds can be
		// deduplicated with another run's (a timing side channel across runs
		// and tenants). Both arguments are C ints, so values the kernel would
		// truncate to them are refused too.
		{Rule: Rule{Syscall: "prctl", Errno: "EPERM",
			When: "option (argument 0) is PR_SET_MEMORY_MERGE (67)"},
			cond: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.Equal, Value: prSetMemoryMerge}}},
		{Rule: Rule{Syscall: "prctl", Errno: "EPERM",
			When: "option (argument 0) is not a 32-bit value: it is at least 0x1_00000000"},
			cond: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.GreaterOrEqual, Value: above32}}},
		{Rule: Rule{Syscall: "madvise", Errno: "EPERM",
			When: "advice (argument 2) is MADV_MERGEABLE (12)"},
			cond: seccompbpf.ArgumentConditions{{Argument: 2, Operation: seccompbpf.Equal, Value: madvMergeable}}},
		{Rule: Rule{Syscall: "madvise", Errno: "EPERM",
			When: "advice (argument 2) is not a 32-bit value: it is at least 0x1_00000000"},
			cond: seccompbpf.ArgumentConditions{{Argument: 2, Operation: seccompbpf.GreaterOrEqual, Value: above32}}},
		{Rule: Rule{Syscall: "setrlimit", Errno: "EPERM",
			When: "resource (argument 0) is RLIMIT_CORE (4)"},
			cond: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.Equal, Value: rlimitCore}}},
		{Rule: Rule{Syscall: "setrlimit", Errno: "EPERM",
			When: "resource (argument 0) is not a 32-bit value: it is at least 0x1_00000000"},
			cond: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.GreaterOrEqual, Value: above32}}},
		{Rule: Rule{Syscall: "prlimit64", Errno: "EPERM",
			When: "resource (argument 1) is RLIMIT_CORE (4) and a new limit (argument 2) is given"},
			cond: seccompbpf.ArgumentConditions{
				{Argument: 1, Operation: seccompbpf.Equal, Value: rlimitCore},
				{Argument: 2, Operation: seccompbpf.NotEqual, Value: 0},
			}},
		{Rule: Rule{Syscall: "prlimit64", Errno: "EPERM",
			When: "resource (argument 1) is not a 32-bit value and a new limit (argument 2) is given"},
			cond: seccompbpf.ArgumentConditions{
				{Argument: 1, Operation: seccompbpf.GreaterOrEqual, Value: above32},
				{Argument: 2, Operation: seccompbpf.NotEqual, Value: 0},
			}},

		// Address families.
		{Rule: Rule{Syscall: "socket", Errno: "EPERM",
			When: "family (argument 0) is not AF_UNIX (1), AF_INET (2) or AF_INET6 (10)"},
			cond: familyNotAllowed},
		{Rule: Rule{Syscall: "socketpair", Errno: "EPERM",
			When: "family (argument 0) is not AF_UNIX (1), AF_INET (2) or AF_INET6 (10)"},
			cond: familyNotAllowed},

		// Set-user-ID and set-group-ID files: through a writable host path
		// a file the program makes is a file on the host, where nosuid does
		// not apply (red team F5).
		setID("chmod", 1, "amd64"),
		setID("fchmod", 1, ""),
		setID("fchmodat", 2, ""),
		setID("fchmodat2", 2, ""),
		setID("creat", 1, "amd64"),
		setID("mkdir", 1, "amd64"),
		setID("mkdirat", 2, ""),
		setID("mknod", 1, "amd64"),
		setID("mknodat", 2, ""),
		setIDOpen("open", 1, "amd64"),
		setIDOpen("openat", 2, ""),
		newer("openat2"), // its mode is in memory the filter cannot read; callers fall back to openat

		// Other processes and the host name.
		always("kcmp"),
		always("process_madvise"),
		always("process_mrelease"),
		always("sethostname"),
		always("setdomainname"),
		always("fanotify_mark"),
		always("cachestat"),

		// Newer variants: callers fall back on ENOSYS to calls that are
		// allowed (futex, the *xattr calls) or to files (/proc/self/mountinfo,
		// /proc/self/attr).
		newer("futex_wake"),
		newer("futex_wait"),
		newer("futex_requeue"),
		newer("setxattrat"),
		newer("getxattrat"),
		newer("listxattrat"),
		newer("removexattrat"),
		newer("statmount"),
		newer("listmount"),
		newer("lsm_get_self_attr"),
		newer("lsm_set_self_attr"),
		newer("lsm_list_modules"),

		// Obsolete, unimplemented or internal: named so that the table is
		// complete; the default would refuse them anyway.
		quiet(always("remap_file_pages")),
		quiet(amd64Only("_sysctl")),
		quiet(amd64Only("ustat")),
		quiet(amd64Only("sysfs")),
		quiet(amd64Only("create_module")),
		quiet(amd64Only("get_kernel_syms")),
		quiet(amd64Only("query_module")),
		quiet(amd64Only("getpmsg")),
		quiet(amd64Only("putpmsg")),
		quiet(amd64Only("afs_syscall")),
		quiet(amd64Only("tuxcall")),
		quiet(amd64Only("security")),
		quiet(amd64Only("vserver")),
		quiet(amd64Only("epoll_ctl_old")),
		quiet(amd64Only("epoll_wait_old")),
		quiet(amd64Only("set_thread_area")),
		quiet(amd64Only("get_thread_area")),
		quiet(amd64Only("uretprobe")),
		quiet(arm64Only("arch_specific_syscall")),
	}
	for _, name := range arm64Time64 {
		t = append(t, quiet(arm64Only(name)))
	}
	return t
})

// setID denies name when its mode (argument mode) has the set-user-ID or
// set-group-ID bit.
func setID(name string, mode int, goarch string) rule {
	r := rule{Rule: Rule{Syscall: name, Errno: "EPERM", GOARCH: goarch,
		When: fmt.Sprintf("mode (argument %d) has S_ISUID or S_ISGID (0o6000)", mode)},
		cond: seccompbpf.ArgumentConditions{{Argument: uint32(mode), Operation: seccompbpf.BitsSet, Value: setIDBits}}}
	return r
}

// setIDOpen denies an open call (flags in argument flags, the mode
// after them) that creates a file with the set-user-ID or set-group-ID
// bit.
func setIDOpen(name string, flags int, goarch string) rule {
	return rule{Rule: Rule{Syscall: name, Errno: "EPERM", GOARCH: goarch,
		When: fmt.Sprintf("flags (argument %d) include O_CREAT or O_TMPFILE and mode (argument %d) has S_ISUID or S_ISGID (0o6000)", flags, flags+1)},
		cond: seccompbpf.ArgumentConditions{
			{Argument: uint32(flags), Operation: seccompbpf.BitsSet, Value: oCreate},
			{Argument: uint32(flags + 1), Operation: seccompbpf.BitsSet, Value: setIDBits},
		}}
}

func arm64Only(name string) rule {
	r := always(name)
	r.GOARCH = "arm64"
	return r
}

// arm64Time64 are the 32-bit time64 calls go-seccomp-bpf lists for arm64,
// where they exist only for AArch32 programs (which the architecture check
// kills); a native call with their numbers reaches no system call.
var arm64Time64 = []string{
	"clock_gettime64", "clock_settime64", "clock_adjtime64", "clock_getres_time64",
	"clock_nanosleep_time64", "timer_gettime64", "timer_settime64", "timerfd_gettime64",
	"timerfd_settime64", "utimensat_time64", "pselect6_time64", "ppoll_time64",
	"io_pgetevents_time64", "recvmmsg_time64", "mq_timedsend_time64", "mq_timedreceive_time64",
	"semtimedop_time64", "rt_sigtimedwait_time64", "futex_time64", "sched_rr_get_interval_time64",
}

// Rules returns the filter's rules for every supported GOARCH, in the
// order of the package documentation: one entry per system call, or per
// condition where a call is denied under several. The result is a copy.
func Rules() []Rule {
	t := table()
	rules := make([]Rule, len(t))
	for i, r := range t {
		rules[i] = r.Rule
	}
	return rules
}

// errnoValue returns the Linux errno a Rule.Errno names.
func errnoValue(name string) (uint32, error) {
	switch name {
	case "EPERM":
		return errnoEPERM, nil
	case "ENOSYS":
		return errnoENOSYS, nil
	}
	return 0, fmt.Errorf("seccomp: rule errno %q is neither EPERM nor ENOSYS", name)
}
