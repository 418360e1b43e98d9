package stage

import (
	"cmp"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// stager copies inputs into the staging directory.
type stager struct {
	root  int
	own   Owner
	b     budget
	dirs  map[string]int // staging parent directories opened so far
	files []File
	input string       // the declared input being copied
	links []stagedLink // symbolic links staged, checked once all is staged
}

// stagedLink is a symbolic link staged inside the declared directory
// input, at the workspace-relative path p.
type stagedLink struct{ input, p string }

func in(workspace, staging *os.File, inputs []string, own Owner, lim Limits) ([]File, error) {
	ws, err := checkRoot(workspace, "workspace")
	if err != nil {
		return nil, err
	}
	root, err := checkRoot(staging, "staging")
	if err != nil {
		return nil, err
	}
	s := &stager{root: root, own: own, b: budget{lim: lim}, dirs: map[string]int{}}
	defer s.close()
	for _, p := range inputs {
		s.input = p
		src, st, err := openSource(ws, p, p, "the workspace")
		if err != nil {
			return nil, err
		}
		up, err := s.parent(path.Dir(p))
		if err == nil {
			err = s.copy(src, &st, up, path.Base(p), p, 0)
		}
		src.Close()
		if err != nil {
			return nil, err
		}
	}
	if err := s.checkLinks(); err != nil {
		return nil, err
	}
	slices.SortFunc(s.files, func(a, b File) int { return cmp.Compare(a.Path, b.Path) })
	return s.files, nil
}

// maxLinkTarget bounds a symbolic link's target (PATH_MAX).
const maxLinkTarget = 4096

// link stages the symbolic link name of the workspace directory src,
// found at p, into the staging directory up: the same target text, read
// once. Whether it stays inside its declared input is checked on the
// staged tree, once everything is staged (checkLinks).
func (s *stager) link(src, up int, name, p string) error {
	if err := s.b.entry(p); err != nil {
		return err
	}
	buf := make([]byte, maxLinkTarget+1)
	n, err := unix.Readlinkat(src, name, buf)
	if err != nil {
		return &PathError{Path: p, Reason: "read symbolic link in the workspace", Err: err}
	}
	if n == 0 || n > maxLinkTarget {
		return refuse(p, "symbolic link with an empty or over-long target")
	}
	if err := unix.Symlinkat(string(buf[:n]), up, name); err != nil {
		return &PathError{Path: p, Reason: "create symbolic link in staging", Err: err}
	}
	if s.own.UID != -1 || s.own.GID != -1 {
		if err := unix.Fchownat(up, name, s.own.UID, s.own.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &PathError{Path: p, Reason: "chown in staging", Err: err}
		}
	}
	s.links = append(s.links, stagedLink{input: s.input, p: p})
	return nil
}

// checkLinks refuses, naming it, every staged symbolic link that does
// not resolve to something inside its own declared input in staging.
// The kernel resolves it (openat2 from the input's staged directory with
// RESOLVE_BENEATH, following links but no magic link and no mount
// point), so an absolute target, a ".." past the input's top, a chain of
// links that walks out, or a link to nothing are all refused as the
// program would see them.
func (s *stager) checkLinks() error {
	for _, l := range s.links {
		root, err := openat2(s.root, l.input, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return lookupErr(l.input, "staging", err)
		}
		how := unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		}
		var fd int
		for range 16 {
			fd, err = unix.Openat2(root, strings.TrimPrefix(l.p, l.input+"/"), &how)
			if err != unix.EINTR && err != unix.EAGAIN {
				break
			}
		}
		unix.Close(root)
		switch {
		case err == nil:
			unix.Close(fd)
		case err == unix.EXDEV:
			return refuse(l.p, fmt.Sprintf("symbolic link that leaves the staged input %q", l.input))
		case err == unix.ENOENT || err == unix.ENOTDIR:
			return refuse(l.p, fmt.Sprintf("symbolic link that resolves to nothing in the staged input %q", l.input))
		case err == unix.ELOOP:
			return refuse(l.p, "symbolic link loop")
		default:
			return &PathError{Path: l.p, Reason: "resolve symbolic link in staging", Err: err}
		}
	}
	return nil
}

func (s *stager) close() {
	for _, fd := range s.dirs {
		unix.Close(fd)
	}
}

// parent returns the staging directory d, creating it and its parents as
// needed.
func (s *stager) parent(d string) (int, error) {
	if d == "." {
		return s.root, nil
	}
	if fd, ok := s.dirs[d]; ok {
		return fd, nil
	}
	up, err := s.parent(path.Dir(d))
	if err != nil {
		return -1, err
	}
	name := path.Base(d)
	fd, err := mkdirOpen(up, name, 0o755)
	switch err {
	case nil:
		s.dirs[d] = fd
		if err := s.chown(fd); err != nil {
			return -1, &PathError{Path: d, Reason: "chown in staging", Err: err}
		}
	case unix.EEXIST:
		// An earlier input's parent.
		fd, err = openat2(up, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return -1, lookupErr(d, "staging", err)
		}
		s.dirs[d] = fd
	default:
		return -1, &PathError{Path: d, Reason: "create directory in staging", Err: err}
	}
	return fd, nil
}

func (s *stager) chown(fd int) error {
	if s.own.UID == -1 && s.own.GID == -1 {
		return nil
	}
	return unix.Fchown(fd, s.own.UID, s.own.GID)
}

// copy copies src, opened from the workspace path p, to the entry name of
// the staging directory up, which it creates. A directory is copied
// recursively; depth is how far p is beneath a declared input.
func (s *stager) copy(src *os.File, st *unix.Stat_t, up int, name, p string, depth int) error {
	if err := s.b.entry(p); err != nil {
		return err
	}
	if !isDir(st) {
		dst, err := createFile(up, name)
		if err != nil {
			return &PathError{Path: p, Reason: "create in staging", Err: err}
		}
		f, err := s.b.copyFile(dst, src, st, p)
		perm := uint32(0o644)
		if st.Mode&0o100 != 0 {
			// The owner's execute bit is kept: a run granted rwx on
			// /work runs a staged program (a virtualenv's interpreter).
			perm = 0o755
		}
		if err == nil {
			err = s.finish(int(dst.Fd()), perm, p)
		}
		if cerr := dst.Close(); err == nil && cerr != nil {
			err = &PathError{Path: p, Reason: "close in staging", Err: cerr}
		}
		if err != nil {
			return err
		}
		s.files = append(s.files, f)
		return nil
	}
	if depth >= maxDepth {
		return &PathError{Path: p, Reason: fmt.Sprintf("nested deeper than %d", maxDepth), Err: ErrLimit}
	}
	fd, err := mkdirOpen(up, name, 0o755)
	if err != nil {
		return &PathError{Path: p, Reason: "create directory in staging", Err: err}
	}
	defer unix.Close(fd)
	if err := s.finish(fd, 0o755, p); err != nil {
		return err
	}
	return eachChild(src, p, "the workspace", func(c *os.File, cst *unix.Stat_t, child, q string) error {
		return s.copy(c, cst, fd, child, q, depth+1)
	}, func(child, q string) error {
		return s.link(int(src.Fd()), fd, child, q)
	})
}

// finish sets a staged entry's mode and owner.
func (s *stager) finish(fd int, perm uint32, p string) error {
	if err := unix.Fchmod(fd, perm); err != nil {
		return &PathError{Path: p, Reason: "chmod in staging", Err: err}
	}
	if err := s.chown(fd); err != nil {
		return &PathError{Path: p, Reason: "chown in staging", Err: err}
	}
	return nil
}
