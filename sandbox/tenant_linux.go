package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Host uid/gid ranges. A run's user namespace maps ids 0..rangeSize-1
// inside to base..base+rangeSize-1 on the host; range k owns base =
// rangeBase + k*rangeSize. Range 0 goes to the first single-tenant (S2)
// allocation on the host.
const (
	rangeBase  = 1 << 30
	rangeSize  = 65536
	maxTenants = (1<<31 - rangeBase) / rangeSize // keep every id below 2^31
)

// singleTenant is the state directory name of S2 runs.
const singleTenant = "_single"

// tenantRegistry is the host-wide directory whose file "tenants" records
// which range each (state directory, tenant) pair holds, so that two
// cordon installations on one host never hand out the same host ids.
// Tests point it elsewhere.
var tenantRegistry = "/var/lib/cordon-registry"

// registryFile is the registry's file of allocations, in tenantRegistry.
const registryFile = "tenants"

// tenantState is a tenant's allocation: its directory and id range.
type tenantState struct {
	dir  string
	base int
}

// regEntry is one line of the registry: range K belongs to tenant Tenant
// of the state directory State.
type regEntry struct {
	K      int    `json:"k"`
	State  string `json:"state"`
	Tenant string `json:"tenant"`
}

// allocateTenant returns the tenant's range, allocating a free one on
// first use. The host-wide registry (tenantRegistry) is the authority:
// under an exclusive lock on it, and then on STATE/tenants, the range is
// looked up by (state directory, tenant), or else allocated as the
// lowest range no live registry entry and no other tenant of this state
// directory holds; it is recorded in the registry and mirrored in
// STATE/tenants/NAME/range. A range a state directory recorded before
// the registry existed is kept when no other holds it, and replaced by a
// free one when another installation does. An entry whose state
// directory no longer has the tenant's range file is stale: its range is
// free again, and it is dropped.
func allocateTenant(stateDir, name string) (*tenantState, error) {
	if err := checkStateDir(stateDir); err != nil {
		return nil, err
	}
	unlockReg, err := lockDir(tenantRegistry, true)
	if err != nil {
		return nil, fmt.Errorf("tenant registry: %w", err)
	}
	defer unlockReg()
	tenants := filepath.Join(stateDir, "tenants")
	unlockState, err := lockDir(tenants, false)
	if err != nil {
		return nil, err
	}
	defer unlockState()

	// This state directory's own allocations must be consistent.
	entries, err := os.ReadDir(tenants)
	if err != nil {
		return nil, err
	}
	local := map[int]string{}
	own := -1
	for _, e := range entries {
		k, err := readRange(filepath.Join(tenants, e.Name(), "range"))
		if err != nil {
			return nil, fmt.Errorf("tenant %q: %w", e.Name(), err)
		}
		if other, dup := local[k]; dup {
			return nil, fmt.Errorf("tenants %q and %q share range %d: the state directory %s is corrupt", other, e.Name(), k, stateDir)
		}
		local[k] = e.Name()
		if e.Name() == name {
			own = k
		}
	}

	reg, err := readRegistry()
	if err != nil {
		return nil, err
	}
	held := map[int]regEntry{}
	k := -1
	for _, r := range reg {
		if r.State == stateDir && r.Tenant == name {
			k = r.K // ours, even when the state directory lost its file
			continue
		}
		if stale(r) {
			continue
		}
		if o, dup := held[r.K]; dup {
			return nil, fmt.Errorf("tenant registry %s: %s:%s and %s:%s share range %d: the registry is corrupt",
				tenantRegistry, o.State, o.Tenant, r.State, r.Tenant, r.K)
		}
		held[r.K] = r
	}
	if k >= 0 {
		if o, taken := held[k]; taken {
			return nil, fmt.Errorf("tenant registry %s: %s:%s and %s:%s share range %d: the registry is corrupt",
				tenantRegistry, o.State, o.Tenant, stateDir, name, k)
		}
	}
	if k < 0 && own >= 0 {
		if _, taken := held[own]; !taken {
			k = own // recorded before the registry: keep it
		}
	}
	if k < 0 {
		free := func(k int) bool {
			_, taken := held[k]
			other, mine := local[k]
			return !taken && (!mine || other == name)
		}
		k = 0
		if name != singleTenant {
			k = 1
		}
		for k < maxTenants && !free(k) {
			k++
		}
		if k >= maxTenants {
			return nil, fmt.Errorf("no free uid range for tenant %q: all %d are registered in %s", name, maxTenants, tenantRegistry)
		}
	}
	// The registry keeps its order: ours in its place, or last when new.
	out, placed := make([]regEntry, 0, len(reg)+1), false
	for _, r := range reg {
		switch {
		case r.State == stateDir && r.Tenant == name:
			r.K, placed = k, true
		case stale(r):
			continue
		}
		out = append(out, r)
	}
	if !placed {
		out = append(out, regEntry{K: k, State: stateDir, Tenant: name})
	}
	if !slices.Equal(out, reg) {
		if err := writeRegistry(out); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(tenants, name)
	if own != k {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if err := writeFileAtomic(filepath.Join(dir, "range"), []byte(strconv.Itoa(k)+"\n")); err != nil {
			return nil, err
		}
	}
	return &tenantState{dir: dir, base: rangeBase + k*rangeSize}, nil
}

// lockDir creates dir (0700) if it is missing, checks it as a state
// directory when check is set, and returns the release of an exclusive
// flock on it.
func lockDir(dir string, check bool) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if check {
		if err := checkStateDir(dir); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// stale reports whether a registry entry's state directory no longer
// holds the tenant's range file: its installation is gone.
func stale(r regEntry) bool {
	_, err := os.Lstat(filepath.Join(r.State, "tenants", r.Tenant, "range"))
	return errors.Is(err, fs.ErrNotExist)
}

// readRegistry reads the registry's entries, refusing anything malformed.
func readRegistry() ([]regEntry, error) {
	file := filepath.Join(tenantRegistry, registryFile)
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tenant registry: %w", err)
	}
	var out []regEntry
	seen := map[[2]string]bool{}
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 && len(b) == 0 {
			break
		}
		var r regEntry
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || dec.More() ||
			r.K < 0 || r.K >= maxTenants || !filepath.IsAbs(r.State) || r.Tenant == "" || strings.ContainsAny(r.Tenant, "/\x00") {
			return nil, fmt.Errorf("tenant registry %s: line %d is malformed: %q", file, i+1, line)
		}
		key := [2]string{r.State, r.Tenant}
		if seen[key] {
			return nil, fmt.Errorf("tenant registry %s: %s:%s is registered twice", file, r.State, r.Tenant)
		}
		seen[key] = true
		out = append(out, r)
	}
	return out, nil
}

func writeRegistry(es []regEntry) error {
	var b bytes.Buffer
	for _, e := range es {
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := writeFileAtomic(filepath.Join(tenantRegistry, registryFile), b.Bytes()); err != nil {
		return fmt.Errorf("tenant registry: %w", err)
	}
	return nil
}

// writeFileAtomic replaces name with data (0600): a temporary file beside
// it, synced, then renamed over it, so that a crash leaves the old or the
// new content, never a torn one.
func writeFileAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	return err
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
