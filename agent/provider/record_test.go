package provider

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
)

// scripted answers from a list, then fails.
type scripted struct{ resps []*Response }

func (s *scripted) Name() string { return "scripted" }
func (s *scripted) Complete(ctx context.Context, req Request) (*Response, error) {
	if len(s.resps) == 0 {
		return nil, errors.New("scripted: no more")
	}
	r := s.resps[0]
	s.resps = s.resps[1:]
	return r, nil
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestRecordReplays: a recorded session replays response for response;
// a failed call is not recorded; a response that cannot be written fails
// its call.
func TestRecordReplays(t *testing.T) {
	want := []*Response{
		{Content: []Block{{Type: "text", Text: "hi"}, {Type: "tool_use", ID: "t1", Name: "run", Input: []byte(`{"argv":["true"]}`)}},
			StopReason: "tool_use", Usage: Usage{InputTokens: 10, OutputTokens: 5, Reported: true}, Model: "m", RequestID: "req-1", Attempts: 2},
		{Content: []Block{{Type: "text", Text: "done"}}, StopReason: "end_turn", Usage: Usage{InputTokens: 20, OutputTokens: 1, Reported: true}, Attempts: 1},
	}
	var buf bytes.Buffer
	rec := Record(&scripted{resps: append([]*Response(nil), want...)}, &buf)
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: []Block{{Type: "text", Text: "go"}}}}}
	for range want {
		if _, err := rec.Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.Complete(t.Context(), req); err == nil {
		t.Fatal("the exhausted provider's failure was not passed on")
	}
	p, err := NewReplayData("recorded", buf.Bytes())
	if err != nil {
		t.Fatalf("the recording does not parse as a replay: %v\n%s", err, buf.Bytes())
	}
	for i, w := range want {
		got, err := p.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("response %d: replayed %+v, recorded %+v", i, got, w)
		}
	}
	if _, err := p.Complete(t.Context(), req); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a failed call was recorded: %v", err)
	}
	bad := Record(&scripted{resps: want[:1]}, failWriter{})
	if _, err := bad.Complete(t.Context(), req); err == nil {
		t.Fatal("a response that could not be recorded was returned")
	}
}
