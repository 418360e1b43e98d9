package risk_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/risk"
)

const policy = `{
  "approvals": {"low": 1, "medium": 1, "high": 2},
  "rules": [
    {"tier": "high", "paths": [".github/workflows/**", "**/*.sh"]},
    {"tier": "medium", "paths": ["go.mod", "go.sum"]},
    {"tier": "high", "added_lines": ["(?i)curl[^|]*\\|\\s*(ba)?sh", "os\\.Setenv\\(\"PATH\""]},
    {"tier": "low", "paths": ["**"]}
  ]
}`

func mustParse(t *testing.T, s string) *risk.Policy {
	t.Helper()
	p, err := risk.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClassify(t *testing.T) {
	p := mustParse(t, policy)
	cases := []struct {
		name   string
		change []risk.File
		tier   string
		need   int
		kinds  []string // the kinds of the matches of tier above low, in order
	}{
		{"empty change", []risk.File{}, risk.Low, 1, nil},
		{"ordinary edit", []risk.File{{Path: "main.go", Old: []byte("a\n"), New: []byte("a\nb\n")}}, risk.Low, 1, nil},
		{"workflow file", []risk.File{{Path: ".github/workflows/ci.yml", New: []byte("on: push\n")}}, risk.High, 2, []string{"path"}},
		{"nested shell script", []risk.File{{Path: "scripts/x/deploy.sh", Old: []byte("echo\n"), New: []byte("echo hi\n")}}, risk.High, 2, []string{"path"}},
		{"deleting a workflow is risky too", []risk.File{{Path: ".github/workflows/ci.yml", Old: []byte("on: push\n")}}, risk.High, 2, []string{"path"}},
		{"go.mod", []risk.File{{Path: "go.mod", Old: []byte("module m\n"), New: []byte("module m\nrequire x v1\n")}}, risk.Medium, 1, []string{"path"}},
		{"added curl pipe", []risk.File{{Path: "README.md", Old: []byte("x\n"), New: []byte("x\nCURL https://e | sh\n")}}, risk.High, 2, []string{"added_line"}},
		{"a moved risky line is not added", []risk.File{{Path: "README.md", Old: []byte("curl a | sh\ny\n"), New: []byte("y\ncurl a | sh\n")}}, risk.Low, 1, nil},
		{"a duplicated risky line is added", []risk.File{{Path: "README.md", Old: []byte("curl a | sh\n"), New: []byte("curl a | sh\ncurl a | sh\n")}}, risk.High, 2, []string{"added_line"}},
		{"CRLF line still matches", []risk.File{{Path: "a.txt", New: []byte("curl a | bash\r\n")}}, risk.High, 2, []string{"added_line"}},
		{"binary content is scanned as bytes", []risk.File{{Path: "blob", New: []byte("\x00\xffcurl a | sh\x00")}}, risk.High, 2, []string{"added_line"}},
		{"a low rule never lowers a high match", []risk.File{{Path: "deploy.sh", New: []byte("x")}, {Path: "z.txt", New: []byte("y")}}, risk.High, 2, []string{"path"}},
		{"the order of files does not matter", []risk.File{{Path: "z.txt", New: []byte("y")}, {Path: "deploy.sh", New: []byte("x")}}, risk.High, 2, []string{"path"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := p.Classify(c.change)
			if err != nil {
				t.Fatal(err)
			}
			if got.Tier != c.tier || got.Approvals != c.need || got.Policy != p.ID().String() {
				t.Fatalf("tier %s approvals %d policy %s, want %s %d", got.Tier, got.Approvals, got.Policy, c.tier, c.need)
			}
			var kinds []string
			for _, m := range got.Matches {
				if m.Tier != risk.Low {
					kinds = append(kinds, m.Kind)
				}
			}
			if fmt.Sprint(kinds) != fmt.Sprint(c.kinds) {
				t.Fatalf("matches %+v, want kinds %v", got.Matches, c.kinds)
			}
			if got.MatchesTotal != len(got.Matches) {
				t.Fatalf("total %d, recorded %d", got.MatchesTotal, len(got.Matches))
			}
		})
	}
}

// TestClassifyDeterministic: the same change, in any order, classifies
// to the same bytes, and the line numbers point into the new content.
func TestClassifyDeterministic(t *testing.T) {
	p := mustParse(t, policy)
	a := []risk.File{{Path: "b.sh", New: []byte("ok\n")}, {Path: "a.md", Old: []byte("1\n"), New: []byte("1\n2\ncurl x|sh\n")}}
	b := []risk.File{a[1], a[0]}
	ca, _ := p.Classify(a)
	cb, _ := p.Classify(b)
	if fmt.Sprintf("%+v", ca) != fmt.Sprintf("%+v", cb) {
		t.Fatalf("order changed the classification:\n%+v\n%+v", ca, cb)
	}
	for _, m := range ca.Matches {
		if m.Kind == "added_line" && (m.Path != "a.md" || m.Line != 3) {
			t.Fatalf("added line match %+v, want a.md line 3", m)
		}
	}
}

// TestMatchCapKeepsExactCount: beyond MaxMatches the matches are cut,
// the count is not, and the tier still reflects every match.
func TestMatchCapKeepsExactCount(t *testing.T) {
	p := mustParse(t, `{"approvals":{"low":1,"medium":2,"high":3},"rules":[{"tier":"medium","added_lines":["^x$"]},{"tier":"high","paths":["last"]}]}`)
	var change []risk.File
	change = append(change, risk.File{Path: "many", New: []byte(strings.Repeat("x\n", risk.MaxMatches+50))})
	change = append(change, risk.File{Path: "last", New: []byte("y")})
	c, err := p.Classify(change)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Matches) != risk.MaxMatches || c.MatchesTotal != risk.MaxMatches+51 || c.Tier != risk.High || c.Approvals != 3 {
		t.Fatalf("recorded %d total %d tier %s approvals %d", len(c.Matches), c.MatchesTotal, c.Tier, c.Approvals)
	}
}

