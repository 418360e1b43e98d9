package sandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/sandbox/seccomp"
)

// TestDocsListSeccompRules keeps the seccomp table of docs/sandbox.md in
// step with the filter: every rule has a row, and every row is a rule.
func TestDocsListSeccompRules(t *testing.T) {
	b, err := os.ReadFile("../docs/sandbox.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| `") && strings.Contains(line, "| EPERM |") || strings.Contains(line, "| ENOSYS |") {
			rows[strings.TrimSpace(line)] = true
		}
	}
	want := map[string]bool{}
	for _, r := range seccomp.Rules() {
		when := r.When
		if when == "" {
			when = "always"
		}
		if r.GOARCH != "" {
			when += " (" + r.GOARCH + " only)"
		}
		row := "| `" + r.Syscall + "` | " + r.Errno + " | " + when + " |"
		want[row] = true
		if !rows[row] {
			t.Errorf("docs/sandbox.md lacks the row\n%s", row)
		}
	}
	for row := range rows {
		if !want[row] {
			t.Errorf("docs/sandbox.md has a row that is no rule:\n%s", row)
		}
	}
}
