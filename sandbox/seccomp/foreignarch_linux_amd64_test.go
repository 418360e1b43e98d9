package seccomp

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// i386Exit42 returns a static 32-bit x86 program that calls exit(42)
// through int $0x80, the i386 system call entry: one PT_LOAD segment
// holding the headers and three instructions.
func i386Exit42(t *testing.T) []byte {
	t.Helper()
	const base = 0x08048000
	code := []byte{
		0xb8, 0x01, 0x00, 0x00, 0x00, // mov $1, %eax (i386 exit)
		0xbb, 0x2a, 0x00, 0x00, 0x00, // mov $42, %ebx
		0xcd, 0x80, // int $0x80
	}
	hdrSize := binary.Size(elf.Header32{})
	phSize := binary.Size(elf.Prog32{})
	size := uint32(hdrSize + phSize + len(code))
	var ident [elf.EI_NIDENT]byte
	copy(ident[:], elf.ELFMAG)
	ident[elf.EI_CLASS] = byte(elf.ELFCLASS32)
	ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, elf.Header32{
		Ident:     ident,
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(elf.EM_386),
		Version:   uint32(elf.EV_CURRENT),
		Entry:     base + uint32(hdrSize+phSize),
		Phoff:     uint32(hdrSize),
		Ehsize:    uint16(hdrSize),
		Phentsize: uint16(phSize),
		Phnum:     1,
	})
	binary.Write(&b, binary.LittleEndian, elf.Prog32{
		Type:   uint32(elf.PT_LOAD),
		Vaddr:  base,
		Paddr:  base,
		Filesz: size,
		Memsz:  size,
		Flags:  uint32(elf.PF_R | elf.PF_X),
		Align:  0x1000,
	})
	b.Write(code)
	f, err := elf.NewFile(bytes.NewReader(b.Bytes()))
	if err != nil || f.Class != elf.ELFCLASS32 || f.Machine != elf.EM_386 || f.Entry != base+uint64(hdrSize+phSize) {
		t.Fatalf("built a bad ELF file: %v %+v", err, f)
	}
	return b.Bytes()
}

// TestForeignArchitectureKilled runs a 32-bit x86 program from the
// filtered thread. Its system calls reach seccomp under AUDIT_ARCH_I386,
// numbered from the i386 table; go-seccomp-bpf alone would allow them, and
// the check Install adds must kill the process with SIGSYS. Without the
// filter the same program must exit 42, showing that the kernel runs i386
// code; a kernel that cannot (no IA32 emulation) must refuse it either way.
func TestForeignArchitectureKilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exit42")
	if err := os.WriteFile(path, i386Exit42(t), 0o755); err != nil {
		t.Fatal(err)
	}
	control := runChild(t, "exec-control", execEnv+"="+path).byProbe["exec"]
	filtered := runChild(t, "exec-filtered", execEnv+"="+path).byProbe["exec"]
	switch {
	case control.Errno == 0 && control.Signal == "" && control.Exit == 42:
		if filtered.Errno != 0 || filtered.Signal != "SIGSYS" {
			t.Errorf("with the filter: %+v, want killed by SIGSYS", filtered)
		}
	case control.Errno == int(unix.ENOEXEC):
		t.Logf("this kernel does not run i386 programs (%s); checking the filtered run is refused too", control.Detail)
		if filtered.Errno != int(unix.ENOEXEC) {
			t.Errorf("with the filter: %+v, want ENOEXEC as without it", filtered)
		}
	default:
		t.Fatalf("without the filter: %+v, want exit status 42 (or ENOEXEC without IA32 emulation)", control)
	}
}
