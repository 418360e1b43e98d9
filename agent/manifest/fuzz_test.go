package manifest

import (
	"errors"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// FuzzParse checks that Parse never panics, refuses with ErrInvalid, and
// that an accepted manifest's canonical bytes parse to the same ID; and
// that a manifest never covers itself.
func FuzzParse(f *testing.F) {
	f.Add(encode(f, base()))
	f.Add(encode(f, minimal()))
	withReport := base()
	withReport["verify_report"] = map[string]any{"format": "junit", "min_passed": 2, "file": "report.xml"}
	f.Add(encode(f, withReport))
	f.Add([]byte(`{"type":"cordon.manifest.v1"}`))
	f.Add([]byte(`{"inputs":[".cordon/x","a/../b"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := canon.CheckJCS(m.JCS()); err != nil {
			t.Fatalf("JCS() is not canonical: %v", err)
		}
		again, err := Parse(m.JCS())
		if err != nil {
			t.Fatalf("canonical form refused: %v", err)
		}
		if again.ID() != m.ID() || canon.Sum(m.JCS()) != m.ID() {
			t.Fatalf("ID changed across the canonical round trip")
		}
		if err := Covers(m, m); !errors.Is(err, ErrWidening) {
			t.Fatalf("Covers(m, m) = %v, want ErrWidening", err)
		}
		for _, p := range append(append([]string{}, m.Inputs...), m.Outputs...) {
			if CheckPath(p) != nil {
				t.Fatalf("accepted path %q fails CheckPath", p)
			}
		}
	})
}
