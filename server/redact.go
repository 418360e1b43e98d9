package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/redact"
)

// Redaction on every path text leaves the server (docs/redaction.md):
// the structured log (redactHandler), every JSON response and error
// (redactWriter), the audit export (audit.go: masked to commitments),
// and each run's journal and captured command output (the agent runner,
// given the pool). The pool's values come only from the operator: the
// secrets Config.Secrets names and what SetSecretSource adds (the
// credential broker's stored secrets, which admin-tier routes write) —
// never from anything a tenant wrote.

// secrets holds the sources the pool is built from.
type secrets struct {
	mu      sync.RWMutex
	sources map[string]secretSource
	pool    *redact.Pool
}

type secretSource struct {
	values     []string
	configured int
}

// Pool is the server's current redaction pool. A pool whose operator
// configured secrets that resolved to nothing fails every call
// (redact.ErrEmptyPool): output that needed masking is refused.
func (s *Server) Pool() *redact.Pool {
	s.secrets.mu.RLock()
	defer s.secrets.mu.RUnlock()
	return s.secrets.pool
}

// SetSecretSource replaces the secret values one source contributes to
// the pool (the operator's configuration is the source "operator"; the
// credential broker calls it with its stored secrets). configured is how
// many secrets the source is configured with: when the sources together
// are configured with some and none resolved, the pool fails loud. The
// values must come from the operator, never from a tenant's request.
func (s *Server) SetSecretSource(name string, values []string, configured int) error {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	return s.setSecretSourceLocked(name, values, configured)
}

// addSecretValue adds one value to a source, atomically.
func (s *Server) addSecretValue(name, v string) error {
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	src := s.secrets.sources[name]
	return s.setSecretSourceLocked(name, append(append([]string(nil), src.values...), v), src.configured+1)
}

func (s *Server) setSecretSourceLocked(name string, values []string, configured int) error {
	next := map[string]secretSource{}
	for k, v := range s.secrets.sources {
		next[k] = v
	}
	next[name] = secretSource{values: append([]string(nil), values...), configured: configured}
	var all []string
	total := 0
	for _, src := range next {
		all = append(all, src.values...)
		total += src.configured
	}
	p, err := redact.NewPool(redact.Config{OperatorSecrets: all, Configured: total})
	if err != nil {
		return fmt.Errorf("server: secrets of %s: %w", name, err)
	}
	s.secrets.sources, s.secrets.pool = next, p
	return nil
}

// decodedText is an encoded JSON document as the pool must see it: each
// string with its escapes undone (still between its quotes, so that
// what surrounds a string's text is a quote, as in the full pass, where
// each string is masked alone), everything outside strings as written.
// ok is false when the document needs the full pass anyway: a member
// whose name says it holds a secret holds a string (an object, array or
// string value; not a number, true, false or null), or the document is
// not valid UTF-8 or has a string that does not decode.
func decodedText(b []byte) (text string, ok bool) {
	if !utf8.Valid(b) {
		return "", false
	}
	var out []byte // nil while no string had an escape
	last := 0
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		j, escaped := i+1, false
		for ; j < len(b) && b[j] != '"'; j++ {
			switch {
			case b[j] == '\\':
				escaped = true
				j++
			case b[j] < 0x20:
				return "", false // not JSON: the full pass says so
			}
		}
		if j >= len(b) {
			return "", false
		}
		str := b[i+1 : j]
		if escaped {
			var v string
			if json.Unmarshal(b[i:j+1], &v) != nil {
				return "", false
			}
			if out == nil {
				out = make([]byte, 0, len(b))
			}
			out = append(append(append(out, b[last:i+1]...), v...), '"')
			last = j + 1
			str = []byte(v)
		}
		i = j
		k := j + 1
		for k < len(b) && isSpace(b[k]) {
			k++
		}
		if k >= len(b) || b[k] != ':' {
			continue
		}
		for k++; k < len(b) && isSpace(b[k]); k++ {
		}
		if k < len(b) && (b[k] == '"' || b[k] == '{' || b[k] == '[') && redact.SecretName(string(str)) {
			return "", false
		}
	}
	if out == nil {
		return string(b), true
	}
	return string(append(out, b[last:]...)), true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// clean reports whether an encoded JSON document certainly needs no
