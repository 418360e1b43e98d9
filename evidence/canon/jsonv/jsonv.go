// Package jsonv reads canon.Values into Go values strictly: member names
// must match exactly (no case folding, unlike encoding/json), members must
// have the expected type, unknown members are errors, and the first error
// names the path of the offending member ("fs[2].access").
//
// A Reader records the first error; after it, every read returns a zero
// value, so decoders can be written straight through and check Err once.
package jsonv

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// ErrInvalid is wrapped by every error of this package.
var ErrInvalid = errors.New("invalid document")

// Error names the member that is wrong and why.
type Error struct {
	Path string // e.g. "fs[2].access"; "" for the document itself
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func (e *Error) Unwrap() error { return ErrInvalid }

// Reader collects the first error of a decode.
type Reader struct {
	err error
}

// Err returns the first error, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records an error at path unless one was recorded already.
func (r *Reader) Fail(path, format string, args ...any) {
	if r.err == nil {
		r.err = &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
}

// Obj is an object being read.
type Obj struct {
	r    *Reader
	v    canon.Value
	path string
	used map[string]bool
}

// Object starts reading v, which must be an object.
func (r *Reader) Object(v canon.Value, path string) *Obj {
	o := &Obj{r: r, v: v, path: path, used: map[string]bool{}}
	if r.err == nil && v.Kind() != canon.KindObject {
		r.Fail(path, "want an object, got %s", v.Kind())
	}
	return o
}

// Path returns the path of member name.
func (o *Obj) Path(name string) string {
	if name == "" {
		return o.path
	}
	if o.path == "" {
		return name
	}
	return o.path + "." + name
}

// Has reports whether the object has member name.
func (o *Obj) Has(name string) bool {
	_, ok := o.v.Get(name)
	return ok
}

func (o *Obj) get(name string, required bool, want canon.Kind) (canon.Value, bool) {
	o.used[name] = true
	if o.r.err != nil {
		return canon.Value{}, false
	}
	v, ok := o.v.Get(name)
	if !ok {
		if required {
			var unread []string
			for n := range o.v.Members() {
				if !o.used[n] {
					unread = append(unread, n)
				}
			}
			if near := Nearest(name, unread); near != "" {
				o.r.Fail(o.Path(name), "required member is missing (is %q a misspelling of it?)", near)
			} else {
				o.r.Fail(o.Path(name), "required member is missing")
			}
		}
		return canon.Value{}, false
	}
	if v.Kind() != want {
		o.r.Fail(o.Path(name), "want %s, got %s", want, v.Kind())
		return canon.Value{}, false
	}
	return v, true
}

// Str reads a string member.
func (o *Obj) Str(name string, required bool) (string, bool) {
	v, ok := o.get(name, required, canon.KindString)
	return v.Str(), ok
}

// Int reads an integer member.
func (o *Obj) Int(name string, required bool) (int64, bool) {
	v, ok := o.get(name, required, canon.KindInt)
	return v.Int(), ok
}

// Bool reads a boolean member.
func (o *Obj) Bool(name string, required bool) (bool, bool) {
	v, ok := o.get(name, required, canon.KindBool)
	return v.Bool(), ok
}

// Array reads an array member and returns its elements.
func (o *Obj) Array(name string, required bool) ([]canon.Value, bool) {
	v, ok := o.get(name, required, canon.KindArray)
	var out []canon.Value
	for _, e := range v.Elems() {
		out = append(out, e)
	}
	return out, ok
}

// Object reads an object member.
func (o *Obj) Object(name string, required bool) (*Obj, bool) {
	v, ok := o.get(name, required, canon.KindObject)
	if !ok {
		return &Obj{r: o.r, path: o.Path(name), used: map[string]bool{}}, false
	}
	return o.r.Object(v, o.Path(name)), true
}

// Strings reads an array of strings.
func (o *Obj) Strings(name string, required bool) ([]string, bool) {
	elems, ok := o.Array(name, required)
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		if e.Kind() != canon.KindString {
			o.r.Fail(fmt.Sprintf("%s[%d]", o.Path(name), i), "want string, got %s", e.Kind())
			return nil, false
		}
		out = append(out, e.Str())
	}
	return out, ok
}

// Members returns the names of the object's members in canonical order.
func (o *Obj) Members() []string {
	var names []string
	for n := range o.v.Members() {
		names = append(names, n)
	}
	return names
}

// Use marks member name as known without reading it.
func (o *Obj) Use(name string) { o.used[name] = true }

// End fails if the object has a member nobody read: unknown members are
// refused, never ignored.
func (o *Obj) End() {
	if o.r.err != nil {
		return
	}
	for name := range o.v.Members() {
		if !o.used[name] {
			known := make([]string, 0, len(o.used))
			for k := range o.used {
				known = append(known, k)
			}
			slices.Sort(known)
			if near := Nearest(name, known); near != "" {
				o.r.Fail(o.Path(name), "unknown member; did you mean %q?", near)
				return
			}
			o.r.Fail(o.Path(name), "unknown member (known: %v)", known)
			return
		}
	}
}

// Nearest returns the candidate nearest to name by edit distance when it
// is near enough to be a likely slip: at most 2 edits, and at most one
// per three characters of name (but always 1). It returns "" otherwise,
// and for a tie the first candidate.
func Nearest(name string, candidates []string) string {
	limit := min(2, max(1, utf8.RuneCountInString(name)/3))
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// ErrNotCanonical is returned by Canonical for a document that parses but
// is not exactly its own JCS form.
var ErrNotCanonical = errors.New("not in canonical (JCS) form")

// Canonical parses data, which must be exactly its own JCS form (one
// document, one spelling), and starts reading it as an object. Formats
// whose documents are addressed by their bytes read them through it.
func Canonical(data []byte) (canon.Value, *Reader, *Obj, error) {
	v, err := canon.Parse(data)
	if err != nil {
		return canon.Value{}, nil, nil, err
	}
	if string(v.AppendJCS(nil)) != string(data) {
		return canon.Value{}, nil, nil, ErrNotCanonical
	}
	r := &Reader{}
	return v, r, r.Object(v, ""), nil
}
