// Package redact removes secrets from text before it leaves cordon: logs,
// API responses, error messages, captured command output and audit
// exports (docs/governance.md).
//
// A Pool masks two things: text that has the shape of a known credential
// (GitHub, GitLab, Anthropic, OpenAI, AWS, Slack tokens, PEM private key
// blocks, cordon's tenant keys), and the exact values of the secrets the
// operator configured. Its values come only from the operator
// (NewPool's OperatorSecrets): text a tenant wrote must never become a
// mask, or a tenant could erase an incriminating string from its own
// audit export by declaring it a "secret".
//
// A pool that was configured with secrets but resolved none fails loud:
// every call returns ErrEmptyPool instead of text that may be unmasked.
// A pool configured with no secrets is a working, pattern-only pool.
//
// Writer redacts a stream, holding back just enough bytes that a secret
// split across two writes is still caught.
package redact

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

var (
	// ErrEmptyPool is returned by every method of a pool whose operator
	// configured secrets that resolved to nothing: output that needed
	// masking is refused, never emitted unmasked.
	ErrEmptyPool = errors.New("redact: secrets are configured but none resolved; refusing output that may hold them")
	// ErrBadSecret is returned by NewPool for a secret value too short to
	// mask without masking ordinary text.
	ErrBadSecret = errors.New("redact: bad secret value")
)

// MinSecret is the shortest secret value a pool accepts: a shorter one
// would mask ordinary words.
const MinSecret = 8

// maxMatch bounds every token pattern's match, so a stream holds back at
// most this many bytes for them. PEM private key blocks are unbounded: a
// stream holds back from an unterminated BEGIN line (up to pemHold bytes,
// then masks everything until the END line, see Writer).
const maxMatch = 1 << 10

// pemHold is how much of an unterminated PEM block a Writer holds back
// before it masks it and keeps masking until the END line.
const pemHold = 1 << 20

// The patterns below are compiled on first use, not at package
// initialisation: every cordon process (sandbox init too) links this
// package, and most never redact anything (docs/PERFORMANCE.md).
var (
	pemBegin = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----`)
	})
	pemEnd = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----`)
	})
)

// shape is one known credential shape: literal prefixes that start it (a
// fast search finds candidates) and a pattern, anchored at the prefix,
// that a candidate must match. A shape that starts a word must not follow
// a word character.
type shape struct {
	name      string
	prefixes  []string
	fold      bool   // prefixes match in any ASCII case
	lead      string // the start every prefix shares (fold: in lower case)
	wordStart bool
	re        *regexp.Regexp
}

func newShape(name string, prefixes []string, fold, wordStart bool, re string) shape {
	sh := shape{name: name, prefixes: prefixes, fold: fold, wordStart: wordStart, re: regexp.MustCompile(`^(?:` + re + `)`)}
	sh.lead = prefixes[0]
	for _, p := range prefixes[1:] {
		for !strings.HasPrefix(p, sh.lead) {
			sh.lead = sh.lead[:len(sh.lead)-1]
		}
	}
	if sh.lead == "" {
		panic("redact: the prefixes of shape " + name + " share no first byte") // a programming error in shapes
	}
	return sh
}

