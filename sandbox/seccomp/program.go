package seccomp

import (
	"errors"
	"fmt"
	"runtime"

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

// policy returns the go-seccomp-bpf policy of the rules that apply on
// goarch: default ALLOW, one group per errno.
func policy(goarch string, rules []rule) (*seccompbpf.Policy, error) {
	if _, err := archInfo(goarch); err != nil {
		return nil, err
	}
	groups := map[string]*seccompbpf.SyscallGroup{}
	var order []string
	for _, r := range rules {
		if r.GOARCH != "" && r.GOARCH != goarch {
			continue
		}
		g := groups[r.Errno]
		if g == nil {
			errno, err := errnoValue(r.Errno)
			if err != nil {
				return nil, err
			}
			g = &seccompbpf.SyscallGroup{Action: seccompbpf.ActionErrno | seccompbpf.Action(errno)}
			groups[r.Errno] = g
			order = append(order, r.Errno)
		}
		if r.cond == nil {
			g.Names = append(g.Names, r.Syscall)
		} else {
			g.NamesWithCondtions = append(g.NamesWithCondtions,
				seccompbpf.NameWithConditions{Name: r.Syscall, Conditions: r.cond})
		}
	}
	p := &seccompbpf.Policy{DefaultAction: seccompbpf.ActionAllow}
	for _, errno := range order {
		p.Syscalls = append(p.Syscalls, *groups[errno])
	}
	return p, nil
}

// offsetArch is the offset of arch in struct seccomp_data
// (include/uapi/linux/seccomp.h).
const offsetArch = 4

// program assembles the filter for the running GOARCH.
func program() ([]bpf.Instruction, error) {
	return assemble(table)
}

// assemble assembles rules for the running GOARCH. go-seccomp-bpf
// resolves system call names for runtime.GOARCH and fails on any name its
// table lacks, so a misspelt rule is an error, never a gap.
//
// go-seccomp-bpf sends a call made under another audit architecture to the
// default action, which here is ALLOW; its numbers would be read from the
// wrong table and pass every rule. assemble therefore puts its own check
// in front that kills the process on any other architecture. The x32 check
// (a number of 0x40000000 or above answers ENOSYS) is go-seccomp-bpf's.
func assemble(rules []rule) ([]bpf.Instruction, error) {
	info, err := archInfo(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	p, err := policy(runtime.GOARCH, rules)
	if err != nil {
		return nil, err
	}
	insts, err := p.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble policy: %w", err)
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offsetArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccompbpf.ActionKillProcess)},
	}
	return append(guard, insts...), nil
}
