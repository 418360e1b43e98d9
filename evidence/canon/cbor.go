package canon

import (
	"bytes"
	"fmt"
	"math/big"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// encMode is RFC 8949 §4.2.1 core deterministic encoding: shortest heads,
// definite lengths, map keys sorted bytewise by their encodings.
var encMode = mustEncMode()

func mustEncMode() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // the options are constants
	}
	return em
}

// decMode decodes without leniency: duplicate keys, indefinite lengths and
// tags are errors. It does not check key order or shortest heads; CheckCBOR
// does that by re-encoding.
var decMode = mustDecMode()

func mustDecMode() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  DefaultMaxDepth,
		MaxArrayElements: 1<<31 - 1, // bounded by the input size instead
		MaxMapPairs:      1<<31 - 1,
		IntDec:           cbor.IntDecConvertNone,
		DefaultMapType:   reflect.TypeFor[map[any]any](),
		UTF8:             cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err) // the options are constants
	}
	return dm
}

// CBOR parses data under the strict rules and returns its deterministic CBOR
// encoding.
func CBOR(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return v.CBOR()
}

// CBOR returns the RFC 8949 §4.2.1 core deterministic encoding of v:
// integers as major types 0 and 1, strings as text strings, arrays, maps
// with text keys, false, true and null. A value holding RFC 8785 numbers has
// no CBOR form and is refused.
func (v Value) CBOR() ([]byte, error) {
	x, err := v.toAny()
	if err != nil {
		return nil, err
	}
	b, err := encMode.Marshal(x)
	if err != nil {
		return nil, fmt.Errorf("canon: encoding CBOR: %w", err) // unreachable for valid Values
	}
	return b, nil
}

func (v Value) toAny() (any, error) {
	switch v.kind {
	case KindNull:
		return nil, nil
	case KindBool:
		return v.b, nil
	case KindInt:
		return v.i, nil
	case KindString:
		return v.s, nil
	case KindArray:
		a := make([]any, len(v.elems))
		for i, e := range v.elems {
			x, err := e.toAny()
			if err != nil {
				return nil, err
			}
			a[i] = x
		}
		return a, nil
	case KindObject:
		m := make(map[string]any, len(v.members))
		for _, mem := range v.members {
			x, err := mem.Value.toAny()
			if err != nil {
				return nil, err
			}
			m[mem.Name] = x
		}
		return m, nil
	}
	return nil, &Error{Offset: -1, Err: ErrFloat, Detail: "RFC 8785 numbers have no CBOR form in cordon"}
}

// CheckCBOR verifies that data is exactly one data item in cordon's
// canonical CBOR subset (docs/SPEC.md §2.4): unsigned and negative integers
// of the full 64-bit range, text strings without noncharacters, arrays,
// maps with distinct text keys, false, true and null — encoded in core
// deterministic form. It decodes strictly, re-encodes and compares bytes.
func CheckCBOR(data []byte) error {
	_, err := checkCBOR(data)
	return err
}

func checkCBOR(data []byte) (any, error) {
	if len(data) > DefaultMaxSize {
		return nil, &Error{Offset: DefaultMaxSize, Err: ErrTooLarge,
			Detail: fmt.Sprintf("%d bytes, limit %d", len(data), DefaultMaxSize)}
	}
	var x any
	if err := decMode.Unmarshal(data, &x); err != nil {
		return nil, &Error{Offset: -1, Err: ErrCBORMalformed, Detail: err.Error()}
	}
	if err := checkSubset(x); err != nil {
		return nil, err
	}
	again, err := encMode.Marshal(x)
	if err != nil {
		return nil, &Error{Offset: -1, Err: ErrCBORType, Detail: err.Error()}
	}
	if !bytes.Equal(again, data) {
		off := 0
		for off < len(again) && off < len(data) && again[off] == data[off] {
			off++
		}
		return nil, errAt(off, ErrNotCanonical, "the canonical encoding differs from here")
	}
	return x, nil
}

// minNint is -2^64, the smallest CBOR negative integer.
var minNint = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64))

func checkSubset(x any) error {
	switch x := x.(type) {
	case nil, bool, uint64, int64:
		return nil
	case big.Int: // a negative integer below math.MinInt64; tags are forbidden
		if x.Sign() < 0 && x.Cmp(minNint) >= 0 {
			return nil
		}
	case string:
		for i, r := range x {
			if isNoncharacter(r) {
				return &Error{Offset: -1, Err: ErrNoncharacter, Detail: fmt.Sprintf("U+%04X at byte %d of a text string", r, i)}
			}
		}
		return nil
	case []any:
		for _, e := range x {
			if err := checkSubset(e); err != nil {
				return err
			}
		}
		return nil
	case map[any]any:
		for k, e := range x {
			if _, ok := k.(string); !ok {
				return &Error{Offset: -1, Err: ErrCBORType, Detail: fmt.Sprintf("map key of type %s; only text keys are allowed", cborTypeName(k))}
			}
			if err := checkSubset(k); err != nil {
				return err // a key is text of the subset too: no noncharacters
			}
			if err := checkSubset(e); err != nil {
				return err
			}
		}
		return nil
	}
	return &Error{Offset: -1, Err: ErrCBORType, Detail: cborTypeName(x) + " is not allowed"}
}

func cborTypeName(x any) string {
	switch x.(type) {
	case float32, float64:
		return "floating-point number"
	case []byte:
		return "byte string"
	case cbor.SimpleValue:
		return "simple value"
	case cbor.Tag, cbor.RawTag:
		return "tag"
	case uint64, int64, big.Int:
		return "integer"
	case []any:
		return "array"
	case map[any]any:
		return "map"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", x)
}

// DecodeCBOR verifies data as CheckCBOR does and returns it as a Value of
// the JSON model, refusing integers outside ±MaxInt.
func DecodeCBOR(data []byte) (Value, error) {
	x, err := checkCBOR(data)
	if err != nil {
		return Value{}, err
	}
	return fromAny(x)
}

func fromAny(x any) (Value, error) {
	switch x := x.(type) {
	case nil:
		return Value{}, nil
	case bool:
		return Value{kind: KindBool, b: x}, nil
	case uint64:
		if x > MaxInt {
			return Value{}, &Error{Offset: -1, Err: ErrIntegerRange, Detail: fmt.Sprint(x)}
		}
		return Value{kind: KindInt, i: int64(x)}, nil
	case int64:
		if x < -MaxInt {
			return Value{}, &Error{Offset: -1, Err: ErrIntegerRange, Detail: fmt.Sprint(x)}
		}
		return Value{kind: KindInt, i: x}, nil
	case big.Int:
		return Value{}, &Error{Offset: -1, Err: ErrIntegerRange, Detail: x.String()}
	case string:
		return Value{kind: KindString, s: x}, nil
	case []any:
		elems := make([]Value, len(x))
		for i, e := range x {
			v, err := fromAny(e)
			if err != nil {
				return Value{}, err
			}
			elems[i] = v
		}
		return Value{kind: KindArray, elems: elems}, nil
	case map[any]any:
		members := make([]Member, 0, len(x))
		for k, e := range x {
			v, err := fromAny(e)
			if err != nil {
				return Value{}, err
			}
			members = append(members, Member{Name: k.(string), Value: v, Offset: -1})
		}
		if err := sortMembers(members); err != nil {
			return Value{}, err
		}
		return Value{kind: KindObject, members: members}, nil
	}
	return Value{}, &Error{Offset: -1, Err: ErrCBORType, Detail: cborTypeName(x) + " is not allowed"}
}
