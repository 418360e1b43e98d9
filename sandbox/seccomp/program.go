package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// ErrUnavailable reports that this kernel cannot load the filter: it lacks
// seccomp filter mode or an action the filter uses.
var ErrUnavailable = errors.New("seccomp: filter unavailable")

// arches maps each supported GOARCH to go-seccomp-bpf's description of it.
// Others are refused, among them 386, whose socketcall(2) carries the
// address family in memory, where the socket rule cannot see it.
var arches = map[string]*arch.Info{
	"amd64": arch.X86_64,
	"arm64": arch.AARCH64,
}

// archInfo returns the description of goarch, or an error wrapping
// errors.ErrUnsupported.
func archInfo(goarch string) (*arch.Info, error) {
	info, ok := arches[goarch]
	if !ok {
		return nil, fmt.Errorf("seccomp: no policy for GOARCH %q (only amd64 and arm64): %w", goarch, errors.ErrUnsupported)
	}
	return info, nil
}

// placeholder is the default action handed to go-seccomp-bpf, which
// accepts only its own actions: SECCOMP_RET_TRAP, which the filter uses
// nowhere else. assemble replaces every return of it with a jump to its
// own default.
const placeholder = seccompbpf.ActionTrap

// policies returns the go-seccomp-bpf policies of rules and allow on
// goarch, which assemble chains: one per call with conditional rules
// (EPERM when a condition holds), then one of the allowed calls and the
// calls that answer ENOSYS. Each policy's default, the placeholder, goes
// on to the next policy, and after the last to assemble's default.
//
// Each conditional call has a policy of its own because go-seccomp-bpf
// loads arguments into the accumulator and then compares the next call's
// number against it without loading the number again; a policy starts by
// loading it. A call denied always with EPERM is not assembled: the
// default answers it the same way. policies checks every name against
// goarch's table, and that no call is both allowed and denied always.
func policies(goarch string, rules []rule, allow []string) ([]*seccompbpf.Policy, error) {
	info, err := archInfo(goarch)
	if err != nil {
		return nil, err
	}
	allowed := map[string]bool{}
	for _, name := range allow {
		if _, ok := info.SyscallNames[name]; !ok {
			return nil, fmt.Errorf("seccomp: allowed call %q is no system call on %s", name, goarch)
		}
		allowed[name] = true
	}
	conditional := map[string]*seccompbpf.Policy{}
	var ps []*seccompbpf.Policy
	enosys := seccompbpf.SyscallGroup{Action: seccompbpf.ActionErrno | errnoENOSYS}
	for _, r := range rules {
		if r.GOARCH != "" && r.GOARCH != goarch {
			continue
		}
		if _, ok := info.SyscallNames[r.Syscall]; !ok {
			return nil, fmt.Errorf("seccomp: rule %q is no system call on %s", r.Syscall, goarch)
		}
		if _, err := errnoValue(r.Errno); err != nil {
			return nil, err
		}
		switch {
		case r.cond != nil && r.Errno != "EPERM":
			return nil, fmt.Errorf("seccomp: conditional rule for %s answers %s; only EPERM is supported", r.Syscall, r.Errno)
		case r.cond != nil && !allowed[r.Syscall]:
			return nil, fmt.Errorf("seccomp: conditional rule for %s, which is not allowed", r.Syscall)
		case r.cond != nil:
			p := conditional[r.Syscall]
			if p == nil {
				p = &seccompbpf.Policy{DefaultAction: placeholder, Syscalls: []seccompbpf.SyscallGroup{
					{Action: seccompbpf.ActionErrno | errnoEPERM}}}
				conditional[r.Syscall] = p
				ps = append(ps, p)
			}
			p.Syscalls[0].NamesWithCondtions = append(p.Syscalls[0].NamesWithCondtions,
				seccompbpf.NameWithConditions{Name: r.Syscall, Conditions: r.cond})
		case allowed[r.Syscall]:
			return nil, fmt.Errorf("seccomp: %s is both allowed and always denied", r.Syscall)
		case r.Errno == "ENOSYS":
			enosys.Names = append(enosys.Names, r.Syscall)
		}
	}
	// The kernel caches the answer for a call that no argument decides
	// (Linux 5.11 and later), so only the conditional calls run through
	// the allowed group: they come first in it.
	var allowNames []string
	for _, name := range allow {
		if conditional[name] != nil {
			allowNames = append(allowNames, name)
		}
	}
	for _, name := range allow {
		if conditional[name] == nil {
			allowNames = append(allowNames, name)
		}
	}
	return append(ps, &seccompbpf.Policy{
		DefaultAction: placeholder,
		Syscalls: []seccompbpf.SyscallGroup{
			{Action: seccompbpf.ActionAllow, Names: allowNames},
			enosys,
		},
	}), nil
}

