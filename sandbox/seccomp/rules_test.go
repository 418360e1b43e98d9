package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// These tests need no kernel: they check the table and run the assembled
// program in golang.org/x/net/bpf's interpreter, as the kernel would run
// it. They run on every GOOS whose GOARCH has a policy.

// Return values of the filter (include/uapi/linux/seccomp.h).
const (
	retAllow       = 0x7fff0000
	retKillProcess = 0x80000000
	retEPERM       = 0x00050000 | errnoEPERM
	retENOSYS      = 0x00050000 | errnoENOSYS
)

func rulesForGOARCH(goarch string) []rule {
	var rules []rule
	for _, r := range table() {
		if r.GOARCH == "" || r.GOARCH == goarch {
			rules = append(rules, r)
		}
	}
	return rules
}

func distinctNames(rules []rule) []string {
	var names []string
	for _, r := range rules {
		names = append(names, r.Syscall)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// supportedHere fails the test unless the running GOARCH has a policy, in
// which case program must refuse with errors.ErrUnsupported.
func supportedHere(t *testing.T) *arch.Info {
	t.Helper()
	info, err := archInfo(runtime.GOARCH)
	if err != nil {
		if _, perr := program(); !errors.Is(perr, errors.ErrUnsupported) {
			t.Fatalf("program() on GOARCH %s = %v, want errors.ErrUnsupported", runtime.GOARCH, perr)
		}
		t.Fatalf("GOARCH %s has no policy; these tests need amd64 or arm64", runtime.GOARCH)
	}
	return info
}

func TestAssemble(t *testing.T) {
	supportedHere(t)
	insts, err := program()
	if err != nil {
		t.Fatalf("program() = %v", err)
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		t.Fatalf("bpf.Assemble = %v", err)
	}
	// BPF_MAXINSNS in include/uapi/linux/bpf_common.h.
	if len(raw) == 0 || len(raw) > 4096 {
		t.Fatalf("program has %d instructions, want 1..4096", len(raw))
	}
	if _, err := bpf.NewVM(insts); err != nil {
		t.Fatalf("bpf.NewVM rejects the program: %v", err)
	}
}

func TestAssembleRejectsUnknownSyscall(t *testing.T) {
	supportedHere(t)
	allow := allowedNames(runtime.GOARCH)
	for _, r := range []rule{
		always("no_such_syscall"),
		newer("no_such_syscall"),
		{Rule: Rule{Syscall: "no_such_syscall", Errno: "EPERM", When: "argument 0 is 1"},
			cond: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.Equal, Value: 1}}},
	} {
		rules := append(slices.Clip(table()), r)
		if _, err := assemble(rules, append(slices.Clip(allow), r.Syscall)); err == nil || !strings.Contains(err.Error(), "no_such_syscall") {
			t.Errorf("assemble(table + %+v) = %v, want an error naming no_such_syscall", r.Rule, err)
		}
	}
	if _, err := assemble(table(), append(slices.Clip(allow), "no_such_syscall")); err == nil || !strings.Contains(err.Error(), "no_such_syscall") {
		t.Errorf("assemble with no_such_syscall allowed = %v, want an error naming it", err)
	}
	bad := always("getpid")
	bad.Errno = "EACCES"
	if _, err := assemble([]rule{bad}, nil); err == nil {
		t.Errorf("assemble with errno %q = nil error, want an error", bad.Errno)
	}
	if _, err := assemble([]rule{always("mount")}, []string{"mount"}); err == nil {
		t.Errorf("assemble with mount both allowed and denied = nil error, want an error")
	}
	tb := table()
	cond := tb[slices.IndexFunc(tb, func(r rule) bool { return r.cond != nil })]
	if _, err := assemble([]rule{cond}, nil); err == nil {
		t.Errorf("assemble with a condition on %s, which is not allowed = nil error, want an error", cond.Syscall)
	}
}

