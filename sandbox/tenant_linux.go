package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Host uid/gid ranges. A run's user namespace maps ids 0..rangeSize-1
// inside to base..base+rangeSize-1 on the host; tenant k owns base =
// rangeBase + k*rangeSize. Index 0 is the single-tenant (S2) range.
const (
	rangeBase  = 1 << 30
	rangeSize  = 65536
	maxTenants = (1<<31 - rangeBase) / rangeSize // keep every id below 2^31
)

// singleTenant is the state directory name of S2 runs.
const singleTenant = "_single"

// tenantState is a tenant's allocation: its directory and id range.
type tenantState struct {
	dir  string
	base int
}

// allocateTenant returns the tenant's range, allocating the next free
// one on first use. The allocation is recorded in
// STATE/tenants/NAME/range under an exclusive lock on STATE/tenants, and
// never changes afterwards.
func allocateTenant(stateDir, name string) (*tenantState, error) {
	if err := checkStateDir(stateDir); err != nil {
		return nil, err
	}
	tenants := filepath.Join(stateDir, "tenants")
	if err := os.Mkdir(tenants, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	lock, err := os.Open(tenants)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("locking %s: %w", tenants, err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)

	entries, err := os.ReadDir(tenants)
	if err != nil {
		return nil, err
	}
	used := map[int]string{}
	for _, e := range entries {
		k, err := readRange(filepath.Join(tenants, e.Name(), "range"))
		if err != nil {
			return nil, fmt.Errorf("tenant %q: %w", e.Name(), err)
		}
		if other, dup := used[k]; dup {
			return nil, fmt.Errorf("tenants %q and %q share range %d: the state directory %s is corrupt", other, e.Name(), k, stateDir)
		}
		used[k] = e.Name()
		if e.Name() == name {
			return &tenantState{dir: filepath.Join(tenants, name), base: rangeBase + k*rangeSize}, nil
		}
	}
	k := 0
	if name != singleTenant {
		k = 1
		for used[k] != "" {
			k++
		}
	}
	if used[k] != "" || k >= maxTenants {
		return nil, fmt.Errorf("no free uid range for tenant %q", name)
	}
	dir := filepath.Join(tenants, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "range"), []byte(strconv.Itoa(k)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return &tenantState{dir: dir, base: rangeBase + k*rangeSize}, nil
}

func readRange(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSuffix(string(b), "\n")
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || k >= maxTenants || strconv.Itoa(k) != s {
		return 0, fmt.Errorf("%s: malformed range %q", p, s)
	}
	return k, nil
}

// checkStateDir requires the state directory to exist, be a directory
// owned by us and writable by nobody else: it decides who gets which
// host uid range.
func checkStateDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("state directory %q: must be absolute", dir)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("state directory %s: not a directory", dir)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("state directory %s: must be owned by uid %d and writable by nobody else (mode %o, owner %d)", dir, os.Geteuid(), st.Mode&0o777, st.Uid)
	}
	// No one else may be able to swap the directory, or one of its
	// parents, for another: every parent is a real directory owned by
	// root or by us, and writable by nobody else unless it is sticky
	// (then only its owner can rename what it holds, as in /tmp).
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("state directory %s: %s: %w", dir, p, err)
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return fmt.Errorf("state directory %s: %s is not a directory (a symbolic link?); give a path without links", dir, p)
		case st.Uid != 0 && int(st.Uid) != os.Geteuid():
			return fmt.Errorf("state directory %s: its parent %s belongs to uid %d", dir, p, st.Uid)
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return fmt.Errorf("state directory %s: its parent %s is writable by others (mode %o)", dir, p, st.Mode&0o7777)
		}
		if p == "/" {
			return nil
		}
	}
}
