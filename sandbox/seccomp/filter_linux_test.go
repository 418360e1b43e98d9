package seccomp

import (
	"reflect"
	"testing"
)

// The binary form carries the filter whole: what init parses is what the
// parent compiled, and a torn or empty form is refused, never loaded.
func TestFilterBinaryRoundTrip(t *testing.T) {
	f, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	if len(f) < 10 {
		t.Fatalf("Compile returned %d instructions", len(f))
	}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseFilter(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Fatal("ParseFilter(MarshalBinary(f)) differs from f")
	}
	for _, bad := range [][]byte{nil, {}, b[:len(b)-1], b[:7], make([]byte, 8*4097)} {
		if _, err := ParseFilter(bad); err == nil {
			t.Errorf("ParseFilter accepted %d bytes", len(bad))
		}
	}
	again, _ := Compile()
	if &again[0] != &f[0] {
		t.Error("Compile assembled the filter twice in one process")
	}
}
