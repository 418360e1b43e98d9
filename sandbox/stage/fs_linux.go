package stage

// This file holds every system call the package makes on Linux, each
// wrapped so that path resolution always goes through openat2 with the
// same restrictions.

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// resolve is the openat2 resolution every lookup uses: stay beneath the
// directory, follow no symlink of any kind, cross no mount point.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// maxDepth bounds how deep a declared directory may nest; each level holds
// two descriptors open while it is copied.
const maxDepth = 256

// openat2 opens name beneath the directory dir. name is a declared path
// (checked by CheckPath) or one directory entry. O_NOFOLLOW and O_CLOEXEC
// are always added; mode is used only with O_CREAT.
func openat2(dir int, name string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: resolve,
	}
	for range 16 {
		fd, err := unix.Openat2(dir, name, &how)
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR, unix.EAGAIN:
			// EAGAIN: the kernel saw a concurrent rename and could not
			// prove the lookup stayed beneath dir; try again.
			continue
		case unix.ENOSYS:
			return -1, fmt.Errorf("openat2: %w", errors.ErrUnsupported)
		default:
			return -1, err
		}
	}
	return -1, unix.EAGAIN
}

// lookupErr turns an error from resolving the declared or found path p
// into a *PathError. where names the side, "staging" or "the workspace".
func lookupErr(p, where string, err error) error {
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return &PathError{Path: p, Reason: "openat2 is not available", Err: err}
	case err == unix.ENOENT:
		return &PathError{Path: p, Reason: "does not exist in " + where, Err: ErrMissing}
	case err == unix.ELOOP:
		return refuse(p, "is or passes through a symlink in "+where)
	case err == unix.ENOTDIR:
		return refuse(p, "passes through something that is not a directory in "+where)
	case err == unix.EXDEV:
		return refuse(p, "crosses a mount point in "+where)
	default:
		return &PathError{Path: p, Reason: "open in " + where, Err: err}
	}
}

// kind describes a file type for refusals.
func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	default:
		return fmt.Sprintf("file of unknown type %#o", mode&unix.S_IFMT)
	}
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// checkSource accepts a directory or a regular file with exactly one link:
// a second link could alias a file outside the declared paths.
func checkSource(p, where string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return nil
	case unix.S_IFREG:
		if st.Nlink != 1 {
			return refuse(p, fmt.Sprintf("hard-linked file (%d links) in %s", st.Nlink, where))
		}
		return nil
	default:
		return refuse(p, fmt.Sprintf("%s in %s", kind(st.Mode), where))
	}
}

// fstat stats an open descriptor.
func fstat(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	return st, err
}

// lstatAt stats the entry name in dir without following it and without
// opening anything but an O_PATH descriptor, which has no side effects
// even on a FIFO or device.
func lstatAt(dir int, name string) (unix.Stat_t, error) {
	fd, err := openat2(dir, name, unix.O_PATH, 0)
	if err != nil {
		return unix.Stat_t{}, err
	}
	defer unix.Close(fd)
	return fstat(fd)
}

// openSource opens name beneath dir for copying from it: a directory, or a
// regular file with one link. The type is checked first on an O_PATH
// descriptor, so that nothing else is ever opened for reading, then again
// on the descriptor returned, which must be the same file. p is the path
// for errors.
func openSource(dir int, name, p, where string) (*os.File, unix.Stat_t, error) {
	st, err := lstatAt(dir, name)
	if err != nil {
		return nil, st, lookupErr(p, where, err)
	}
	if err := checkSource(p, where, &st); err != nil {
		return nil, st, err
	}
	flags := unix.O_RDONLY | unix.O_NOCTTY | unix.O_NONBLOCK
	if isDir(&st) {
		flags = unix.O_RDONLY | unix.O_DIRECTORY
	}
	fd, err := openat2(dir, name, flags, 0)
	if err != nil {
		return nil, st, lookupErr(p, where, err)
	}
	st2, err := fstat(fd)
	if err == nil && (st2.Dev != st.Dev || st2.Ino != st.Ino) {
		err = refuse(p, "replaced while it was opened in "+where)
	}
	if err == nil {
		err = checkSource(p, where, &st2)
	}
	if err != nil {
		unix.Close(fd)
		return nil, st, pathErr(p, "fstat", err)
	}
	return os.NewFile(uintptr(fd), p), st2, nil
}

// pathErr wraps err in a *PathError unless it is one already.
func pathErr(p, reason string, err error) error {
	if _, ok := errors.AsType[*PathError](err); ok {
		return err
	}
	return &PathError{Path: p, Reason: reason, Err: err}
}

