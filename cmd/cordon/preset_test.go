package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// TestPresetsAreValidGrantSets: every preset, in its Debian form, is a
// valid single-tenant untrusted grant set (S2) with limits, names no
// host path beneath /tmp, and makes nothing writable on the host.
func TestPresetsAreValidGrantSets(t *testing.T) {
	for _, name := range presetNames {
		p, err := buildPreset(context.Background(), name, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := json.Marshal(p.set)
		if err != nil {
			t.Fatal(err)
		}
		gs, err := grant.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
		if r := selection.Required(gs); r != tier.S2 {
			t.Errorf("%s requires %s, want S2", name, r)
		}
		if gs.Limits.WallMS == nil || gs.Limits.MemoryBytes == nil || gs.Limits.PIDs == nil {
			t.Errorf("%s: limits %+v", name, gs.Limits)
		}
		for _, r := range gs.FS {
			if strings.HasPrefix(r.Path, "/tmp/") {
				t.Errorf("%s grants %s beneath /tmp", name, r.Path)
			}
			if r.Access&grant.Write != 0 && r.Path != "/work" && r.Path != "/tmp" {
				t.Errorf("%s grants a writable host path %s", name, r.Path)
			}
		}
	}
	if _, err := buildPreset(context.Background(), "cobol", false); err == nil {
		t.Errorf("an unknown toolchain was accepted")
	}
}

// TestHostToolsIgnoreTheCallersDirectory: --host runs the host's tools
// from "/" and without the variables that pick another toolchain, so
// that a checkout's rust-toolchain.toml (whose path names its own rustc)
// or a direnv-set RUSTUP_TOOLCHAIN cannot choose what cordon, as root,
// runs and grants (red team F8).
func TestHostToolsIgnoreTheCallersDirectory(t *testing.T) {
	bin := t.TempDir()
	tool := bin + "/cordon-test-tool"
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho \"dir=$(pwd) tc=${RUSTUP_TOOLCHAIN-unset} flags=${GOFLAGS-unset}\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("RUSTUP_TOOLCHAIN", "/checkout/tc")
	t.Setenv("GOFLAGS", "-toolexec=/checkout/x")
	t.Chdir(t.TempDir())
	got, err := hostTools{ctx: context.Background()}.out("cordon-test-tool")
	if err != nil {
		t.Fatal(err)
	}
	if want := "dir=/ tc=unset flags=unset"; got != want {
		t.Errorf("host tool saw %q, want %q", got, want)
	}
}
