package sandbox

import (
	"regexp"
	"strings"
	"testing"
)

// validTenant accepts exactly what tenantForm, as a regular expression,
// accepts.
func TestValidTenantIsTenantForm(t *testing.T) {
	re := regexp.MustCompile(tenantForm)
	for _, in := range []string{"", "a", "0", "_a", "-a", "a_-9", "A", "aB", "a b", "a\n", "a.b", "é",
		strings.Repeat("a", 62), strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62)} {
		if got, want := validTenant(in), re.MatchString(in); got != want {
			t.Errorf("validTenant(%q) = %v, %s says %v", in, got, tenantForm, want)
		}
	}
}
