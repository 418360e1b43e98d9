// Package printable makes hostile text safe to print on one line: control,
// C1 and format characters (terminal escapes, line breaks, bidirectional
// overrides, invisible characters) are written escaped, never raw.
package printable

import (
	"strconv"
	"strings"
	"unicode"
)

// String returns s with invalid UTF-8 replaced and every control or
// format character written as its Go escape.
func String(s string) string {
	var b strings.Builder
	for _, c := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsControl(c) || unicode.Is(unicode.Cf, c) {
			q := strconv.QuoteRuneToASCII(c)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
