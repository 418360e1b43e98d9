package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Info describes a stored secret without its value.
type Info struct {
	Name    string    `json:"name"`
	Updated time.Time `json:"updated"`
}

// List lists a tenant's stored secrets by name and the time each was
// last written, never their values, sorted by name.
func (s *Store) List(tenant string) ([]Info, error) {
	ns, err := Namespace(tenant)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(s.path(ns, "x"))
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Info{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".age")
		if !ok || !e.Type().IsRegular() || !nameRE().MatchString(name) {
			continue // a temporary file of a Put in progress, or not ours
		}
		fi, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, Info{Name: name, Updated: fi.ModTime().UTC()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Values decrypts every secret in the store, of every tenant: the
// operator's pool of values to mask wherever text leaves cordon (package
// redact). Every value was written through the admin tier (Put), so no
// tenant can add a string to it. The caller must Destroy each Secret. A
// secret that does not decrypt is an error, never skipped: a pool that
// silently lacks a value would leave it unmasked.
func (s *Store) Values() ([]*Secret, error) {
	dirs, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Secret
	fail := func(err error) ([]*Secret, error) {
		for _, v := range out {
			v.Destroy()
		}
		return nil, err
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(s.Dir, d.Name()))
		if err != nil {
			return fail(err)
		}
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".age")
			if !ok || !e.Type().IsRegular() || !nameRE().MatchString(name) {
				continue
			}
			v, err := s.open(filepath.Join(s.Dir, d.Name(), e.Name()), name)
			if errors.Is(err, ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return fail(fmt.Errorf("broker: the mask pool: %w", err))
			}
			out = append(out, &Secret{v: v})
		}
	}
	return out, nil
}

// CheckRef checks a tenant's reference's shape without resolving it (no
// backend is asked): what a project's configuration may name.
func CheckRef(ref string) error {
	_, _, err := parseRef(ref)
	return err
}

// CanonicalRef returns a tenant's reference in one spelling,
// "SOURCE:NAME" ("db" and "store:db" are the same secret), or the error
// CheckRef gives.
func CanonicalRef(ref string) (string, error) {
	source, name, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	return source + ":" + name, nil
}
