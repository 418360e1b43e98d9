package seccomp

import (
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
)

// The filter's front: a binary search on the call's number that answers
// at once what no argument decides, before the chain of policies.
//
// Loading a filter, the kernel (Linux 5.11 and later) runs it in an
// emulator for every system call number, to cache the numbers it always
// allows. Through the chain alone a number walked up to all of the
// program's ~480 instructions, which cost about 0.4 ms on every run;
// through the front it takes about 20. What the program answers does not
// change (TestFastPathSameAnswers runs both forms on every number).

// Where the front sends a number.
const (
	toAllow   = iota // allowed, and no rule looks at its arguments
	toChain          // a rule decides it, or it is outside the table: the chain, unchanged
	toDefault        // neither allowed nor ruled: the default's answer
)

// numberRun is a range of numbers the front treats alike, from lo to the
// next run's lo.
type numberRun struct {
	lo    uint32
	class int
}

// numberRuns classifies every number of info's table (goarch's), as policies
// assembles rules and allow; numbers above the newest known call, and the
// x32 range, go to the chain.
func numberRuns(goarch string, info *arch.Info, rules []rule, allow []string) []numberRun {
	newest := newestKnown(info)
	class := make([]int, newest+1)
	for i := range class {
		class[i] = toDefault
	}
	for _, name := range allow {
		if n, ok := info.SyscallNames[name]; ok {
			class[n] = toAllow
		}
	}
	for _, r := range rules {
		if r.GOARCH != "" && r.GOARCH != goarch {
			continue
		}
		if n, ok := info.SyscallNames[r.Syscall]; ok && (r.cond != nil || r.Errno != "EPERM") {
			class[n] = toChain // a conditional rule, or an answer other than the default's
		}
	}
	var runs []numberRun
	for n, c := range class {
		if len(runs) == 0 || runs[len(runs)-1].class != c {
			runs = append(runs, numberRun{lo: uint32(n), class: c})
		}
	}
	return append(runs, numberRun{lo: newest + 1, class: toChain})
}

// fastPath returns the front for runs: it loads the number and ends in a
// return or a jump. Jumps to the chain and to the default are left as
// bpf.Jump with Skip set to toChain or toDefault, in the returned leaves,
// for the caller to aim once it knows where those are.
func fastPath(runs []numberRun) (prog []bpf.Instruction, leaves []int) {
	prog = []bpf.Instruction{bpf.LoadAbsolute{Off: offsetNr, Size: 4}}
	var tree func(rs []numberRun)
	tree = func(rs []numberRun) {
		if len(rs) == 1 {
			switch rs[0].class {
			case toAllow:
				prog = append(prog, bpf.RetConstant{Val: uint32(seccompbpf.ActionAllow)})
			default:
				leaves = append(leaves, len(prog))
				prog = append(prog, bpf.Jump{Skip: uint32(rs[0].class)})
			}
			return
		}
		mid := len(rs) / 2
		// number >= rs[mid].lo: on to the jump to the upper half; else
		// over it, into the lower half.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: rs[mid].lo, SkipTrue: 0, SkipFalse: 1})
		jump := len(prog)
		prog = append(prog, bpf.Jump{})
		tree(rs[:mid])
		prog[jump] = bpf.Jump{Skip: uint32(len(prog) - jump - 1)}
		tree(rs[mid:])
	}
	tree(runs)
	return prog, leaves
}
