package provider

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const anthropicToolUse = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.txt"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":7,"cache_read_input_tokens":0},"new_field":1}`

const anthropicText = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"It says hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":5}}`

func TestAnthropicToolRoundTrip(t *testing.T) {
	f := newFake(t, reply(200, anthropicToolUse), reply(200, anthropicText))
	p, err := NewAnthropic(testConfig(f.URL))
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
			{Type: "tool_use", ID: "toolu_1", Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)},
		},
		StopReason: "tool_use",
		Usage:      Usage{InputTokens: 12, OutputTokens: 7, Reported: true},
		Model:      "claude-x",
		RequestID:  "req_1",
		Attempts:   1,
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("Complete = %+v, want %+v", resp, want)
	}
	resp, err = p.Complete(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != "end_turn" || resp.Content[0].Text != "It says hello." || resp.Usage.InputTokens != 30 {
		t.Errorf("second Complete = %+v", resp)
	}

	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("server got %d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.Path != "/v1/messages" {
			t.Errorf("path %q, want /v1/messages", r.Path)
		}
		for h, v := range map[string]string{"X-Api-Key": testKey, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json", "Authorization": ""} {
			if got := r.Header.Get(h); got != v {
				t.Errorf("header %s = %q, want %q", h, got, v)
			}
		}
	}
	tools := `[{"name":"read_file","description":"Read a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`
	jsonEqual(t, reqs[0].Body, `{"model":"test-model","max_tokens":100,"system":"Be brief.","tools":`+tools+`,
		"messages":[{"role":"user","content":[{"type":"text","text":"What is in a.txt?"}]}]}`)
	jsonEqual(t, reqs[1].Body, `{"model":"test-model","max_tokens":100,"system":"Be brief.","tools":`+tools+`,
		"messages":[
		{"role":"user","content":[{"type":"text","text":"What is in a.txt?"}]},
		{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.txt"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"hello"}]}]}`)
}

func TestAnthropicToolResultError(t *testing.T) {
	_, second := roundTrip()
	second.Messages[2].Content[0].IsError = true
	b, err := encodeAnthropic(second, "m")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `{"type":"tool_result","tool_use_id":"toolu_1","content":"hello","is_error":true}`) {
		t.Errorf("encodeAnthropic = %s, want an is_error tool_result", b)
	}
}

func TestParseAnthropicHostile(t *testing.T) {
	const head = `{"type":"message","role":"assistant","model":"m","usage":{"input_tokens":1,"output_tokens":1},`
	for _, tc := range []struct {
		name, body string
	}{
		{"malformed JSON", `{"type":"message",`},
		{"not an object", `[1,2]`},
		{"trailing data", anthropicText + `{}`},
		{"invalid UTF-8", head + `"content":[{"type":"text","text":"` + "\xff" + `"}],"stop_reason":"end_turn"}`},
		{"duplicate top-level key", head + `"content":[],"content":[],"stop_reason":"end_turn"}`},
		{"wrong type", `{"type":"error","role":"assistant","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`},
		{"no content", head + `"stop_reason":"end_turn"}`},
		{"null content", head + `"content":null,"stop_reason":"end_turn"}`},
		{"no stop reason", head + `"content":[]}`},
		{"unknown stop reason", head + `"content":[],"stop_reason":"eject"}`},
		{"no usage", `{"type":"message","role":"assistant","content":[],"stop_reason":"end_turn"}`},
		{"partial usage", `{"type":"message","role":"assistant","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1}}`},
		{"negative usage", `{"type":"message","role":"assistant","content":[],"stop_reason":"end_turn","usage":{"input_tokens":-1,"output_tokens":1}}`},
		{"text without text", head + `"content":[{"type":"text"}],"stop_reason":"end_turn"}`},
		{"text not a string", head + `"content":[{"type":"text","text":5}],"stop_reason":"end_turn"}`},
		{"unknown block type", head + `"content":[{"type":"thinking","thinking":"hm"}],"stop_reason":"end_turn"}`},
		{"tool_use without id", head + `"content":[{"type":"tool_use","name":"f","input":{}}],"stop_reason":"tool_use"}`},
		{"tool_use empty id", head + `"content":[{"type":"tool_use","id":"","name":"f","input":{}}],"stop_reason":"tool_use"}`},
		{"tool_use without name", head + `"content":[{"type":"tool_use","id":"a","input":{}}],"stop_reason":"tool_use"}`},
		{"tool_use without input", head + `"content":[{"type":"tool_use","id":"a","name":"f"}],"stop_reason":"tool_use"}`},
		{"tool_use string input", head + `"content":[{"type":"tool_use","id":"a","name":"f","input":"{}"}],"stop_reason":"tool_use"}`},
		{"tool_use array input", head + `"content":[{"type":"tool_use","id":"a","name":"f","input":[1]}],"stop_reason":"tool_use"}`},
		{"tool_use null input", head + `"content":[{"type":"tool_use","id":"a","name":"f","input":null}],"stop_reason":"tool_use"}`},
		{"tool_use duplicate input key", head + `"content":[{"type":"tool_use","id":"a","name":"f","input":{"p":"safe","p":"/etc/shadow"}}],"stop_reason":"tool_use"}`},
		{"nested duplicate input key", head + `"content":[{"type":"tool_use","id":"a","name":"f","input":{"o":[{"p":1,"p":2}]}}],"stop_reason":"tool_use"}`},
		{"duplicate tool ids", head + `"content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"a","name":"g","input":{}}],"stop_reason":"tool_use"}`},
		{"tool_use with end_turn", head + `"content":[{"type":"tool_use","id":"a","name":"f","input":{}}],"stop_reason":"end_turn"}`},
		{"tool_use stop without tools", head + `"content":[{"type":"text","text":"x"}],"stop_reason":"tool_use"}`},
		{"tool_result from the model", head + `"content":[{"type":"tool_result","tool_use_id":"a","content":"x"}],"stop_reason":"end_turn"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseAnthropic([]byte(tc.body))
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("parseAnthropic(%s) = %+v, %v; want ErrMalformed", tc.body, r, err)
			}
		})
	}
}

func TestAnthropicRequestValidation(t *testing.T) {
	p, err := NewAnthropic(testConfig("http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	good := Message{Role: "user", Content: []Block{{Type: "text", Text: "hi"}}}
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"no messages", Request{}},
		{"bad role", Request{Messages: []Message{{Role: "system", Content: good.Content}}}},
		{"tool_use from user", Request{Messages: []Message{{Role: "user", Content: []Block{{Type: "tool_use", ID: "a", Name: "f", Input: json.RawMessage(`{}`)}}}}}},
		{"tool_use bad input", Request{Messages: []Message{good, {Role: "assistant", Content: []Block{{Type: "tool_use", ID: "a", Name: "f", Input: json.RawMessage(`[]`)}}}}}},
		{"tool_result without id", Request{Messages: []Message{{Role: "user", Content: []Block{{Type: "tool_result", Text: "x"}}}}}},
		{"bad tool name", Request{Messages: []Message{good}, Tools: []Tool{{Name: "a b", InputSchema: json.RawMessage(`{}`)}}}},
		{"duplicate tool", Request{Messages: []Message{good}, Tools: []Tool{{Name: "a", InputSchema: json.RawMessage(`{}`)}, {Name: "a", InputSchema: json.RawMessage(`{}`)}}}},
		{"tool without schema", Request{Messages: []Message{good}, Tools: []Tool{{Name: "a"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.Complete(context.Background(), tc.req); !errors.Is(err, ErrMalformed) {
				t.Errorf("Complete = %v, want ErrMalformed", err)
			}
		})
	}
}