func TestRuleTable(t *testing.T) {
	for _, r := range Rules() {
		if _, err := errnoValue(r.Errno); err != nil {
			t.Errorf("rule %+v: %v", r, err)
		}
		if r.GOARCH != "" {
			if _, ok := arches[r.GOARCH]; !ok {
				t.Errorf("rule %+v: GOARCH %q has no policy", r, r.GOARCH)
			}
		}
	}
	for _, r := range table() {
		if (r.cond == nil) != (r.When == "") {
			t.Errorf("rule %+v: When must be empty exactly when the rule has no condition", r.Rule)
		}
		if r.cond != nil && r.Errno != "EPERM" {
			t.Errorf("rule %+v: a conditional rule must answer EPERM", r.Rule)
		}
		if r.quiet && (r.cond != nil || r.Errno != "EPERM") {
			t.Errorf("rule %+v: a quiet rule is an unconditional EPERM", r.Rule)
		}
	}
	// A system call is denied either always or under conditions, never
	// both, with one errno.
	seen := map[string]rule{}
	for _, r := range table() {
		if prev, ok := seen[r.Syscall]; ok && (prev.cond == nil || r.cond == nil || prev.Errno != r.Errno || prev.GOARCH != r.GOARCH) {
			t.Errorf("rules %+v and %+v conflict", prev.Rule, r.Rule)
		}
		seen[r.Syscall] = r
	}
	for _, a := range Allowed() {
		if a.GOARCH != "" {
			if _, ok := arches[a.GOARCH]; !ok {
				t.Errorf("allowed %+v: GOARCH %q has no policy", a, a.GOARCH)
			}
		}
		if a.Group == "" {
			t.Errorf("allowed %+v has no group", a)
		}
	}
}

// TestTableComplete checks, for each supported GOARCH, that every system
// call go-seccomp-bpf knows is either allowed or named by a rule, and that
// a call with conditions is allowed and a call denied always is not.
func TestTableComplete(t *testing.T) {
	for goarch, info := range arches {
		allowed := map[string]bool{}
		for _, name := range allowedNames(goarch) {
			allowed[name] = true
		}
		ruled := map[string]rule{}
		for _, r := range rulesForGOARCH(goarch) {
			ruled[r.Syscall] = r
			switch {
			case r.cond != nil && !allowed[r.Syscall]:
				t.Errorf("GOARCH %s: %s has conditions but is not allowed", goarch, r.Syscall)
			case r.cond == nil && allowed[r.Syscall]:
				t.Errorf("GOARCH %s: %s is both allowed and always denied", goarch, r.Syscall)
			}
		}
		for name := range info.SyscallNames {
			if !allowed[name] && ruled[name].Syscall == "" {
				t.Errorf("GOARCH %s: %s is neither allowed nor named by a rule", goarch, name)
			}
		}
		n := 0
		for _, a := range Allowed() {
			if a.GOARCH == "" || a.GOARCH == goarch {
				n++
			}
		}
		if len(allowed) != n {
			t.Errorf("GOARCH %s: %d allowed entries name %d distinct calls; an entry repeats", goarch, n, len(allowed))
		}
	}
}

// TestRuleNamesOnEveryArch checks every name against go-seccomp-bpf's table
// for each supported GOARCH, not only the one running the test, and that
// the rules and allowed calls limited to one GOARCH name calls that the
// others do not have.
func TestRuleNamesOnEveryArch(t *testing.T) {
	for goarch, info := range arches {
		for _, r := range rulesForGOARCH(goarch) {
			if _, ok := info.SyscallNames[r.Syscall]; !ok {
				t.Errorf("GOARCH %s (%s): no system call %q", goarch, info.Name, r.Syscall)
			}
		}
		for _, name := range allowedNames(goarch) {
			if _, ok := info.SyscallNames[name]; !ok {
				t.Errorf("GOARCH %s (%s): allowed call %q does not exist", goarch, info.Name, name)
			}
		}
		for _, r := range table() {
			if r.GOARCH != "" && r.GOARCH != goarch {
				if _, ok := info.SyscallNames[r.Syscall]; ok {
					t.Errorf("rule %+v is limited to %s, but %s has %q", r.Rule, r.GOARCH, goarch, r.Syscall)
				}
			}
		}
		for _, a := range Allowed() {
			if a.GOARCH != "" && a.GOARCH != goarch {
				if _, ok := info.SyscallNames[a.Syscall]; ok {
					t.Errorf("allowed %+v is limited to %s, but %s has %q", a, a.GOARCH, goarch, a.Syscall)
				}
			}
		}
	}
}

