package printable

import "testing"

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":         "plain text",
		"a\x1b[31mred":       `a\x1b[31mred`,
		"two\nlines\r":       `two\nlines\r`,
		"bidi\u202eevil":     `bidi\u202eevil`,
		"zero\u200bwidth":    `zero\u200bwidth`,
		"bad \xff utf-8":     "bad \uFFFD utf-8",
		"c1 \u009b control":  `c1 \u009b control`,
		"unicode ok: µJ, 日本": "unicode ok: µJ, 日本",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}
