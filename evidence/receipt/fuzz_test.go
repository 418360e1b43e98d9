package receipt

import (
	"bytes"
	"testing"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// FuzzVerify: Verify never panics, and what it accepts is exactly what
// sealing its core again under the same key produces.
func FuzzVerify(f *testing.F) {
	seed := make([]byte, 32)
	k, _ := sign.NewKeyFromSeed(seed)
	env, _, _ := Seal(k, sample())
	f.Add(env)
	f.Add(env[:len(env)/2])
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, id, err := Verify(in, k.Public())
		if err != nil {
			return
		}
		again, id2, err := Seal(k, c)
		if err != nil || !bytes.Equal(again, in) || id2 != id {
			t.Fatalf("accepted %x, but re-sealing gives %x, %v", in, again, err)
		}
	})
}