// Offsets in struct seccomp_data (include/uapi/linux/seccomp.h).
const (
	offsetNr   = 0
	offsetArch = 4
)

// program assembles the filter for the running GOARCH.
func program() ([]bpf.Instruction, error) {
	return assemble(table(), allowedNames(runtime.GOARCH))
}

// assemble assembles rules and allow for the running GOARCH.
// go-seccomp-bpf resolves system call names for runtime.GOARCH and fails
// on any name its table lacks, so a misspelt rule is an error, never a gap.
//
// go-seccomp-bpf sends a call made under another audit architecture to the
// default action; its numbers would be read from the wrong table. assemble
// therefore puts its own check in front that kills the process on any
// other architecture. The x32 check (a number of 0x40000000 or above
// answers ENOSYS) is go-seccomp-bpf's.
//
// The default action is assemble's: a number above the newest call
// go-seccomp-bpf knows answers ENOSYS, any other EPERM.
func assemble(rules []rule, allow []string) ([]bpf.Instruction, error) {
	info, err := archInfo(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	ps, err := policies(runtime.GOARCH, rules, allow)
	if err != nil {
		return nil, err
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offsetArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccompbpf.ActionKillProcess)},
	}
	for _, p := range ps {
		insts, err := p.Assemble()
		if err != nil {
			return nil, fmt.Errorf("seccomp: assemble policy: %w", err)
		}
		// go-seccomp-bpf ends with the default's return, and copies it in
		// place of a jump too long for a conditional; every copy becomes a
		// jump to what follows: the next policy, or the default below.
		start := len(prog)
		prog = append(prog, insts...)
		next, defaults := len(prog), 0
		for i := start; i < next; i++ {
			if r, ok := prog[i].(bpf.RetConstant); ok && r.Val == uint32(placeholder) {
				prog[i] = bpf.Jump{Skip: uint32(next - i - 1)}
				defaults++
			}
		}
		if defaults == 0 {
			return nil, errors.New("seccomp: go-seccomp-bpf's program has no default return")
		}
	}
	// The default. The accumulator may hold an argument here, so the
	// number is loaded again.
	prog = append(prog,
		bpf.LoadAbsolute{Off: offsetNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: newestKnown(info), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccompbpf.ActionErrno | errnoEPERM)},
		bpf.RetConstant{Val: uint32(seccompbpf.ActionErrno | errnoENOSYS)},
	)
	if !withFastPath {
		return prog, nil
	}
	// The front (fastpath.go) goes between the architecture check and the
	// chain; every jump in the chain is relative, so it stays as it was.
	front, leaves := fastPath(numberRuns(runtime.GOARCH, info, rules, allow))
	const archCheck = 3
	chain, def := archCheck+len(front), len(prog)+len(front)-4
	for _, i := range leaves {
		target := chain
		if front[i].(bpf.Jump).Skip == toDefault {
			target = def
		}
		front[i] = bpf.Jump{Skip: uint32(target - (archCheck + i) - 1)}
	}
	return slices.Concat(prog[:archCheck], front, prog[archCheck:]), nil
}

// withFastPath puts the front (fastpath.go) in the filter; tests turn it
// off to compare the two forms.
var withFastPath = true
