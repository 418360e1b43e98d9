package provider

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-test-SECRET-0123456789abcdef"

func testEnv(name string) (string, bool) {
	if name == "TEST_KEY" {
		return testKey, true
	}
	return "", false
}

// staticKey is a KeySource holding a fixed key.
type staticKey string

func (k staticKey) Key() (string, error) { return string(k), nil }

var errKeySource = errors.New("key store locked")

// failingKey is a KeySource that cannot supply a key.
type failingKey struct{}

func (failingKey) Key() (string, error) { return "", errKeySource }

// recorded is one request a fake server received.
type recorded struct {
	Path   string
	Header http.Header
	Body   []byte
}

// fake is a local server that answers with handlers in turn (the last one
// repeats) and records every request.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	reqs     []recorded // guarded by mu
	handlers []http.HandlerFunc
}

func newFake(t *testing.T, handlers ...http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{handlers: handlers}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		i := min(len(f.reqs), len(f.handlers)) - 1
		f.mu.Unlock()
		f.handlers[i](w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// reply answers status with a JSON body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_1")
		w.Header().Set("x-request-id", "req_1")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func testConfig(url string) Config {
	return Config{
		BaseURL: url,
		Model:   "test-model",
		Key:     EnvKey{Name: "TEST_KEY", Lookup: testEnv},
		Timeout: 5 * time.Second,
		Backoff: time.Millisecond,
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("server got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("server got\n%s\nwant\n%s", got, want)
	}
}

// roundTrip is the conversation of the tool-use tests: a request with a
// tool, the model's tool_use, then the tool_result.
func roundTrip() (first, second Request) {
	tools := []Tool{{Name: "read_file", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}}
	user := Message{Role: "user", Content: []Block{{Type: "text", Text: "What is in a.txt?"}}}
	first = Request{System: "Be brief.", Messages: []Message{user}, Tools: tools, MaxTokens: 100}
	second = first
	second.Messages = []Message{
		user,
		{Role: "assistant", Content: []Block{{Type: "text", Text: "Reading."}, {Type: "tool_use", ID: "toolu_1", Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)}}},
		{Role: "user", Content: []Block{{Type: "tool_result", ToolUseID: "toolu_1", Text: "hello"}}},
	}
	return first, second
}