// TestPolicies checks the go-seccomp-bpf policies for each GOARCH: one per
// call with conditions, holding exactly its conditions, then one of the
// allowed calls and the ENOSYS rules; every default is the placeholder
// assemble replaces.
func TestPolicies(t *testing.T) {
	for goarch := range arches {
		ps, err := policies(goarch, table(), allowedNames(goarch))
		if err != nil {
			t.Fatalf("policies(%s) = %v", goarch, err)
		}
		wantConditions := map[string]int{}
		var wantENOSYS []string
		for _, r := range rulesForGOARCH(goarch) {
			if r.cond != nil {
				wantConditions[r.Syscall]++
			} else if r.Errno == "ENOSYS" {
				wantENOSYS = append(wantENOSYS, r.Syscall)
			}
		}
		if len(ps) != len(wantConditions)+1 {
			t.Fatalf("GOARCH %s: %d policies, want %d", goarch, len(ps), len(wantConditions)+1)
		}
		conditions := map[string]int{}
		for _, p := range ps {
			if p.DefaultAction != placeholder {
				t.Errorf("GOARCH %s: a policy's default is %v, want the placeholder", goarch, p.DefaultAction)
			}
		}
		for _, p := range ps[:len(ps)-1] {
			if len(p.Syscalls) != 1 || p.Syscalls[0].Action != seccompbpf.ActionErrno|errnoEPERM || len(p.Syscalls[0].Names) != 0 {
				t.Errorf("GOARCH %s: conditional policy %+v", goarch, p.Syscalls)
				continue
			}
			names := map[string]bool{}
			for _, nc := range p.Syscalls[0].NamesWithCondtions {
				conditions[nc.Name]++
				names[nc.Name] = true
			}
			if len(names) != 1 {
				t.Errorf("GOARCH %s: a conditional policy names %v, want one call", goarch, names)
			}
		}
		if !maps.Equal(conditions, wantConditions) {
			t.Errorf("GOARCH %s: conditions %v, want %v", goarch, conditions, wantConditions)
		}
		last := ps[len(ps)-1].Syscalls
		if len(last) != 2 {
			t.Fatalf("GOARCH %s: last policy has %d groups, want 2", goarch, len(last))
		}
		if g := last[0]; g.Action != seccompbpf.ActionAllow || !slices.Equal(slices.Sorted(slices.Values(g.Names)), allowedNames(goarch)) {
			t.Errorf("GOARCH %s: allow group %v %v, want allow %v", goarch, g.Action, g.Names, allowedNames(goarch))
		}
		if g := last[1]; g.Action != seccompbpf.ActionErrno|errnoENOSYS || !slices.Equal(g.Names, wantENOSYS) {
			t.Errorf("GOARCH %s: ENOSYS group %v, want %v", goarch, g.Names, wantENOSYS)
		}
	}
}

// seccompData encodes struct seccomp_data for the interpreter. The kernel
// loads 32-bit words in native byte order (little-endian on amd64 and
// arm64, which go-seccomp-bpf's argument offsets assume); the interpreter
// loads them big-endian, so each word is stored big-endian at its native
// offset.
func seccompData(nr, auditArch uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], auditArch)
	for i, a := range args {
		off := 16 + 8*i
		binary.BigEndian.PutUint32(b[off:], uint32(a))       // low word first
		binary.BigEndian.PutUint32(b[off+4:], uint32(a>>32)) // then high
	}
	return b
}

