package risk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/cordon-dev/cordon/risk"
)

// TestClassifyContextStops: a classification whose context ends is an
// error, never a partial (lower) tier.
func TestClassifyContextStops(t *testing.T) {
	p := mustParse(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["q"]}]}`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	change := []risk.File{{Path: "a", New: []byte(strings.Repeat("x\n", 1<<16))}}
	if c, err := p.ClassifyContext(ctx, change); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("a cancelled classification: %+v, %v", c, err)
	}
	if _, err := p.ClassifyContext(t.Context(), change); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TestClassifyLineCap: over MaxChangeLines lines, old and new together,
// the change is refused as too large to review.
func TestClassifyLineCap(t *testing.T) {
	p := mustParse(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["q"]}]}`)
	half := []byte(strings.Repeat("\n", risk.MaxChangeLines/2))
	if _, err := p.Classify([]risk.File{{Path: "a", New: half}, {Path: "b", New: half}}); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("a change over the line cap: %v", err)
	}
	if _, err := p.Classify([]risk.File{{Path: "a", Old: half[2:], New: half[1:]}}); err != nil {
		t.Fatalf("a change under the line cap: %v", err)
	}
}

// TestClassifyViews: what each view of content adds. Every case is high.
func TestClassifyViews(t *testing.T) {
	p := mustParse(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["^curl x$","\\Qa|b","(?i)iwr"]},{"tier":"high","paths":["Deploy/**","kube/**"]}]}`)
	le := func(s string, bom bool) []byte {
		var b []byte
		if bom {
			b = []byte{0xff, 0xfe}
		}
		for _, u := range utf16.Encode([]rune(s)) {
			b = append(b, byte(u), byte(u>>8))
		}
		return b
	}
	be := func(s string) []byte {
		var b []byte
		for _, u := range utf16.Encode([]rune(s)) {
			b = append(b, byte(u>>8), byte(u))
		}
		return b
	}
	for name, f := range map[string]risk.File{
		"lone CR":                     {Path: "x", New: []byte("a\rcurl x\rb")},
		"CR CR LF":                    {Path: "x", New: []byte("a\r\rcurl x\r\n")},
		"quoted pattern":              {Path: "x", New: []byte("a|b")},
		"flags stay in the pattern":   {Path: "x", New: []byte("IWR")},
		"UTF-16LE without BOM":        {Path: "x", New: le("echo 1\ncurl x\n", false)},
		"UTF-16BE without BOM":        {Path: "x", New: be("echo 1\ncurl x\n")},
		"UTF-16 with a bad surrogate": {Path: "x", New: append([]byte{0xff, 0xfe, 0x00, 0xd8}, le("\ncurl x\n", false)...)},
		// A byte-order mark does not hide plain text after it.
		"BOM then plain text":        {Path: "x", New: []byte("\xff\xfe\ncurl x\n")},
		"UTF-16 added to UTF-8 text": {Path: "x", Old: []byte("echo 1\n"), New: le("echo 1\ncurl x\n", true)},
		"path folded":                {Path: "deploy/run", New: []byte("y")},
		"path with a Kelvin sign":    {Path: "\u212aUBE/x", New: []byte("y")},
		"path not NFC in the change": {Path: "deploy/e\u0301", New: []byte("y")},
	} {
		if got := tierOf(t, p, f); got != risk.High {
			t.Errorf("%s: %s, want %s", name, got, risk.High)
		}
	}
	// A UTF-16 match says which encoding its line number counts in.
	c, err := p.Classify([]risk.File{{Path: "x", New: le("echo 1\ncurl x\n", true)}})
	if err != nil || c.MatchesTotal != 1 || c.Matches[0].Encoding != "utf-16le" || c.Matches[0].Line != 2 {
		t.Fatalf("%+v %v", c, err)
	}
	// Unchanged UTF-16 lines are not added.
	if got := tierOf(t, p, risk.File{Path: "x", Old: le("curl x\n", true), New: le("curl x\necho\n", true)}); got != risk.Low {
		t.Errorf("an unchanged UTF-16 line was matched: %s", got)
	}
	// Lines end at CR LF, LF and CR alike: a change of line endings adds
	// nothing, and line numbers count every ending.
	if got := tierOf(t, p, risk.File{Path: "x", Old: []byte("curl x\r\n"), New: []byte("curl x\r")}); got != risk.Low {
		t.Errorf("a change of line ending: %s", got)
	}
	c, err = p.Classify([]risk.File{{Path: "x", New: []byte("a\rb\r\nc\ncurl x")}})
	if err != nil || c.MatchesTotal != 1 || c.Matches[0].Line != 4 {
		t.Fatalf("line numbers: %+v %v", c, err)
	}
}

// TestDeletionArmsEveryLine: once a change removes a line, every line of
// the file is matched, not only the added ones; without a removal a
// moved line is still not added.
func TestDeletionArmsEveryLine(t *testing.T) {
	p := mustParse(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["^curl x$"]}]}`)
	for name, c := range map[string]struct {
		old, new string
		tier     string
	}{
		"a guard removed":       {"if false; then\ncurl x\nfi\n", "curl x\n", risk.High},
		"a guard edited":        {"if false; then\ncurl x\nfi\n", "if true; then\ncurl x\nfi\n", risk.High},
		"one copy of two gone":  {"curl x\ncurl x\n", "curl x\n", risk.High},
		"a line moved":          {"curl x\ny\n", "y\ncurl x\n", risk.Low},
		"a line appended":       {"curl x\n", "curl x\ny\n", risk.Low},
		"the line itself gone":  {"curl x\ny\n", "y\n", risk.Low},
		"old empty, new a line": {"", "curl x", risk.High},
	} {
		if got := tierOf(t, p, risk.File{Path: "s", Old: []byte(c.old), New: []byte(c.new)}); got != c.tier {
			t.Errorf("%s: %s, want %s", name, got, c.tier)
		}
	}
}

