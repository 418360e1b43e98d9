package redact

import (
	"regexp"
	"strings"
	"testing"
)

// TestLazyPatterns pins the patterns compiled on first use (not at package
// initialisation) to their sources, and checks their answers: compiled
// late, they must be the patterns they were.
func TestLazyPatterns(t *testing.T) {
	for _, re := range []func() *regexp.Regexp{pemBegin, pemEnd, secretName} {
		if first := re(); re() != first {
			t.Fatalf("%s is compiled again on a second use", first)
		}
	}
	if first := shapes(); &shapes()[0] != &first[0] {
		t.Fatal("a lazily built pattern is built again on a second use")
	}
	for _, c := range []struct{ got, want string }{
		{pemBegin().String(), `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----`},
		{pemEnd().String(), `-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----`},
		{secretName().String(), `(?i)(secret|token|passw(or)?d|passphrase|api_?key|private_?key|credential|authorization|cookie|session_?key|access_?key)`},
		{shapes()[0].re.String(), `^(?:-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----)`},
		{shapes()[len(shapes())-1].re.String(), `^(?:cdn_[A-Za-z0-9_-]{20,255})`},
	} {
		if c.got != c.want {
			t.Errorf("pattern %q, want %q", c.got, c.want)
		}
	}
	if n := len(shapes()); n != 11 {
		t.Errorf("%d credential shapes, want 11", n)
	}
	for name, want := range map[string]bool{"API_KEY": true, "dbPassword": true, "Session-Key": false, "session_key": true, "name": false, "path": false} {
		if SecretName(name) != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, !want, want)
		}
	}
	if !pemBegin().MatchString("-----BEGIN RSA PRIVATE KEY-----") || pemEnd().MatchString("-----END PUBLIC KEY-----") {
		t.Error("the PEM patterns answer differently")
	}
}

// TestSecretNameAgreesWithPattern: SecretName's ASCII path answers as
// the pattern does, for names assembled from the pattern's words in
// every case, their near misses, separators and non-ASCII letters that
// fold to ASCII (K, ſ).
func TestSecretNameAgreesWithPattern(t *testing.T) {
	parts := []string{"secret", "SeCrEt", "token", "TOKEN", "passwd", "password", "PassWord", "passwrd", "passphrase", "pass",
		"api", "key", "KEY", "api_key", "apiKey", "api-key", "private", "privateKey", "private_key", "credential",
		"credentials", "authorization", "auth", "cookie", "session", "sessionkey", "Session_Key", "session-key", "access", "accessKey",
		"access_key", "_", "-", ".", "x", "max_input_", "name", "secre", "toke", "coo", "kie", "\u212a", "ſ", "é", " ", "\x00", "\xff"}
	n := 0
	for _, a := range parts {
		for _, b := range parts {
			for _, c := range []string{"", "_", "s", "key", "word", "et"} {
				name := a + c + b
				n++
				if got, want := SecretName(name), secretName().MatchString(name); got != want {
					t.Errorf("SecretName(%q) = %v, the pattern says %v", name, got, want)
				}
			}
		}
	}
	for _, name := range []string{strings.Repeat("x", 64) + "token", strings.Repeat("x", 63) + "k", "api_\u212aey", "ſecret", "max_input_tokens", "submitted_key", "key_id"} {
		if got, want := SecretName(name), secretName().MatchString(name); got != want {
			t.Errorf("SecretName(%q) = %v, the pattern says %v", name, got, want)
		}
	}
	if n < 10000 {
		t.Fatalf("only %d names", n)
	}
}

// TestFoldedShapeWithoutLowering: the folded shape (the AWS secret key
// assignment) is found in any ASCII case, also when its lead ("aws") is
// at the text's very start or end, and a text without the lead in any
// case is not lowered for it (containsFoldASCII answers as lowering
// would).
func TestFoldedShapeWithoutLowering(t *testing.T) {
	var folded []shape
	for _, sh := range shapes() {
		if sh.fold {
			folded = append(folded, sh)
		}
	}
	if len(folded) != 1 || folded[0].lead != "aws" {
		t.Fatalf("folded shapes %+v, want one with the lead aws", folded)
	}
	p, err := NewPool(Config{})
	if err != nil {
		t.Fatal(err)
	}
	key := "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	for _, in := range []string{"AWS_SECRET_ACCESS_KEY=" + key, "x Aws_Secret_Access_Key: " + key, "aWsSeCrEtAcCeSsKeY=" + key} {
		got, err := p.String(in)
		if err != nil || strings.Contains(got, key) {
			t.Errorf("%q masks to %q, %v", in, got, err)
		}
	}
	for _, c := range []struct {
		s    string
		want bool
	}{{"aws", true}, {"xAWs", true}, {"aW", false}, {"", false}, {"a w s", false}, {"AWZ aws", true}, {"\u212aaws", true}, {"áws", false}} {
		if got, want := containsFoldASCII(c.s, "aws"), strings.Contains(asciiLower(c.s), "aws"); got != want || got != c.want {
			t.Errorf("containsFoldASCII(%q) = %v; lowering says %v", c.s, got, want)
		}
	}
}
