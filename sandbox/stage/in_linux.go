package stage

import (
	"cmp"
	"fmt"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// stager copies inputs into the staging directory.
type stager struct {
	root  int
	own   Owner
	b     budget
	dirs  map[string]int // staging parent directories opened so far
	files []File
}

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
	slices.SortFunc(s.files, func(a, b File) int { return cmp.Compare(a.Path, b.Path) })
	return s.files, nil
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
		if err == nil {
			err = s.finish(int(dst.Fd()), 0o644, p)
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
