// Package broker is the credential broker (docs/governance.md): tenants'
// secrets stored encrypted at rest under the operator's master key, and
// resolved by reference for a tenant's run.
//
// Entitlement comes before I/O. The namespace a tenant may read is derived
// from its tenant id, never stored where a tenant could edit it; a
// reference names a secret inside that namespace and nothing else — no
// namespace, no path, no other source — so a reference that could reach
// outside it is refused before any backend sees a request. Adapters are
// chosen by the reference's shape, never by which tenant asks: `NAME` or
// `store:NAME` is the local encrypted store, `http:NAME` the HTTP secrets
// backend. The operator's own sources (`file:`, `env:`) are resolved only
// for the operator (ResolveOperator) and refused in a tenant's reference.
//
// A resolved Secret never prints, never marshals, and is wiped by Destroy.
package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"filippo.io/age"
)

var (
	// ErrRef is wrapped when a reference is malformed or reaches outside
	// the tenant's namespace. Nothing was asked of any backend.
	ErrRef = errors.New("bad secret reference")
	// ErrForbidden is wrapped when a tenant's reference names an
	// operator-only source.
	ErrForbidden = errors.New("secret source not available to tenants")
	// ErrNotFound is wrapped when no secret has that name.
	ErrNotFound = errors.New("no such secret")
)

// MaxSecret bounds a secret's size.
const MaxSecret = 64 << 10

var (
	nameRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`) })
	tenantRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`) })
)

// Secret is a resolved credential. Its value is reachable only through
// Bytes; it formats as [secret] and refuses to be marshalled.
type Secret struct {
	v []byte
}

// Bytes returns the value (not a copy: do not keep it past Destroy).
func (s *Secret) Bytes() []byte { return s.v }

// Destroy overwrites the value.
func (s *Secret) Destroy() {
	for i := range s.v {
		s.v[i] = 0
	}
	s.v = nil
}

func (s *Secret) String() string             { return "[secret]" }
func (s *Secret) GoString() string           { return "[secret]" }
func (s *Secret) Format(f fmt.State, _ rune) { io.WriteString(f, "[secret]") }
func (s *Secret) MarshalJSON() ([]byte, error) {
	return nil, errors.New("broker: a secret is never serialized")
}
func (s *Secret) MarshalText() ([]byte, error) {
	return nil, errors.New("broker: a secret is never serialized")
}
func (s *Secret) MarshalBinary() ([]byte, error) {
	return nil, errors.New("broker: a secret is never serialized")
}

// Namespace is the namespace a tenant's secrets live in, derived from its
// id and nothing else.
func Namespace(tenant string) (string, error) {
	if !tenantRE().MatchString(tenant) {
		return "", fmt.Errorf("%w: tenant id %q", ErrRef, tenant)
	}
	return "tenant/" + tenant, nil
}

// Backend is an external secrets store (an HTTP secrets service). Get is
// only ever called with a tenant's own namespace and a checked name.
type Backend interface {
	Get(ctx context.Context, namespace, name string) ([]byte, error)
}

// Broker resolves references.
type Broker struct {
	Store *Store
	HTTP  Backend // nil: http: references are refused
}

// parseRef splits a tenant's reference into its source and name, refusing
// every shape that is not a plain name in the tenant's namespace.
func parseRef(ref string) (source, name string, err error) {
	source, name, ok := strings.Cut(ref, ":")
	if !ok {
		source, name = "store", ref
	}
	switch source {
	case "store", "http":
	case "file", "env":
		return "", "", fmt.Errorf("%w: %q names an operator source; a tenant's reference is a secret name (NAME, store:NAME or http:NAME)", ErrForbidden, ref)
	default:
		return "", "", fmt.Errorf("%w: %q: unknown source %q (use NAME, store:NAME or http:NAME)", ErrRef, ref, source)
	}
	if !nameRE().MatchString(name) || strings.Contains(name, "..") {
		return "", "", fmt.Errorf("%w: %q: a secret name is 1–128 of A–Z a–z 0–9 . _ -, starting with a letter or digit, without ..; it names a secret in the tenant's own namespace only", ErrRef, ref)
	}
	return source, name, nil
}

