package standing

import (
	"strings"
	"testing"
)

// TestLazyWordPattern pins the word pattern, compiled on first use rather
// than at package initialisation, to its source and its answers.
func TestLazyWordPattern(t *testing.T) {
	if first := word(); word() != first {
		t.Fatal("the pattern is compiled again on a second use")
	}
	if got, want := word().String(), `^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`; got != want {
		t.Errorf("word = %q, want %q", got, want)
	}
	for s, want := range map[string]bool{"ci.failed": true, "gh:push/main-1": true, "a" + strings.Repeat("b", 127): true, "a" + strings.Repeat("b", 128): false, "/x": false, "a b": false, "": false} {
		if word().MatchString(s) != want {
			t.Errorf("word.MatchString(%q) = %v, want %v", s, !want, want)
		}
	}
}
