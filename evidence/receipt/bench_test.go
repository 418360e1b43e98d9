package receipt

import (
	"crypto/ed25519"
	"testing"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// BenchmarkSeal: sealing a receipt (validate, encode, address, sign, wrap)
// against a bare crypto/ed25519 signature of the same core bytes.
func BenchmarkSeal(b *testing.B) {
	k, _ := sign.Generate()
	c := sample()
	core := c.Encode()
	_, priv, _ := ed25519.GenerateKey(nil)
	b.Run("impl=cordon", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := Seal(k, c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=ed25519", func(b *testing.B) {
		for b.Loop() {
			_ = ed25519.Sign(priv, core)
		}
	})
}

// BenchmarkVerify: verifying a receipt (strict decoding of envelope and
// core, round trips, the coupling, sum and coverage rules, the signature)
// against a bare crypto/ed25519 verification of the same core bytes.
func BenchmarkVerify(b *testing.B) {
	k, _ := sign.Generate()
	env, _, _ := Seal(k, sample())
	core := sample().Encode()
	pub, priv, _ := ed25519.GenerateKey(nil)
	sig := ed25519.Sign(priv, core)
	b.Run("impl=cordon", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := Verify(env, k.Public()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=ed25519", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, core, sig) {
				b.Fatal("bad")
			}
		}
	})
}