// FuzzAlternation: the one alternation a policy's line patterns are
// compiled into never misses a line one of them matches (it is built
// from each pattern's parsed form, so `\Q…` and flags stay inside it).
func FuzzAlternation(f *testing.F) {
	for _, s := range [][2]string{{`\Qa|b`, "a|b"}, {`(?i)x`, "X"}, {`^a$`, "a"}, {`(?m)^b`, "b"}, {`a\z`, "a"}, {`(?s).`, "\x00"}, {`\x{212a}`, "\u212a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, line string) {
		re, err := regexp.Compile(pattern)
		if err != nil || len(pattern) > risk.MaxPatternLen || strings.ContainsAny(line, "\r\n") || !re.MatchString(line) {
			return
		}
		b, _ := json.Marshal(pattern)
		p, err := risk.Parse([]byte(`{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["zz"]},{"tier":"medium","added_lines":[` + string(b) + `]}]}`))
		if err != nil {
			if pattern == "" {
				return
			}
			t.Fatalf("%q: %v", pattern, err)
		}
		c, err := p.Classify([]risk.File{{Path: "x", New: []byte(line)}})
		if err != nil {
			t.Fatal(err)
		}
		if c.Tier == risk.Low {
			t.Fatalf("pattern %q matches %q, but the classification is %+v", pattern, line, c)
		}
	})
}

// TestMaximalPolicy: a policy at every limit (256 rules of 64 line
// patterns of 512 bytes) is too large for one alternation; it parses,
// and a line matching its last pattern is still matched.
func TestMaximalPolicy(t *testing.T) {
	var rules []string
	for i := range risk.MaxRules {
		var ps []string
		for j := range risk.MaxPatterns {
			ps = append(ps, fmt.Sprintf(`"%s%03d%02d"`, strings.Repeat("a", risk.MaxPatternLen-5), i, j))
		}
		rules = append(rules, `{"tier":"medium","added_lines":[`+strings.Join(ps, ",")+`]}`)
	}
	rules[len(rules)-1] = strings.Replace(rules[len(rules)-1], "medium", "high", 1)
	start := time.Now()
	p, err := risk.Parse([]byte(`{"approvals":{"low":1,"medium":1,"high":2},"rules":[` + strings.Join(rules, ",") + `]}`))
	if err != nil {
		t.Fatalf("%.200s", err)
	}
	parsed := time.Since(start)
	line := strings.Repeat("a", risk.MaxPatternLen-5) + "25563"
	c, err := p.Classify([]risk.File{{Path: "x", New: []byte("b\n" + line + "\n")}})
	if err != nil || c.Tier != risk.High || c.MatchesTotal != 1 || c.Matches[0].Line != 2 {
		t.Fatalf("%+v %v", c, err)
	}
	t.Logf("parsed in %v, classified in %v", parsed, time.Since(start)-parsed)
}

// TestLiteralPatterns: a pattern that is a plain literal is searched as
// bytes; an anchored one is not taken for a literal.
func TestLiteralPatterns(t *testing.T) {
	p := mustParse(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["^abc$","os\\.Setenv","(?:)z"]}]}`)
	for line, want := range map[string]string{"abc": risk.High, "xabcx": risk.Low, "abcx": risk.Low, "a os.Setenv(": risk.High, "osXSetenv": risk.Low, "yz": risk.High, "y": risk.Low} {
		if got := tierOf(t, p, risk.File{Path: "f", New: []byte(line)}); got != want {
			t.Errorf("%q: %s, want %s", line, got, want)
		}
	}
}
