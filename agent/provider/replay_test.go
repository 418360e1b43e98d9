package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const replayLines = `{"content":[{"type":"tool_use","id":"t1","name":"read","input":{"path":"a"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5,"reported":true},"model":"m"}

{"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":2,"reported":true},"model":"m"}
`

func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "replay.jsonl")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReplayInOrderThenExhausted(t *testing.T) {
	for name, file := range map[string]string{
		"lines": replayLines,
		"array": `[` + `{"content":[{"type":"tool_use","id":"t1","name":"read","input":{"path":"a"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5,"reported":true},"model":"m"},
			{"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":2,"reported":true},"model":"m"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			want := []*Response{
				{Content: []Block{{Type: "tool_use", ID: "t1", Name: "read", Input: json.RawMessage(`{"path":"a"}`)}}, StopReason: "tool_use", Usage: Usage{10, 5, true}, Model: "m", Attempts: 1},
				{Content: []Block{{Type: "text", Text: "done"}}, StopReason: "end_turn", Usage: Usage{20, 2, true}, Model: "m", Attempts: 1},
			}
			// Two providers from one file play identically.
			for range 2 {
				p, err := NewReplay(writeFile(t, file))
				if err != nil {
					t.Fatal(err)
				}
				for i, w := range want {
					got, err := p.Complete(context.Background(), hello())
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, w) {
						t.Errorf("Complete %d = %+v, want %+v", i, got, w)
					}
					got.Content[0].Text = "mutated" // must not affect the recording
				}
				if _, err := p.Complete(context.Background(), hello()); !errors.Is(err, ErrExhausted) {
					t.Errorf("Complete after the end = %v, want ErrExhausted", err)
				}
			}
		})
	}
}

func TestReplayMalformed(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"empty", ""},
		{"only blank lines", "\n\n"},
		{"not JSON", "hello\n"},
		{"truncated line", `{"content":[`},
		{"unknown field", `{"content":[],"stop_reason":"end_turn","usage":{"reported":false},"extra":1}`},
		{"no content", `{"stop_reason":"end_turn","usage":{}}`},
		{"unknown stop reason", `{"content":[],"stop_reason":"eject","usage":{}}`},
		{"tool_use bad input", `{"content":[{"type":"tool_use","id":"a","name":"f","input":[]}],"stop_reason":"tool_use","usage":{}}`},
		{"duplicate tool ids", `{"content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"a","name":"f","input":{}}],"stop_reason":"tool_use","usage":{}}`},
		{"tool_result", `{"content":[{"type":"tool_result","tool_use_id":"a"}],"stop_reason":"end_turn","usage":{}}`},
		{"unreported counts", `{"content":[],"stop_reason":"end_turn","usage":{"input_tokens":3}}`},
		{"duplicate keys", `{"content":[],"content":[],"stop_reason":"end_turn","usage":{}}`},
		{"array of junk", `[1]`},
		{"second line bad", replayLines + "{}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewReplay(writeFile(t, tc.file)); !errors.Is(err, ErrMalformed) {
				t.Errorf("NewReplay(%q) = %v, want ErrMalformed", tc.file, err)
			}
		})
	}
	if _, err := NewReplay(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("NewReplay(missing) = %v, want ErrNotExist", err)
	}
}

// TestReplaySkip: a resumed run's replay continues after the responses
// already played, through a recording too; a skip past the end, or after
// a response was played, is refused.
func TestReplaySkip(t *testing.T) {
	line := `{"content":[{"type":"text","text":"%d"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1,"reported":true}}` + "\n"
	data := []byte(fmt.Sprintf(line, 0) + fmt.Sprintf(line, 1) + fmt.Sprintf(line, 2))
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: []Block{{Type: "text", Text: "x"}}}}}
	p, err := NewReplayData("r", data)
	if err != nil {
		t.Fatal(err)
	}
	var rec bytes.Buffer
	rp := Record(p, &rec).(interface{ Skip(int) error })
	if err := rp.Skip(2); err != nil {
		t.Fatal(err)
	}
	resp, err := p.Complete(context.Background(), req)
	if err != nil || resp.Content[0].Text != "2" {
		t.Fatalf("after skipping 2: %v %v", resp, err)
	}
	if err := p.(interface{ Skip(int) error }).Skip(1); err == nil {
		t.Fatal("a skip after a response was played")
	}
	q, _ := NewReplayData("r", data)
	if err := q.(interface{ Skip(int) error }).Skip(4); err == nil {
		t.Fatal("a skip past the end")
	}
}
