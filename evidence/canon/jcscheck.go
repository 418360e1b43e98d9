package canon

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// ErrNotJCS: well-formed input that is not exactly the JCS form of its
// value (whitespace, member order, escapes, number spelling).
var ErrNotJCS = errors.New("not in JCS form")

// Span locates one member of an object checked by CheckJCSObject: the name
// b[NameStart:NameEnd] (between the quotes, as written) and the value
// b[ValueStart:ValueEnd].
type Span struct {
	NameStart, NameEnd, ValueStart, ValueEnd int
}

// CheckJCS reports whether b is exactly the JCS form of a value of the
// model: what Parse followed by AppendJCS would return for it. It builds
// nothing and allocates nothing in the common case (member names without
// escapes), so it is the fast way to verify bytes that must already be
// canonical, such as journal lines.
func CheckJCS(b []byte) error {
	_, err := checkJCS(b, nil, false)
	return err
}

// CheckJCSObject is CheckJCS for a top-level object; it appends the spans
// of its members, in order, to spans.
func CheckJCSObject(b []byte, spans []Span) ([]Span, error) {
	if len(b) == 0 || b[0] != '{' {
		return spans, errAt(0, ErrNotJCS, "want an object")
	}
	return checkJCS(b, spans, true)
}

func checkJCS(b []byte, spans []Span, top bool) ([]Span, error) {
	if len(b) > DefaultMaxSize {
		return spans, &Error{Offset: DefaultMaxSize, Err: ErrTooLarge}
	}
	c := jcsChecker{b: b, spans: spans, top: top}
	if err := c.value(); err != nil {
		return c.spans, err
	}
	if c.i != len(b) {
		return c.spans, errAt(c.i, ErrNotJCS, "data after the value")
	}
	return c.spans, nil
}

type jcsChecker struct {
	b     []byte
	i     int
	depth int
	spans []Span
	top   bool
}

func (c *jcsChecker) fail(err error, msg string) error { return errAt(c.i, err, "%s", msg) }

func (c *jcsChecker) value() error {
	if c.i >= len(c.b) {
		return c.fail(ErrSyntax, "unexpected end of input")
	}
	switch x := c.b[c.i]; {
	case x == '{':
		return c.object()
	case x == '[':
		return c.array()
	case x == '"':
		_, err := c.str()
		return err
	case x == 't':
		return c.lit("true")
	case x == 'f':
		return c.lit("false")
	case x == 'n':
		return c.lit("null")
	case x == '-' || '0' <= x && x <= '9':
		return c.number()
	}
	return c.fail(ErrNotJCS, "unexpected byte")
}

func (c *jcsChecker) lit(s string) error {
	if len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return c.fail(ErrSyntax, "invalid literal")
	}
	c.i += len(s)
	return nil
}

func (c *jcsChecker) enter() error {
	c.depth++
	if c.depth > DefaultMaxDepth {
		return c.fail(ErrTooDeep, "nesting too deep")
	}
	c.i++
	return nil
}

func (c *jcsChecker) array() error {
	if err := c.enter(); err != nil {
		return err
	}
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		c.depth--
		return nil
	}
	for {
		if err := c.value(); err != nil {
			return err
		}
		if c.i >= len(c.b) {
			return c.fail(ErrSyntax, "unterminated array")
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			c.depth--
			return nil
		default:
			return c.fail(ErrNotJCS, "want ',' or ']'")
		}
	}
}