// mkdirOpen creates the directory name in dir with mode perm (whatever the
// umask) and opens it. It fails with EEXIST if name exists, and removes
// the directory again if it fails after creating it.
func mkdirOpen(dir int, name string, perm uint32) (int, error) {
	if err := unix.Mkdirat(dir, name, 0o700); err != nil {
		return -1, err
	}
	fd, err := openat2(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil {
		if err = unix.Fchmod(fd, perm); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		return -1, err
	}
	return fd, nil
}

// createFile creates the regular file name in dir, which must not exist,
// for writing.
func createFile(dir int, name string) (*os.File, error) {
	fd, err := openat2(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readNames calls fn for each entry of the directory d, in the order the
// file system lists them, reading the listing a batch at a time.
// eachChild opens each entry of the directory src, whose declared path
// is p, on the given side ("the workspace" or "staging"), checks the
// entry's path and calls fn with it open (closed when fn returns).
//
// link, when not nil, is called instead of refusing an entry that is a
// symbolic link (In stages links; Out passes nil and refuses them).
func eachChild(src *os.File, p, where string, fn func(c *os.File, st *unix.Stat_t, name, q string) error, link func(name, q string) error) error {
	dir := int(src.Fd())
	return readNames(src, func(name string) error {
		q := p + "/" + name
		if err := CheckPath(q); err != nil {
			return err
		}
		c, st, err := openSource(dir, name, q, where)
		if err != nil {
			if link != nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return link(name, q)
			}
			return err
		}
		defer c.Close()
		return fn(c, &st, name, q)
	})
}

func readNames(d *os.File, fn func(name string) error) error {
	for {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if err := fn(name); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// budget counts entries and bytes against Limits.
type budget struct {
	lim   Limits
	files int
	bytes int64
}

// entry counts one entry.
func (b *budget) entry(p string) error {
	b.files++
	if b.files > b.lim.MaxFiles {
		return &PathError{Path: p, Reason: fmt.Sprintf("more than %d entries", b.lim.MaxFiles), Err: ErrLimit}
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// copyFile copies the regular file src, whose fstat is st, to dst and
// returns what it copied. The limits are checked against st first and
// then against the bytes actually read; src must have the same size after
// the copy as before and as read.
func (b *budget) copyFile(dst io.Writer, src *os.File, st *unix.Stat_t, p string) (File, error) {
	max := min(b.lim.MaxFileBytes, b.lim.MaxTotalBytes-b.bytes)
	tooBig := func(n int64) error {
		if n > b.lim.MaxFileBytes {
			return &PathError{Path: p, Reason: fmt.Sprintf("larger than %d bytes", b.lim.MaxFileBytes), Err: ErrLimit}
		}
		return &PathError{Path: p, Reason: fmt.Sprintf("total larger than %d bytes", b.lim.MaxTotalBytes), Err: ErrLimit}
	}
	if st.Size > max {
		return File{}, tooBig(st.Size)
	}
	// Read one byte more than allowed, to see a file that grew.
	cr := &countingReader{r: io.LimitReader(src, max+1)}
	id, err := canon.SumReader(io.TeeReader(cr, dst))
	if err != nil {
		return File{}, &PathError{Path: p, Reason: "copy", Err: err}
	}
	if cr.n > max {
		return File{}, tooBig(cr.n)
	}
	after, err := fstat(int(src.Fd()))
	if err != nil {
		return File{}, &PathError{Path: p, Reason: "fstat", Err: err}
	}
	if cr.n != st.Size || after.Size != st.Size {
		return File{}, refuse(p, fmt.Sprintf("changed while copied (size %d, read %d, now %d)", st.Size, cr.n, after.Size))
	}
	b.bytes += cr.n
	return File{Path: p, Size: cr.n, ID: id}, nil
}

// checkRoot checks that f is an open directory and returns its descriptor.
func checkRoot(f *os.File, what string) (int, error) {
	if f == nil {
		return -1, fmt.Errorf("stage: %s directory is nil", what)
	}
	fd := int(f.Fd())
	st, err := fstat(fd)
	if err != nil {
		return -1, fmt.Errorf("stage: %s directory: %w", what, err)
	}
	if !isDir(&st) {
		return -1, fmt.Errorf("stage: %s is a %s, not a directory: %w", what, kind(st.Mode), ErrRefused)
	}
	return fd, nil
}
