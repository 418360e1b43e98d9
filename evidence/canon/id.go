package canon

import (
	"encoding/base64"
	"fmt"
	"io"

	"github.com/zeebo/blake3"
)

// IDPrefix starts every ContentId.
const IDPrefix = "b3:"

// idLen is the length of a ContentId string: the prefix and 43 characters
// of unpadded base64url for 32 bytes.
const idLen = len(IDPrefix) + 43

var b64 = base64.RawURLEncoding.Strict()

// ID is a ContentId: the BLAKE3-256 digest of some bytes. Its text form is
// "b3:" followed by the unpadded base64url encoding of the digest. The zero
// ID is the digest of nothing in particular and is never produced by Sum
// in practice; IsZero reports it.
type ID [32]byte

// Sum returns the ContentId of b, taken as it is.
func Sum(b []byte) ID { return ID(blake3.Sum256(b)) }

// String returns the text form, "b3:…".
func (id ID) String() string {
	var buf [idLen]byte
	return string(id.appendText(buf[:0]))
}

func (id ID) appendText(b []byte) []byte {
	b = append(b, IDPrefix...)
	return b64.AppendEncode(b, id[:])
}

// AppendText implements encoding.TextAppender. It never fails.
func (id ID) AppendText(b []byte) ([]byte, error) { return id.appendText(b), nil }

// MarshalText implements encoding.TextMarshaler.
func (id ID) MarshalText() ([]byte, error) { return id.AppendText(nil) }

// UnmarshalText implements encoding.TextUnmarshaler with the rules of ParseID.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// IsZero reports whether id is the zero value.
func (id ID) IsZero() bool { return id == ID{} }

// ParseID parses the text form of a ContentId strictly: the prefix must be
// exactly "b3:", the digest exactly 43 characters of the base64url alphabet
// without padding, and the two spare bits of the last character zero, so
// that each digest has exactly one spelling.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) < len(IDPrefix) || s[:len(IDPrefix)] != IDPrefix {
		return id, &Error{Offset: 0, Err: ErrIDPrefix, Detail: quoteShort(s)}
	}
	if len(s) != idLen {
		return id, &Error{Offset: -1, Err: ErrIDLength, Detail: fmt.Sprintf("got %d characters, want %d", len(s), idLen)}
	}
	for i := len(IDPrefix); i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return id, errAt(i, ErrIDEncoding, "%s is not in the base64url alphabet", describeByte([]byte(s), i))
		}
	}
	n, err := b64.Decode(id[:], []byte(s[len(IDPrefix):]))
	if err != nil || n != len(id) {
		return ID{}, errAt(idLen-1, ErrIDEncoding, "the last character's spare bits must be zero")
	}
	return id, nil
}

// quoteShort quotes at most the first 16 bytes of s for an error message.
func quoteShort(s string) string {
	if len(s) > 16 {
		return fmt.Sprintf("got %q…", s[:16])
	}
	return fmt.Sprintf("got %q", s)
}

// SumReader returns the ContentId of everything r yields, read in a
// streaming fashion with no size limit.
func SumReader(r io.Reader) (ID, error) {
	h := blake3.New()
	if _, err := io.Copy(h, r); err != nil {
		return ID{}, err
	}
	var id ID
	h.Sum(id[:0])
	return id, nil
}
