package canon

import (
	"math"
	"strconv"
)

// JCS parses data under the strict rules and returns its RFC 8785 form.
func JCS(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return v.AppendJCS(make([]byte, 0, len(data))), nil
}

// AppendJCS appends the RFC 8785 (JSON Canonicalization Scheme) form of v
// to dst: no whitespace, object members sorted by the UTF-16 code units of
// their names, strings escaped minimally, numbers in ECMAScript form.
func (v Value) AppendJCS(dst []byte) []byte {
	switch v.kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case KindInt:
		return strconv.AppendInt(dst, v.i, 10)
	case KindNumber:
		return appendES6(dst, v.f)
	case KindString:
		return appendJCSString(dst, v.s)
	case KindArray:
		dst = append(dst, '[')
		for i, e := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.AppendJCS(dst)
		}
		return append(dst, ']')
	case KindObject:
		dst = append(dst, '{')
		for i, m := range v.members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJCSString(dst, m.Name)
			dst = append(dst, ':')
			dst = m.Value.AppendJCS(dst)
		}
		return append(dst, '}')
	}
	panic("canon: invalid Value kind") // unreachable: Values are built only by this package
}

// ID returns the ContentId of v's JCS form. It refuses values parsed with
// RFC8785Numbers, whose numbers cordon never addresses.
func (v Value) ID() (ID, error) {
	if err := v.checkNoNumbers(); err != nil {
		return ID{}, err
	}
	return Sum(v.AppendJCS(nil)), nil
}

func (v Value) checkNoNumbers() error {
	switch v.kind {
	case KindNumber:
		return &Error{Offset: -1, Err: ErrFloat, Detail: "RFC 8785 numbers have no canonical form in cordon"}
	case KindArray:
		for _, e := range v.elems {
			if err := e.checkNoNumbers(); err != nil {
				return err
			}
		}
	case KindObject:
		for _, m := range v.members {
			if err := m.Value.checkNoNumbers(); err != nil {
				return err
			}
		}
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendJCSString writes s as RFC 8785 §3.2.2.2 requires: '"' and '\\'
// escaped, U+0008, U+0009, U+000A, U+000C and U+000D as \b \t \n \f \r, the
// other controls below U+0020 as \u00xx in lower case, and everything else,
// U+007F and above included, as it is.
func appendJCSString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendES6 writes f as ECMAScript's Number.prototype.toString does
// (ECMA-262 §7.1.12.1), which RFC 8785 §3.2.2.3 adopts. Go's shortest
// round-trip formatting gives the digits; this function only places them.
// f is never NaN or ±Inf: the parser refuses numbers outside binary64.
func appendES6(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic("canon: non-finite number") // unreachable: see above
	}
	if f == 0 {
		return append(dst, '0') // and -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	ePos := 0
	for e[ePos] != 'e' {
		ePos++
	}
	exp, _ := strconv.Atoi(string(e[ePos+1:]))
	var digs [24]byte
	d := append(digs[:0], e[0])
	if ePos > 1 {
		d = append(d, e[2:ePos]...)
	}
	k, n := len(d), exp+1 // value = 0.d × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
