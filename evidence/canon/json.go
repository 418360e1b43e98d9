package canon

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Default limits, documented in docs/SPEC.md §2.5.
const (
	DefaultMaxSize  = 32 << 20 // bytes of input
	DefaultMaxDepth = 128      // nested arrays and objects
)

// Options configure a parse. The zero Options are cordon's strict rules
// with the default limits.
type Options struct {
	// MaxSize is the largest input accepted, in bytes; 0 means DefaultMaxSize.
	MaxSize int
	// MaxDepth is the deepest nesting of arrays and objects; 0 means
	// DefaultMaxDepth.
	MaxDepth int
	// RFC8785Numbers switches numbers to the full RFC 8785 model: any JSON
	// number is read as the nearest IEEE-754 binary64 value (KindNumber),
	// which rounds, and -0 reads as 0. It exists to interoperate with RFC
	// 8785 and its published test data. cordon never uses it for anything
	// it signs or addresses: such Values have no CBOR form and ID refuses
	// them.
	RFC8785Numbers bool
}

func (o Options) maxSize() int {
	if o.MaxSize > 0 {
		return o.MaxSize
	}
	return DefaultMaxSize
}

func (o Options) maxDepth() int {
	if o.MaxDepth > 0 {
		return o.MaxDepth
	}
	return DefaultMaxDepth
}

// Parse parses one JSON text under the strict rules with default limits.
func Parse(data []byte) (Value, error) { return Options{}.Parse(data) }

// Parse parses one JSON text (RFC 8259) under the rules of docs/SPEC.md
// §2.2. Whitespace may surround the value; anything else after it is an
// error. On error the returned Value is null and the error is an *Error.
func (o Options) Parse(data []byte) (Value, error) {
	v, err := o.parse(data)
	if err != nil {
		locate(err, data)
	}
	return v, err
}

func (o Options) parse(data []byte) (Value, error) {
	if len(data) > o.maxSize() {
		return Value{}, &Error{Offset: int64(o.maxSize()), Err: ErrTooLarge,
			Detail: fmt.Sprintf("%d bytes, limit %d", len(data), o.maxSize())}
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return Value{}, errAt(0, ErrBOM, "remove the leading U+FEFF")
	}
	p := parser{data: data, maxDepth: o.maxDepth(), floats: o.RFC8785Numbers}
	v, err := p.value()
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return Value{}, errAt(p.pos, ErrSyntax, "unexpected %s after the top-level value", describeByte(p.data, p.pos))
	}
	return v, nil
}

type parser struct {
	data     []byte
	pos      int
	depth    int
	maxDepth int
	floats   bool
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func describeByte(data []byte, pos int) string {
	if pos >= len(data) {
		return "end of input"
	}
	c := data[pos]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("character %q", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) value() (Value, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return Value{}, errAt(p.pos, ErrSyntax, "unexpected end of input, want a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		return Value{kind: KindString, s: s}, err
	case c == 't':
		return Value{kind: KindBool, b: true}, p.literal("true")
	case c == 'f':
		return Value{kind: KindBool}, p.literal("false")
	case c == 'n':
		return Value{}, p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	default:
		return Value{}, errAt(p.pos, ErrSyntax, "unexpected %s, want a value", describeByte(p.data, p.pos))
	}
}

func (p *parser) literal(lit string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
		return errAt(p.pos, ErrSyntax, "invalid literal, want %q", lit)
	}
	p.pos += len(lit)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return errAt(p.pos, ErrTooDeep, "more than %d nested arrays and objects", p.maxDepth)
	}
	p.pos++ // '[' or '{'
	return nil
}

func (p *parser) array() (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	var elems []Value
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return Value{kind: KindArray, elems: []Value{}}, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return Value{}, err
		}
		elems = append(elems, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, errAt(p.pos, ErrSyntax, "unexpected end of input, want ',' or ']'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			return Value{kind: KindArray, elems: elems}, nil
		default:
			return Value{}, errAt(p.pos, ErrSyntax, "unexpected %s, want ',' or ']'", describeByte(p.data, p.pos))
		}
	}
}

func (p *parser) object() (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	var members []Member
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return Value{kind: KindObject, members: []Member{}}, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, errAt(p.pos, ErrSyntax, "unexpected %s, want a member name", describeByte(p.data, p.pos))
		}
		off := p.pos
		name, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, errAt(p.pos, ErrSyntax, "unexpected %s, want ':'", describeByte(p.data, p.pos))
		}
		p.pos++
		v, err := p.value()
		if err != nil {
			return Value{}, err
		}
		members = append(members, Member{Name: name, Value: v, Offset: int64(off)})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, errAt(p.pos, ErrSyntax, "unexpected end of input, want ',' or '}'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			if err := sortMembers(members); err != nil {
				return Value{}, err
			}
			return Value{kind: KindObject, members: members}, nil
		default:
			return Value{}, errAt(p.pos, ErrSyntax, "unexpected %s, want ',' or '}'", describeByte(p.data, p.pos))
		}
	}
}

