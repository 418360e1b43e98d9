package testreport

import (
	"strconv"
	"strings"
)

// parseTAP counts a TAP stream. Top-level lines only: an optional
// "TAP version 13" or "14" first line, exactly one plan "1..N" (before
// the first test line or after the last), test lines "ok" or "not ok"
// with an optional number (which must be the test's ordinal), description
// and "# SKIP" or "# TODO" directive, "Bail out!", comments ("#"), blank
// lines and "pragma" lines. Indented lines (YAML diagnostics, subtests)
// are not read: a subtest counts through its parent's test line. "ok"
// counts as passed, "not ok" as failed, "ok # SKIP" as skipped, and a
// TODO test, which TAP does not count as a failure, as skipped either
// way; "not ok # SKIP" is a failure. "Bail out!" counts one failure and
// ends the stream. The number of test lines must equal the plan. Any
// other line is refused.
func parseTAP(data []byte) (Counts, error) {
	ls, err := lines(data)
	if err != nil {
		return Counts{}, err
	}
	var c Counts
	var tests int64
	plan := int64(-1)
	planLine := 0
	planAtEnd := false // the plan came after test lines: no more may follow
	first := true
	for i, l := range ls {
		n := i + 1
		if strings.TrimSpace(l) == "" {
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			continue // YAML block or subtest
		}
		if first && strings.HasPrefix(l, "TAP version ") {
			first = false
			if v := strings.TrimPrefix(l, "TAP version "); v != "13" && v != "14" {
				return Counts{}, malformed("tap: line %d: version %q (want 13 or 14)", n, v)
			}
			continue
		}
		first = false
		switch {
		case strings.HasPrefix(l, "#") || strings.HasPrefix(l, "pragma "):
			continue
		case strings.HasPrefix(l, "Bail out!"):
			c.Failed++
			return c, nil
		case strings.HasPrefix(l, "1.."):
			if plan >= 0 {
				return Counts{}, malformed("tap: line %d: a second plan (the first is on line %d)", n, planLine)
			}
			planAtEnd = tests > 0
			num, _, _ := strings.Cut(strings.TrimPrefix(l, "1.."), "#")
			num = strings.TrimRight(num, " ")
			p, err := strconv.ParseInt(num, 10, 64)
			if err != nil || !digits(num) || p > 1<<40 {
				return Counts{}, malformed("tap: line %d: plan %q is not 1..N", n, l)
			}
			plan, planLine = p, n
		case l == "ok" || strings.HasPrefix(l, "ok ") || l == "not ok" || strings.HasPrefix(l, "not ok "):
			if planAtEnd {
				return Counts{}, malformed("tap: line %d: a test line after the plan at the end (line %d)", n, planLine)
			}
			tests++
			ok := !strings.HasPrefix(l, "not ok")
			rest := strings.TrimPrefix(strings.TrimPrefix(l, "not ok"), "ok")
			rest = strings.TrimLeft(rest, " ")
			if j := len(rest) - len(strings.TrimLeft(rest, "0123456789")); j > 0 {
				num, err := strconv.ParseInt(rest[:j], 10, 64)
				if err != nil || num != tests {
					return Counts{}, malformed("tap: line %d: test number %s, want %d", n, rest[:j], tests)
				}
				rest = rest[j:]
				if rest != "" && rest[0] != ' ' {
					return Counts{}, malformed("tap: line %d: test number not followed by a space", n)
				}
			}
			switch directive(rest) {
			case "skip":
				if ok {
					c.Skipped++
				} else {
					c.Failed++
				}
			case "todo":
				c.Skipped++
			default:
				if ok {
					c.Passed++
				} else {
					c.Failed++
				}
			}
		default:
			return Counts{}, malformed("tap: line %d: not a TAP line: %q", n, clip(l, 80))
		}
	}
	switch {
	case plan < 0:
		return Counts{}, malformed("tap: no plan (1..N)")
	case plan != tests:
		return Counts{}, malformed("tap: the plan is 1..%d but there are %d test lines", plan, tests)
	}
	return c, nil
}

// directive returns "skip" or "todo" for a test line's directive (after
// the first "#" not escaped as "\#"), or "".
func directive(rest string) string {
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			i++
		case '#':
			d := strings.ToLower(strings.TrimLeft(rest[i+1:], " \t"))
			switch {
			case strings.HasPrefix(d, "skip"):
				return "skip"
			case strings.HasPrefix(d, "todo"):
				return "todo"
			}
			return ""
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