// shapes are the credential shapes every pool masks; token matches are
// bounded (maxMatch). PEM private key blocks run to their END line, or,
// unterminated, to the end of the text: a key cut short is still a key.
var shapes = sync.OnceValue(func() []shape {
	return []shape{
		newShape("pem-private-key", []string{"-----BEGIN "}, false, false, `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----`),
		newShape("github", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, false, true, `gh[pousr]_[A-Za-z0-9]{36,255}\b`),
		newShape("github", []string{"github_pat_"}, false, true, `github_pat_[A-Za-z0-9_]{22,255}\b`),
		newShape("gitlab", []string{"glpat-"}, false, true, `glpat-[A-Za-z0-9_-]{20,255}`),
		newShape("anthropic", []string{"sk-ant-"}, false, true, `sk-ant-[A-Za-z0-9_-]{20,255}`),
		newShape("openai", []string{"sk-"}, false, true, `sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,255}`),
		newShape("aws-access-key", []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"}, false, true, `A[A-Z]{3}[A-Z0-9]{16}\b`),
		newShape("aws-secret-key", []string{"aws_secret_access_key", "awssecretaccesskey", "aws_secretaccesskey", "awssecret_accesskey", "awssecretaccess_key", "aws_secret_accesskey", "aws_secretaccess_key", "awssecret_access_key"}, true, false, `(?i:aws_?secret_?access_?key)["']?[ \t]{0,8}[:=][ \t]{0,8}["']?[A-Za-z0-9/+]{40}`),
		newShape("slack", []string{"xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"}, false, true, `xox[abposr]-[A-Za-z0-9-]{10,255}`),
		newShape("slack-webhook", []string{"https://hooks.slack.com/services/"}, false, false, `https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,255}`),
		newShape("cordon-key", []string{"cdn_"}, false, true, `cdn_[A-Za-z0-9_-]{20,255}`),
	}
})

// Mask replaces a secret in output; it never says which secret.
func Mask(kind string) string { return "[redacted:" + kind + "]" }

// Config configures a pool.
type Config struct {
	// OperatorSecrets are the exact values to mask, resolved from the
	// operator's configuration (secret files, the credential store) —
	// never from anything a tenant wrote.
	OperatorSecrets []string
	// Configured is how many secrets the operator configured. When it is
	// above zero and OperatorSecrets holds none, the pool fails loud.
	Configured int
}

// Pool masks known credential shapes and the operator's secret values.
type Pool struct {
	secrets []string // longest first
	maxL    int      // the longest token or secret match, for streams
	err     error
}

// NewPool builds a pool. A secret shorter than MinSecret is an error,
// naming its position only (never its value).
func NewPool(c Config) (*Pool, error) {
	p := &Pool{maxL: maxMatch}
	for i, v := range c.OperatorSecrets {
		if v == "" {
			continue
		}
		if len(v) < MinSecret {
			return nil, fmt.Errorf("%w: secret %d is %d bytes; at least %d are needed to mask it without masking ordinary text", ErrBadSecret, i+1, len(v), MinSecret)
		}
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: secret %d is not valid UTF-8", ErrBadSecret, i+1)
		}
		p.secrets = append(p.secrets, v)
		p.maxL = max(p.maxL, len(v))
	}
	if c.Configured > 0 && len(p.secrets) == 0 {
		p.err = ErrEmptyPool
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(p.secrets, func(a, b string) int { return len(b) - len(a) })
	return p, nil
}

// Err reports whether the pool fails loud.
func (p *Pool) Err() error { return p.err }

// String masks every secret in s.
func (p *Pool) String(s string) (string, error) {
	if p.err != nil {
		return "", p.err
	}
	out, _ := p.mask(s, len(s))
	return out, nil
}

// match is one secret found in a text.
type match struct {
	start, end int
	kind       string
}

// find returns the secrets in s that start before limit, leftmost first
// and, at one position, longest first, not overlapping.
// prev is the byte before s in the text s comes from (0 at its start).
func (p *Pool) find(s string, limit int, prev byte) []match {
	var cands []match
	add := func(from int, lit string, fn func(i int)) {
		for off := from; off < limit; {
			i := strings.Index(s[off:], lit)
			if i < 0 || off+i >= limit {
				return
			}
			fn(off + i)
			off += i + 1
		}
	}
	for _, v := range p.secrets {
		add(0, v, func(i int) { cands = append(cands, match{i, i + len(v), "secret"}) })
	}
	var lower string
	for _, sh := range shapes() {
		text := s
		if sh.fold {
			// Every folded prefix starts with its shape's lead (in any
			// ASCII case): without one, lowering s finds nothing.
			if !containsFoldASCII(s, sh.lead) {
				continue
			}
			if lower == "" {
				lower = asciiLower(s)
			}
			text = lower
		}
		// One search for the lead the shape's prefixes share, then each
		// prefix where it is found (each lead is at least a byte).
		for off := 0; off < limit; {
			i := strings.Index(text[off:], sh.lead)
			if i < 0 || off+i >= limit {
				break
			}
			at := off + i
			off = at + 1
			if !slices.ContainsFunc(sh.prefixes, func(pre string) bool { return strings.HasPrefix(text[at:], pre) }) {
				continue
			}
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
				end := len(s) // unterminated: to the end
				if e := pemEnd().FindStringIndex(s[at+loc[1]:]); e != nil {
					end = at + loc[1] + e[1]
				}
				cands = append(cands, match{at, end, sh.name})
				continue
			}
			loc := sh.re.FindStringIndex(s[at:min(len(s), at+maxMatch)])
			if loc != nil {
				cands = append(cands, match{at, at + loc[1], sh.name})
			}
		}
	}
	// Stable: at one position and length, a secret wins over a shape and
	// a shape listed earlier (more specific) over a later one.
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

func isWord(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// containsFoldASCII reports whether asciiLower(s) contains low, a
// lower-case ASCII string, without lowering s.
func containsFoldASCII(s, low string) bool {
	if low == "" {
		return true
	}
	cs := []byte{low[0]}
	if 'a' <= low[0] && low[0] <= 'z' {
		cs = append(cs, low[0]-'a'+'A')
	}
	for _, c := range cs {
		for off := 0; off+len(low) <= len(s); {
			i := strings.IndexByte(s[off:len(s)-len(low)+1], c)
			if i < 0 {
				break
			}
			at := off + i
			if equalLowerASCII(s[at:at+len(low)], low) {
				return true
			}
			off = at + 1
		}
	}
	return false
}

// equalLowerASCII reports whether asciiLower(s) == low.
func equalLowerASCII(s, low string) bool {
	if len(s) != len(low) {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != low[i] {
			return false
		}
	}
	return true
}

// asciiLower lower-cases ASCII letters only, keeping every byte offset.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// mask masks the matches of s that start before limit and returns the
// masked text up to the end of the last such match or limit, whichever is
// later, and the number of bytes of s it consumed.
func (p *Pool) mask(s string, limit int) (string, int) { return p.maskAfter(s, limit, 0) }

// maskAfter is mask for text that follows the byte prev.
func (p *Pool) maskAfter(s string, limit int, prev byte) (string, int) {
	var b strings.Builder
	last := 0
	for _, m := range p.find(s, limit, prev) {
		b.WriteString(s[last:m.start])
		b.WriteString(Mask(m.kind))
		last = m.end
	}
	end := max(limit, last)
	b.WriteString(s[last:end])
	return b.String(), end
}

// secretName reports whether a member name says it holds a secret.
var secretName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(secret|token|passw(or)?d|passphrase|api_?key|private_?key|credential|authorization|cookie|session_?key|access_?key)`)
})

// secretWords are secretName's alternatives spelled out in lower case,
// by their first letter: for an ASCII name, the pattern matches exactly
// when its lower-cased form contains one of them (the pattern's case
// folding differs from ASCII's only for non-ASCII letters: K and ſ fold
// to k and s).
var secretWords = [256][]string{
	's': {"secret", "sessionkey", "session_key"},
	't': {"token"},
	'p': {"passwd", "password", "passphrase", "privatekey", "private_key"},
	'a': {"apikey", "api_key", "authorization", "accesskey", "access_key"},
	'c': {"credential", "cookie"},
}

// SecretName reports whether a JSON member or header name names a
// secret, so that its whole value is masked whatever it looks like.
// An ASCII name is checked without the pattern, in one pass (every JSON
// response's member names are checked, and the pattern cost a third of
// a read's CPU).
func SecretName(name string) bool {
	var buf [64]byte
	if len(name) > len(buf) {
		return secretName().MatchString(name)
	}
	low := buf[:len(name)]
	for i := range len(name) {
		c := name[i]
		if c >= utf8.RuneSelf {
			return secretName().MatchString(name) // Unicode case folding
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	for i, c := range low {
		for _, w := range secretWords[c] {
			if len(low)-i >= len(w) && string(low[i:i+len(w)]) == w {
				return true
			}
		}
	}
	return false
}

// Value masks a decoded JSON value (as encoding/json or canon decode it:
// map[string]any, []any, string, numbers, bools, nil) at any depth: the
// value of a secret-named member is replaced whole, and every string —
// also the top-level value — is masked. It returns a new value.
func (p *Pool) Value(v any) (any, error) {
	if p.err != nil {
		return nil, p.err
	}
	return p.value(v), nil
}

func (p *Pool) value(v any) any {
	switch x := v.(type) {
	case string:
		s, _ := p.mask(x, len(x))
		return s
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if SecretName(k) && e != nil {
				out[k] = Mask("field")
				continue
			}
			out[k] = p.value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = p.value(e)
		}
		return out
	}
	return v
}

// Writer redacts a stream into w. It holds back the last bytes of what it
// was given until it can tell they do not begin a secret, so a secret
// split across writes is masked; Close flushes the rest. After an error
// every call fails.
type Writer struct {
	p     *Pool
	w     io.Writer
	buf   []byte
	prev  byte // the last byte of the text already consumed (0 at the start)
	inPEM bool // inside a PEM private key block too long to hold: mask until its END line
	err   error
}

// NewWriter returns a Writer into w; with a pool that fails loud, every
// Write fails and nothing reaches w.
func (p *Pool) NewWriter(w io.Writer) *Writer { return &Writer{p: p, w: w, err: p.err} }

// Write masks what it can decide and holds back the rest.
func (wr *Writer) Write(b []byte) (int, error) {
	if wr.err != nil {
		return 0, wr.err
	}
	wr.buf = append(wr.buf, b...)
	if err := wr.drain(); err != nil {
		wr.err = err
		return 0, err
	}
	return len(b), nil
}

func (wr *Writer) drain() error {
	for {
		if wr.inPEM {
			loc := pemEnd().FindIndex(wr.buf)
			if loc == nil {
				// Keep only what could be the start of the END line.
				keep := min(len(wr.buf), 64)
				wr.buf = append(wr.buf[:0], wr.buf[len(wr.buf)-keep:]...)
				return nil
			}
			wr.prev = wr.buf[loc[1]-1]
			wr.buf = append(wr.buf[:0], wr.buf[loc[1]:]...)
			wr.inPEM = false
		}
		// Every token match has at most maxL bytes: one that starts
		// before len(buf)-maxL lies wholly in buf already and cannot
		// grow, and no match can start there that is not found now.
		limit := len(wr.buf) - wr.p.maxL
		// An unterminated PEM block is held from its BEGIN line.
		if begins := pemBegin().FindAllIndex(wr.buf, -1); len(begins) > 0 {
			last := begins[len(begins)-1]
			if pemEnd().FindIndex(wr.buf[last[1]:]) == nil {
				if len(wr.buf)-last[0] > pemHold {
					out, _ := wr.p.maskAfter(string(wr.buf[:last[0]]), last[0], wr.prev)
					if _, err := io.WriteString(wr.w, out+Mask("pem-private-key")); err != nil {
						return err
					}
					wr.buf = append(wr.buf[:0], wr.buf[last[0]:]...)
					wr.inPEM = true
					continue
				}
				limit = min(limit, last[0])
			}
		}
		if limit <= 0 {
			return nil
		}
		// Never cut a UTF-8 sequence: move the limit back to a rune start.
		for limit > 0 && !utf8.RuneStart(wr.buf[limit]) {
			limit--
		}
		out, used := wr.p.maskAfter(string(wr.buf), limit, wr.prev)
		if _, err := io.WriteString(wr.w, out); err != nil {
			return err
		}
		if used > 0 {
			wr.prev = wr.buf[used-1]
		}
		wr.buf = append(wr.buf[:0], wr.buf[used:]...)
		return nil
	}
}

// Close masks and writes what is held back. It does not close w.
func (wr *Writer) Close() error {
	if wr.err != nil {
		return wr.err
	}
	out := ""
	if !wr.inPEM {
		out, _ = wr.p.maskAfter(string(wr.buf), len(wr.buf), wr.prev)
	}
	wr.buf = nil
	_, err := io.WriteString(wr.w, out)
	wr.err = errors.New("redact: writer closed")
	return err
}