func newVM(t *testing.T) (*bpf.VM, *arch.Info) {
	t.Helper()
	info := supportedHere(t)
	insts, err := program()
	if err != nil {
		t.Fatalf("program() = %v", err)
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatalf("bpf.NewVM = %v", err)
	}
	return vm, info
}

func run(t *testing.T, vm *bpf.VM, nr, auditArch uint32, args [6]uint64) uint32 {
	t.Helper()
	ret, err := vm.Run(seccompData(nr, auditArch, args))
	if err != nil {
		t.Fatalf("vm.Run = %v", err)
	}
	return uint32(ret)
}

// TestProgram runs the assembled program on chosen calls.
func TestProgram(t *testing.T) {
	vm, info := newVM(t)
	const (
		sigchld         = 17
		cloneVM         = 0x100
		cloneFS         = 0x200
		cloneFiles      = 0x400
		cloneSighand    = 0x800
		clonePidfd      = 0x1000
		cloneVfork      = 0x4000
		cloneSysvsem    = 0x40000
		cloneThread     = 0x10000
		cloneNewTime    = 0x80
		goThreadFlags   = cloneVM | cloneFS | cloneFiles | cloneSighand | cloneSysvsem | cloneThread
		goForkExecFlags = cloneVfork | cloneVM | clonePidfd | sigchld
		fionread        = 0x541B
		tcgets          = 0x5401
		addrNoRandomize = 0x0040000
		perLinux32      = 0x0008
	)
	type tc struct {
		name    string
		syscall string
		args    [6]uint64
		want    uint32
	}
	cases := []tc{
		{"getpid", "getpid", [6]uint64{}, retAllow},
		{"read", "read", [6]uint64{}, retAllow},
		{"rt_sigreturn", "rt_sigreturn", [6]uint64{}, retAllow},
		{"futex", "futex", [6]uint64{}, retAllow},
		{"kcmp", "kcmp", [6]uint64{}, retEPERM},
		{"sethostname", "sethostname", [6]uint64{}, retEPERM},
		{"remap_file_pages (quiet)", "remap_file_pages", [6]uint64{}, retEPERM},
		{"futex_wake (newer)", "futex_wake", [6]uint64{}, retENOSYS},
		{"listmount (newer)", "listmount", [6]uint64{}, retENOSYS},
		{"statx", "statx", [6]uint64{}, retAllow},
		{"faccessat2", "faccessat2", [6]uint64{}, retAllow},
		{"openat2 (mode in memory)", "openat2", [6]uint64{}, retENOSYS},
		{"fchmodat(0o4755)", "fchmodat", [6]uint64{0, 0, 0o4755}, retEPERM},
		{"fchmodat(0o2755)", "fchmodat", [6]uint64{0, 0, 0o2755}, retEPERM},
		{"fchmodat(0o1777)", "fchmodat", [6]uint64{0, 0, 0o1777}, retAllow},
		{"fchmod(0o6755)", "fchmod", [6]uint64{0, 0o6755}, retEPERM},
		{"fchmod(0o755)", "fchmod", [6]uint64{0, 0o755}, retAllow},
		{"openat(O_CREAT, 0o4755)", "openat", [6]uint64{0, 0, 0o100 | 0o1, 0o4755}, retEPERM},
		{"openat(O_TMPFILE, 0o2755)", "openat", [6]uint64{0, 0, 0o20200000 | 0o2, 0o2755}, retEPERM},
		{"openat(O_CREAT, 0o644)", "openat", [6]uint64{0, 0, 0o100 | 0o1, 0o644}, retAllow},
		{"openat(O_RDONLY, garbage mode)", "openat", [6]uint64{0, 0, 0, 0o6000}, retAllow},
		{"mkdirat(0o2775)", "mkdirat", [6]uint64{0, 0, 0o2775}, retEPERM},
		{"mknodat(S_IFREG|0o4755)", "mknodat", [6]uint64{0, 0, 0o100000 | 0o4755}, retEPERM},
		{"rseq", "rseq", [6]uint64{}, retAllow},
		{"pidfd_open", "pidfd_open", [6]uint64{}, retAllow},
		{"mount", "mount", [6]uint64{}, retEPERM},
		{"fsopen", "fsopen", [6]uint64{}, retEPERM},
		{"unshare(0)", "unshare", [6]uint64{}, retEPERM},
		{"clone3", "clone3", [6]uint64{}, retENOSYS},
		{"clone Go thread", "clone", [6]uint64{goThreadFlags}, retAllow},
		{"clone os/exec", "clone", [6]uint64{goForkExecFlags}, retAllow},
		{"clone fork", "clone", [6]uint64{sigchld}, retAllow},
		{"clone CLONE_NEWTIME bit (exit signal byte)", "clone", [6]uint64{cloneNewTime}, retAllow},
		{"clone high bits only", "clone", [6]uint64{0xFFFFFFFF_00000000 | sigchld}, retAllow},
		{"ioctl FIONREAD", "ioctl", [6]uint64{0, fionread}, retAllow},
		{"ioctl TCGETS", "ioctl", [6]uint64{0, tcgets}, retAllow},
		{"ioctl TIOCSTI", "ioctl", [6]uint64{0, tiocsti}, retEPERM},
		{"ioctl TIOCLINUX", "ioctl", [6]uint64{0, tioclinux}, retEPERM},
		{"ioctl 1<<32|TIOCSTI", "ioctl", [6]uint64{0, 1<<32 | tiocsti}, retEPERM},
		{"ioctl 1<<32|FIONREAD", "ioctl", [6]uint64{0, 1<<32 | fionread}, retEPERM},
		{"ioctl 1<<63", "ioctl", [6]uint64{0, 1 << 63}, retEPERM},
		{"ioctl 1<<32", "ioctl", [6]uint64{0, 1 << 32}, retEPERM},
		{"ioctl TIOCSTI with high bits all set", "ioctl", [6]uint64{0, 0xFFFFFFFF_00000000 | tiocsti}, retEPERM},
		{"ioctl TIOCLINUX with high bits all set", "ioctl", [6]uint64{0, 0xFFFFFFFF_00000000 | tioclinux}, retEPERM},
		{"ioctl largest zero-extended", "ioctl", [6]uint64{0, 0xFFFFFFFF}, retAllow},
		{"ioctl TIOCGPTN sign-extended (musl)", "ioctl", [6]uint64{0, 0xFFFFFFFF_80045430}, retAllow},
		{"ioctl TIOCGPTN zero-extended (glibc, Go)", "ioctl", [6]uint64{0, 0x80045430}, retAllow},
		{"ioctl -1 sign-extended", "ioctl", [6]uint64{0, ^uint64(0)}, retAllow},
		{"ioctl TIOCGPTN with other high bits", "ioctl", [6]uint64{0, 0xFFFFFFFE_80045430}, retEPERM},
		{"ioctl TIOCGPTN with high bit 32", "ioctl", [6]uint64{0, 0x1_80045430}, retEPERM},
		{"ioctl sign-extension of a positive request", "ioctl", [6]uint64{0, 0xFFFFFFFF_7FFFFFFF}, retEPERM},
		{"ioctl TIOCSTI in argument 2", "ioctl", [6]uint64{0, fionread, tiocsti}, retAllow},
		{"personality query", "personality", [6]uint64{personaQuery}, retAllow},
		{"personality PER_LINUX", "personality", [6]uint64{perLinux}, retAllow},
		{"personality PER_LINUX32", "personality", [6]uint64{perLinux32}, retEPERM},
		{"personality ADDR_NO_RANDOMIZE", "personality", [6]uint64{addrNoRandomize}, retEPERM},
		{"personality query sign-extended", "personality", [6]uint64{^uint64(0)}, retAllow},
		{"personality PER_LINUX with high bits", "personality", [6]uint64{0xFFFFFFFF_00000000}, retEPERM},
		{"personality query with high bit 32", "personality", [6]uint64{0x1_FFFFFFFF}, retEPERM},
		{"setrlimit RLIMIT_CORE", "setrlimit", [6]uint64{rlimitCore}, retEPERM},
		{"setrlimit RLIMIT_CORE with high bits", "setrlimit", [6]uint64{0xFFFFFFFF_00000000 | rlimitCore}, retEPERM},
		{"setrlimit RLIMIT_CORE with bit 32", "setrlimit", [6]uint64{above32 | rlimitCore}, retEPERM},
		{"setrlimit RLIMIT_NOFILE", "setrlimit", [6]uint64{7, 0x1000}, retAllow},
		{"prlimit64 set RLIMIT_CORE", "prlimit64", [6]uint64{0, rlimitCore, 0x1000}, retEPERM},
		{"prlimit64 set and get RLIMIT_CORE", "prlimit64", [6]uint64{0, rlimitCore, 0x1000, 0x2000}, retEPERM},
		{"prlimit64 get RLIMIT_CORE", "prlimit64", [6]uint64{0, rlimitCore, 0, 0x2000}, retAllow},
		{"prlimit64 set RLIMIT_CORE with bit 32", "prlimit64", [6]uint64{0, above32 | rlimitCore, 0x1000}, retEPERM},
		{"prlimit64 set RLIMIT_NOFILE", "prlimit64", [6]uint64{0, 7, 0x1000}, retAllow},
		{"socket AF_INET high bit", "socket", [6]uint64{1<<32 | afInet}, retEPERM},
		{"socketpair AF_UNIX", "socketpair", [6]uint64{afUnix}, retAllow},
		{"socketpair AF_NETLINK", "socketpair", [6]uint64{16}, retEPERM},
	}
	for _, flag := range []uint64{cloneNewNS, cloneNewCgroup, cloneNewUTS, cloneNewIPC, cloneNewUser, cloneNewPID, cloneNewNet} {
		cases = append(cases,
			tc{fmt.Sprintf("clone ns flag %#x", flag), "clone", [6]uint64{flag | sigchld}, retEPERM},
			tc{fmt.Sprintf("clone thread + ns flag %#x", flag), "clone", [6]uint64{goThreadFlags | flag}, retEPERM})
	}
	for family := uint64(0); family < 64; family++ {
		want := uint32(retEPERM)
		if family == afUnix || family == afInet || family == afInet6 {
			want = retAllow
		}
		cases = append(cases, tc{fmt.Sprintf("socket family %d", family), "socket", [6]uint64{family, 1}, want})
	}
	newest := newestKnown(info)
	for _, c := range []struct {
		nr   uint32
		want uint32
	}{{newest + 1, retENOSYS}, {1000, retENOSYS}, {0x3FFFFFFF, retENOSYS}, {newest, retAllow}} {
		if c.nr == newest {
			// The newest known call is named: whatever the table says.
			continue
		}
		if got := run(t, vm, c.nr, uint32(info.ID), [6]uint64{}); got != c.want {
			t.Errorf("number %d (newest known %d) = %#x, want %#x", c.nr, newest, got, c.want)
		}
	}
	for _, c := range cases {
		nr, ok := info.SyscallNames[c.syscall]
		if !ok {
			t.Fatalf("%s: no system call %q on %s", c.name, c.syscall, info.Name)
		}
		if got := run(t, vm, uint32(nr), uint32(info.ID), c.args); got != c.want {
			t.Errorf("%s: %s%v = %#x, want %#x", c.name, c.syscall, c.args, got, c.want)
		}
	}
}

