package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

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

// freezerOf returns the file among dirs that freezes the group (v2
// cgroup.freeze, v1 freezer.state) and the value that reads frozen and
// the one that thaws, or an error wrapping ErrUnavailable.
func freezerOf(dirs []string) (file, frozen, thawed string, err error) {
	for _, d := range dirs {
		if err := cgroupDir(d); err != nil {
			return "", "", "", err
		}
	}
	for _, d := range dirs {
		if f := filepath.Join(d, "cgroup.freeze"); exists(f) {
			return f, "1", "0", nil
		}
		if f := filepath.Join(d, "freezer.state"); exists(f) {
			return f, "FROZEN", "THAWED", nil
		}
	}
	return "", "", "", fmt.Errorf("%w: no cgroup.freeze or freezer.state in %q: the group cannot have been frozen", ErrUnavailable, dirs)
}

func frozenLeftover(dirs []string) (bool, error) {
	file, frozen, _, err := freezerOf(dirs)
	if err != nil {
		return false, err
	}
	s, err := readState(file)
	if err != nil {
		return false, fmt.Errorf("cgroup: %w", err)
	}
	return s == frozen, nil
}

// dirProcs reads dir's cgroup.procs, and refuses a dir with a child
// group (whose processes cgroup.procs does not list).
func dirProcs(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			return nil, fmt.Errorf("%w: %s holds the group %s", ErrBusy, dir, e.Name())
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	pids, err := parsePIDs(b)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %s/cgroup.procs: %w", dir, err)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// frozenProcs checks that the group is frozen and that every process in
// any of dirs is in the frozen group, and returns them.
func frozenProcs(dirs []string, file, frozen string) ([]int, error) {
	s, err := readState(file)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if s != frozen {
		return nil, fmt.Errorf("%w: %s reads %s, not %s: only a frozen group's processes are killed", ErrBusy, file, s, frozen)
	}
	pids, err := dirProcs(filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		other, err := dirProcs(d)
		if err != nil {
			return nil, err
		}
		for _, pid := range other {
			if _, found := slices.BinarySearch(pids, pid); !found {
				return nil, fmt.Errorf("%w: %s holds process %d, which is not in the frozen group %s", ErrBusy, d, pid, filepath.Dir(file))
			}
		}
	}
	// A thaw between the two reads would let a listed process exit and
	// its PID be reused: read the state again.
	if s, err := readState(file); err != nil || s != frozen {
		return nil, fmt.Errorf("%w: %s was thawed while its processes were listed", ErrBusy, filepath.Dir(file))
	}
	return pids, nil
}

func killFrozen(dirs []string, dryRun bool) ([]int, error) {
	file, frozen, thawed, err := freezerOf(dirs)
	if err != nil {
		return nil, err
	}
	pids, err := frozenProcs(dirs, file, frozen)
	if err != nil || dryRun {
		return pids, err
	}
	// A pidfd names one process: opened while the PID is listed in the
	// frozen group, and the group found frozen with the PID still listed
	// after, it names that process.
	fds := make([]int, 0, len(pids))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return nil, fmt.Errorf("cgroup: pidfd_open %d (Linux 5.3 or later): %w", pid, err)
		}
		fds = append(fds, fd)
	}
	again, err := frozenProcs(dirs, file, frozen)
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		if _, found := slices.BinarySearch(again, pid); !found {
			return nil, fmt.Errorf("%w: process %d left the frozen group %s while it was being killed", ErrBusy, pid, filepath.Dir(file))
		}
	}
	var errs []error
	for i, fd := range fds {
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pids[i], err))
		}
	}
	// Frozen tasks die of SIGKILL only once thawed (v1).
	if err := os.WriteFile(file, []byte(thawed), 0); err != nil {
		errs = append(errs, fmt.Errorf("thawing: %w", err))
	}
	if len(errs) > 0 {
		return pids, fmt.Errorf("cgroup: killing the frozen group %s: %w", filepath.Dir(file), errors.Join(errs...))
	}
	empty := func() (bool, error) {
		for _, d := range dirs {
			if ok, err := idle(d); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}
	ok, err := waitUntil(time.Now().Add(KillTimeout), empty)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %q not empty %v after SIGKILL and thaw (is a parent group frozen?)", ErrBusy, dirs, KillTimeout)
	}
	return pids, err
}
