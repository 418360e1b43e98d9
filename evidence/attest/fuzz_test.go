package attest

import (
	"testing"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// FuzzVerify: Verify never panics on a signed payload of any shape, and
// what it accepts re-signs to the same core.
func FuzzVerify(f *testing.F) {
	k, _ := sign.NewKeyFromSeed(make([]byte, 32))
	good := `{"devices":["cpu"],"host":{"cordon":"0.1.0","kernel":"6.1.0","tiers":["S2"]},"receipt":"b3:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI","tier":"S2","type":"cordon.attestation.v1"}`
	f.Add([]byte(good))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		env := sign.Seal(k, sign.PayloadAttestation, payload)
		c, err := Verify(env, k.Public(), Options{})
		if err != nil {
			return
		}
		if string(c.JCS()) != string(payload) {
			t.Fatalf("accepted payload %q decodes to another core %q", payload, c.JCS())
		}
	})
}
