package grant

import (
	"errors"
	"testing"
)

// TestIsolatedKernel: "isolated_kernel" is an optional boolean fact; a
// child may not drop it.
func TestIsolatedKernel(t *testing.T) {
	const facts = `"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false`
	parse := func(doc string) *Set {
		t.Helper()
		s, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%s): %v", doc, err)
		}
		return s
	}
	plain := parse(`{` + facts + `}`)
	on := parse(`{` + facts + `,"isolated_kernel":true}`)
	off := parse(`{` + facts + `,"isolated_kernel":false}`)
	if plain.IsolatedKernel || off.IsolatedKernel || !on.IsolatedKernel {
		t.Fatalf("IsolatedKernel: absent %v, false %v, true %v", plain.IsolatedKernel, off.IsolatedKernel, on.IsolatedKernel)
	}
	for _, bad := range []string{`"true"`, `1`, `null`} {
		if _, err := Parse([]byte(`{` + facts + `,"isolated_kernel":` + bad + `}`)); !errors.Is(err, ErrInvalid) {
			t.Errorf("isolated_kernel %s: Parse = %v, want ErrInvalid", bad, err)
		}
	}
	if err := Covers(on, plain); !errors.Is(err, ErrWidening) {
		t.Errorf("Covers(isolated, plain) = %v, want a widening", err)
	}
	for _, c := range [][2]*Set{{plain, on}, {on, on}, {off, plain}} {
		if err := Covers(c[0], c[1]); err != nil {
			t.Errorf("Covers(%s, %s) = %v", c[0].JCS(), c[1].JCS(), err)
		}
	}
}
