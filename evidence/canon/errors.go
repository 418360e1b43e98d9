package canon

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them; test with errors.Is.
var (
	// ErrSyntax: the input is not JSON (RFC 8259), or has data after the value.
	ErrSyntax = errors.New("malformed JSON")
	// ErrBOM: the input starts with a UTF-8 byte order mark.
	ErrBOM = errors.New("byte order mark")
	// ErrInvalidUTF8: a string holds bytes that are not UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrLoneSurrogate: a \u escape names half of a surrogate pair.
	ErrLoneSurrogate = errors.New("lone surrogate")
	// ErrNoncharacter: a string holds a Unicode noncharacter (RFC 7493 §2.1).
	ErrNoncharacter = errors.New("noncharacter in a string")
	// ErrDuplicateKey: an object has two members whose names are equal
	// after unescaping.
	ErrDuplicateKey = errors.New("duplicate member name")
	// ErrFloat: a number has a fraction or an exponent.
	ErrFloat = errors.New("number is not an integer")
	// ErrNegativeZero: the number -0.
	ErrNegativeZero = errors.New("negative zero")
	// ErrIntegerRange: an integer outside ±(2^53−1).
	ErrIntegerRange = errors.New("integer outside ±(2^53-1)")
	// ErrTooDeep: arrays and objects nest deeper than the limit.
	ErrTooDeep = errors.New("nesting too deep")
	// ErrTooLarge: the input is larger than the limit.
	ErrTooLarge = errors.New("input too large")

	// ErrIDPrefix: a ContentId does not start with "b3:".
	ErrIDPrefix = errors.New("ContentId prefix is not \"b3:\"")
	// ErrIDLength: a ContentId is not 46 characters long.
	ErrIDLength = errors.New("ContentId has the wrong length")
	// ErrIDEncoding: a ContentId's digest is not canonical unpadded base64url.
	ErrIDEncoding = errors.New("ContentId is not canonical base64url")

	// ErrCBORMalformed: bytes that are not well-formed CBOR, or that use
	// something the strict decoder forbids (indefinite lengths, tags,
	// duplicate map keys, trailing bytes).
	ErrCBORMalformed = errors.New("malformed CBOR")
	// ErrCBORType: a CBOR data item outside cordon's canonical subset
	// (floats, tags, undefined, other simple values, non-text map keys).
	ErrCBORType = errors.New("CBOR item outside the canonical subset")
	// ErrNotCanonical: well-formed CBOR that is not in core deterministic
	// form (a longer-than-needed head, unsorted map keys).
	ErrNotCanonical = errors.New("CBOR is not in core deterministic form")
)

// Error reports why an input was refused and where.
type Error struct {
	// Offset is the byte offset in the input where the problem starts, or
	// -1 when no single offset applies.
	Offset int64
	// Line and Column locate Offset in a JSON input for people: both
	// count from 1, Column in characters (an invalid UTF-8 byte counts as
	// one). They are 0 when unknown, as for CBOR input.
	Line, Column int
	// Err is one of the package's sentinel errors.
	Err error
	// Detail says more, in words; it may quote the input.
	Detail string
}

func (e *Error) Error() string {
	msg := e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Offset >= 0 && e.Line > 0 {
		return fmt.Sprintf("line %d, column %d (offset %d): %s", e.Line, e.Column, e.Offset, msg)
	}
	if e.Offset >= 0 {
		return fmt.Sprintf("offset %d: %s", e.Offset, msg)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

func errAt(off int, err error, format string, args ...any) *Error {
	return &Error{Offset: int64(off), Err: err, Detail: fmt.Sprintf(format, args...)}
}

// locate sets the line and column of err's offset in data.
func locate(err error, data []byte) {
	var e *Error
	if !errors.As(err, &e) || e.Offset < 0 || e.Offset > int64(len(data)) {
		return
	}
	before := data[:e.Offset]
	start := bytes.LastIndexByte(before, '\n') + 1
	e.Line = bytes.Count(before, []byte{'\n'}) + 1
	e.Column = utf8.RuneCount(before[start:]) + 1
}
