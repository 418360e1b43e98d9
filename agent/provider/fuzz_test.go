package provider

import (
	"testing"
)

// checkParsed requires that a successful parse satisfies the package's
// response invariants.
func checkParsed(t *testing.T, r *Response, err error) {
	if err != nil {
		return
	}
	if verr := validateResponse(r); verr != nil {
		t.Fatalf("parser accepted a response that fails validation: %v", verr)
	}
}

func FuzzParseAnthropic(f *testing.F) {
	for _, s := range []string{anthropicToolUse, anthropicText, `{}`, `[]`, `{"content":[{"type":"tool_use"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseAnthropic(b)
		checkParsed(t, r, err)
	})
}

func FuzzParseOpenAI(f *testing.F) {
	for _, s := range []string{openAIToolCall, openAIText, `{"choices":[]}`, `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":{}}"}}]},"finish_reason":"stop"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseOpenAI(b)
		checkParsed(t, r, err)
	})
}

func FuzzParseReplay(f *testing.F) {
	f.Add([]byte(replayLines))
	f.Add([]byte(`[{"content":[],"stop_reason":"end_turn","usage":{}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseReplay(b)
	})
}

func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":1}]}}`, `[{},{}]`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkJSON(b)
	})
}

func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"a":"b","b":1}`, true},
		{`{"a":{"a":1},"b":[{"a":1},{"a":1}]}`, true},
		{`{"a":[],"b":{},"c":null}`, true},
		{`[{"a":1,"b":2},{"a":1,"b":2}]`, true},
		{`{"a":1,"a":1}`, false},
		{`{"a":{"x":1},"a":2}`, false},
		{`{"a":[{"b":{"c":1,"c":2}}]}`, false},
		{`{"\u0061":1,"a":2}`, false},
		{`{} {}`, false},
		{`{"a":1`, false},
		{"\"\xff\"", false},
	} {
		if err := checkJSON([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("checkJSON(%s) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
