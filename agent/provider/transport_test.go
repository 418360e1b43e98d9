package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// providers builds each HTTP provider against url with cfg edited by edit,
// paired with a 200 body in its wire format.
func providers(t *testing.T, url string, edit func(*Config)) map[string]Provider {
	t.Helper()
	cfg := testConfig(url)
	if edit != nil {
		edit(&cfg)
	}
	a, err := NewAnthropic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Provider{"anthropic": a, "openai": o}
}

var okBody = map[string]string{"anthropic": anthropicText, "openai": openAIText}

func hello() Request {
	return Request{Messages: []Message{{Role: "user", Content: []Block{{Type: "text", Text: "hi"}}}}}
}

func TestRetryAfter429ThenSuccess(t *testing.T) {
	for _, name := range []string{"anthropic", "openai"} {
		t.Run(name, func(t *testing.T) {
			limited := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "1")
				reply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)(w, r)
			}
			f := newFake(t, limited, reply(200, okBody[name]))
			p := providers(t, f.URL, nil)[name]
			start := time.Now()
			resp, err := p.Complete(context.Background(), hello())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Attempts != 2 || len(f.requests()) != 2 {
				t.Errorf("attempts = %d, server saw %d; want 2", resp.Attempts, len(f.requests()))
			}
			if d := time.Since(start); d < time.Second {
				t.Errorf("retried after %v, want Retry-After's 1s honored", d)
			}
		})
	}
}

func TestRetryGivesUp(t *testing.T) {
	for _, status := range []int{500, 502, 503, 504, 529} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f := newFake(t, reply(status, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`))
			p := providers(t, f.URL, func(c *Config) { c.MaxRetries = 2 })["anthropic"]
			_, err := p.Complete(context.Background(), hello())
			var he *HTTPError
			if !errors.As(err, &he) || he.Status != status || he.Message != "busy" || he.Type != "overloaded_error" {
				t.Fatalf("Complete = %v, want HTTPError %d", err, status)
			}
			if n := len(f.requests()); n != 3 {
				t.Errorf("server saw %d attempts, want 3", n)
			}
		})
	}
}

func TestNoRetryOn4xx(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 413, 422} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f := newFake(t, reply(status, `{"error":{"message":"no"}}`))
			p := providers(t, f.URL, func(c *Config) { c.MaxRetries = 5 })["openai"]
			_, err := p.Complete(context.Background(), hello())
			var he *HTTPError
			if !errors.As(err, &he) || he.Status != status || he.Retryable {
				t.Fatalf("Complete = %v, want HTTPError %d", err, status)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server saw %d attempts, want 1", n)
			}
		})
	}
}

func TestSlowServerTimesOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	for name, p := range providers(t, f.URL, func(c *Config) { c.Timeout = 50 * time.Millisecond; c.MaxRetries = 1 }) {
		start := time.Now()
		_, err := p.Complete(context.Background(), hello())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Complete = %v, want DeadlineExceeded", name, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("server saw %d attempts, want 2 per provider", n)
	}
}

func TestSlowBodyTimesOut(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message",`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	p := providers(t, f.URL, func(c *Config) { c.Timeout = 50 * time.Millisecond; c.MaxRetries = -1 })["anthropic"]
	if _, err := p.Complete(context.Background(), hello()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Complete = %v, want DeadlineExceeded", err)
	}
}

func TestContextCancel(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	p := providers(t, f.URL, nil)["openai"]
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := p.Complete(ctx, hello()); !errors.Is(err, context.Canceled) {
		t.Errorf("Complete = %v, want Canceled", err)
	}
	// Cancel during a backoff wait, too.
	f2 := newFake(t, reply(503, `{}`))
	p = providers(t, f2.URL, func(c *Config) { c.Backoff = time.Hour })["openai"]
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := p.Complete(ctx, hello()); !errors.Is(err, context.Canceled) {
		t.Errorf("Complete in backoff = %v, want Canceled", err)
	}
}

func TestRedirectRefused(t *testing.T) {
	other := newFake(t, reply(200, anthropicText))
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	for name, p := range providers(t, f.URL, nil) {
		_, err := p.Complete(context.Background(), hello())
		var he *HTTPError
		if !errors.As(err, &he) || he.Status != http.StatusTemporaryRedirect {
			t.Errorf("%s: Complete = %v, want refused redirect", name, err)
		}
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("redirect target got %d requests, want 0", n)
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	// Each handler reflects the key back in a different place.
	echo := func(status int, wrap func(h string) string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var sb strings.Builder
			r.Header.Write(&sb)
			reply(status, wrap(sb.String()))(w, r)
		}
	}
	key := func(r *http.Request) string {
		if k := r.Header.Get("x-api-key"); k != "" {
			return k
		}
		return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"raw headers in 400", echo(400, func(h string) string { return h })},
		{"headers in error message", echo(401, func(h string) string {
			return fmt.Sprintf(`{"error":{"type":%q,"message":%q}}`, h, h)
		})},
		{"headers in 503 until give up", echo(503, func(h string) string { return h })},
		{"key as block type", func(w http.ResponseWriter, r *http.Request) {
			reply(200, `{"type":"message","role":"assistant","content":[{"type":"`+key(r)+`"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1},
			"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"x"},"finish_reason":"`+key(r)+`"}]}`)(w, r)
		}},
		{"key as duplicate key", func(w http.ResponseWriter, r *http.Request) {
			reply(200, `{"`+key(r)+`":1,"`+key(r)+`":2}`)(w, r)
		}},
		{"key as content type", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/"+key(r))
			io.WriteString(w, "{}")
		}},
		{"key as request id", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("request-id", key(r))
			w.Header().Set("x-request-id", key(r))
			reply(200, `{"bad":true}`)(w, r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.h)
			for name, p := range providers(t, f.URL, func(c *Config) { c.MaxRetries = 1 }) {
				resp, err := p.Complete(context.Background(), hello())
				if err == nil {
					t.Fatalf("%s: Complete succeeded: %+v", name, resp)
				}
				if strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), testKey) {
					t.Errorf("%s: error holds the key: %v", name, err)
				}
				for e := err; e != nil; e = errors.Unwrap(e) {
					if strings.Contains(e.Error(), testKey) {
						t.Errorf("%s: wrapped error holds the key: %v", name, e)
					}
				}
				var he *HTTPError
				if errors.As(err, &he) && strings.Contains(fmt.Sprintf("%+v", *he), testKey) {
					t.Errorf("%s: HTTPError holds the key", name)
				}
			}
			for _, r := range f.requests() {
				if strings.Contains(string(r.Body), testKey) {
					t.Errorf("request body holds the key")
				}
			}
		})
	}
}

