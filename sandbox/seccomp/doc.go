// Package seccomp is the system call filter of cordon's sandbox: a
// seccomp-BPF allowlist (Linux, Documentation/userspace-api/seccomp_filter.rst),
// assembled with github.com/elastic/go-seccomp-bpf and loaded by Install on
// the calling OS thread only, for the processes that thread then starts.
//
// The filter is one layer of several. It does not confine file or network
// access (Landlock, namespaces and the egress proxy do); it keeps programs
// to the kernel interfaces ordinary programs use, and away from those that
// have served to escape sandboxes or to attack the kernel.
//
// # Default deny
//
// Allowed lists the system calls the filter lets through (allow.go), in
// groups: files, I/O, polling, memory, processes, credentials, signals,
// time, scheduling, limits, sockets, IPC and self-restriction. The list
// follows Docker's default profile for a container without added
// capabilities, less what the rules below deny. Every other call is
// denied: it does nothing and returns -1 with errno EPERM, or ENOSYS when
// its number is above the newest call go-seccomp-bpf knows (a call newer
// than this table, which its callers must expect a kernel to lack). The
// rules below are reviewed decisions: calls denied on purpose, with
// ENOSYS where callers fall back on it, and conditions under which an
// allowed call (clone, ioctl, personality, prctl, madvise, setrlimit,
// prlimit64, socket, socketpair) is refused. Every call go-seccomp-bpf knows is either
// allowed or named by a rule; TestTableComplete checks it, so a new
// go-seccomp-bpf release cannot add a call nobody classified. Reachable
// counts the system call numbers the filter can let through.
//
// Calls whose newer variants glibc and other libraries try first and fall
// back from on ENOSYS are allowed where the variant is harmless: statx,
// faccessat2, close_range, fchmodat2, rseq, epoll_pwait2,
// futex_waitv, pidfd_open and pidfd_send_signal. clone3 is not (its flags
// are in memory), and answers ENOSYS.
//
// # Architecture checks
//
// Supported GOARCH values are amd64 and arm64. On any other the package
// returns errors wrapping errors.ErrUnsupported. 386 in particular is left
// out on purpose: its socketcall(2) passes the address family in memory,
// where the socket rule cannot read it.
//
// Before any rule the filter checks seccomp_data.arch:
//
//   - A call made under another audit architecture kills the process
//     (SECCOMP_RET_KILL_PROCESS). On amd64 that is an i386 call, through
//     int $0x80 or from a 32-bit program; on arm64 an AArch32 call. Such a
//     call is numbered from a different table, so without this check it
//     would slip past every rule. go-seccomp-bpf alone answers it with the
//     default action, ALLOW; this package puts its own check in front.
//   - On amd64, a call numbered 0x40000000 or above, which covers every
//     x32 call (the x32 bit is 0x40000000), answers ENOSYS, as on a kernel
//     without x32. go-seccomp-bpf adds this check.
//
// # Rules
//
// Rules returns the list below. A denied call does nothing and returns -1
// with errno EPERM, except clone3 and the newer variants below, which get
// ENOSYS. Denials use EPERM,
// not the errno the kernel would give for a missing feature, so that a
// denial is recognisably policy, and so that the tests can tell the
// filter's answer from the kernel's. Conditions compare all 64 bits of an
// argument.
//
// Mounts and the view of the file system: mount, umount2, pivot_root,
// chroot, and the new mount API open_tree, open_tree_attr, move_mount,
// fsopen, fsconfig, fsmount, fspick, mount_setattr. Filters that listed
// only mount missed the new API (CVE-2021-41133, Flatpak).
//
// Namespaces: unshare and setns always; clone when its flags (argument 0)
// include CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
// CLONE_NEWPID, CLONE_NEWNET or CLONE_NEWCGROUP. A user namespace makes
// kernel code that needs CAP_SYS_ADMIN reachable, a common first step of
// kernel exploits. Plain clone, as fork, vfork and thread creation use it,
// is allowed. CLONE_NEWTIME is not in the clone mask: in clone(2) the low
// byte is the exit signal, so a time namespace can only be asked for
// through clone3 or unshare.
//
// clone3 answers ENOSYS: its flags are in memory, which seccomp cannot
// read, so it would bypass the clone rule (also CVE-2021-41133). ENOSYS
// makes glibc and other callers fall back to clone.
//
// Other processes: ptrace, process_vm_readv, process_vm_writev and
// pidfd_getfd read or change another process or take its files.
//
// Kernel code and instrumentation: init_module, finit_module,
// delete_module, kexec_load and kexec_file_load load or replace kernel
// code; bpf and perf_event_open are large kernel interfaces with a long
// record of vulnerabilities. The keyring, keyctl, add_key and
// request_key, is not namespaced.
//
// Exploitation aids and seccomp bypasses: userfaultfd lets a process stall
// the kernel inside a page fault, a standard way to win kernel races.
// open_by_handle_at opens a file by handle with no path walk, the
// "shocker" container escape; name_to_handle_at makes the handles.
// io_uring_setup, io_uring_enter and io_uring_register: io_uring performs
// operations (open, connect, and since Linux 5.19 socket creation) in the
// kernel without passing through seccomp, so it would bypass every rule
// here. personality when the persona (argument 0) is neither 0 (PER_LINUX)
// nor 0xffffffff (a query; also accepted sign-extended, as -1, since the
// kernel reads 32 bits): other personas turn off address space
// randomisation (ADDR_NO_RANDOMIZE) or make readable memory executable
// (READ_IMPLIES_EXEC) for the programs started afterwards; this also
// refuses linux32 and setarch -R. On amd64 only: modify_ldt, iopl and ioperm,
// x86 segment and I/O port control.
//
// Host administration: acct, quotactl, quotactl_fd, syslog (the kernel log
// can leak kernel addresses), swapon, swapoff, reboot, vhangup, and
// fanotify_init (watching whole file systems).
//
// NUMA memory placement: mbind, set_mempolicy, set_mempolicy_home_node,
// move_pages and migrate_pages. move_pages and migrate_pages act on other
// processes; the other three only tune the caller's own memory, and are
// denied anyway, as a group: they are a performance hint an agent can do
// without, and a caller that gets EPERM keeps the default policy.
//
// The clock: settimeofday, clock_settime, clock_adjtime and adjtimex.
// adjtimex is clock_adjtime(CLOCK_REALTIME, ...); whether either only
// reads (modes = 0) is in memory, so both are denied whole.
//
// Obsolete: lookup_dcookie, nfsservctl and, on amd64, uselib.
//
// Terminals, in ioctl's request (argument 1):
//
//   - a request that is not a 32-bit value zero- or sign-extended to 64
//     bits, that is one in [0x1_00000000, 0xFFFFFFFF_80000000). The kernel
//     reads only the low 32 bits, so a filter comparing 64 bits could be
//     dodged by setting high ones (CVE-2019-10063, Flatpak). This rule is
//     why the next two are safe to state as equalities. Sign-extended
//     requests are allowed because musl declares the request an int and
//     sign-extends it: every request with bit 31 set (the _IOC_READ
//     direction, as in TIOCGPTN, which openpty uses) reaches the kernel
//     with its high 32 bits all set. Such a request has bit 31 set, so it
//     cannot be TIOCSTI or TIOCLINUX.
//   - TIOCSTI (0x5412), which pushes input into a terminal; through the
//     controlling terminal it runs commands in the user's shell after the
//     sandbox exits (CVE-2017-5226, bubblewrap).
//   - TIOCLINUX (0x541C), whose selection paste on a virtual console does
//     the same (CVE-2023-28100, Flatpak).
//
// Address families: socket and socketpair unless the family (argument 0)
// is AF_UNIX (1), AF_INET (2) or AF_INET6 (10). Denied are, among others,
// AF_NETLINK (routing, firewall and audit configuration; a large
// interface), AF_PACKET (raw frames), AF_VSOCK (a channel to the hypervisor
// and host services that does not pass through the egress proxy) and
// AF_ALG (kernel crypto).
//
// Memory files: memfd_create, always. A memfd lives on an internal mount
// that neither a noexec mount nor Landlock covers: executing one
// (execveat, /proc/self/fd/N) would start a program no exec rule
// allowed, and even one sealed with MFD_NOEXEC_SEAL can still be mapped
// executable by the dynamic loader run directly. memfd_secret, always: a
// secret memory file is a memory file too, and its pages are taken out of
// the kernel's direct map, which no sandboxed program needs.
//
// Host writeback: sync and syncfs, always. sync writes back every file
// system on the host, and syncfs the one a descriptor is on (the
// runtime's, say): work the run would make the host do, outside its
// cgroup's limits, which its own tmpfs mounts never need. libc's sync
// returns nothing, so a program that calls it goes on; syncfs reports
// EPERM. fsync and fdatasync, on the program's own files, stay allowed.
//
// Core dumps: setrlimit when the resource (argument 0) is RLIMIT_CORE (4),
// and prlimit64 when the resource (argument 1) is RLIMIT_CORE and a new
// limit (argument 2) is given; reading the limit stays allowed. The
// sandbox sets RLIMIT_CORE to 1 (soft and hard): when core_pattern pipes
// cores to a helper, the kernel runs that helper as root on the host with
// the program's memory whatever the limit is, 0 included, except for
// exactly 1, at which it aborts the dump; and 1 byte is below the smallest
// core a file dump writes. Lowering the limit to 0 is always permitted by
// the kernel, so it is the filter that keeps it at 1. The kernel reads the
// resource as 32 bits, so a resource with any higher bit set is refused as
// well (setrlimit always; prlimit64 when it sets).
//
// Memory merging: prctl when the option (argument 0) is
// PR_SET_MEMORY_MERGE (67), and madvise when the advice (argument 2) is
// MADV_MERGEABLE (12): no program opts into KSM, so none of its pages is
// deduplicated with another run's (a timing side channel across runs and
// tenants). Both are C ints the kernel truncates to 32 bits, so a value
// with a higher bit set is refused as well.
//
// Set-ID files: chmod, fchmod, fchmodat and fchmodat2 when the mode has
// S_ISUID or S_ISGID (0o6000); creat, mkdir, mkdirat, mknod and mknodat
// when the mode has them; open and openat when the flags include O_CREAT
// or O_TMPFILE and the mode has them. Through a writable host path (an
// rw or rwx fs grant) a file the program makes is the host's, where the
// sandbox's nosuid does not apply: a set-user-ID copy of a shell owned by
// the tenant's host uid would let any host user act as that uid. openat2
// answers ENOSYS (its mode is in memory the filter cannot read); callers
// fall back to openat.
//
// Other processes and the host: kcmp compares the kernel objects of two
// processes, and process_madvise and process_mrelease act on another
// process's memory; all three need what ptrace needs. sethostname and
// setdomainname (the UTS namespace refuses them anyway without
// CAP_SYS_ADMIN). fanotify_mark, useless without fanotify_init. cachestat
// reports which pages of a file are in the page cache, a side channel on
// the runtime files other processes read.
//
// Newer variants, which answer ENOSYS so that callers take the fallback
// they have for older kernels: futex_wake, futex_wait and futex_requeue
// (futex is allowed); setxattrat, getxattrat, listxattrat and
// removexattrat (the *xattr calls are allowed); statmount and listmount
// (/proc/self/mountinfo); lsm_get_self_attr, lsm_set_self_attr and
// lsm_list_modules (/proc/self/attr).
//
// Quiet: obsolete, unimplemented or internal calls, named only so that
// the table is complete; the default answers them the same way.
// remap_file_pages (deprecated, emulated); on amd64 _sysctl, ustat,
// sysfs, create_module, get_kernel_syms, query_module, getpmsg, putpmsg,
// afs_syscall, tuxcall, security, vserver, epoll_ctl_old,
// epoll_wait_old, set_thread_area and get_thread_area (32-bit TLS
// descriptors), and uretprobe (the kernel's uprobe trampoline calls it);
// on arm64 arch_specific_syscall and the 32-bit time64 calls, whose
// numbers only AArch32 programs use: clock_gettime64, clock_settime64,
// clock_adjtime64, clock_getres_time64, clock_nanosleep_time64,
// timer_gettime64, timer_settime64, timerfd_gettime64, timerfd_settime64,
// utimensat_time64, pselect6_time64, ppoll_time64, io_pgetevents_time64,
// recvmmsg_time64, mq_timedsend_time64, mq_timedreceive_time64,
// semtimedop_time64, rt_sigtimedwait_time64, futex_time64 and
// sched_rr_get_interval_time64.
//
// # Threads and processes
//
// Install affects the calling thread; see its documentation for what the
// caller must do with that thread and what inherits the filter.
package seccomp
