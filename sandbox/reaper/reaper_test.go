package reaper

import "testing"

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
	if a == b || a != InstanceID("/var/lib/cordon") || !validInst.MatchString(a) || !validInst.MatchString(b) {
		t.Errorf("instances %q %q", a, b)
	}
}