// TestProgramArchitecture checks the checks made before any rule.
func TestProgramArchitecture(t *testing.T) {
	vm, info := newVM(t)
	getpid := uint32(info.SyscallNames["getpid"])
	for _, foreign := range []*arch.Info{arch.I386, arch.ARM, arch.X86_64, arch.AARCH64} {
		if foreign.ID == info.ID {
			continue
		}
		for _, nr := range []uint32{0, 1, getpid, 0x40000000 | getpid} {
			if got := run(t, vm, nr, uint32(foreign.ID), [6]uint64{}); got != retKillProcess {
				t.Errorf("call %d under audit arch %s (%#x) = %#x, want kill process", nr, foreign.Name, uint32(foreign.ID), got)
			}
		}
	}
	if runtime.GOARCH == "amd64" {
		for _, nr := range []uint32{0x40000000 | getpid, 0x40000000 | uint32(info.SyscallNames["mount"]), 0xFFFFFFFF} {
			if got := run(t, vm, nr, uint32(info.ID), [6]uint64{}); got != retENOSYS {
				t.Errorf("x32 call %#x = %#x, want ENOSYS", nr, got)
			}
		}
	}
}

// TestProgramScan runs every system call number up to 1023, and a few
// far beyond, through the program with several argument patterns. An
// allowed call must be let through by some pattern and answer only EPERM
// otherwise (its conditions); a call a rule names must always answer the
// rule's errno; any other number must answer EPERM, or ENOSYS above the
// newest call go-seccomp-bpf knows. The count of numbers let through must
// be Reachable's.
func TestProgramScan(t *testing.T) {
	vm, info := newVM(t)
	patterns := [][6]uint64{
		{},
		{afUnix, afUnix, afUnix, afUnix, afUnix, afUnix},
		{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)},
		{0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF},
		{1 << 32, 1 << 32, 1 << 32, 1 << 32, 1 << 32, 1 << 32},
	}
	allowed := map[string]bool{}
	for _, name := range allowedNames(runtime.GOARCH) {
		allowed[name] = true
	}
	wantErrno := map[string]uint32{}
	for _, r := range rulesForGOARCH(runtime.GOARCH) {
		e, _ := errnoValue(r.Errno)
		wantErrno[r.Syscall] = 0x00050000 | e
	}
	newest := newestKnown(info)
	reached := 0
	var nrs []uint32
	for nr := range uint32(1024) {
		nrs = append(nrs, nr)
	}
	nrs = append(nrs, 0x10000, 0x3FFFFFFF)
	for _, nr := range nrs {
		name, known := info.SyscallNumbers[int(nr)]
		let := false
		for _, args := range patterns {
			got := run(t, vm, nr, uint32(info.ID), args)
			switch {
			case got == retAllow && allowed[name]:
				let = true
			case !known && nr > newest && got == retENOSYS:
			case !known && nr <= newest && got == retEPERM:
			case allowed[name] && got == retEPERM && wantErrno[name] == retEPERM:
			case known && !allowed[name] && got == wantErrno[name]:
			default:
				t.Errorf("%d (%q, allowed %v)%v = %#x", nr, name, allowed[name], args, got)
			}
		}
		if allowed[name] && !let {
			t.Errorf("%s is allowed, but no argument pattern got through", name)
		}
		if let {
			reached++
		}
	}
	want, err := Reachable(runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if reached != want {
		t.Errorf("the program lets %d numbers through, Reachable(%s) = %d", reached, runtime.GOARCH, want)
	}
	insts, _ := program()
	t.Logf("%d of %d named calls reachable; %d instructions", reached, len(info.SyscallNumbers), len(insts))
}

// TestDocListsRules checks that the package documentation names every
// rule's system call.
func TestDocListsRules(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range distinctNames(table()) {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).Match(doc) {
			t.Errorf("doc.go does not mention %s", name)
		}
	}
}
