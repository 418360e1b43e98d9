package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/examples"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/tier"
)

// demoAgent runs the fix-test example (examples/fix-test) with --apply in
// a copy under dir, signs it with key, and verifies the record as a third
// party would, against the public key. Where the host lacks the sandbox
// the run is a dry run, and the demo says so.
func demoAgent(w io.Writer, dir string, keep bool, key *sign.PrivateKey) error {
	ws, err := filepath.Abs(filepath.Join(dir, "fix-test"))
	if err != nil {
		return err
	}
	if err := copyEmbedded(examples.FixTest, "fix-test", ws); err != nil {
		return fmt.Errorf("agent demo: %w", err)
	}
	apply := sandbox.Probe(tier.S2) == nil
	mode := "--apply"
	if !apply {
		mode = "a dry run: this host cannot provide the sandbox, so nothing is applied"
	} else if err := sandbox.CgroupLimits(); err != nil {
		// The example's manifest limits memory, which a run without a
		// cgroup cannot enforce: its commands would be refused.
		apply = false
		mode = "a dry run: rootless without cgroup limits (" + err.Error() + "), the example's memory limit cannot be enforced, so nothing is applied"
	}
	fmt.Fprintf(w, "an agent run (examples/fix-test, a recorded model session, %s):\n", mode)
	mb, err := os.ReadFile(filepath.Join(ws, "manifest.json"))
	if err != nil {
		return err
	}
	m, err := manifest.Parse(mb)
	if err != nil {
		return fmt.Errorf("agent demo: %w", err)
	}
	p, err := newProvider(m, ws, "")
	if err != nil {
		return fmt.Errorf("agent demo: %w", err)
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	var log strings.Builder
	out, err := runner.Run(context.Background(), runner.Config{
		Workspace: ws, Manifest: m, Provider: p, Apply: apply, Key: key, SandboxState: state,
		Memory: memory.Options{}, Log: &log, Version: version,
	})
	if err != nil {
		return fmt.Errorf("agent demo: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if apply && out.Status != runner.StatusVerified {
		return fmt.Errorf("agent demo: the run ended %s, not verified", out.Status)
	}
	pub := key.Public()
	rep := runrecord.Verify(ws, &pub)
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  verify %s %-12s %s\n", mark, c.Name, c.Detail)
	}
	if rep.Failed() {
		return fmt.Errorf("agent demo: the run's record does not verify")
	}
	if keep {
		fmt.Fprintf(w, "  workspace  %s ('cordon verify run --pubkey KEY.pub %s' checks it again; 'cordon mail %s' shows its mailbox)\n", ws, ws, ws)
	} else {
		fmt.Fprintln(w, "  workspace  removed on exit; 'cordon demo --out DIR' keeps it for 'cordon verify run'")
	}
	return nil
}

// copyEmbedded copies the tree root of fsys to dst.
func copyEmbedded(fsys fs.FS, root, dst string) error {
	return fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.FromSlash(p))
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
