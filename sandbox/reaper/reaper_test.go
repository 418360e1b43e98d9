package reaper

import (
	"regexp"
	"strings"
	"testing"
)

func TestNameRoundTrip(t *testing.T) {
	r := &Run{Instance: InstanceID("/var/lib/cordon"), ID: "0123456789abcdef", Tenant: "alice", Started: 1700000000,
		Owner: Owner{PID: 4242, Start: 987654, Boot: "b"}}
	if err := r.check(); err != nil {
		t.Fatal(err)
	}
	id, started, pid, ticks, ok := parseName(r.Name())
	if !ok || id != r.ID || started != r.Started || pid != r.Owner.PID || ticks != r.Owner.Start {
		t.Fatalf("parseName(%q) = %v %v %v %v %v", r.Name(), id, started, pid, ticks, ok)
	}
	if g := r.Group(); g != "cordon/"+r.Instance+"/alice/"+r.Name() {
		t.Errorf("Group() = %q", g)
	}
	for _, bad := range []string{"", "x", "a-1-2", "a-1-2-3-4", "a-01-2-3", "a-1-2-0", "a-0-2-3", "a-1--2-3", "a.b-1-2-3", "a-1-2-3x"} {
		if _, _, _, _, ok := parseName(bad); ok {
			t.Errorf("parseName(%q) accepted", bad)
		}
	}
}

func TestInstanceID(t *testing.T) {
	a, b := InstanceID("/var/lib/cordon"), InstanceID("/var/lib/cordon2")
	if a == b || a != InstanceID("/var/lib/cordon") || !validInst(a) || !validInst(b) {
		t.Errorf("instances %q %q", a, b)
	}
}

// The byte-by-byte checks accept exactly what the regular expressions
// they replaced accept.
func TestValidFormsMatchRegexps(t *testing.T) {
	forms := []struct {
		name string
		f    func(string) bool
		re   *regexp.Regexp
	}{
		{"validID", validID, regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)},
		{"validTenant", validTenant, regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)},
		{"validInst", validInst, regexp.MustCompile(`^[0-9a-f]{12}$`)},
	}
	inputs := []string{"", "a", "A_9", "-a", "a-", "a b", "a\n", "0123456789ab", "0123456789aB", "0123456789abc",
		"0123456789a", "é", "a.b", "a/b", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 65),
		"_" + strings.Repeat("-", 63), "_" + strings.Repeat("-", 64), "a\x00"}
	for _, fm := range forms {
		for _, in := range inputs {
			if got, want := fm.f(in), fm.re.MatchString(in); got != want {
				t.Errorf("%s(%q) = %v, the regexp says %v", fm.name, in, got, want)
			}
		}
	}
}
