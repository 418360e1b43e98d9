package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cordon-dev/cordon/grant"
)

// TestWithoutMemoryLimit: the rootless default grant set is the embedded
// one less its memory limit, and nothing else changes.
func TestWithoutMemoryLimit(t *testing.T) {
	b, err := withoutMemoryLimit(defaultExecGrants)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := grant.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Limits.MemoryBytes != nil || gs.Limits.PIDs == nil || gs.Limits.WallMS == nil {
		t.Fatalf("limits of the rootless default grant set: %+v", gs.Limits)
	}
	var got, want map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(defaultExecGrants, &want); err != nil {
		t.Fatal(err)
	}
	delete(want["limits"].(map[string]any), "memory_bytes")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the rootless default grant set differs in more than its memory limit:\n got %v\nwant %v", got, want)
	}
}

// TestDefaultStateDir: root's default state directory is /var/lib/cordon;
// another user's $XDG_STATE_HOME/cordon, else ~/.local/state/cordon.
func TestDefaultStateDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, tc := range []struct {
		euid      int
		xdg, want string
	}{
		{0, "/x", "/var/lib/cordon"},
		{1000, "", filepath.Join(home, ".local/state/cordon")},
		{1000, "/srv/state", "/srv/state/cordon"},
		{1000, "relative", filepath.Join(home, ".local/state/cordon")},
	} {
		t.Setenv("XDG_STATE_HOME", tc.xdg)
		if got, err := defaultStateDir(tc.euid); err != nil || got != tc.want {
			t.Errorf("defaultStateDir(%d) with XDG_STATE_HOME=%q = %q, %v; want %q", tc.euid, tc.xdg, got, err, tc.want)
		}
	}
}
