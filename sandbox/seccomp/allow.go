package seccomp

import (
	"fmt"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
)

// Allow is one system call the filter lets through. A call that also has
// conditional Rules is let through unless one of them holds.
type Allow struct {
	Syscall string // name in the kernel's syscall table
	Group   string // what the call is for, as docs/sandbox.md groups it
	GOARCH  string // "" on every supported GOARCH; otherwise only on this one
}

// allowGroup is one row of the allowlist: calls of one kind.
type allowGroup struct {
	group  string
	goarch string
	calls  []string
}

// allowlist is the reviewed set of system calls the filter allows; every
// other call is denied. It follows Docker's default profile where that
// profile allows a call without a capability, less what the rules in
// table deny (io_uring, memfds, sync, personality, NUMA placement, ...),
// and adds nothing it denies.
var allowlist = []allowGroup{
	{group: "files and directories", calls: []string{
		"openat", "close", "close_range", "fstat", "statx", "statfs", "fstatfs",
		"faccessat", "faccessat2", "getdents64", "getcwd", "chdir", "fchdir", "mkdirat", "mknodat",
		"unlinkat", "renameat", "renameat2", "linkat", "symlinkat", "readlinkat", "fchmod", "fchmodat",
		"fchmodat2", "fchown", "fchownat", "truncate", "ftruncate", "fallocate", "utimensat", "umask",
		"setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
		"llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr", "inotify_init1",
		"inotify_add_watch", "inotify_rm_watch", "flock", "fsync", "fdatasync", "sync_file_range",
	}},
	{group: "files and directories", goarch: "amd64", calls: []string{
		"newfstatat", "open", "creat", "stat", "lstat", "access", "getdents", "mkdir", "rmdir", "mknod", "unlink",
		"rename", "link", "symlink", "readlink", "chmod", "chown", "lchown", "utime", "utimes",
		"futimesat", "inotify_init",
	}},
	{group: "files and directories", goarch: "arm64", calls: []string{"fstatat"}},
	{group: "descriptors and I/O", calls: []string{
		"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
		"pwritev2", "lseek", "dup", "dup3", "fcntl", "ioctl", "pipe2", "sendfile", "splice", "tee",
		"vmsplice", "copy_file_range", "readahead", "fadvise64",
	}},
	{group: "descriptors and I/O", goarch: "amd64", calls: []string{"dup2", "pipe"}},
	{group: "polling and events", calls: []string{
		"ppoll", "pselect6", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "eventfd2",
		"signalfd4", "timerfd_create", "timerfd_settime", "timerfd_gettime",
	}},
	{group: "polling and events", goarch: "amd64", calls: []string{
		"poll", "select", "epoll_create", "epoll_wait", "eventfd", "signalfd",
	}},
	{group: "asynchronous I/O (not io_uring)", calls: []string{
		"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
	}},
	{group: "memory", calls: []string{
		"brk", "mmap", "munmap", "mprotect", "mremap", "msync", "mincore", "madvise", "mlock", "mlock2",
		"munlock", "mlockall", "munlockall", "membarrier", "pkey_mprotect", "pkey_alloc", "pkey_free",
		"get_mempolicy", "mseal", "map_shadow_stack",
	}},
	{group: "processes and threads", calls: []string{
		"clone", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "getpid", "getppid",
		"gettid", "getpgid", "setpgid", "getsid", "setsid", "set_tid_address", "set_robust_list",
		"get_robust_list", "rseq", "futex", "futex_waitv", "restart_syscall", "prctl", "personality",
		"pidfd_open", "pidfd_send_signal",
	}},
	{group: "processes and threads", goarch: "amd64", calls: []string{"fork", "vfork", "getpgrp", "arch_prctl"}},
	{group: "credentials", calls: []string{
		"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid",
		"setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups",
		"capget", "capset",
	}},
	{group: "signals", calls: []string{
		"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait",
		"rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigsuspend", "sigaltstack", "kill", "tkill",
		"tgkill", "getitimer", "setitimer",
	}},
	{group: "signals", goarch: "amd64", calls: []string{"pause", "alarm"}},
	{group: "time and timers", calls: []string{
		"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "times",
		"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
	}},
	{group: "time and timers", goarch: "amd64", calls: []string{"time"}},
	{group: "scheduling and priority", calls: []string{
		"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
		"sched_getscheduler", "sched_setscheduler", "sched_get_priority_max", "sched_get_priority_min",
		"sched_rr_get_interval", "sched_getattr", "sched_setattr", "getpriority", "setpriority",
		"ioprio_get", "ioprio_set", "getcpu",
	}},
	{group: "limits and system information", calls: []string{
		"getrlimit", "setrlimit", "prlimit64", "getrusage", "sysinfo", "uname", "getrandom",
	}},
	{group: "sockets", calls: []string{
		"socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "shutdown",
		"getsockname", "getpeername", "setsockopt", "getsockopt", "sendto", "recvfrom", "sendmsg",
		"recvmsg", "sendmmsg", "recvmmsg",
	}},
	{group: "System V and POSIX IPC", calls: []string{
		"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget",
		"msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
		"mq_notify", "mq_getsetattr",
	}},
	{group: "restricting oneself further", calls: []string{
		"seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	}},
}

// Allowed returns the calls the filter lets through on every supported
// GOARCH, in the order of docs/sandbox.md. The result is a copy.
func Allowed() []Allow {
	var out []Allow
	for _, g := range allowlist {
		for _, c := range g.calls {
			out = append(out, Allow{Syscall: c, Group: g.group, GOARCH: g.goarch})
		}
	}
	return out
}

// allowedNames returns the calls allowed on goarch, sorted.
func allowedNames(goarch string) []string {
	var names []string
	for _, a := range Allowed() {
		if a.GOARCH == "" || a.GOARCH == goarch {
			names = append(names, a.Syscall)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Reachable returns how many system call numbers of goarch the filter can
// let through: those of the allowed calls, including the ones allowed
// only when no Rule's condition holds. Every other number is denied.
func Reachable(goarch string) (int, error) {
	info, err := archInfo(goarch)
	if err != nil {
		return 0, err
	}
	nums := map[int]bool{}
	for _, name := range allowedNames(goarch) {
		n, ok := info.SyscallNames[name]
		if !ok {
			return 0, fmt.Errorf("seccomp: no system call %q on %s", name, goarch)
		}
		nums[n] = true
	}
	return len(nums), nil
}

// newestKnown is the highest system call number go-seccomp-bpf names on
// info's architecture. A number above it is a call newer than this table,
// which the filter answers with ENOSYS, as a kernel without it would, so
// that callers take their fallbacks.
func newestKnown(info *arch.Info) uint32 {
	var newest int
	for n := range info.SyscallNumbers {
		newest = max(newest, n)
	}
	return uint32(newest)
}
