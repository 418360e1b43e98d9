package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

func (c Config) dirs(path string) ([]string, error) {
	h, err := c.discover()
	if err != nil {
		return nil, err
	}
	switch h.version {
	case 1:
		var bases, out []string
		for _, ctl := range v1Controllers {
			base := h.base[ctl]
			if base == "" || slices.ContainsFunc(bases, func(b string) bool { return sameDir(b, base) }) {
				continue // missing, or co-mounted with one already listed
			}
			bases = append(bases, base)
			out = append(out, filepath.Join(base, path))
		}
		if out == nil {
			return nil, h.check()
		}
		return out, nil
	case 2:
		if h.dir == "" {
			return nil, h.check()
		}
		return []string{filepath.Join(h.dir, path)}, nil
	}
	return nil, h.check()
}

// cgroupDir returns an error unless dir is a directory on a cgroup (v1)
// or cgroup2 file system.
func cgroupDir(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%w: %s is not on a cgroup file system", ErrInvalid, dir)
	}
	return nil
}

func idle(dir string) (bool, error) {
	if err := cgroupDir(dir); err != nil {
		return false, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false, fmt.Errorf("cgroup: %w", err)
	}
	pids, err := parsePIDs(b)
	if err != nil {
		return false, fmt.Errorf("cgroup: %s/cgroup.procs: %w", dir, err)
	}
	return len(pids) == 0, nil
}

func removeIdle(dir string) error {
	ok, err := idle(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s holds processes", ErrBusy, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			return fmt.Errorf("%w: %s holds the group %s", ErrBusy, dir, e.Name())
		}
	}
	// The kernel refuses to remove a group that gained a process or a
	// child since: EBUSY (v1, v2) or ENOTEMPTY.
	if err := syscall.Rmdir(dir); err != nil {
		if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("%w: %s: %v", ErrBusy, dir, err)
		}
		return &os.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}
