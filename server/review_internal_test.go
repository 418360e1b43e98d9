package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/risk"
	"github.com/cordon-dev/cordon/store"
)

// TestReviewFailsPastItsDeadline: a change that cannot be classified
// within classifyTimeout fails its run (fail closed), and one that can is
// tiered.
func TestReviewFailsPastItsDeadline(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	s, err := New(Config{Store: st, AdminKey: "0123456789abcdef0123456789abcdef", StateDir: dir, Key: k, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSetting(ctx, riskPolicySetting, []byte(`{"approvals":{"low":1,"medium":1,"high":2},"rules":[{"tier":"high","added_lines":["curl"]}]}`)); err != nil {
		t.Fatal(err)
	}
	change := []risk.File{{Path: "a", New: []byte(strings.Repeat("x\n", 1<<16) + "curl\n")}}
	out := s.review(ctx, store.Outcome{State: store.StateFinished, Change: change})
	if out.State != store.StateFinished || out.Review == nil || out.Review.Tier != risk.High {
		t.Fatalf("control: %+v", out)
	}
	defer func(d time.Duration) { classifyTimeout = d }(classifyTimeout)
	classifyTimeout = 0
	out = s.review(ctx, store.Outcome{State: store.StateFinished, Change: change})
	if out.State != store.StateFailed || out.Review != nil || !strings.Contains(out.Reason, "cannot be reviewed") || !strings.Contains(out.Reason, "deadline") {
		t.Fatalf("a classification past its deadline: %+v", out)
	}
}

// TestReadOutputRefusesEveryLink: a link in any component of an output's
// path, at any depth, and a parent that is not a directory, fail the
// review; a missing parent is a deleted output.
func TestReadOutputRefusesEveryLink(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "a", "real", "deep"), 0o700)
	os.WriteFile(filepath.Join(ws, "a", "real", "deep", "f"), []byte("x\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "file"), []byte("x\n"), 0o600)
	if err := os.Symlink("real", filepath.Join(ws, "a", "link")); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"a/link/deep/f", "file/f"} {
		if c, err := runChange(ws, &manifest.Manifest{Outputs: []string{out}}, nil); err == nil {
			t.Errorf("%s: read as %v", out, c)
		}
	}
	c, err := runChange(ws, &manifest.Manifest{Outputs: []string{"a/real/deep/f", "gone/f"}}, map[string]string{"gone/f": "g\n"})
	if err != nil || len(c) != 2 || c[0].Path != "a/real/deep/f" || string(c[0].New) != "x\n" || c[1].Path != "gone/f" || c[1].New != nil {
		t.Fatalf("control: %+v %v", c, err)
	}
}
