package entry

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// TestSpecTable: docs/SPEC.md §4.3.1 lists every entry type.
func TestSpecTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(b)
	seen := map[string]bool{}
	for _, e := range All() {
		if seen[e.Name()] {
			t.Errorf("%s listed twice in All", e.Name())
		}
		seen[e.Name()] = true
		if !strings.Contains(spec, "| `"+e.Name()+"` |") {
			t.Errorf("docs/SPEC.md §4.3.1 has no row for %q", e.Name())
		}
	}
}

// TestEncode: every body carries its schema type; no struct may carry a
// type member of its own, which would be a second, conflicting one.
func TestEncode(t *testing.T) {
	for _, e := range All() {
		if _, ok := e.(Decision); ok {
			continue
		}
		v, err := Encode(e)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		got, ok := v.Get("type")
		if !ok || got.Str() != "cordon."+e.Name()+".v1" {
			t.Errorf("%s: type %v", e.Name(), got)
		}
	}
	v, err := Encode(Command{Argv: []string{"true"}, Grants: "b3:x", Outputs: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(v.AppendJCS(nil)); got != `{"argv":["true"],"grants":"b3:x","outputs":{},"type":"cordon.command.v1"}` {
		t.Fatalf("command %s", got)
	}
	// A decision is its record, as written.
	rec := `{"grants":"b3:g","outcome":"deny","query":{"kind":"env","name":"X"},"reason":"r","rule":"default","type":"cordon.decision.v1"}`
	v, err = Encode(Decision{Record: json.RawMessage(rec)})
	if err != nil || string(v.AppendJCS(nil)) != rec {
		t.Fatalf("decision %s, %v", v.AppendJCS(nil), err)
	}
	// A record that is not canonical JSON is refused, not repaired.
	if _, err := Encode(Decision{Record: json.RawMessage(`{"a":1.5}`)}); err == nil {
		t.Fatal("a float in a decision record was accepted")
	}
	var _ canon.Value = v
}
