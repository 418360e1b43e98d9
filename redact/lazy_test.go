package redact

import (
	"regexp"
	"slices"
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

// findByEachPrefix is find as it was before it searched each shape's
// lead once: one search per prefix (the reference for
// TestFindByLeadAgrees).
func (p *Pool) findByEachPrefix(s string, limit int, prev byte) []match {
	var cands []match
	for _, v := range p.secrets {
		for off := 0; off < limit; {
			i := strings.Index(s[off:], v)
			if i < 0 || off+i >= limit {
				break
			}
			cands = append(cands, match{off + i, off + i + len(v), "secret"})
			off += i + 1
		}
	}
	lower := asciiLower(s)
	for _, sh := range shapes() {
		text := s
		if sh.fold {
			text = lower
		}
		for _, pre := range sh.prefixes {
			for off := 0; off < limit; {
				i := strings.Index(text[off:], pre)
				if i < 0 || off+i >= limit {
					break
				}
				at := off + i
				off = at + 1
				before := prev
				if at > 0 {
					before = s[at-1]
				}
				if sh.wordStart && isWord(before) {
					continue
				}
				if sh.name == "pem-private-key" {
					loc := sh.re.FindStringIndex(s[at:])
					if loc == nil {
						continue
					}
					end := len(s)
					if e := pemEnd().FindStringIndex(s[at+loc[1]:]); e != nil {
						end = at + loc[1] + e[1]
					}
					cands = append(cands, match{at, end, sh.name})
					continue
				}
				if loc := sh.re.FindStringIndex(s[at:min(len(s), at+maxMatch)]); loc != nil {
					cands = append(cands, match{at, at + loc[1], sh.name})
				}
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b match) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	var out []match
	cursor := 0
	for _, c := range cands {
		if c.start < cursor {
			continue
		}
		out = append(out, c)
		cursor = c.end
	}
	return out
}

// TestFindByLeadAgrees: find, searching each shape's shared lead once,
// finds exactly what one search per prefix finds, over texts assembled
// from every shape's prefixes and near misses, in both cases, at every
// limit, after a word byte or not.
func TestFindByLeadAgrees(t *testing.T) {
	p, err := NewPool(Config{OperatorSecrets: []string{"op-secret-value-1", "AKIAop-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	var pieces []string
	for _, sh := range shapes() {
		for _, pre := range sh.prefixes {
			pieces = append(pieces, pre, strings.ToUpper(pre), pre[:len(pre)-1])
		}
	}
	pieces = append(pieces, strings.Repeat("Z9", 20), strings.Repeat("A", 40), " = ", "_", "x", "-----END RSA PRIVATE KEY-----", "RSA PRIVATE KEY-----\n", "op-secret-value-1", "\n")
	n, found := 0, 0
	for i, a := range pieces {
		for j, b := range pieces {
			c := pieces[(i*7+j*3)%len(pieces)]
			s := a + b + c + pieces[(i+j)%len(pieces)] + strings.Repeat("Z9", 20)
			for _, limit := range []int{len(s), len(a) + 1, len(s) / 2} {
				for _, prev := range []byte{0, 'w'} {
					n++
					got, want := p.find(s, limit, prev), p.findByEachPrefix(s, limit, prev)
					if !slices.Equal(got, want) {
						t.Fatalf("find(%q, %d, %q) = %v, one search per prefix finds %v", s, limit, prev, got, want)
					}
					found += len(got)
				}
			}
		}
	}
	if n < 10000 || found < n/10 {
		t.Fatalf("%d texts, %d matches: the sweep checks too little", n, found)
	}
}
