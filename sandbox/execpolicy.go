package sandbox

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/exechash"
)

// searchPath is PATH inside the sandbox, and where names are resolved.
var searchPath = []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"}

// runtimeRoots are the host directories the sandbox sees read-only, at
// the same paths. A path that resolves outside them is not in the
// runtime.
var runtimeRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// programDirs are the runtime directories that hold programs rather than
// libraries. Inside the sandbox they are noexec except for the allowed
// executables, which are bound back executable one by one. /bin and /sbin
// count where they are real directories (a host without merged /usr);
// where they are symbolic links into /usr, existingDirs leaves them out
// and their targets are already here.
var programDirs = []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/usr/libexec", "/usr/games", "/usr/local/games"}

// alternatives is Debian's alternatives directory: symbolic links only,
// bound read-only so that /usr/bin/awk → /etc/alternatives/awk resolves.
const alternatives = "/etc/alternatives"

// hashes is shared by every run in this process.
var hashes = exechash.New(4096)

// execPlan is the exec side of a run, decided on the host before start:
// the program, the files Landlock lets the sandbox execute, and the
// runtime files masked because their hash is denied.
type execPlan struct {
	program Program
	// execFiles are host paths (the same inside) of every file execve
	// may open: the allowed executables and their ELF interpreters.
	execFiles []string
	// fs is the plan of the grant set's fs rules (fsgrant_linux.go).
	fs *fsPlan
}

// inRuntime reports whether the clean absolute path p lies in the runtime.
func inRuntime(p string) bool {
	for _, r := range runtimeRoots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// resolve finds name in the runtime: a name without a slash is searched
// in searchPath; an absolute path is taken as is. It returns the path as
// found (for the decision's name) and the fully resolved file, which must
// lie in the runtime.
func resolve(name string, fsp *fsPlan) (found, real string, err error) {
	search := searchPath
	if fsp != nil && len(fsp.search) > 0 {
		search = fsp.search // granted bin directories first (fsgrant_linux.go)
	}
	switch {
	case name == "":
		return "", "", &ExitError{Code: ExitNotFound, Err: fmt.Errorf("%w: empty program name", ErrNotFound)}
	case strings.Contains(name, "/"):
		if !path.IsAbs(name) || path.Clean(name) != name {
			return "", "", &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %q: a program path must be absolute and clean, and lie in the runtime (the workspace and /tmp are not executable)", ErrCannotExec, name)}
		}
		real, err := realPathIn(name, fsp)
		return name, real, err
	}
	for _, dir := range search {
		p := dir + "/" + name
		if err := lstatRuntime(fsp, p); err != nil { // in the image, under one (image_linux.go)
			continue
		}
		real, err := realPathIn(p, fsp)
		if err != nil {
			return "", "", err
		}
		return p, real, nil
	}
	return "", "", &ExitError{Code: ExitNotFound, Err: fmt.Errorf("%w: %q is not in the runtime's PATH (%s)", ErrNotFound, name, strings.Join(search, ":"))}
}

// realRuntimePath resolves every symbolic link in p and requires the
// result to be in the runtime (links through /etc/alternatives are
// followed, as they are inside).
func realRuntimePath(p string) (string, error) { return realPathIn(p, nil) }

// realPathIn is realRuntimePath that also accepts paths beneath the
// executable roots (rx and rwx binds) of the run's fs plan.
func realPathIn(p string, fsp *fsPlan) (string, error) {
	if !inRuntime(p) && !fsp.inExecRoot(p) {
		return "", &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %s is not in the runtime (%s)", ErrCannotExec, p, strings.Join(runtimeRoots, ", "))}
	}
	real, err := evalRuntime(fsp, p) // within the image, under one (image_linux.go)
	if errors.Is(err, fs.ErrNotExist) {
		return "", &ExitError{Code: ExitNotFound, Err: fmt.Errorf("%w: %s", ErrNotFound, p)}
	}
	if err != nil {
		return "", &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %v", ErrCannotExec, err)}
	}
	if !inRuntime(real) && !fsp.inExecRoot(real) {
		return "", &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %s resolves to %s, outside the runtime", ErrCannotExec, p, real)}
	}
	if err := checkImageSide(fsp, p, real); err != nil { // image.go
		return "", err
	}
	return real, nil
}

// hashIn opens an executable regular file of the run's runtime (the
// host's, or its plan's image) without blocking and returns its hash.
func hashIn(fsp *fsPlan, p string) (canon.ID, error) {
	f, fi, err := openRuntimeRegular(fsp, p)
	if err != nil {
		return canon.ID{}, &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %v", ErrCannotExec, err)}
	}
	defer f.Close()
	if fi.Mode().Perm()&0o111 == 0 {
		return canon.ID{}, &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %s is not an executable regular file", ErrCannotExec, p)}
	}
	id, err := hashes.SumFile(f)
	if err != nil {
		return canon.ID{}, &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: hashing %s: %v", ErrCannotExec, p, err)}
	}
	return id, nil
}

// errNotRegular is openRegular's answer for anything but a regular file.
var errNotRegular = errors.New("not a regular file")

// openRegular opens p for reading without blocking (a FIFO or a device
// planted where a program is looked up must not hang cordon: red team
// F6) and requires the descriptor to be a regular file; callers read,
// hash and stat that same descriptor.
func openRegular(p string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", p, errNotRegular, fi.Mode().Type())
	}
	return f, fi, nil
}

