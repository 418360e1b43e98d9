// Package stage does the host-side copying around a sandboxed run: In
// builds the sandbox's workspace from the unit's declared inputs, and Out
// copies back only its declared outputs (docs/SPEC.md §2.6.1 `inputs` and
// `outputs`; the ContentIds it returns are the receipt's `outputs`, §2.6.3).
//
// Threat model. The staging directory (the sandbox's /work) is entirely
// attacker-controlled when Out runs. The host workspace may hold
// attacker-planted symlinks, hard links, FIFOs, sockets and device nodes.
// No sandboxed process runs while In or Out copies. Against that, this
// package guarantees:
//
//   - every path is resolved relative to an open directory descriptor with
//     openat2(2) and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
//     RESOLVE_NO_XDEV, one declared path or one directory entry at a time;
//     no symlink is ever followed, no mount point is crossed, and no path
//     string is ever joined to a host directory name;
//   - only regular files with a single link and directories are copied,
//     and (by In, inside a declared directory) symbolic links that resolve
//     inside that directory; any other symlink, a FIFO, socket, device or
//     hard-linked file anywhere in a declared path is refused, naming the
//     path. Out copies no symlink at all. File types are checked
//     with fstat on the opened descriptor; a FIFO, socket or device is
//     only ever opened with O_PATH, which has no side effects;
//   - limits are checked against the size fstat reports, and again against
//     the bytes actually read, so a file that grows is caught;
//   - Out changes the workspace only after every output has been read,
//     checked and written to temporary files beside its destination; it
//     then moves them into place with renameat2 (RENAME_EXCHANGE where a
//     destination exists, RENAME_NOREPLACE where none does) and, if that
//     fails part way, moves back what it moved. On a file system without
//     RENAME_EXCHANGE (NFS, for one) Out cannot replace existing files and
//     fails. Nothing is ever written through an
//     existing destination: a symlink at an output's path is replaced, not
//     followed. Out never deletes a host file that is not an output.
//
// Where openat2 is not available (Linux before 5.6, other systems, or a
// seccomp filter that hides it), In and Out return an error wrapping
// errors.ErrUnsupported; there is no fallback.
//
// In and Out start no goroutines: every system call runs on the calling
// goroutine, so a caller may lock it to a thread whose file system
// credentials (setfsuid) are those of the sandbox's user.
//
// Staged files get mode 0644, or 0755 when the workspace file has its
// owner's execute bit (which means something only where a run is granted
// rwx on /work: otherwise /work is mounted noexec), and directories 0755.
// A symbolic link inside a declared directory is staged as a link when
// the kernel, resolving it from the input's staged directory with
// RESOLVE_BENEATH, finds it inside that input; any other is refused. Out gives a new file
// mode 0644 and a replaced regular file its old permission bits without
// setuid, setgid and sticky.
package stage

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// Sentinel errors. Every policy decision In and Out make wraps exactly one
// of them, inside a *PathError; test with errors.Is. Errors from the
// operating system (EIO, ENOSPC) are wrapped in a *PathError too but match
// none of these.
var (
	// ErrRefused: a path is not canonical, is not declared, or names or
	// passes through something other than a regular file with one link or
	// a directory.
	ErrRefused = errors.New("refused")
	// ErrLimit: a file, the total or the number of entries exceeds Limits.
	ErrLimit = errors.New("limit exceeded")
	// ErrMissing: a declared path does not exist (for Out: the sandbox did
	// not produce a declared output).
	ErrMissing = errors.New("declared path missing")
)

// PathError reports which path failed and why.
type PathError struct {
	// Path is the workspace-relative path that failed, as declared or as
	// found inside a declared directory. It may be attacker-chosen; print
	// it quoted.
	Path string
	// Reason says what is wrong with it, in words.
	Reason string
	// Err is ErrRefused, ErrLimit, ErrMissing or an operating system error.
	Err error
}

func (e *PathError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("stage: %q: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("stage: %q: %s: %v", e.Path, e.Reason, e.Err)
}

func (e *PathError) Unwrap() error { return e.Err }

func refuse(p, reason string) error { return &PathError{Path: p, Reason: reason, Err: ErrRefused} }

// reservedDir is the workspace's state directory: never staged, never
// written by Out.
const reservedDir = ".cordon"

// Path length limits, those of Linux (NAME_MAX, PATH_MAX).
const (
	maxSegment = 255
	maxPath    = 4096
)

// CheckPath reports whether p is a canonical workspace-relative path: not
// empty, relative, clean (path.Clean(p) == p), with no "." or ".."
// segment and no empty one, no NUL byte, no segment longer than 255 bytes,
// at most 4096 bytes in all, and not ".cordon" or beneath it. The error is
// a *PathError wrapping ErrRefused.
func CheckPath(p string) error {
	switch {
	case p == "":
		return refuse(p, "empty path")
	case len(p) > maxPath:
		return refuse(p, fmt.Sprintf("longer than %d bytes", maxPath))
	case strings.IndexByte(p, 0) >= 0:
		return refuse(p, "contains a NUL byte")
	case p[0] == '/':
		return refuse(p, "not relative")
	case path.Clean(p) != p:
		return refuse(p, "not clean")
	case !plainText(p):
		// A declared path is named in journals and receipts as it is.
		return refuse(p, "not plain text (invalid UTF-8, a control character or a noncharacter)")
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "" || seg == "." || seg == "..":
			// Clean leaves ".." at the start and "." alone; refuse both.
			return refuse(p, fmt.Sprintf("segment %q", seg))
		case len(seg) > maxSegment:
			return refuse(p, fmt.Sprintf("segment longer than %d bytes", maxSegment))
		}
	}
	if p == reservedDir || strings.HasPrefix(p, reservedDir+"/") {
		return refuse(p, "the reserved "+reservedDir+" directory")
	}
	return nil
}

