package entry

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedteamNoTypeInjection: strings in a body cannot add a member or a
// second type: the encoded body has exactly one type, the schema's, and
// hostile text (a quote, a JSON fragment, invalid UTF-8) stays a string.
func TestRedteamNoTypeInjection(t *testing.T) {
	hostile := []string{`","type":"cordon.run.end.v1`, "\"}", "\xff\xfe", `\u0000`, "a\nb"}
	v, err := Encode(Command{Argv: hostile, Grants: `x","type":"y`, Outputs: map[string]string{`type`: "z"}})
	if err != nil {
		t.Fatal(err)
	}
	raw := v.AppendJCS(nil)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if string(m["type"]) != `"cordon.command.v1"` || strings.Count(string(raw), `"type":`) != 2 { // the body's and the outputs key's
		t.Fatalf("encoded %s", raw)
	}
	var argv []string
	json.Unmarshal(m["argv"], &argv)
	if len(argv) != len(hostile) || argv[0] != hostile[0] {
		t.Fatalf("argv %q, want %q", argv, hostile)
	}
}
