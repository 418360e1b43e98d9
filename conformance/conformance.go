// Package conformance holds cordon's conformance vectors and the harness
// that runs them, as specified in CONFORMANCE.md.
//
// The vectors are data: one JSON file per class under v1/, embedded in the
// binary and exported by V1 as an fs.FS so that other implementations can
// read and run them. A published vector is never edited; a change of format
// is a new version directory.
package conformance

import (
	"bytes"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// Format names version 1 of the vector file format.
const Format = "cordon-conformance-v1"

//go:embed v1/*.json
var embedded embed.FS

// V1 returns the published version 1 vectors: one file per class, named
// <class>.json, at the root of the returned fs.FS.
func V1() fs.FS {
	sub, err := fs.Sub(embedded, "v1")
	if err != nil {
		panic(err) // the embedded directory always exists
	}
	return sub
}

// File is one vector file: every vector of one class.
type File struct {
	Format  string   `json:"format"`
	Class   string   `json:"class"`
	Title   string   `json:"title"`
	Vectors []Vector `json:"vectors"`
}

// Vector is one conformance case: an operation applied to an input and the
// output or the error kind it must give.
type Vector struct {
	ID          string  `json:"id"`
	Class       string  `json:"class"`
	Description string  `json:"description"`
	Op          string  `json:"op"`
	Input       *string `json:"input,omitempty"`     // UTF-8 text
	InputHex    *string `json:"input_hex,omitempty"` // bytes, lower-case hex
	Expect      Expect  `json:"expect"`
}

// Expect is what a vector must produce: either an error kind, or some of
// an output (text or hex) and a ContentId.
type Expect struct {
	Output    *string `json:"output,omitempty"`
	OutputHex *string `json:"output_hex,omitempty"`
	ID        string  `json:"id,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// Bytes returns the vector's input bytes.
func (v *Vector) Bytes() ([]byte, error) {
	switch {
	case v.Input != nil && v.InputHex != nil:
		return nil, fmt.Errorf("vector %s: both input and input_hex", v.ID)
	case v.Input != nil:
		return []byte(*v.Input), nil
	case v.InputHex == nil:
		return nil, fmt.Errorf("vector %s: no input", v.ID)
	}
	b, err := decodeHex(*v.InputHex)
	if err != nil {
		return nil, fmt.Errorf("vector %s: input_hex: %w", v.ID, err)
	}
	return b, nil
}

func decodeHex(s string) ([]byte, error) {
	if strings.ToLower(s) != s {
		return nil, errors.New("hex must be lower case")
	}
	return hex.DecodeString(s)
}

// Load reads and validates every <class>.json file at the root of fsys.
// Files are parsed under canon's strict rules (duplicate names refused)
// and decoded with unknown fields refused; a malformed file is an error,
// never a skipped class.
func Load(fsys fs.FS) ([]File, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no vector files (*.json) found")
	}
	seen := map[string]string{}
	var files []File
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		f, err := parseFile(name, raw)
		if err != nil {
			return nil, err
		}
		for _, v := range f.Vectors {
			if other, dup := seen[v.ID]; dup {
				return nil, fmt.Errorf("%s: vector id %q already used in %s", name, v.ID, other)
			}
			seen[v.ID] = name
		}
		files = append(files, f)
	}
	return files, nil
}

func parseFile(name string, raw []byte) (File, error) {
	var f File
	if _, err := canon.Parse(raw); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	if f.Format != Format {
		return f, fmt.Errorf("%s: format %q, want %q", name, f.Format, Format)
	}
	want := strings.TrimSuffix(path.Base(name), ".json")
	switch want {
	case "negative":
		want = "C-neg" // the negatives live in negative.json
	case "durable":
		want = "C6" // the seed's durable.json: cross-implementation record vectors
	case "standing":
		want = "C20" // the seed's standing.json: cross-implementation standing-grant vectors
	case "amend":
		want = "C21" // checkpoints and amendments
	}
	if f.Class != want {
		return f, fmt.Errorf("%s: class %q does not match the file name", name, f.Class)
	}
	if len(f.Vectors) == 0 {
		return f, fmt.Errorf("%s: no vectors", name)
	}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		where := fmt.Sprintf("%s: vector %d (%q)", name, i, v.ID)
		switch {
		case v.ID == "" || v.Op == "" || v.Description == "":
			return f, fmt.Errorf("%s: id, op and description are required", where)
		case v.Class != f.Class:
			return f, fmt.Errorf("%s: class %q in a %s file", where, v.Class, f.Class)
		case (v.Input == nil) == (v.InputHex == nil):
			return f, fmt.Errorf("%s: exactly one of input and input_hex is required", where)
		case v.Expect.Error != "" && (v.Expect.Output != nil || v.Expect.OutputHex != nil || v.Expect.ID != ""):
			return f, fmt.Errorf("%s: expect has an error and an output", where)
		case v.Expect.Error == "" && v.Expect.Output == nil && v.Expect.OutputHex == nil && v.Expect.ID == "":
			return f, fmt.Errorf("%s: expect is empty", where)
		case f.Class == "C-neg" && v.Expect.Error == "":
			return f, fmt.Errorf("%s: every C-neg vector must expect an error", where)
		case v.Expect.Error != "" && !slices.Contains(ErrorKinds(), v.Expect.Error):
			return f, fmt.Errorf("%s: unknown error kind %q", where, v.Expect.Error)
		}
		if _, err := v.Bytes(); err != nil {
			return f, err
		}
	}
	return f, nil
}