// masking: no secret-named member holds a string, and the pool finds
// nothing in its text with every string decoded (decodedText). Each
// string the full pass would mask alone is here one stretch of a longer
// text between quotes; a secret found in it is found here too (a shape
// that starts a word or ends at a word's end sees a quote on either
// side, as it sees the text's edge alone), and a match that spans
// strings only sends the document to the full pass. A false "no" costs
// only the full pass.
//
// A document found clean is remembered by its SHA-256 with the pool
// that checked it (cleanMemo): the same bytes under the same pool are
// clean again without the search (a run polled while nothing about it
// changes is the same response each time).
func (s *Server) clean(p *redact.Pool, b []byte) bool {
	sum := sha256.Sum256(b)
	if s.cleanMemo.seen(p, sum) {
		return true
	}
	text, ok := decodedText(b)
	if !ok {
		return false
	}
	m, err := p.String(text)
	if err != nil || m != text {
		return false
	}
	s.cleanMemo.remember(p, sum)
	return true
}

// cleanMemoMax bounds the documents cleanMemo remembers; when full it
// is emptied.
const cleanMemoMax = 8192

// cleanMemo remembers the digests of documents one pool found clean.
// A pool is never changed once made (SetSecretSource makes a new one),
// and the memo holds the pool it answers for, so a new pool, or an old
// one's address reused, never finds another's answers; only "clean" is
// remembered, so a document the pool would mask is always searched.
type cleanMemo struct {
	mu   sync.RWMutex          // read-locked by seen, on every response
	pool *redact.Pool          // guarded by mu
	m    map[[32]byte]struct{} // guarded by mu
}

func (c *cleanMemo) seen(p *redact.Pool, sum [32]byte) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.pool != p {
		return false
	}
	_, ok := c.m[sum]
	return ok
}

func (c *cleanMemo) remember(p *redact.Pool, sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool != p || c.m == nil || len(c.m) >= cleanMemoMax {
		c.pool, c.m = p, make(map[[32]byte]struct{})
	}
	c.m[sum] = struct{}{}
}

