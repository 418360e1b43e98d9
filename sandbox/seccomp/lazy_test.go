package seccomp

import (
	"slices"
	"testing"
)

// TestLazyTable checks the rule table, built on first use rather than at
// package initialisation: built once (a second use sees the same rules,
// the arm64 time64 calls appended once, last), and Rules still a copy.
func TestLazyTable(t *testing.T) {
	a, b := table(), table()
	if len(a) != len(b) || &a[0] != &b[0] {
		t.Fatal("the table is built again on a second use")
	}
	n := len(arm64Time64)
	if len(a) <= n {
		t.Fatalf("the table has %d rules", len(a))
	}
	for i, name := range arm64Time64 {
		r := a[len(a)-n+i]
		if r.Syscall != name || r.GOARCH != "arm64" || !r.quiet {
			t.Errorf("rule %d = %+v, want the quiet arm64-only %s", len(a)-n+i, r.Rule, name)
		}
	}
	for _, r := range a[:len(a)-n] {
		if slices.Contains(arm64Time64, r.Syscall) {
			t.Errorf("%s is in the table twice", r.Syscall)
		}
	}
	rs := Rules()
	rs[0].Syscall = "changed"
	if table()[0].Syscall == "changed" || len(Rules()) != len(a) {
		t.Error("Rules hands out the table itself")
	}
}