// sortMembers puts members in RFC 8785 order and refuses equal names,
// reporting the duplicate that comes first in the input.
func sortMembers(ms []Member) error {
	slices.SortFunc(ms, func(a, b Member) int { return compareUTF16(a.Name, b.Name) })
	var dup *Member
	for i := 1; i < len(ms); i++ {
		if ms[i].Name != ms[i-1].Name {
			continue
		}
		later := &ms[i]
		if ms[i-1].Offset > later.Offset {
			later = &ms[i-1]
		}
		if dup == nil || later.Offset < dup.Offset {
			dup = later
		}
	}
	if dup != nil {
		return &Error{Offset: dup.Offset, Err: ErrDuplicateKey, Detail: strconv.Quote(dup.Name)}
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 §3.2.3
// requires. Byte order of UTF-8 is code point order, which differs from
// UTF-16 order only between U+E000–U+FFFF and the supplementary planes, so
// the strings are compared at their first differing code point.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	return cmp.Compare(utf16Key(ra), utf16Key(rb))
}

// utf16Key maps a code point to a number that orders like its UTF-16 form:
// supplementary code points (high surrogate 0xD800–0xDBFF first) sort
// after U+D7FF and before U+E000.
func utf16Key(r rune) int32 {
	switch {
	case r >= 0x10000:
		return 0xD800 + (r - 0x10000)
	case r >= 0xE000:
		return r + 0x100000
	default:
		return r
	}
}

func isNoncharacter(r rune) bool {
	return r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE
}

// str parses a string starting at the opening quote and returns it unescaped.
func (p *parser) str() (string, error) {
	start := p.pos + 1
	i := start
	data := p.data
	for i < len(data) {
		c := data[i]
		if c == '"' {
			p.pos = i + 1
			return string(data[start:i]), nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		i++
	}
	buf := make([]byte, 0, i-start+16)
	buf = append(buf, data[start:i]...)
	for {
		if i >= len(data) {
			return "", errAt(start-1, ErrSyntax, "unterminated string")
		}
		c := data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return string(buf), nil
		case c == '\\':
			r, n, err := unescape(data, i)
			if err != nil {
				return "", err
			}
			buf = utf8.AppendRune(buf, r)
			i += n
		case c < 0x20:
			return "", errAt(i, ErrSyntax, "control character U+%04X in a string must be escaped", c)
		case c < 0x80:
			buf = append(buf, c)
			i++
		default:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				return "", errAt(i, ErrInvalidUTF8, "byte 0x%02x", c)
			}
			if isNoncharacter(r) {
				return "", errAt(i, ErrNoncharacter, "U+%04X", r)
			}
			buf = append(buf, data[i:i+n]...)
			i += n
		}
	}
}

// unescape decodes the escape sequence at data[i] == '\\' and returns the
// code point and the number of bytes consumed.
func unescape(data []byte, i int) (rune, int, error) {
	if i+1 >= len(data) {
		return 0, 0, errAt(i, ErrSyntax, "unterminated escape")
	}
	switch data[i+1] {
	case '"':
		return '"', 2, nil
	case '\\':
		return '\\', 2, nil
	case '/':
		return '/', 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
	default:
		return 0, 0, errAt(i, ErrSyntax, "invalid escape \\%c", data[i+1])
	}
	r, ok := hex4(data, i+2)
	if !ok {
		return 0, 0, errAt(i, ErrSyntax, "\\u must be followed by four hex digits")
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, 0, errAt(i, ErrLoneSurrogate, "low surrogate \\u%04x without a high surrogate before it", r)
	case r >= 0xD800 && r <= 0xDBFF:
		lo, ok := rune(0), false
		if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
			lo, ok = hex4(data, i+8)
		}
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, 0, errAt(i, ErrLoneSurrogate, "high surrogate \\u%04x without a low surrogate after it", r)
		}
		r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
		if isNoncharacter(r) {
			return 0, 0, errAt(i, ErrNoncharacter, "U+%04X", r)
		}
		return r, 12, nil
	}
	if isNoncharacter(r) {
		return 0, 0, errAt(i, ErrNoncharacter, "U+%04X", r)
	}
	return r, 6, nil
}

func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number parses a number per the RFC 8259 grammar, then applies the model:
// integers only, within ±MaxInt, never -0 (unless RFC8785Numbers).
func (p *parser) number() (Value, error) {
	data := p.data
	start := p.pos
	i := start
	neg := i < len(data) && data[i] == '-'
	if neg {
		i++
	}
	digits := i
	switch {
	case i < len(data) && data[i] == '0':
		i++
		if i < len(data) && '0' <= data[i] && data[i] <= '9' {
			return Value{}, errAt(start, ErrSyntax, "number with a leading zero")
		}
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	default:
		return Value{}, errAt(start, ErrSyntax, "'-' must be followed by a digit")
	}
	intEnd := i
	frac, exp := false, false
	if i < len(data) && data[i] == '.' {
		frac = true
		i++
		d := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == d {
			return Value{}, errAt(start, ErrSyntax, "'.' must be followed by a digit")
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		exp = true
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		d := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == d {
			return Value{}, errAt(start, ErrSyntax, "exponent must have a digit")
		}
	}
	p.pos = i
	if p.floats {
		f, err := strconv.ParseFloat(string(data[start:i]), 64)
		if err != nil {
			return Value{}, errAt(start, ErrSyntax, "number %s is outside the IEEE-754 binary64 range", clip(data[start:i]))
		}
		return Value{kind: KindNumber, f: f}, nil
	}
	if frac || exp {
		what := "a fraction"
		if !frac {
			what = "an exponent"
		}
		return Value{}, errAt(start, ErrFloat, "%s has %s; write integers only", clip(data[start:i]), what)
	}
	if neg && intEnd-digits == 1 && data[digits] == '0' {
		return Value{}, errAt(start, ErrNegativeZero, "write 0")
	}
	if intEnd-digits > 16 {
		return Value{}, errAt(start, ErrIntegerRange, "%s", clip(data[start:i]))
	}
	var n int64
	for _, c := range data[digits:intEnd] {
		n = n*10 + int64(c-'0')
	}
	if n > MaxInt {
		return Value{}, errAt(start, ErrIntegerRange, "%s", clip(data[start:i]))
	}
	if neg {
		n = -n
	}
	return Value{kind: KindInt, i: n}, nil
}

// clip shortens input quoted in an error message to at most 40 bytes.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