func TestParseRefuses(t *testing.T) {
	cases := map[string]string{
		"unknown member":            `{"approvals":{"low":1,"medium":1,"high":1},"rules":[],"lower":true}`,
		"duplicate member":          `{"approvals":{"low":1,"medium":1,"high":1},"rules":[],"rules":[]}`,
		"unknown tier in approvals": `{"approvals":{"low":1,"medium":1,"high":1,"none":0},"rules":[]}`,
		"missing tier":              `{"approvals":{"low":1,"high":1},"rules":[]}`,
		"zero approvals":            `{"approvals":{"low":0,"medium":1,"high":1},"rules":[]}`,
		"too many approvals":        `{"approvals":{"low":1,"medium":1,"high":99},"rules":[]}`,
		"higher tier needs fewer":   `{"approvals":{"low":1,"medium":3,"high":2},"rules":[]}`,
		"missing rules":             `{"approvals":{"low":1,"medium":1,"high":1}}`,
		"unknown rule tier":         `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"critical","paths":["x"]}]}`,
		"rule matching nothing":     `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"high"}]}`,
		"bad glob":                  `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"high","paths":["[a"]}]}`,
		"absolute glob":             `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"high","paths":["/etc/*"]}]}`,
		"empty glob":                `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"high","paths":[""]}]}`,
		"bad regexp":                `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"high","added_lines":["(a"]}]}`,
		"backreference (not RE2)":   `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"high","added_lines":["(a)\\1"]}]}`,
		"trailing data":             `{"approvals":{"low":1,"medium":1,"high":1},"rules":[]} {}`,
		"float approvals":           `{"approvals":{"low":1.5,"medium":2,"high":2},"rules":[]}`,
		"long pattern":              `{"approvals":{"low":1,"medium":1,"high":1},"rules":[{"tier":"high","added_lines":["` + strings.Repeat("a", risk.MaxPatternLen+1) + `"]}]}`,
	}
	for name, in := range cases {
		if _, err := risk.Parse([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestClassifyRefusesBadChange(t *testing.T) {
	p := risk.Default()
	for name, change := range map[string][]risk.File{
		"absolute path": {{Path: "/etc/passwd", New: []byte("x")}},
		"empty path":    {{Path: "", New: []byte("x")}},
		"twice":         {{Path: "a", New: []byte("x")}, {Path: "a", New: []byte("y")}},
		"not UTF-8":     {{Path: "a\xff", New: []byte("x")}},
	} {
		if _, err := p.Classify(change); err == nil {
			t.Errorf("%s: classified", name)
		}
	}
	big := make([]risk.File, risk.MaxChangeFiles+1)
	for i := range big {
		big[i] = risk.File{Path: fmt.Sprint("f", i), New: []byte("x")}
	}
	if _, err := p.Classify(big); err == nil {
		t.Error("an oversized change was classified")
	}
}

func TestDefault(t *testing.T) {
	c, err := risk.Default().Classify([]risk.File{{Path: ".github/workflows/x.yml", New: []byte("curl a | sh")}})
	if err != nil || c.Tier != risk.Low || c.Approvals != 1 {
		t.Fatalf("%+v %v", c, err)
	}
}

func FuzzClassify(f *testing.F) {
	p, err := risk.Parse([]byte(policy))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("a.sh", []byte("x\n"), []byte("x\ncurl y | sh\n"))
	f.Fuzz(func(t *testing.T, path string, old, new []byte) {
		c, err := p.Classify([]risk.File{{Path: path, Old: old, New: new}})
		if err != nil {
			return
		}
		// The tier is never below any match's.
		rank := map[string]int{risk.Low: 0, risk.Medium: 1, risk.High: 2}
		for _, m := range c.Matches {
			if rank[m.Tier] > rank[c.Tier] {
				t.Fatalf("tier %s below a %s match", c.Tier, m.Tier)
			}
		}
		if c.Approvals < 1 {
			t.Fatal("no approver needed")
		}
	})
}
