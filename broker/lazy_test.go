package broker

import (
	"regexp"
	"strings"
	"testing"
)

// TestLazyPatterns pins the name patterns, compiled on first use rather
// than at package initialisation, to their sources and their answers.
func TestLazyPatterns(t *testing.T) {
	for _, re := range []func() *regexp.Regexp{nameRE, tenantRE} {
		if first := re(); re() != first {
			t.Fatalf("%s is compiled again on a second use", first)
		}
	}
	if got, want := nameRE().String(), `^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`; got != want {
		t.Errorf("nameRE = %q, want %q", got, want)
	}
	if got, want := tenantRE().String(), `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`; got != want {
		t.Errorf("tenantRE = %q, want %q", got, want)
	}
	for s, want := range map[string]bool{"a": true, "db.pass-1_x": true, "a" + strings.Repeat("b", 127): true, "a" + strings.Repeat("b", 128): false, ".x": false, "a/b": false, "": false} {
		if nameRE().MatchString(s) != want {
			t.Errorf("nameRE.MatchString(%q) = %v, want %v", s, !want, want)
		}
	}
	for s, want := range map[string]bool{"alice": true, "a-b_c": true, "a.b": false, "a" + strings.Repeat("b", 63): true, "a" + strings.Repeat("b", 64): false, "-a": false} {
		if tenantRE().MatchString(s) != want {
			t.Errorf("tenantRE.MatchString(%q) = %v, want %v", s, !want, want)
		}
	}
}
