package provider

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

const openAIToolCall = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"llama-x","system_fingerprint":"fp","choices":[{"index":0,"message":{"role":"assistant","content":"Reading.","refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"a.txt\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`

const openAIText = `{"id":"chatcmpl-2","object":"chat.completion","created":2,"model":"llama-x","choices":[{"index":0,"message":{"role":"assistant","content":"It says hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":5,"total_tokens":35}}`

func TestOpenAIToolRoundTrip(t *testing.T) {
	f := newFake(t, reply(200, openAIToolCall), reply(200, openAIText))
	p, err := NewOpenAI(testConfig(f.URL + "/v1"))
	if err != nil {
		t.Fatal(err)
	}
	first, second := roundTrip()
	resp, err := p.Complete(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{
		Content: []Block{
			{Type: "text", Text: "Reading."},
			{Type: "tool_use", ID: "call_1", Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)},
		},
		StopReason: "tool_use",
		Usage:      Usage{InputTokens: 12, OutputTokens: 7, Reported: true},
		Model:      "llama-x",
		RequestID:  "req_1",
		Attempts:   1,
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("Complete = %+v, want %+v", resp, want)
	}
	second.Messages[1].Content[1].ID = "call_1"
	second.Messages[2].Content[0].ToolUseID = "call_1"
	resp, err = p.Complete(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != "end_turn" || resp.Content[0].Text != "It says hello." || resp.Usage.OutputTokens != 5 {
		t.Errorf("second Complete = %+v", resp)
	}

	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("server got %d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.Path != "/v1/chat/completions" {
			t.Errorf("path %q, want /v1/chat/completions", r.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.Header.Get("X-Api-Key"); got != "" {
			t.Errorf("X-Api-Key = %q, want none", got)
		}
	}
	tools := `[{"type":"function","function":{"name":"read_file","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]`
	jsonEqual(t, reqs[0].Body, `{"model":"test-model","max_tokens":100,"tools":`+tools+`,
		"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is in a.txt?"}]}`)
	jsonEqual(t, reqs[1].Body, `{"model":"test-model","max_tokens":100,"tools":`+tools+`,
		"messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":"What is in a.txt?"},
		{"role":"assistant","content":"Reading.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"hello"}]}`)
}

func TestOpenAINoKey(t *testing.T) {
	f := newFake(t, reply(200, openAIText))
	cfg := testConfig(f.URL)
	cfg.Key = nil
	p, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := roundTrip()
	if _, err := p.Complete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestOpenAIEncodeErrorResultAndMultiText(t *testing.T) {
	req := Request{Messages: []Message{
		{Role: "user", Content: []Block{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}},
		{Role: "assistant", Content: []Block{{Type: "tool_use", ID: "c1", Name: "f", Input: json.RawMessage(`{ "x" : 1 }`)}}},
		{Role: "user", Content: []Block{{Type: "tool_result", ToolUseID: "c1", Text: "boom", IsError: true}, {Type: "text", Text: "go on"}}},
	}}
	b, err := encodeOpenAI(req, "m")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, b, `{"model":"m","max_tokens":4096,"messages":[
		{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"error: boom"},
		{"role":"user","content":"go on"}]}`)
}

func TestParseOpenAI(t *testing.T) {
	const msg = `{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`
	r, err := parseOpenAI([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != "tool_use" || r.Usage.Reported || len(r.Content) != 1 {
		t.Errorf("parseOpenAI(stop with tool_calls, no usage) = %+v, want tool_use, unreported usage", r)
	}
	r, err = parseOpenAI([]byte(`{"choices":[{"message":{"role":"assistant","content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`))
	if err != nil || r.StopReason != "max_tokens" || r.Usage != (Usage{1, 2, true}) {
		t.Errorf("parseOpenAI(length) = %+v, %v", r, err)
	}
}

func TestParseOpenAIHostile(t *testing.T) {
	call := func(c string) string {
		return `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[` + c + `]},"finish_reason":"tool_calls"}]}`
	}
	for _, tc := range []struct {
		name, body string
	}{
		{"malformed JSON", `{"choices":[`},
		{"not JSON", `<html>oops</html>`},
		{"empty choices", `{"choices":[]}`},
		{"no choices", `{"id":"x"}`},
		{"error object in 200", `{"error":{"message":"bad"}}`},
		{"two choices", `{"choices":[{"message":{"role":"assistant","content":"a"},"finish_reason":"stop"},{"message":{"role":"assistant","content":"b"},"finish_reason":"stop"}]}`},
		{"wrong object", `{"object":"list","choices":[{"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}]}`},
		{"no message", `{"choices":[{"finish_reason":"stop"}]}`},
		{"user message", `{"choices":[{"message":{"role":"user","content":"a"},"finish_reason":"stop"}]}`},
		{"no finish reason", `{"choices":[{"message":{"role":"assistant","content":"a"}}]}`},
		{"unknown finish reason", `{"choices":[{"message":{"role":"assistant","content":"a"},"finish_reason":"function_call"}]}`},
		{"content parts", `{"choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"a"}]},"finish_reason":"stop"}]}`},
		{"partial usage", `{"choices":[{"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`},
		{"negative usage", `{"choices":[{"message":{"role":"assistant","content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":-1,"completion_tokens":1}}`},
		{"arguments array", call(`{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}`)},
		{"arguments string", call(`{"id":"c","type":"function","function":{"name":"f","arguments":"\"x\""}}`)},
		{"arguments invalid", call(`{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":"}}`)},
		{"arguments empty", call(`{"id":"c","type":"function","function":{"name":"f","arguments":""}}`)},
		{"arguments object not string", call(`{"id":"c","type":"function","function":{"name":"f","arguments":{}}}`)},
		{"arguments duplicate keys", call(`{"id":"c","type":"function","function":{"name":"f","arguments":"{\"p\":1,\"p\":2}"}}`)},
		{"no id", call(`{"type":"function","function":{"name":"f","arguments":"{}"}}`)},
		{"empty id", call(`{"id":"","type":"function","function":{"name":"f","arguments":"{}"}}`)},
		{"no name", call(`{"id":"c","type":"function","function":{"arguments":"{}"}}`)},
		{"no function", call(`{"id":"c","type":"function"}`)},
		{"wrong type", call(`{"id":"c","type":"code","function":{"name":"f","arguments":"{}"}}`)},
		{"duplicate ids", call(`{"id":"c","function":{"name":"f","arguments":"{}"}},{"id":"c","function":{"name":"g","arguments":"{}"}}`)},
		{"tool_calls finish without calls", `{"choices":[{"message":{"role":"assistant","content":"a"},"finish_reason":"tool_calls"}]}`},
		{"tool calls with length", `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"length"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseOpenAI([]byte(tc.body))
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("parseOpenAI(%s) = %+v, %v; want ErrMalformed", tc.body, r, err)
			}
		})
	}
}
