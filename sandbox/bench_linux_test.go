package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/exechash"
	"github.com/cordon-dev/cordon/tier"
)

// benchSpec is the spec sandboxed builds for argv, without a workspace
// and with nil streams (/dev/null inside).
func benchSpec(b *testing.B, argv ...string) *Spec {
	b.Helper()
	if err := Probe(tier.S2); err != nil {
		b.Skip(err)
	}
	gs, err := grant.Parse([]byte(testGrants))
	if err != nil {
		b.Fatal(err)
	}
	s := &Spec{Argv: argv, Grants: gs, Tier: tier.S2, StateDir: b.TempDir(), Limits: DefaultLimits()}
	s.Limits.Wall = 30 * time.Second
	return s
}

// BenchmarkRunTrue is one whole sandboxed run of true through Run: exec
// planning, cgroup, namespaces, the re-executed init, the fresh root,
// Landlock, seccomp, the program, teardown. It is cordon exec's cold start
// less the CLI's own process start and exit, and with this process's
// executable hash cache warm after the first iteration (a CLI run starts
// with it empty). scripts/bench-sandbox measures the CLI against bare
// execution and bubblewrap.
func BenchmarkRunTrue(b *testing.B) {
	s := benchSpec(b, "true")
	for b.Loop() {
		res, err := Run(context.Background(), s)
		if err != nil {
			b.Fatal(err)
		}
		if res.ExitCode != 0 {
			b.Fatalf("exit %d", res.ExitCode)
		}
	}
}

// BenchmarkPlanExec is the exec planning Run does before anything starts:
// resolving every granted name, reading each allowed file's ELF
// interpreter, and hashing the program and the interpreters. "cold"
// starts each iteration with an empty hash cache, as every cordon exec
// process does.
func BenchmarkPlanExec(b *testing.B) {
	for _, prog := range []string{"true", "python3"} {
		s := benchSpec(b, prog)
		enf := grant.New(s.Grants)
		for _, cache := range []string{"warm", "cold"} {
			b.Run(prog+"/"+cache, func(b *testing.B) {
				saved := hashes
				defer func() { hashes = saved }()
				for b.Loop() {
					if cache == "cold" {
						hashes = exechash.New(4096)
					}
					if _, err := planExec(enf, s.Argv); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
