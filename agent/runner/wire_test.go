package runner

// The runner against the real provider clients and local servers that
// speak each wire format: the conversation the runner builds (tool_use
// answered by tool_result, across turns) must be what each API accepts.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-dev/cordon/agent/provider"
)

const wireKey = "sk-wire-SECRET-42"

// wireModel is a local "model": turn 1 reads the input, turn 2 writes what
// it read to the output, turn 3 finishes. It checks each request's shape
// and what the previous tool result said.
type wireModel struct {
	t        *testing.T
	openai   bool
	mu       sync.Mutex
	requests int
}

func (m *wireModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.requests++
	n := m.requests
	m.mu.Unlock()
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		Messages []map[string]any  `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	auth := r.Header.Get("x-api-key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if auth != wireKey {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	if len(req.Tools) != 6 {
		m.t.Errorf("request %d offers %d tools, want 6", n, len(req.Tools))
	}
	last := fmt.Sprint(req.Messages[len(req.Messages)-1])
	w.Header().Set("Content-Type", "application/json")
	var call, input, text string
	switch n {
	case 1:
		call, input = "read", `{"path":"in"}`
	case 2:
		if !strings.Contains(last, "the input") || (m.openai && !strings.Contains(last, "role:tool")) || (!m.openai && !strings.Contains(last, "tool_result")) {
			m.t.Errorf("request 2 does not carry the read's result: %s", last)
		}
		call, input = "write", `{"path":"out.txt","content":"copied: the input"}`
	case 3:
		if !strings.Contains(last, "wrote out.txt") {
			m.t.Errorf("request 3 does not carry the write's result: %s", last)
		}
		text = "done"
	default:
		http.Error(w, "too many turns", http.StatusInternalServerError)
		return
	}
	if m.openai {
		msg := map[string]any{"role": "assistant", "content": text}
		finish := "stop"
		if call != "" {
			msg["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_%d", n), "type": "function",
				"function": map[string]any{"name": call, "arguments": input}}}
			finish = "tool_calls"
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10}})
		return
	}
	content := []any{map[string]any{"type": "text", "text": "thinking " + text}}
	stop := "end_turn"
	if call != "" {
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": call, "input": json.RawMessage(input)})
		stop = "tool_use"
	}
	json.NewEncoder(w).Encode(map[string]any{"type": "message", "role": "assistant", "model": "m", "content": content,
		"stop_reason": stop, "usage": map[string]any{"input_tokens": 100, "output_tokens": 10}})
}

func TestWireFormatsEndToEnd(t *testing.T) {
	for _, name := range []string{"anthropic", "openai"} {
		t.Run(name, func(t *testing.T) {
			model := &wireModel{t: t, openai: name == "openai"}
			srv := httptest.NewServer(model)
			defer srv.Close()
			env := func(k string) (string, bool) { return wireKey, k == "WIRE_KEY" }
			var p provider.Provider
			var err error
			if name == "openai" {
				p, err = provider.NewOpenAI(provider.Config{BaseURL: srv.URL + "/v1", Model: "m", Key: provider.EnvKey{Name: "WIRE_KEY", Lookup: env}})
			} else {
				p, err = provider.NewAnthropic(provider.Config{BaseURL: srv.URL, Model: "m", Key: provider.EnvKey{Name: "WIRE_KEY", Lookup: env}})
			}
			if err != nil {
				t.Fatal(err)
			}
			ws := newWorkspace(t, defaultFiles())
			out, err := runScript(t, ws, baseManifest(t, nil), nil, runOpts{apply: true, cfg: func(c *Config) { c.Provider = p }})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != StatusFinished || model.requests != 3 || out.Body.InputTokens != 300 || out.Body.Summary != "done" && out.Body.Summary != "thinking done" {
				t.Fatalf("status %s after %d requests, body %+v", out.Status, model.requests, out.Body)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "copied: the input" {
				t.Fatalf("out.txt = %q", b)
			}
			filepath.Walk(filepath.Join(ws, StateDir), func(p string, fi os.FileInfo, err error) error {
				if b, _ := os.ReadFile(p); err == nil && !fi.IsDir() && strings.Contains(string(b), wireKey) {
					t.Errorf("%s holds the key", p)
				}
				return nil
			})
			mustVerify(t, ws)
		})
	}
}
