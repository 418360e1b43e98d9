package canon

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	lukeblake3 "lukechampine.com/blake3"
)

func TestIDRoundTrip(t *testing.T) {
	// BLAKE3("") from the official vectors.
	empty := Sum(nil)
	if got := hex.EncodeToString(empty[:]); got != "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262" {
		t.Fatalf("Sum(nil) = %s", got)
	}
	const emptyID = "b3:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI"
	if got := empty.String(); got != emptyID {
		t.Errorf("Sum(nil).String() = %s, want %s", got, emptyID)
	}
	for _, in := range []string{"", "a", "hello, world", strings.Repeat("x", 5000)} {
		id := Sum([]byte(in))
		if want := lukeblake3.Sum256([]byte(in)); id != ID(want) {
			t.Errorf("Sum(%q) disagrees with an independent BLAKE3", in)
		}
		back, err := ParseID(id.String())
		if err != nil || back != id {
			t.Errorf("ParseID(%s) = %v, %v", id, back, err)
		}
		text, _ := id.MarshalText()
		var u ID
		if err := u.UnmarshalText(text); err != nil || u != id {
			t.Errorf("UnmarshalText(%s) = %v, %v", text, u, err)
		}
	}
	if !(ID{}).IsZero() || empty.IsZero() {
		t.Errorf("IsZero is wrong")
	}
}

func TestParseIDRefuses(t *testing.T) {
	good := Sum([]byte("cordon")).String()
	body := good[3:]
	// The last of 43 characters carries 4 data bits and 2 spare bits: only
	// one of the 4 spellings that decode to the same digest is canonical.
	last := strings.IndexByte(b64alphabet, body[42])
	if last&3 != 0 {
		t.Fatalf("canonical last character %q has spare bits set", body[42])
	}
	for spare := 1; spare < 4; spare++ {
		alt := good[:45] + string(b64alphabet[last|spare])
		if _, err := ParseID(alt); !errors.Is(err, ErrIDEncoding) {
			t.Errorf("ParseID(%s) with spare bits %d: err = %v, want ErrIDEncoding", alt, spare, err)
		}
	}
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"empty", "", ErrIDPrefix},
		{"no prefix", body, ErrIDPrefix},
		{"upper prefix", "B3:" + body, ErrIDPrefix},
		{"other hash", "sha256:" + body, ErrIDPrefix},
		{"b3 without colon", "b3" + body, ErrIDPrefix},
		{"short", good[:45], ErrIDLength},
		{"long", good + "A", ErrIDLength},
		{"padded", good + "=", ErrIDLength},
		{"padding in place of last", good[:45] + "=", ErrIDEncoding},
		{"std alphabet plus", good[:10] + "+" + good[11:], ErrIDEncoding},
		{"std alphabet slash", good[:10] + "/" + good[11:], ErrIDEncoding},
		{"newline inside", good[:10] + "\n" + good[11:], ErrIDEncoding},
		{"space", good[:45] + " ", ErrIDEncoding},
		{"non-ascii", good[:44] + "é", ErrIDEncoding},
	} {
		if _, err := ParseID(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: ParseID(%q) err = %v, want %v", tc.name, tc.in, err, tc.want)
		}
	}
	var id ID
	if err := id.UnmarshalText([]byte("b3:")); err == nil || !id.IsZero() {
		t.Errorf("UnmarshalText of a bad id changed the value or succeeded: %v", err)
	}
}

const b64alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