// openRuntimeRegular is openRegular for a file of the run's runtime: in
// its image when the plan has one, else on the host.
func openRuntimeRegular(fsp *fsPlan, p string) (*os.File, fs.FileInfo, error) {
	if fsp.image() == nil || !inRuntime(p) {
		return openRegular(p)
	}
	f, err := openRuntime(fsp, p)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", p, errNotRegular, fi.Mode().Type())
	}
	return f, fi, nil
}

// interpreter returns the ELF interpreter (PT_INTERP) of the file at p,
// or "" when it has none (static binaries, scripts). It reads only the
// ELF header and the program headers: most of a binary is never touched.
func interpreter(p string) (string, error) { return interpreterIn(nil, p) }

// interpreterIn is interpreter for a run's plan (its image runtime).
func interpreterIn(fsp *fsPlan, p string) (string, error) {
	f, _, err := openRuntimeRegular(fsp, p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var hdr [64]byte
	if n, _ := io.ReadFull(f, hdr[:]); n < 4 || string(hdr[:4]) != elf.ELFMAG {
		return "", nil // not ELF: a script, or something execve refuses
	}
	bad := func(what string) (string, error) { return "", fmt.Errorf("%s: malformed ELF: %s", p, what) }
	if hdr[elf.EI_CLASS] != byte(elf.ELFCLASS64) || hdr[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		return bad("not a little-endian 64-bit file")
	}
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(hdr[32:]), uint64(le.Uint16(hdr[54:])), uint64(le.Uint16(hdr[56:]))
	if phentsize != 56 || phnum > 4096 {
		return bad("program header table")
	}
	ph := make([]byte, phentsize*phnum)
	if _, err := f.ReadAt(ph, int64(phoff)); err != nil {
		return bad("program header table: " + err.Error())
	}
	for i := uint64(0); i < phnum; i++ {
		e := ph[i*phentsize:]
		if elf.ProgType(le.Uint32(e)) != elf.PT_INTERP {
			continue
		}
		off, size := le.Uint64(e[8:]), le.Uint64(e[32:])
		if size == 0 || size > 4096 {
			return bad("PT_INTERP size")
		}
		b := make([]byte, size)
		if _, err := f.ReadAt(b, int64(off)); err != nil {
			return bad("PT_INTERP: " + err.Error())
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// planExec decides the program and computes the executable set. Only the
// program is decided with its arguments; the other allowed names are
// decided with their granted argument prefix, since the kernel boundary
// cannot see arguments (docs/sandbox.md, "Exec control").
func planExec(e *grant.Enforcer, argv []string) (*execPlan, error) {
	return planExecFS(e, argv, nil)
}

// planExecFS is planExec for a run whose fs grants fsp (nil: none) add
// executable paths and PATH directories: names are found on the
// sandbox's PATH, and files beneath a deny.fs path are never executable.
func planExecFS(e *grant.Enforcer, argv []string, fsp *fsPlan) (*execPlan, error) {
	return planExecNames(e, argv, fsp, nil)
}

// hashMatters reports whether a rule of the grant set pins a hash or
// denies one: then every allowed name's decision depends on its bytes.
func hashMatters(gs *grant.Set) bool {
	m := len(gs.ExecDeny) > 0
	for _, r := range gs.Exec {
		m = m || r.HasB3
	}
	return m
}

// preparedNames are the executables a grant set allows by name, resolved
// with their ELF interpreters ahead of the program (planNames), for a
// grant set whose decisions do not depend on bytes (no hash pinned or
// denied). A prepared sandbox resolves them when it is prepared, so that
// Start resolves and hashes only the program.
type preparedNames struct {
	files []string
}

// planNames resolves the names the grant set allows, and their
// interpreters, as planExecFS would; nil when the decisions depend on
// bytes and every name must be decided at Start.
func planNames(e *grant.Enforcer, fsp *fsPlan) (*preparedNames, error) {
	if hashMatters(e.Set()) {
		return nil, nil
	}
	var files []string
	for _, r := range e.Set().Exec {
		if r.Name == "" {
			continue
		}
		if _, rreal, err := resolve(r.Name, fsp); err == nil {
			files = append(files, rreal)
		}
	}
	interps, err := interpreters(e, fsp, files)
	if err != nil {
		return nil, err
	}
	return &preparedNames{files: append(files, interps...)}, nil
}

// planExecNames is planExecFS with the allowed names already resolved
// (names; nil: resolve them here).
func planExecNames(e *grant.Enforcer, argv []string, fsp *fsPlan, names *preparedNames) (*execPlan, error) {
	found, real, err := resolve(argv[0], fsp)
	if err != nil {
		return nil, err
	}
	id, err := hashIn(fsp, real)
	if err != nil {
		return nil, err
	}
	q := grant.Query{Kind: grant.KindExec, Path: found, B3: id.String(), Argv: append([]string{path.Base(found)}, argv[1:]...)}
	d := e.Decide(q)
	if !d.Allow {
		return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: exec %s: %s (rule %s)", ErrRefused, found, d.Reason, d.Rule)}
	}
	plan := &execPlan{program: Program{Path: found, B3: id, Decision: d}}
	files := []string{real}
	if names != nil && !hashMatters(e.Set()) {
		// The names' interpreters are prepared; the program's is looked
		// up unless the program is one of them. (Should a name's file have
		// changed its interpreter since, the new one is not executable and
		// the exec fails: nothing is widened.)
		var interps []string
		if !slices.Contains(names.files, real) {
			if interps, err = interpreters(e, fsp, files); err != nil {
				return nil, err
			}
		}
		files = slices.Concat(files, names.files, interps)
	} else {
		// When no rule pins a hash and none is denied, a name's decision
		// cannot depend on its bytes: the other allowed names need no hash.
		matters := hashMatters(e.Set())
		for _, r := range e.Set().Exec {
			if r.Name == "" {
				continue // a hash-only rule allows what it matches: the program, if anything
			}
			rf, rreal, err := resolve(r.Name, fsp)
			if err != nil {
				continue // an allowed name the runtime lacks allows nothing
			}
			if !matters {
				files = append(files, rreal)
				continue
			}
			rid, err := hashIn(fsp, rreal)
			if err != nil {
				continue
			}
			rq := grant.Query{Kind: grant.KindExec, Path: rf, B3: rid.String(), Argv: append([]string{r.Name}, r.Args...)}
			if e.Decide(rq).Allow {
				files = append(files, rreal)
			}
		}
		interps, err := interpreters(e, fsp, files)
		if err != nil {
			return nil, err
		}
		files = append(files, interps...)
	}
	files, err = removeDenied(e.Set(), []string{found, real}, files)
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	plan.execFiles = slices.Compact(files)
	return plan, nil
}

// interpreters returns the ELF interpreters of files, resolved in the
// runtime: each allowed ELF file's interpreter must be executable too,
// and one whose hash is denied refuses the run.
func interpreters(e *grant.Enforcer, fsp *fsPlan, files []string) ([]string, error) {
	denied := e.Set().ExecDeny
	var out []string
	for _, f := range files {
		interp, err := interpreterIn(fsp, f)
		if err != nil {
			return nil, &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("%w: %v", ErrCannotExec, err)}
		}
		if interp == "" {
			continue
		}
		ireal, err := realPathIn(interp, fsp.imageOnly()) // the runtime only: the host's or the image's
		if err != nil {
			return nil, err
		}
		iid, err := hashIn(fsp, ireal)
		if err != nil {
			return nil, err
		}
		if slices.Contains(denied, iid) {
			return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: the ELF interpreter %s of %s is denied by content hash", ErrRefused, ireal, f)}
		}
		out = append(out, ireal)
	}
	return out, nil
}
