package seccomp

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/net/bpf"
)

// The front answers exactly what the chain alone answers: both forms of
// the filter run in a BPF interpreter on every number of the table and
// beyond, the x32 range, the wrong architecture, and arguments of zeros,
// ones and random bits.
func TestFastPathSameAnswers(t *testing.T) {
	withFastPath = false
	slow, err := program()
	withFastPath = true
	if err != nil {
		t.Fatal(err)
	}
	fast, err := program()
	if err != nil {
		t.Fatal(err)
	}
	if len(fast) <= len(slow) {
		t.Fatalf("the filter has %d instructions with the front, %d without", len(fast), len(slow))
	}
	vmSlow, err := bpf.NewVM(slow)
	if err != nil {
		t.Fatal(err)
	}
	vmFast, err := bpf.NewVM(fast)
	if err != nil {
		t.Fatal(err)
	}
	info, err := archInfo(runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	newest := newestKnown(info)
	var nums []uint32
	for n := uint32(0); n <= newest+64; n++ {
		nums = append(nums, n, n|0x40000000)
	}
	nums = append(nums, 0x3fffffff, 0x7fffffff, 0x80000000, 0xffffffff)
	rng := rand.New(rand.NewPCG(1, 2))
	// seccomp_data as 16 words (nr, arch, ip, args); the interpreter
	// reads each word big-endian, so each is written so.
	words := func(nr, arch uint32, fill func(i int) uint32) []byte {
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b[0:], nr)
		binary.BigEndian.PutUint32(b[4:], arch)
		for i := 2; i < 16; i++ {
			binary.BigEndian.PutUint32(b[4*i:], fill(i))
		}
		return b
	}
	fills := []func(int) uint32{
		func(int) uint32 { return 0 },
		func(int) uint32 { return 0xffffffff },
		func(int) uint32 { return rng.Uint32() },
		func(int) uint32 { return rng.Uint32() & 0xff },
		func(i int) uint32 { return uint32(1) << (rng.Uint32() % 32) },
	}
	allowed, checked := 0, 0
	for _, arch := range []uint32{uint32(info.ID), 0x40000003} {
		for _, nr := range nums {
			for _, fill := range fills {
				in := words(nr, arch, fill)
				a, errA := vmSlow.Run(in)
				b, errB := vmFast.Run(in)
				if errA != nil || errB != nil || a != b {
					t.Fatalf("number %#x, arch %#x: without the front %#x (%v), with it %#x (%v)", nr, arch, a, errA, b, errB)
				}
				checked++
				if uint32(a) == 0x7fff0000 {
					allowed++
				}
			}
		}
	}
	if allowed == 0 {
		t.Fatal("no input was allowed: the comparison saw only denials")
	}
	t.Logf("%d inputs, %d allowed; %d instructions with the front, %d without", checked, allowed, len(fast), len(slow))
}