// plainText reports whether s is valid UTF-8 without control characters
// or noncharacters, as a receipt's output paths must be.
func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE {
			return false
		}
	}
	return true
}

// checkPaths checks every declared path and refuses duplicates and paths
// beneath another declared path: each file must have exactly one
// declaration.
func checkPaths(ps []string) error {
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if err := CheckPath(p); err != nil {
			return err
		}
		if seen[p] {
			return refuse(p, "declared twice")
		}
		seen[p] = true
	}
	for _, p := range ps {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				return refuse(p, fmt.Sprintf("beneath declared path %q", d))
			}
		}
	}
	return nil
}

// Limits bounds what In and Out copy in one call. The zero value is
// invalid: every field must be positive.
type Limits struct {
	// MaxFileBytes bounds each regular file.
	MaxFileBytes int64
	// MaxTotalBytes bounds the sum over all files.
	MaxTotalBytes int64
	// MaxFiles bounds the number of entries copied: each regular file, and
	// each directory inside or equal to a declared path. Parent directories
	// of declared paths are not counted.
	MaxFiles int
}

// DefaultLimits returns 256 MiB a file, 1 GiB in all and 20000 entries.
func DefaultLimits() Limits {
	return Limits{MaxFileBytes: 256 << 20, MaxTotalBytes: 1 << 30, MaxFiles: 20000}
}

func (l Limits) check() error {
	if l.MaxFileBytes <= 0 || l.MaxTotalBytes <= 0 || l.MaxFiles <= 0 {
		return fmt.Errorf("stage: invalid Limits %+v: every field must be positive", l)
	}
	return nil
}

// Owner is the owner In gives staged files and directories. -1 in either
// field leaves that ID as the creating process's.
type Owner struct{ UID, GID int }

// File is one regular file copied.
type File struct {
	// Path is workspace-relative.
	Path string
	// Size is the number of bytes copied.
	Size int64
	// ID is the ContentId of the bytes copied.
	ID canon.ID
}

// In copies each declared input from the workspace directory into the
// staging directory, at the same relative path, creating parent
// directories as needed. An input is a regular file or a directory copied
// recursively; it may contain only regular files with one link and
// directories. Files are given mode 0644, directories 0755, and both the
// owner own.
//
// The inputs must pass CheckPath, and none may be equal to or beneath
// another. The staging directory should be empty: In never replaces an
// entry there. On error, staging may hold part of the inputs; it is meant
// to be thrown away. The workspace is only read.
//
// In returns the files copied, sorted by path.
func In(workspace, staging *os.File, inputs []string, own Owner, lim Limits) ([]File, error) {
	if err := lim.check(); err != nil {
		return nil, err
	}
	if own.UID < -1 || own.GID < -1 {
		return nil, fmt.Errorf("stage: invalid Owner %+v", own)
	}
	if err := checkPaths(inputs); err != nil {
		return nil, err
	}
	return in(workspace, staging, inputs, own, lim)
}

// Out copies each declared output from the staging directory back into
// the workspace directory, at the same relative path. A declared output
// must exist in staging and be a regular file with one link, or a
// directory holding only such files and directories; anything else is
// refused. Files inside a declared directory are copied into the matching
// workspace directory, replacing files of the same name; workspace files
// that staging does not have are left alone (Out never deletes).
//
// Missing parent directories are created in the workspace, mode 0755. An
// existing destination that is a symlink is replaced, never followed; an
// existing directory where staging has a file, or a file or symlink where
// staging has a directory, is refused.
//
// The outputs must pass CheckPath, and none may be equal to or beneath
// another.
//
// Out first copies every output to temporary entries (named
// ".cordon-out-…") beside their destinations, checking limits as it reads,
// and only then moves them into place. If Out returns a nil []File and an
// error, the workspace is as it was, unless the error says "WORKSPACE LEFT
// CHANGED": a move into place failed and then undoing an earlier move
// failed too, which takes a failing file system. If Out returns files and
// an error, every output is in place but the old copy of a replaced file
// could not be removed; the error names it.
//
// Out returns the files copied, sorted by path. Durability: each file is
// synced before it is moved into place; the directories are not.
func Out(staging, workspace *os.File, outputs []string, lim Limits) ([]File, error) {
	if err := lim.check(); err != nil {
		return nil, err
	}
	if err := checkPaths(outputs); err != nil {
		return nil, err
	}
	return out(staging, workspace, outputs, lim, false)
}

// OutPresent is Out for declared output files the program may or may not
// have made: a declared output missing from staging (ErrMissing) is
// skipped, and a directory at a declared path refuses the whole copy
// (only a regular file may come back at exactly that path); everything
// else is as for Out, so a symlink, hard link or special file still
// refuses it. The agent runner uses it: a manifest declares exactly the
// files the model may write, and each command writes some of them.
func OutPresent(staging, workspace *os.File, outputs []string, lim Limits) ([]File, error) {
	if err := lim.check(); err != nil {
		return nil, err
	}
	if err := checkPaths(outputs); err != nil {
		return nil, err
	}
	return out(staging, workspace, outputs, lim, true)
}