func TestHostileBodies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		want    error
		retried bool
	}{
		{"huge body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"pad":"`+strings.Repeat("A", 4096)+`"}`)
		}, ErrTooLarge, false},
		{"huge error body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			io.WriteString(w, strings.Repeat("A", 4096))
		}, ErrTooLarge, false},
		{"wrong content type", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, anthropicText)
		}, ErrMalformed, false},
		{"no content type", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			io.WriteString(w, anthropicText)
		}, ErrMalformed, false},
		{"non-JSON 200", reply(200, `<html>hello</html>`), ErrMalformed, false},
		{"malformed JSON", reply(200, `{"type":"message","content":[`), ErrMalformed, false},
		{"truncated body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, `{"type":"message"`)
		}, io.ErrUnexpectedEOF, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.h)
			for name, p := range providers(t, f.URL, func(c *Config) { c.MaxResponseBytes = 1024; c.MaxRetries = 1 }) {
				if _, err := p.Complete(context.Background(), hello()); !errors.Is(err, tc.want) {
					t.Errorf("%s: Complete = %v, want %v", name, err, tc.want)
				}
			}
			want := 2
			if tc.retried {
				want = 4
			}
			if n := len(f.requests()); n != want {
				t.Errorf("server saw %d requests, want %d", n, want)
			}
		})
	}
}

func TestConfigChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"unset key", Config{Key: EnvKey{Name: "NOPE", Lookup: testEnv}}, ErrNoKey},
		{"no key source", Config{}, ErrNoKey},
		{"EnvKey without Lookup", Config{Key: EnvKey{Name: "TEST_KEY"}}, ErrNoKey},
		{"empty key", Config{Key: staticKey("")}, ErrNoKey},
		{"key with a newline", Config{Key: staticKey(testKey + "\n")}, nil},
		{"key source fails", Config{Key: failingKey{}}, errKeySource},
		{"key over plain http", Config{BaseURL: "http://example.com", Key: EnvKey{Name: "TEST_KEY", Lookup: testEnv}}, nil},
		{"user info", Config{BaseURL: "https://u:p@example.com", Key: EnvKey{Name: "TEST_KEY", Lookup: testEnv}}, nil},
		{"query", Config{BaseURL: "https://example.com?x=1", Key: EnvKey{Name: "TEST_KEY", Lookup: testEnv}}, nil},
		{"scheme", Config{BaseURL: "file:///tmp", Key: EnvKey{Name: "TEST_KEY", Lookup: testEnv}}, nil},
		{"negative timeout", Config{Timeout: -1, Key: EnvKey{Name: "TEST_KEY", Lookup: testEnv}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewAnthropic(tc.cfg)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("NewAnthropic = %v, want error %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Errorf("error holds the key: %v", err)
			}
		})
	}
	if _, err := NewOpenAI(Config{BaseURL: "http://127.0.0.1:11434/v1", Key: EnvKey{Name: "TEST_KEY", Lookup: testEnv}}); err != nil {
		t.Errorf("NewOpenAI(loopback http with key) = %v", err)
	}
	if _, err := NewOpenAI(Config{BaseURL: "http://gpu-box:8000/v1"}); err != nil {
		t.Errorf("NewOpenAI(plain http without key) = %v", err)
	}
}

