package sandbox

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestMain gives the package's tests a tenant registry of their own, so
// that they never write to the host's.
func TestMain(m *testing.M) {
	if dir := os.Getenv("CORDON_TEST_REGISTRY"); dir != "" { // a helper process
		tenantRegistry = dir
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "cordon-registry-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tenantRegistry = filepath.Join(dir, "registry")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// useRegistry points the tenant registry at a fresh directory for one
// test.
func useRegistry(t *testing.T) string {
	t.Helper()
	old := tenantRegistry
	tenantRegistry = filepath.Join(t.TempDir(), "registry")
	t.Cleanup(func() { tenantRegistry = old })
	return tenantRegistry
}

func TestTenantRanges(t *testing.T) {
	useRegistry(t)
	state := t.TempDir()
	single, err := allocateTenant(state, singleTenant)
	if err != nil {
		t.Fatal(err)
	}
	a, err := allocateTenant(state, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	b, err := allocateTenant(state, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if single.base != rangeBase || a.base == b.base || a.base == single.base || b.base == single.base {
		t.Fatalf("ranges single %d alpha %d beta %d", single.base, a.base, b.base)
	}
	for _, ts := range []*tenantState{single, a, b} {
		if ts.base%rangeSize != 0 || ts.base+rangeSize > 1<<31 {
			t.Errorf("range %d not aligned or beyond 2^31", ts.base)
		}
		fi, err := os.Stat(ts.dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("tenant dir %s: %v %v", ts.dir, fi.Mode(), err)
		}
	}
	// Stable across calls.
	again, err := allocateTenant(state, "alpha")
	if err != nil || again.base != a.base {
		t.Fatalf("alpha again: %v %v", again, err)
	}
}

func TestTenantStateRefusals(t *testing.T) {
	useRegistry(t)
	state := t.TempDir()
	if _, err := allocateTenant(state, "alpha"); err != nil {
		t.Fatal(err)
	}
	// Two tenants claiming one range: the state is corrupt, refuse.
	if err := os.Mkdir(filepath.Join(state, "tenants", "mallory"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "tenants", "mallory", "range"), []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateTenant(state, "beta"); err == nil || !strings.Contains(err.Error(), "share range") {
		t.Errorf("shared range: %v", err)
	}
	for _, body := range []string{"x\n", "-1\n", "01\n", "99999999\n"} {
		if err := os.WriteFile(filepath.Join(state, "tenants", "mallory", "range"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := allocateTenant(state, "beta"); err == nil || !strings.Contains(err.Error(), "malformed range") {
			t.Errorf("range %q: %v", body, err)
		}
	}
	// A state directory others can write is refused, as is a relative one.
	loose := t.TempDir()
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateTenant(loose, "alpha"); err == nil || !strings.Contains(err.Error(), "writable by nobody else") {
		t.Errorf("loose state dir: %v", err)
	}
	// A state directory whose parent others can write could be swapped.
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(parent, "state")
	if err := os.Mkdir(inner, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateTenant(inner, "alpha"); err == nil || !strings.Contains(err.Error(), "is writable by others") {
		t.Errorf("state dir under a world-writable parent: %v", err)
	}
	if err := os.Chmod(parent, 0o777|os.ModeSticky); err != nil { // like /tmp: allowed
		t.Fatal(err)
	}
	if _, err := allocateTenant(inner, "alpha"); err != nil {
		t.Errorf("state dir under a sticky parent: %v", err)
	}
	if _, err := allocateTenant("relative", "alpha"); err == nil {
		t.Errorf("relative state dir accepted")
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateTenant(link, "alpha"); err == nil {
		t.Errorf("symlinked state dir accepted")
	}
}

// Two state directories (two installations) on one host never hand their
// tenants the same host ids: the registry is host-wide.
func TestTenantRangesUniqueAcrossStateDirs(t *testing.T) {
	reg := useRegistry(t)
	bases := map[int]string{}
	for _, state := range []string{t.TempDir(), t.TempDir()} {
		for _, name := range []string{"alice", "bob", singleTenant} {
			ts, err := allocateTenant(state, name)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := bases[ts.base]; dup {
				t.Errorf("%s:%s and %s both have base %d", state, name, other, ts.base)
			}
			bases[ts.base] = state + ":" + name
			again, err := allocateTenant(state, name)
			if err != nil || again.base != ts.base {
				t.Errorf("%s:%s again: %v, %v; first %d", state, name, again, err, ts.base)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(reg, registryFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 6 {
		t.Errorf("registry has %d lines, want 6:\n%s", n, b)
	}
	fi, err := os.Stat(reg)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("registry directory: %v %v", fi.Mode(), err)
	}
}

// Ranges recorded in state directories before the registry existed are
// kept when no one else holds them, and replaced when another state
// directory does; the registry forgets installations that are gone.
func TestTenantRegistryLegacyAndStale(t *testing.T) {
	useRegistry(t)
	legacy := func(k int) string {
		state := t.TempDir()
		dir := filepath.Join(state, "tenants", "alice")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "range"), []byte(strconv.Itoa(k)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return state
	}
	s1, s2 := legacy(1), legacy(1) // the collision the registry ends
	a1, err := allocateTenant(s1, "alice")
	if err != nil || a1.base != rangeBase+rangeSize {
		t.Fatalf("s1 alice: %v %v, want its recorded range 1 kept", a1, err)
	}
	a2, err := allocateTenant(s2, "alice")
	if err != nil || a2.base == a1.base {
		t.Fatalf("s2 alice: %v %v: shares s1's range", a2, err)
	}
	if k, err := readRange(filepath.Join(s2, "tenants", "alice", "range")); err != nil || rangeBase+k*rangeSize != a2.base {
		t.Errorf("s2's range file says %d (%v), registry base %d", k, err, a2.base)
	}
	// s1 is removed: its range is free for the next new tenant.
	if err := os.RemoveAll(s1); err != nil {
		t.Fatal(err)
	}
	c, err := allocateTenant(t.TempDir(), "carol")
	if err != nil || c.base != a1.base {
		t.Errorf("carol: %v %v, want the range %d of the removed state directory", c, err, a1.base)
	}
}

func TestTenantRegistryRefusesCorruption(t *testing.T) {
	for _, body := range []string{
		"garbage\n",
		`{"k":1,"state":"/x","tenant":"a","extra":1}` + "\n",
		`{"k":-1,"state":"/x","tenant":"a"}` + "\n",
		`{"k":1,"state":"relative","tenant":"a"}` + "\n",
		`{"k":1,"state":"/x","tenant":"a"}` + "\n" + `{"k":2,"state":"/x","tenant":"a"}` + "\n",
		"\n",
	} {
		reg := useRegistry(t)
		if err := os.MkdirAll(reg, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(reg, registryFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := allocateTenant(t.TempDir(), "alice"); err == nil || !strings.Contains(err.Error(), "registry") {
			t.Errorf("registry %q: %v", body, err)
		}
	}
	// Two live entries with one range: refused, not resolved by guessing.
	reg := useRegistry(t)
	s1, s2 := t.TempDir(), t.TempDir()
	for _, s := range []string{s1, s2} {
		if _, err := allocateTenant(s, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	body := fmt.Sprintf(`{"k":1,"state":%q,"tenant":"alice"}`+"\n"+`{"k":1,"state":%q,"tenant":"alice"}`+"\n", s1, s2)
	if err := os.WriteFile(filepath.Join(reg, registryFile), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateTenant(s1, "bob"); err == nil || !strings.Contains(err.Error(), "share range") {
		t.Errorf("shared range in the registry: %v", err)
	}
	// A registry directory others can write is refused.
	reg = useRegistry(t)
	if err := os.MkdirAll(reg, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(reg, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := allocateTenant(t.TempDir(), "alice"); err == nil || !strings.Contains(err.Error(), "writable by nobody else") {
		t.Errorf("loose registry: %v", err)
	}
}

// Concurrent allocations, from goroutines and from processes, for
// tenants of several state directories, never collide and never lose an
// allocation.
func TestTenantRegistryConcurrent(t *testing.T) {
	reg := useRegistry(t)
	states := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	names := []string{"alice", "bob", "carol", singleTenant}
	type alloc struct {
		key  string
		base int
	}
	var (
		mu  sync.Mutex
		got []alloc
		wg  sync.WaitGroup
	)
	add := func(key string, base int) {
		mu.Lock()
		got = append(got, alloc{key, base})
		mu.Unlock()
	}
	for i := range 4 { // helper processes, each allocating every pair
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestTenantRegistryHelper$")
			cmd.Env = append(os.Environ(), "CORDON_TEST_REGISTRY="+reg, "CORDON_TEST_ALLOC="+strings.Join(states, ","))
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("helper %d: %v", i, err)
				return
			}
			for _, line := range strings.Fields(string(out)) {
				key, b, ok := strings.Cut(line, "=")
				n, err := strconv.Atoi(b)
				if !ok || err != nil {
					continue // the test framework's own output
				}
				add(key, n)
			}
		}()
	}
	for range 8 { // and goroutines here
		for _, s := range states {
			for _, n := range names {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ts, err := allocateTenant(s, n)
					if err != nil {
						t.Error(err)
						return
					}
					add(s+":"+n, ts.base)
				}()
			}
		}
	}
	wg.Wait()
	byKey, byBase := map[string]int{}, map[int]string{}
	for _, a := range got {
		if b, ok := byKey[a.key]; ok && b != a.base {
			t.Errorf("%s got bases %d and %d", a.key, b, a.base)
		}
		if k, ok := byBase[a.base]; ok && k != a.key {
			t.Errorf("%s and %s share base %d", k, a.key, a.base)
		}
		byKey[a.key], byBase[a.base] = a.base, a.key
	}
	if want := len(states) * len(names); len(byKey) != want || len(got) != want*(8+4) {
		t.Errorf("%d pairs from %d allocations, want %d from %d", len(byKey), len(got), want, want*12)
	}
	keys := slices.Sorted(maps.Keys(byKey))
	t.Logf("%d pairs: %v", len(keys), keys)
}

// TestTenantRegistryHelper is TestTenantRegistryConcurrent's helper
// process: it allocates every tenant of every state directory named in
// $CORDON_TEST_ALLOC and prints STATE:NAME=BASE lines.
func TestTenantRegistryHelper(t *testing.T) {
	states := os.Getenv("CORDON_TEST_ALLOC")
	if states == "" {
		return // not a helper
	}
	for _, s := range strings.Split(states, ",") {
		for _, n := range []string{singleTenant, "carol", "bob", "alice"} {
			ts, err := allocateTenant(s, n)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s:%s=%d\n", s, n, ts.base)
		}
	}
}