// maskJSON masks a decoded JSON value (decoded with UseNumber) at any
// depth: every string and member name through the pool, and every
// string under a secret-named member whole. Numbers and booleans are
// kept (a budget such as max_output_tokens is not a secret).
func maskJSON(p *redact.Pool, v any, secret bool) (any, error) {
	switch x := v.(type) {
	case string:
		if secret {
			return redact.Mask("field"), nil
		}
		return p.String(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			mk, err := p.String(k)
			if err != nil {
				return nil, err
			}
			if out[mk], err = maskJSON(p, e, secret || redact.SecretName(k)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = maskJSON(p, e, secret); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if p.Err() != nil {
		return nil, p.Err()
	}
	return v, nil
}

// maskJSONBytes masks a JSON document.
func maskJSONBytes(p *redact.Pool, b []byte) ([]byte, error) {
	if err := p.Err(); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("the response is not JSON: %w", err)
	}
	m, err := maskJSON(p, v, false)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// withheld is the one body a JSON response gets when the pool fails.
const withheld = `{"error":"the response was withheld: the operator configured secrets to mask, but none resolved (redaction pool empty); fix the server's --secrets configuration"}` + "\n"

type redactKey struct{}

// redactWriter buffers a JSON response and masks it before it is sent;
// other content (evidence archives, signed journals, the audit export,
// metrics) passes through.
type redactWriter struct {
	http.ResponseWriter
	pool    *redact.Pool
	clean   func(*redact.Pool, []byte) bool
	code    int
	decided bool
	buffer  bool
	exempt  bool
	buf     bytes.Buffer
}

func (rw *redactWriter) decide() {
	if rw.decided {
		return
	}
	rw.decided = true
	ct := rw.Header().Get("Content-Type")
	rw.buffer = !rw.exempt && ct == "application/json"
	if !rw.buffer {
		if rw.code == 0 {
			rw.code = 200
		}
		rw.ResponseWriter.WriteHeader(rw.code)
	}
}

func (rw *redactWriter) WriteHeader(code int) {
	if rw.code == 0 {
		rw.code = code
	}
	rw.decide()
}

// Unwrap lets http.ResponseController flush a response that passes
// through unbuffered (the console's server-sent events).
func (rw *redactWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

func (rw *redactWriter) Write(b []byte) (int, error) {
	rw.decide()
	if rw.buffer {
		return rw.buf.Write(b)
	}
	return rw.ResponseWriter.Write(b)
}

// finish sends a buffered response, masked; one the pool cannot mask is
// replaced by a 500 that says why.
func (rw *redactWriter) finish() {
	if !rw.decided || !rw.buffer {
		return
	}
	code := rw.code
	if code == 0 {
		code = 200
	}
	out := rw.buf.Bytes()
	if len(out) > 0 && !rw.clean(rw.pool, out) {
		masked, err := maskJSONBytes(rw.pool, out)
		if err != nil {
			code, masked = 500, []byte(withheld)
			rw.Header().Set("Content-Type", "application/json")
		}
		out = masked
	}
	rw.Header().Del("Content-Length")
	rw.ResponseWriter.WriteHeader(code)
	rw.ResponseWriter.Write(out)
}

// revealToCaller exempts this response from masking: only for a
// credential issued to its caller (a new key, shown once), which the
// pool's cdn_ shape would otherwise mask.
func revealToCaller(r *http.Request) {
	if rw, ok := r.Context().Value(redactKey{}).(*redactWriter); ok {
		rw.exempt = true
	}
}

// unmasked exempts a response built into the binary (the OpenAPI
// document), which holds nothing a tenant or a run wrote.
func unmasked(r *http.Request) { revealToCaller(r) }

// redactResponses wraps h so that every JSON response is masked.
func (s *Server) redactResponses(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &redactWriter{ResponseWriter: w, pool: s.Pool(), clean: s.clean}
		h.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), redactKey{}, rw)))
		rw.finish()
	})
}

// redactHandler masks every log record: its message and every string
// attribute (a secret-named attribute's whole value). When the pool
// fails, the record is replaced by one that says it was withheld.
type redactHandler struct {
	inner slog.Handler
	pool  func() *redact.Pool
}

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	p := h.pool()
	out := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		m, err := maskAttr(p, a)
		if err != nil {
			m = slog.String(a.Key, "[withheld: "+err.Error()+"]")
		}
		out = append(out, m)
	}
	return redactHandler{inner: h.inner.WithAttrs(out), pool: h.pool}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{inner: h.inner.WithGroup(name), pool: h.pool}
}

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	p := h.pool()
	msg, err := p.String(rec.Message)
	out := slog.NewRecord(rec.Time, rec.Level, msg, rec.PC)
	if err == nil {
		rec.Attrs(func(a slog.Attr) bool {
			var m slog.Attr
			if m, err = maskAttr(p, a); err != nil {
				return false
			}
			out.AddAttrs(m)
			return true
		})
	}
	if err != nil {
		out = slog.NewRecord(rec.Time, max(rec.Level, slog.LevelError), "log record withheld: "+err.Error(), rec.PC)
	}
	return h.inner.Handle(ctx, out)
}

func maskAttr(p *redact.Pool, a slog.Attr) (slog.Attr, error) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		var as []slog.Attr
		for _, g := range v.Group() {
			m, err := maskAttr(p, g)
			if err != nil {
				return a, err
			}
			as = append(as, m)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(as...)}, nil
	case slog.KindString, slog.KindAny:
		s := v.String()
		if v.Kind() == slog.KindAny {
			s = fmt.Sprint(v.Any())
		}
		if redact.SecretName(a.Key) {
			if err := p.Err(); err != nil {
				return a, err
			}
			return slog.String(a.Key, redact.Mask("field")), nil
		}
		m, err := p.String(s)
		return slog.String(a.Key, m), err
	}
	return slog.Attr{Key: a.Key, Value: v}, p.Err()
}