func (c *jcsChecker) object() error {
	record := c.top && c.depth == 0
	if err := c.enter(); err != nil {
		return err
	}
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		c.depth--
		return nil
	}
	var prev []byte
	prevEscaped, first := false, true
	for {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return c.fail(ErrNotJCS, "want a member name")
		}
		start := c.i + 1
		escaped, err := c.str()
		if err != nil {
			return err
		}
		name := c.b[start : c.i-1]
		if !first {
			var a, b string
			if escaped || prevEscaped {
				// Rare: names with escapes; compare their unescaped values.
				av, _ := Parse(append(append([]byte{'"'}, prev...), '"'))
				bv, _ := Parse(append(append([]byte{'"'}, name...), '"'))
				a, b = av.Str(), bv.Str()
			} else {
				a, b = string(prev), string(name) // no allocation: used only to compare
			}
			if compareUTF16(a, b) >= 0 {
				return errAt(start-1, ErrNotJCS, "member names are not in JCS order (or repeat)")
			}
		}
		prev, prevEscaped, first = name, escaped, false
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return c.fail(ErrNotJCS, "want ':'")
		}
		c.i++
		vstart := c.i
		if err := c.value(); err != nil {
			return err
		}
		if record {
			c.spans = append(c.spans, Span{NameStart: start, NameEnd: start + len(name), ValueStart: vstart, ValueEnd: c.i})
		}
		if c.i >= len(c.b) {
			return c.fail(ErrSyntax, "unterminated object")
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			c.depth--
			return nil
		default:
			return c.fail(ErrNotJCS, "want ',' or '}'")
		}
	}
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain reports whether none of the 8 bytes of w needs attention inside a
// string: no byte below 0x20, no '"', no '\\', no byte with the high bit.
func plain(w uint64) bool {
	below := (w - lsb*0x20) & ^w & msb
	q := w ^ (lsb * '"')
	quote := (q - lsb) & ^q & msb
	s := w ^ (lsb * '\\')
	slash := (s - lsb) & ^s & msb
	return below|quote|slash|(w&msb) == 0
}

// str checks a string in JCS form and reports whether it has escapes.
func (c *jcsChecker) str() (bool, error) {
	b := c.b
	i := c.i + 1
	escaped := false
	for {
		for i+8 <= len(b) && plain(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			c.i = i
			return escaped, c.fail(ErrSyntax, "unterminated string")
		}
		x := b[i]
		switch {
		case x == '"':
			c.i = i + 1
			return escaped, nil
		case x == '\\':
			escaped = true
			if i+1 >= len(b) {
				c.i = i
				return escaped, c.fail(ErrSyntax, "unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// JCS writes \u00xx, lower-case, only for controls without a
				// short form.
				if i+6 > len(b) || b[i+2] != '0' || b[i+3] != '0' || !(b[i+4] == '0' || b[i+4] == '1') || !isLowerHex(b[i+5]) {
					c.i = i
					return escaped, c.fail(ErrNotJCS, "\\u escape of a character JCS writes as itself")
				}
				switch v := hexVal(b[i+4])<<4 | hexVal(b[i+5]); v {
				case '\b', '\t', '\n', '\f', '\r':
					c.i = i
					return escaped, c.fail(ErrNotJCS, "\\u escape of a character with a short escape")
				}
				i += 6
			default:
				c.i = i
				return escaped, c.fail(ErrNotJCS, "escape JCS does not write")
			}
		case x < 0x20:
			c.i = i
			return escaped, c.fail(ErrSyntax, "control character in a string")
		case x < 0x80:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				c.i = i
				return escaped, c.fail(ErrInvalidUTF8, "invalid UTF-8")
			}
			if isNoncharacter(r) {
				c.i = i
				return escaped, c.fail(ErrNoncharacter, "noncharacter")
			}
			i += n
		}
	}
}

func isLowerHex(x byte) bool { return '0' <= x && x <= '9' || 'a' <= x && x <= 'f' }

func hexVal(x byte) byte {
	if x <= '9' {
		return x - '0'
	}
	return x - 'a' + 10
}

func (c *jcsChecker) number() error {
	b := c.b
	start := c.i
	i := c.i
	if b[i] == '-' {
		i++
	}
	d := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	n := i - d
	switch {
	case n == 0:
		return c.fail(ErrSyntax, "'-' without digits")
	case b[d] == '0' && n > 1:
		return c.fail(ErrSyntax, "leading zero")
	case b[d] == '0' && d > start:
		return c.fail(ErrNegativeZero, "-0")
	case n > 16:
		return c.fail(ErrIntegerRange, "integer out of range")
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return c.fail(ErrFloat, "not an integer")
	}
	var v int64
	for _, x := range b[d:i] {
		v = v*10 + int64(x-'0')
	}
	if v > MaxInt {
		return c.fail(ErrIntegerRange, "integer out of range")
	}
	c.i = i
	return nil
}
