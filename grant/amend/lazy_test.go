package amend

import (
	"strings"
	"testing"
)

// TestLazyRunIDPattern pins the run id pattern, compiled on first use
// rather than at package initialisation, to its source and its answers.
func TestLazyRunIDPattern(t *testing.T) {
	if first := runID(); runID() != first {
		t.Fatal("the pattern is compiled again on a second use")
	}
	if got, want := runID().String(), `^[0-9a-f]{32}$`; got != want {
		t.Errorf("runID = %q, want %q", got, want)
	}
	for s, want := range map[string]bool{strings.Repeat("a0", 16): true, strings.Repeat("A0", 16): false, strings.Repeat("a", 31): false, strings.Repeat("a", 33): false, "": false} {
		if runID().MatchString(s) != want {
			t.Errorf("runID.MatchString(%q) = %v, want %v", s, !want, want)
		}
	}
}
