package tier

import "testing"

func TestParse(t *testing.T) {
	for _, tr := range All {
		if got, err := Parse(tr.String()); err != nil || got != tr {
			t.Errorf("Parse(%s) = %v, %v", tr, got, err)
		}
	}
	for _, bad := range []string{"", "S7", "s2", "S-1", "2", " S2"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
