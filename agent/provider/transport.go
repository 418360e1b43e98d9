package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// checkJSON reports whether b is one valid UTF-8 JSON value with no
// duplicate object keys (which different parsers resolve differently).
func checkJSON(b []byte) error {
	if !utf8.Valid(b) {
		return errors.New("invalid UTF-8")
	}
	if !json.Valid(b) {
		return errors.New("invalid JSON")
	}
	type frame struct {
		obj       bool
		expectKey bool
		keys      map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.obj && top.expectKey {
			k, _ := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("duplicate key %s", short(k))
			}
			top.keys[k] = true
			top.expectKey = false
			continue
		}
		if top != nil && top.obj {
			top.expectKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, expectKey: true, keys: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{})
		}
	}
}

// checkObject reports whether b is a JSON object as checkJSON requires.
func checkObject(b []byte) error {
	if err := checkJSON(b); err != nil {
		return err
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	return nil
}

// client is the HTTP machinery shared by the providers.
type client struct {
	name       string
	endpoint   string
	key        string // never logged, never in an error
	setHeaders func(h http.Header, key string)
	idHeader   string
	errorText  func(body []byte) (typ, msg string)
	hc         *http.Client
	timeout    time.Duration
	maxRetries int
	backoff    time.Duration
	maxBytes   int64
}

func newClient(name string, cfg Config, defaultBase, path string, needKey bool) (*client, error) {
	c := &client{
		name:       name,
		timeout:    cfg.Timeout,
		maxRetries: cfg.MaxRetries,
		backoff:    cfg.Backoff,
		maxBytes:   cfg.MaxResponseBytes,
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxRetries == 0 {
		c.maxRetries = DefaultMaxRetries
	} else if c.maxRetries < 0 {
		c.maxRetries = 0
	}
	if c.backoff == 0 {
		c.backoff = DefaultBackoff
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxResponseBytes
	}
	if c.timeout < 0 || c.backoff < 0 || c.maxBytes < 0 {
		return nil, fmt.Errorf("%s: config: negative timeout, backoff or size", name)
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultBase
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("%s: config: base URL %s: %v", name, short(base), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("%s: config: base URL %s: want http(s)://host[/path] without user info, query or fragment", name, short(base))
	}
	c.endpoint = strings.TrimRight(u.String(), "/") + path
	if cfg.Key == nil && needKey {
		return nil, fmt.Errorf("%s: config: no key source (Config.Key): %w", name, ErrNoKey)
	}
	if cfg.Key != nil {
		k, err := cfg.Key.Key()
		if err != nil {
			return nil, fmt.Errorf("%s: config: %w", name, err)
		}
		what := "key"
		if s, ok := cfg.Key.(fmt.Stringer); ok {
			what = s.String()
		}
		if k == "" {
			return nil, fmt.Errorf("%s: config: %s: %w", name, what, ErrNoKey)
		}
		if strings.ContainsAny(k, "\r\n\x00") {
			return nil, fmt.Errorf("%s: config: %s: key has control characters", name, what)
		}
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%s: config: refusing to send the key over plain http to %s", name, short(u.Host))
		}
		c.key = k
	}
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	} else {
		hc.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &hc
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// post sends body and returns the 2xx response body, retrying as the
// package doc describes. Errors are redacted.
func (c *client) post(ctx context.Context, body []byte, maxAttempts int) (resp []byte, reqID string, attempts int, err error) {
	maxRetries := c.maxRetries
	if maxAttempts > 0 {
		maxRetries = min(maxRetries, maxAttempts-1)
	}
	for attempt := 0; ; attempt++ {
		var retryAfter time.Duration
		var retryable bool
		resp, reqID, retryAfter, retryable, err = c.once(ctx, body)
		if err == nil {
			return resp, reqID, attempt + 1, nil
		}
		if ctx.Err() != nil {
			return nil, "", attempt + 1, c.redact(fmt.Errorf("%s: %w (last error: %v)", c.name, ctx.Err(), err))
		}
		if !retryable || attempt >= maxRetries {
			if attempt > 0 {
				err = fmt.Errorf("%s: giving up after %d attempts: %w", c.name, attempt+1, err)
			}
			return nil, "", attempt + 1, c.redact(err)
		}
		wait := MaxWait
		if attempt < 30 && c.backoff<<attempt < MaxWait {
			wait = c.backoff << attempt
		}
		if retryAfter > wait {
			wait = min(retryAfter, MaxWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", attempt + 1, c.redact(fmt.Errorf("%s: %w (last error: %v)", c.name, ctx.Err(), err))
		case <-t.C:
		}
	}
}

func (c *client) once(ctx context.Context, body []byte) (resp []byte, reqID string, retryAfter time.Duration, retryable bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, "", 0, false, fmt.Errorf("%s: %v", c.name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	c.setHeaders(req.Header, c.key)
	r, err := c.hc.Do(req)
	if err != nil {
		return nil, "", 0, true, fmt.Errorf("%s: %w", c.name, err)
	}
	defer r.Body.Close()
	reqID = c.Redact(sanitizeID(c.Redact(r.Header.Get(c.idHeader))))
	b, err := io.ReadAll(io.LimitReader(r.Body, c.maxBytes+1))
	if int64(len(b)) > c.maxBytes {
		return nil, reqID, 0, false, fmt.Errorf("%s: HTTP %d: body over %d bytes: %w", c.name, r.StatusCode, c.maxBytes, ErrTooLarge)
	}
	if err != nil {
		return nil, reqID, 0, true, fmt.Errorf("%s: HTTP %d: reading body: %w", c.name, r.StatusCode, err)
	}
	if r.StatusCode >= 200 && r.StatusCode < 300 {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return nil, reqID, 0, false, fmt.Errorf("%s: HTTP %d: content type %s: %w", c.name, r.StatusCode, short(r.Header.Get("Content-Type")), ErrMalformed)
		}
		return b, reqID, 0, false, nil
	}
	he := &HTTPError{Provider: c.name, Status: r.StatusCode, RequestID: reqID}
	switch r.StatusCode {
	case 429, 500, 502, 503, 504, 529:
		he.Retryable = true
	}
	if typ, msg := c.errorText(b); msg != "" || typ != "" {
		he.Type, he.Message = c.clean(typ, 64), c.clean(msg, 300)
	} else {
		he.Message = c.clean(string(b), 200)
	}
	if s, err := strconv.Atoi(strings.TrimSpace(r.Header.Get("Retry-After"))); err == nil && s > 0 {
		retryAfter = time.Duration(min(s, int(MaxWait/time.Second))) * time.Second
	}
	return nil, reqID, retryAfter, he.Retryable, he
}

// clean redacts the key from s, then keeps at most n bytes of printable text.
// complete is one model call for either wire format: encode, post with
// retries, parse strictly; parse errors are redacted of the key.
func (c *client) complete(ctx context.Context, req Request, model string,
	encode func(Request, string) ([]byte, error), parse func([]byte) (*Response, error)) (*Response, error) {
	body, err := encode(req, model)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	b, id, attempts, err := c.post(ctx, body, req.MaxAttempts)
	if err != nil {
		return nil, &attemptsError{err: err, attempts: attempts}
	}
	resp, err := parse(b)
	if err != nil {
		return nil, &attemptsError{err: c.redact(fmt.Errorf("%s: response [request %s]: %w", c.name, id, err)), attempts: attempts}
	}
	resp.RequestID, resp.Attempts = id, attempts
	if err := c.scrub(resp); err != nil {
		return nil, &attemptsError{err: c.redact(fmt.Errorf("%s: response [request %s]: %w", c.name, id, err)), attempts: attempts}
	}
	return resp, nil
}

// scrub removes the key from everything a response carries into the
// runner's record (a hostile server may echo request headers back in any
// field) and bounds the model name. A tool id or name holding the key is
// malformed; tool inputs are redacted in their decoded strings (a JSON
// escape cannot hide the key) and re-encoded.
func (c *client) scrub(r *Response) error {
	r.Model = c.clean(r.Model, 256) // the request id was redacted as it was read
	if c.key == "" {
		return nil
	}
	for i := range r.Content {
		b := &r.Content[i]
		b.Text = c.Redact(b.Text)
		if b.Type != "tool_use" {
			continue
		}
		if c.Redact(b.ID) != b.ID || c.Redact(b.Name) != b.Name {
			return malformed("content %d: a tool_use id or name holds the API key", i)
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(b.Input))
		d.UseNumber() // a re-encoded input keeps its numbers exactly
		if err := d.Decode(&v); err != nil {
			return malformed("content %d: tool_use input: %v", i, err)
		}
		v, changed := c.redactValue(v)
		if changed {
			in, err := json.Marshal(v)
			if err != nil {
				return malformed("content %d: tool_use input: %v", i, err)
			}
			b.Input = in
		}
	}
	return nil
}

// redactValue redacts every string and member name of a decoded JSON
// value.
func (c *client) redactValue(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		y := c.Redact(x)
		return y, y != x
	case []any:
		changed := false
		for i := range x {
			var ch bool
			x[i], ch = c.redactValue(x[i])
			changed = changed || ch
		}
		return x, changed
	case map[string]any:
		out := make(map[string]any, len(x))
		changed := false
		for k, e := range x {
			e, ch := c.redactValue(e)
			k2 := c.Redact(k)
			out[k2] = e
			changed = changed || ch || k2 != k
		}
		return out, changed
	}
	return v, false
}

func (c *client) clean(s string, n int) string {
	s = c.Redact(s)
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, " "))
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

func sanitizeID(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.Map(func(r rune) rune {
		if r <= 0x20 || r >= 0x7f {
			return -1
		}
		return r
	}, s)
}

// redactedError replaces an error whose text held the key. It unwraps only
// to the package's sentinels and context errors the original matched, so no
// caller can reach the unredacted text.
type redactedError struct {
	msg   string
	kinds []error
}

func (e *redactedError) Error() string   { return e.msg }
func (e *redactedError) Unwrap() []error { return e.kinds }

func (c *client) redact(err error) error {
	if err == nil || c.key == "" {
		return err
	}
	msg := c.Redact(err.Error())
	if msg == err.Error() {
		return err
	}
	r := &redactedError{msg: msg}
	for _, k := range []error{ErrMalformed, ErrTooLarge, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			r.kinds = append(r.kinds, k)
		}
	}
	return r
}

// jsonErrorText extracts {"error":{"type":..,"message":..}}, the error shape
// of both APIs.
func jsonErrorText(b []byte) (typ, msg string) {
	var e struct {
		Error struct {
			Type    any `json:"type"`
			Message any `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return "", ""
	}
	t, _ := e.Error.Type.(string)
	m, _ := e.Error.Message.(string)
	return t, m
}

// String, GoString and LogValue describe the client without its key, so
// that printing or logging a provider can never reveal it.
func (c *client) String() string          { return c.name + " client for " + c.endpoint }
func (c *client) GoString() string        { return c.String() }
func (c *client) LogValue() slog.Value    { return slog.StringValue(c.String()) }
func (a *anthropic) String() string       { return a.c.String() }
func (a *anthropic) GoString() string     { return a.c.String() }
func (a *anthropic) LogValue() slog.Value { return a.c.LogValue() }
func (o *openAI) String() string          { return o.c.String() }
func (o *openAI) GoString() string        { return o.c.String() }
func (o *openAI) LogValue() slog.Value    { return o.c.LogValue() }

// attemptsError is a failed call with the HTTP attempts it made.
type attemptsError struct {
	err      error
	attempts int
}

func (e *attemptsError) Error() string { return e.err.Error() }
func (e *attemptsError) Unwrap() error { return e.err }

// Attempts returns the HTTP attempts a failed Complete made, or 0 when the
// error does not say (replay, or another Provider).
func Attempts(err error) int {
	var ae *attemptsError
	if errors.As(err, &ae) {
		return ae.attempts
	}
	return 0
}
