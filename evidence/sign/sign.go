// Package sign holds cordon's signing keys and its one signature scheme,
// as specified in docs/SPEC.md §4.1: Ed25519 (RFC 8032, verified as Go's
// crypto/ed25519 does: canonical S, cofactorless) over the DSSE
// pre-authentication encoding of a payload type and the payload bytes.
//
// The payload type is the signing context: each kind of object has its own
// (PayloadReceipt, PayloadAttestation, PayloadJournalHead), so a signature
// over one kind of object never verifies as another.
//
// Private keys are PKCS#8 PEM. They are read from a file or from the
// content of an environment variable, never from a manifest or workspace;
// a key file readable by group or others is refused.
package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// Payload types: the signing contexts of cordon's signed objects.
const (
	PayloadReceipt     = "application/vnd.cordon.receipt.v1+cbor"
	PayloadAttestation = "application/vnd.cordon.attestation.v1+json"
	PayloadJournalHead = "application/vnd.cordon.journal-head.v1+json"
	PayloadRunResult   = "application/vnd.cordon.run-result.v1+json"
	// PayloadReview is the control plane's statement about the review of
	// a run's change (its risk tier and its approvers' decisions).
	PayloadReview = "application/vnd.cordon.review.v1+json"
)

var (
	// ErrBadSignature is returned when a signature does not verify.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrKey is wrapped by errors about key files and key material.
	ErrKey = errors.New("bad key")
)

// PAE is the DSSE v1 pre-authentication encoding of a payload type and
// payload: "DSSEv1 <len(type)> <type> <len(payload)> <payload>".
func PAE(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// PrivateKey is an Ed25519 signing key. It is not comparable and its
// String and GoString never reveal the key.
type PrivateKey struct {
	_   [0]func() // not comparable
	key ed25519.PrivateKey
	pub PublicKey
}

// PublicKey is an Ed25519 public key.
type PublicKey struct {
	key ed25519.PublicKey
}

func (k PrivateKey) String() string   { return "sign.PrivateKey(" + k.pub.ID().String() + ")" }
func (k PrivateKey) GoString() string { return k.String() }

// Public returns the public half of k.
func (k *PrivateKey) Public() PublicKey { return k.pub }

// ID returns the key id: the ContentId of the 32-byte raw public key.
func (p PublicKey) ID() canon.ID { return canon.Sum(p.key) }

// Bytes returns the raw 32-byte public key.
func (p PublicKey) Bytes() []byte { return append([]byte(nil), p.key...) }

// Generate returns a new key from crypto/rand.
func Generate() (*PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return fromEd25519(priv), nil
}

func fromEd25519(priv ed25519.PrivateKey) *PrivateKey {
	return &PrivateKey{key: priv, pub: PublicKey{key: priv.Public().(ed25519.PublicKey)}}
}

// Sign signs payload in the context payloadType.
func (k *PrivateKey) Sign(payloadType string, payload []byte) []byte {
	return ed25519.Sign(k.key, PAE(payloadType, payload))
}

// Verify checks sig over payload in the context payloadType.
func (p PublicKey) Verify(payloadType string, payload, sig []byte) error {
	if len(p.key) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize || !ed25519.Verify(p.key, PAE(payloadType, payload), sig) {
		return ErrBadSignature
	}
	return nil
}

// MarshalPrivate returns k as PKCS#8 PEM.
func (k *PrivateKey) MarshalPrivate() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k.key)
	if err != nil {
		panic(err) // an Ed25519 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// MarshalPublic returns p as PKIX ("PUBLIC KEY") PEM.
func (p PublicKey) MarshalPublic() []byte {
	der, err := x509.MarshalPKIXPublicKey(p.key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// onePEM decodes exactly one PEM block of the given type, with nothing but
// whitespace around it.
func onePEM(data []byte, typ string) ([]byte, error) {
	// pem.Decode skips any text before a block; cordon does not.
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("-----BEGIN "+typ+"-----")) || bytes.Count(data, []byte("-----BEGIN")) != 1 {
		return nil, fmt.Errorf("%w: want exactly one %s PEM block and nothing before it", ErrKey, typ)
	}
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	if block.Type != typ {
		return nil, fmt.Errorf("%w: PEM block is %q, want %q", ErrKey, block.Type, typ)
	}
	if len(block.Headers) != 0 {
		return nil, fmt.Errorf("%w: PEM headers are not allowed", ErrKey)
	}
	for _, c := range rest {
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return nil, fmt.Errorf("%w: data after the PEM block", ErrKey)
		}
	}
	return block.Bytes, nil
}

// ParsePrivate parses a PKCS#8 PEM Ed25519 private key. Errors never
// quote the key material.
func ParsePrivate(data []byte) (*PrivateKey, error) {
	der, err := onePEM(data, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PKCS#8 private key", ErrKey)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not an Ed25519 key", ErrKey, k)
	}
	return fromEd25519(priv), nil
}

// ParsePublic parses a PKIX PEM Ed25519 public key.
func ParsePublic(data []byte) (PublicKey, error) {
	der, err := onePEM(data, "PUBLIC KEY")
	if err != nil {
		return PublicKey{}, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: not a PKIX public key: %v", ErrKey, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return PublicKey{}, fmt.Errorf("%w: %T is not an Ed25519 key", ErrKey, k)
	}
	return PublicKey{key: pub}, nil
}

// LoadPrivate reads a private key file. The file must be a regular file
// readable by its owner only (mode 0600 or 0400), like an SSH key.
func LoadPrivate(path string) (*PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrKey, path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by others (mode %04o); chmod 600 it", ErrKey, path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivate(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// WritePrivate writes k to a new file with mode 0600. It refuses to
// overwrite an existing file.
func WritePrivate(path string, k *PrivateKey) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; cordon never overwrites a key", path)
		}
		return err
	}
	if _, err := f.Write(k.MarshalPrivate()); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// NewKeyFromSeed returns the key of a 32-byte Ed25519 seed. It exists for
// test vectors, whose keys are published; real keys come from Generate.
func NewKeyFromSeed(seed []byte) (*PrivateKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: seed of %d bytes, want %d", ErrKey, len(seed), ed25519.SeedSize)
	}
	return fromEd25519(ed25519.NewKeyFromSeed(seed)), nil
}

// PublicKeyFromBytes returns the public key of 32 raw bytes.
func PublicKeyFromBytes(b []byte) (PublicKey, error) {
	if len(b) != ed25519.PublicKeySize {
		return PublicKey{}, fmt.Errorf("%w: public key of %d bytes, want %d", ErrKey, len(b), ed25519.PublicKeySize)
	}
	return PublicKey{key: append(ed25519.PublicKey(nil), b...)}, nil
}

// LoadPrivateEnv reads a private key from the PEM text in the environment
// variable name (the CLI's only other source of keys besides a file).
func LoadPrivateEnv(name, value string) (*PrivateKey, error) {
	if value == "" {
		return nil, fmt.Errorf("%w: $%s is empty", ErrKey, name)
	}
	k, err := ParsePrivate([]byte(value))
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", name, err)
	}
	return k, nil
}
