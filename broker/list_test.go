package broker

import (
	"slices"
	"testing"

	"filippo.io/age"
)

// TestListAndValues: List names a tenant's secrets only (never another
// tenant's, never a value); Values is every tenant's values, for the
// mask pool, and fails — rather than skip — when one does not decrypt,
// so a pool never silently lacks a value.
func TestListAndValues(t *testing.T) {
	b, _, dir := newBroker(t)
	st := b.Store
	if err := st.Put("acme", "api", []byte("acme-api")); err != nil {
		t.Fatal(err)
	}
	l, err := st.List("acme")
	if err != nil || len(l) != 2 || l[0].Name != "api" || l[1].Name != "db" || l[0].Updated.IsZero() {
		t.Fatalf("List(acme) = %+v, %v", l, err)
	}
	if l, err := st.List("initech"); err != nil || len(l) != 0 {
		t.Errorf("List(initech) = %+v, %v", l, err)
	}
	if _, err := st.List("../acme"); err == nil {
		t.Error("List of a bad tenant id succeeded")
	}
	if err := CheckRef("../globex/db"); err == nil {
		t.Error("CheckRef accepted another namespace")
	}
	vals, err := st.Values()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vals {
		got = append(got, string(v.Bytes()))
		v.Destroy()
	}
	slices.Sort(got)
	if want := []string{"acme-api", "acme-db-password", "globex-db-password"}; !slices.Equal(got, want) {
		t.Errorf("Values = %q, want %q", got, want)
	}
	// A secret encrypted to another key: Values fails loud.
	other, _ := age.GenerateX25519Identity()
	st2, _ := NewStore(dir, other.String())
	st2.Put("acme", "foreign", []byte("x"))
	if _, err := st.Values(); err == nil {
		t.Error("Values skipped a secret it cannot decrypt")
	}
}
