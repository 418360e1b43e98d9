package server

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-dev/cordon/agent/manifest"
)

// TestRunChangeReadsOnlyRegularOutputs: the change of a run is its
// declared outputs that differ from the snapshot; an output the review
// cannot read as a regular file (a symbolic link, a FIFO, a directory, a
// file over the limit) is an error, never an empty or partial change.
func TestRunChangeReadsOnlyRegularOutputs(t *testing.T) {
	m := &manifest.Manifest{Outputs: []string{"new.txt", "same.txt", "gone.txt", "edit.txt", "never.txt"}}
	inputs := map[string]string{"same.txt": "s\n", "gone.txt": "g\n", "edit.txt": "a\n", "undeclared.txt": "u\n"}
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "new.txt"), []byte(""), 0o600)
	os.WriteFile(filepath.Join(ws, "same.txt"), []byte("s\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "edit.txt"), []byte("a\nb\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "undeclared.txt"), []byte("changed, but not an output\n"), 0o600)
	change, err := runChange(ws, m, inputs)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, f := range change {
		got = append(got, f.Path)
		switch f.Path {
		case "new.txt":
			if f.Old != nil || f.New == nil || len(f.New) != 0 {
				t.Errorf("created empty file: old %q new %q", f.Old, f.New)
			}
		case "gone.txt":
			if string(f.Old) != "g\n" || f.New != nil {
				t.Errorf("deleted file: old %q new %q", f.Old, f.New)
			}
		case "edit.txt":
			if string(f.Old) != "a\n" || string(f.New) != "a\nb\n" {
				t.Errorf("edited file: old %q new %q", f.Old, f.New)
			}
		}
	}
	if strings.Join(got, ",") != "new.txt,gone.txt,edit.txt" {
		t.Fatalf("change %v, want new.txt, gone.txt and edit.txt", got)
	}

	for name, plant := range map[string]func(p string) error{
		"symbolic link": func(p string) error { return os.Symlink("/etc/passwd", p) },
		"fifo":          func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"directory":     func(p string) error { return os.Mkdir(p, 0o700) },
		"oversized": func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(MaxOutputReview + 1)
		},
	} {
		ws := t.TempDir()
		if err := plant(filepath.Join(ws, "out")); err != nil {
			t.Fatal(err)
		}
		if c, err := runChange(ws, &manifest.Manifest{Outputs: []string{"out"}}, nil); err == nil {
			t.Errorf("%s: read as change %v", name, c)
		}
	}
	// Outputs under the limit one by one, over it together.
	ws = t.TempDir()
	var outs []string
	for i := range MaxChangeReview/MaxOutputReview + 1 {
		name := filepath.Join(ws, "big"+string(rune('a'+i)))
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, MaxOutputReview); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, filepath.Base(name))
	}
	if _, err := runChange(ws, &manifest.Manifest{Outputs: outs}, nil); err == nil || !strings.Contains(err.Error(), "together") {
		t.Errorf("outputs over the total limit: %v", err)
	}
	// An output beneath a symbolic link to outside the workspace is not
	// followed.
	ws = t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x"), []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(ws, "d"))
	if c, err := runChange(ws, &manifest.Manifest{Outputs: []string{"d/x"}}, nil); err == nil {
		t.Errorf("followed a symbolic link out of the workspace: %v", c)
	}
}
