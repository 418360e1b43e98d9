package canon

import "iter"

// Kind is the type of a Value.
type Kind uint8

const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindString
	KindArray
	KindObject
	// KindNumber is an IEEE-754 binary64 number. Only Options with
	// RFC8785Numbers set produce it; it has a JCS form but no CBOR form and
	// no ContentId form in cordon (see docs/SPEC.md §2.3).
	KindNumber
)

var kindNames = [...]string{"null", "bool", "integer", "string", "array", "object", "number"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// MaxInt is the largest integer magnitude the model holds: 2^53−1, the
// largest integer every I-JSON implementation represents exactly.
const MaxInt = 1<<53 - 1

// A Value is a node of cordon's strict JSON model: null, a boolean, an
// integer within ±MaxInt, a string of Unicode scalar values without
// noncharacters, an array, or an object with distinct member names.
//
// Values are built only by this package's parsers and decoders, so every
// Value satisfies those rules and has exactly one canonical encoding. The
// zero Value is null.
type Value struct {
	kind    Kind
	b       bool
	i       int64
	f       float64
	s       string
	elems   []Value
	members []Member // sorted by name in RFC 8785 order, names distinct
}

// Member is one name/value pair of an object.
type Member struct {
	Name  string
	Value Value
	// Offset is the byte offset of the name in the parsed input, or -1.
	Offset int64
}

// Kind reports the type of v.
func (v Value) Kind() Kind { return v.kind }

// Bool returns the boolean; false unless v is KindBool.
func (v Value) Bool() bool { return v.b }

// Int returns the integer; 0 unless v is KindInt.
func (v Value) Int() int64 { return v.i }

// Str returns the string; "" unless v is KindString.
func (v Value) Str() string { return v.s }

// Len returns the number of elements of an array or members of an object.
func (v Value) Len() int { return len(v.elems) + len(v.members) }

// Elems iterates over the elements of an array in order.
func (v Value) Elems() iter.Seq2[int, Value] {
	return func(yield func(int, Value) bool) {
		for i, e := range v.elems {
			if !yield(i, e) {
				return
			}
		}
	}
}

// Members iterates over the members of an object in RFC 8785 order (member
// names sorted by their UTF-16 code units).
func (v Value) Members() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		for _, m := range v.members {
			if !yield(m.Name, m.Value) {
				return
			}
		}
	}
}

// Get returns the member of an object with the given name.
func (v Value) Get(name string) (Value, bool) {
	for _, m := range v.members {
		if m.Name == name {
			return m.Value, true
		}
	}
	return Value{}, false
}
