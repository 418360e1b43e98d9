package seccomp

import "testing"

// BenchmarkProgram is the cost of assembling the filter, which init pays
// on every run before it installs it.
func BenchmarkProgram(b *testing.B) {
	for b.Loop() {
		if _, err := program(); err != nil {
			b.Fatal(err)
		}
	}
}