// Resolve resolves a tenant's reference. The tenant's namespace is
// derived from tenant; the reference is checked before any backend is
// asked.
func (b *Broker) Resolve(ctx context.Context, tenant, ref string) (*Secret, error) {
	ns, err := Namespace(tenant)
	if err != nil {
		return nil, err
	}
	source, name, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	var v []byte
	switch source {
	case "store":
		if b.Store == nil {
			return nil, fmt.Errorf("%w: no secret store is configured", ErrNotFound)
		}
		v, err = b.Store.get(ns, name)
	case "http":
		if b.HTTP == nil {
			return nil, fmt.Errorf("%w: %q: no HTTP secrets backend is configured", ErrRef, ref)
		}
		v, err = b.HTTP.Get(ctx, ns, name)
	}
	if err != nil {
		return nil, err
	}
	if len(v) == 0 || len(v) > MaxSecret {
		return nil, fmt.Errorf("%w: %q resolved to %d bytes", ErrNotFound, ref, len(v))
	}
	return &Secret{v: v}, nil
}

// ResolveOperator resolves one of the operator's own references:
// file:/ABSOLUTE/PATH or env:NAME. Never call it with a tenant's text.
func ResolveOperator(ref string, getenv func(string) (string, bool)) (*Secret, error) {
	source, rest, ok := strings.Cut(ref, ":")
	if !ok {
		return nil, fmt.Errorf("%w: %q: an operator reference is file:/PATH or env:NAME", ErrRef, ref)
	}
	switch source {
	case "file":
		if !filepath.IsAbs(rest) {
			return nil, fmt.Errorf("%w: %q: the path must be absolute", ErrRef, ref)
		}
		v, err := os.ReadFile(rest)
		if err != nil {
			return nil, err
		}
		v = bytes.TrimRight(v, "\r\n")
		if len(v) == 0 || len(v) > MaxSecret {
			return nil, fmt.Errorf("%w: %q holds %d bytes", ErrNotFound, ref, len(v))
		}
		return &Secret{v: v}, nil
	case "env":
		v, ok := getenv(rest)
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: %q is unset or empty", ErrNotFound, ref)
		}
		return &Secret{v: []byte(v)}, nil
	}
	return nil, fmt.Errorf("%w: %q: an operator reference is file:/PATH or env:NAME", ErrRef, ref)
}

// Store keeps secrets in a directory, each encrypted with age to the
// operator's master key: DIR/HEX(sha256(namespace))/NAME.age. Only
// admin-tier code writes it.
type Store struct {
	Dir       string
	recipient age.Recipient
	identity  age.Identity
}

// NewStore opens a store with the operator's master key: an age X25519
// identity (AGE-SECRET-KEY-1…), as `age-keygen` writes it.
func NewStore(dir string, masterKey string) (*Store, error) {
	id, err := age.ParseX25519Identity(strings.TrimSpace(masterKey))
	if err != nil {
		return nil, fmt.Errorf("broker: master key: %w", err)
	}
	return &Store{Dir: dir, recipient: id.Recipient(), identity: id}, nil
}

func (s *Store) path(ns, name string) string {
	h := sha256.Sum256([]byte(ns))
	return filepath.Join(s.Dir, hex.EncodeToString(h[:16]), name+".age")
}

// Put writes (or rotates) a tenant's secret, encrypted; the old value is
// replaced atomically.
func (s *Store) Put(tenant, name string, value []byte) error {
	ns, err := Namespace(tenant)
	if err != nil {
		return err
	}
	if !nameRE().MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("%w: secret name %q", ErrRef, name)
	}
	if len(value) == 0 || len(value) > MaxSecret {
		return fmt.Errorf("broker: a secret has 1 to %d bytes, not %d", MaxSecret, len(value))
	}
	p := s.path(ns, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, s.recipient)
	if err != nil {
		return err
	}
	if _, err := w.Write(value); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// Delete removes a tenant's secret.
func (s *Store) Delete(tenant, name string) error {
	ns, err := Namespace(tenant)
	if err != nil {
		return err
	}
	if !nameRE().MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("%w: secret name %q", ErrRef, name)
	}
	return os.Remove(s.path(ns, name))
}

func (s *Store) get(ns, name string) ([]byte, error) {
	return s.open(s.path(ns, name), name)
}

func (s *Store) open(p, name string) ([]byte, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := age.Decrypt(io.LimitReader(f, MaxSecret+4096), s.identity)
	if err != nil {
		return nil, fmt.Errorf("broker: secret %q: %w", name, err)
	}
	return io.ReadAll(io.LimitReader(r, MaxSecret+1))
}