func TestPrintingHidesKey(t *testing.T) {
	for name, p := range providers(t, "http://127.0.0.1:1", nil) {
		var sb strings.Builder
		slog.New(slog.NewJSONHandler(&sb, nil)).Info("p", "provider", p)
		s := fmt.Sprintf("%v %+v %#v %s", p, p, p, sb.String())
		if strings.Contains(s, testKey) {
			t.Errorf("%s: printing reveals the key: %s", name, s)
		}
	}
}

// TestMaxAttemptsCapsRetries: the runner's model-call budget caps the
// attempts of one call below the configured retries, for both clients.
func TestMaxAttemptsCapsRetries(t *testing.T) {
	for _, name := range []string{"anthropic", "openai"} {
		for _, cap := range []int{1, 2} {
			t.Run(fmt.Sprint(name, cap), func(t *testing.T) {
				f := newFake(t, reply(503, `{"error":{"message":"busy"}}`))
				p := providers(t, f.URL, func(c *Config) { c.MaxRetries = 5; c.Backoff = time.Millisecond })[name]
				req := hello()
				req.MaxAttempts = cap
				_, err := p.Complete(context.Background(), req)
				if err == nil {
					t.Fatal("Complete succeeded against a server that only answers 503")
				}
				if got := Attempts(err); got != cap {
					t.Errorf("Attempts(err) = %d, want %d", got, cap)
				}
				if n := len(f.requests()); n != cap {
					t.Errorf("server saw %d attempts, want %d", n, cap)
				}
			})
		}
	}
}

// TestKeyNeverInResponses: a server that echoes the key into a successful
// response's model name, request id, text and tool input gets it
// redacted from everything Complete returns.
func TestKeyNeverInResponses(t *testing.T) {
	key := func(r *http.Request) string {
		if k := r.Header.Get("x-api-key"); k != "" {
			return k
		}
		return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		k := key(r)
		w.Header().Set("request-id", "req-"+k)
		w.Header().Set("x-request-id", "req-"+k)
		if r.Header.Get("x-api-key") != "" {
			esc := `\u00` + fmt.Sprintf("%x", k[0]) + k[1:] // the key with its first byte JSON-escaped
			reply(200, `{"type":"message","role":"assistant","model":"m-`+k+`","content":[{"type":"text","text":"k=`+k+`"},`+
				`{"type":"tool_use","id":"t1","name":"read","input":{"path":"`+esc+`","`+esc+`":[1,"`+k[:20]+` `+k[20:]+`"]}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`)(w, r)
			return
		}
		reply(200, `{"object":"chat.completion","model":"m-`+k+`","choices":[{"message":{"role":"assistant","content":"k=`+k+`",`+
			`"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\":\"`+k+`\"}"}}]},"finish_reason":"tool_calls"}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1}}`)(w, r)
	}
	f := newFake(t, h, h)
	for name, p := range providers(t, f.URL, nil) {
		resp, err := p.Complete(context.Background(), hello())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := fmt.Sprintf("%+v %s", *resp, resp.Content[1].Input); strings.Contains(got, testKey) {
			t.Errorf("%s: the response holds the key: %s", name, got)
		}
		if !strings.Contains(resp.Content[0].Text, "[REDACTED]") || !strings.Contains(string(resp.Content[1].Input), "[REDACTED]") {
			t.Errorf("%s: nothing was redacted: %+v", name, resp)
		}
	}
}

// TestHostileToolNames: tool names and ids that could carry terminal
// escapes, and absurd counts, make the response malformed.
func TestHostileToolNames(t *testing.T) {
	for _, r := range []Response{
		{Content: []Block{{Type: "tool_use", ID: "t1", Name: "\x1b]0;PWNED\x07", Input: []byte(`{}`)}}, StopReason: "tool_use"},
		{Content: []Block{{Type: "tool_use", ID: "t\x1b[2J", Name: "read", Input: []byte(`{}`)}}, StopReason: "tool_use"},
		{Content: []Block{{Type: "text", Text: "x"}}, StopReason: "end_turn", Usage: Usage{InputTokens: 1 << 50, Reported: true}},
		{Content: []Block{{Type: "text", Text: "x"}}, StopReason: "end_turn", Attempts: 1 << 30},
	} {
		if err := validateResponse(&r); !errors.Is(err, ErrMalformed) {
			t.Errorf("%+v: %v, want malformed", r, err)
		}
	}
}

// TestKeyInToolIDRefused: a tool id or name carrying the key makes the
// response malformed rather than recorded.
func TestKeyInToolIDRefused(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get("x-api-key")
		reply(200, `{"type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"`+k+`","name":"read","input":{}}],`+
			`"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`)(w, r)
	}
	f := newFake(t, h)
	p := providers(t, f.URL, func(c *Config) { c.MaxRetries = -1 })["anthropic"]
	_, err := p.Complete(context.Background(), hello())
	if !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), testKey) {
		t.Fatalf("Complete = %v", err)
	}
}
