package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTenantRanges(t *testing.T) {
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
