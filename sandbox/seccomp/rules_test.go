package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	for _, r := range table {
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
	for _, r := range []rule{
		always("no_such_syscall"),
		{Rule: Rule{Syscall: "no_such_syscall", Errno: "EPERM", When: "argument 0 is 1"},
			cond: seccompbpf.ArgumentConditions{{Argument: 0, Operation: seccompbpf.Equal, Value: 1}}},
	} {
		rules := append(slices.Clip(table), r)
		if _, err := assemble(rules); err == nil || !strings.Contains(err.Error(), "no_such_syscall") {
			t.Errorf("assemble(table + %+v) = %v, want an error naming no_such_syscall", r.Rule, err)
		}
	}
	bad := always("getpid")
	bad.Errno = "EACCES"
	if _, err := assemble([]rule{bad}); err == nil {
		t.Errorf("assemble with errno %q = nil error, want an error", bad.Errno)
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
	for _, r := range table {
		if (r.cond == nil) != (r.When == "") {
			t.Errorf("rule %+v: When must be empty exactly when the rule has no condition", r.Rule)
		}
	}
	// A system call is denied either always or under conditions, never
	// both, with one errno.
	seen := map[string]rule{}
	for _, r := range table {
		if prev, ok := seen[r.Syscall]; ok && (prev.cond == nil || r.cond == nil || prev.Errno != r.Errno || prev.GOARCH != r.GOARCH) {
			t.Errorf("rules %+v and %+v conflict", prev.Rule, r.Rule)
		}
		seen[r.Syscall] = r
	}
}

// TestRuleNamesOnEveryArch checks every name against go-seccomp-bpf's table
// for each supported GOARCH, not only the one running the test, and that
// the amd64-only rules name calls that arm64 does not have.
func TestRuleNamesOnEveryArch(t *testing.T) {
	for goarch, info := range arches {
		for _, r := range rulesForGOARCH(goarch) {
			if _, ok := info.SyscallNames[r.Syscall]; !ok {
				t.Errorf("GOARCH %s (%s): no system call %q", goarch, info.Name, r.Syscall)
			}
		}
		for _, r := range table {
			if r.GOARCH != "" && r.GOARCH != goarch {
				if _, ok := info.SyscallNames[r.Syscall]; ok {
					t.Errorf("rule %+v is limited to %s, but %s has %q", r.Rule, r.GOARCH, goarch, r.Syscall)
				}
			}
		}
	}
}

// TestRulesMatchPolicy checks that Rules lists every system call of the
// go-seccomp-bpf policy and the other way round.
func TestRulesMatchPolicy(t *testing.T) {
	for goarch := range arches {
		p, err := policy(goarch, table)
		if err != nil {
			t.Fatalf("policy(%s) = %v", goarch, err)
		}
		if p.DefaultAction != seccompbpf.ActionAllow {
			t.Errorf("policy(%s).DefaultAction = %v, want allow", goarch, p.DefaultAction)
		}
		var inPolicy []string
		conditions := map[string]int{}
		for _, g := range p.Syscalls {
			inPolicy = append(inPolicy, g.Names...)
			for _, nc := range g.NamesWithCondtions {
				inPolicy = append(inPolicy, nc.Name)
				conditions[nc.Name]++
			}
		}
		slices.Sort(inPolicy)
		inPolicy = slices.Compact(inPolicy)

		var inRules []string
		wantConditions := map[string]int{}
		for _, r := range Rules() {
			if r.GOARCH == "" || r.GOARCH == goarch {
				inRules = append(inRules, r.Syscall)
				if r.When != "" {
					wantConditions[r.Syscall]++
				}
			}
		}
		slices.Sort(inRules)
		inRules = slices.Compact(inRules)
		if !slices.Equal(inPolicy, inRules) {
			t.Errorf("GOARCH %s: policy names\n%v\nRules names\n%v", goarch, inPolicy, inRules)
		}
		for name, n := range wantConditions {
			if conditions[name] != n {
				t.Errorf("GOARCH %s: %s has %d condition sets in the policy, %d rules", goarch, name, conditions[name], n)
			}
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

// TestProgramScan runs every system call number of the running GOARCH
// through the program with several argument patterns. The calls it finds
// denied must be exactly those Rules names, each with its errno.
func TestProgramScan(t *testing.T) {
	vm, info := newVM(t)
	patterns := [][6]uint64{
		{},
		{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)},
		{0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF},
		{1 << 32, 1 << 32, 1 << 32, 1 << 32, 1 << 32, 1 << 32},
	}
	wantErrno := map[string]uint32{}
	for _, r := range rulesForGOARCH(runtime.GOARCH) {
		e, _ := errnoValue(r.Errno)
		wantErrno[r.Syscall] = 0x00050000 | e
	}
	var denied []string
	for nr, name := range info.SyscallNumbers {
		for _, args := range patterns {
			got := run(t, vm, uint32(nr), uint32(info.ID), args)
			if got == retAllow {
				continue
			}
			if got != wantErrno[name] {
				t.Errorf("%s%v = %#x, want allow or %#x", name, args, got, wantErrno[name])
			}
			denied = append(denied, name)
		}
	}
	slices.Sort(denied)
	denied = slices.Compact(denied)
	if want := distinctNames(rulesForGOARCH(runtime.GOARCH)); !slices.Equal(denied, want) {
		t.Errorf("denied by the program:\n%v\nnamed by Rules:\n%v", denied, want)
	}
}

// TestDocListsRules checks that the package documentation names every
// rule's system call.
func TestDocListsRules(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range distinctNames(table) {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).Match(doc) {
			t.Errorf("doc.go does not mention %s", name)
		}
	}
}
