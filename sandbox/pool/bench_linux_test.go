package pool

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/internal/phase"
	"github.com/cordon-dev/cordon/sandbox"
)

// bwrapTrue is scripts/bench-sandbox's bubblewrap invocation of
// /bin/true (its BW list), with ws bound at /work.
func bwrapTrue(bwrap, ws string) *exec.Cmd {
	return exec.Command(bwrap, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/work", "--setenv", "LANG", "C.UTF-8",
		"--setenv", "TERM", "dumb", "--bind", ws, "/work", "--chdir", "/work", "/bin/true")
}

// BenchmarkWarmClaim measures, side by side and interleaved, one sample
// of each per iteration:
//
//   - claim-exec: from Pool.Claim to the program exec'd in its slot: the
//     claim, the slot's check, the exec decision (resolving and hashing
//     the program), the launch line, the executables' mounts, Landlock,
//     seccomp, and the fork and exec of /bin/true, up to init's
//     "program started" mark (taken when fork+exec has returned, which
//     is after the program's execve succeeded), on the shared monotonic
//     clock;
//   - claim-exit: from Pool.Claim to Wait's return (the program ran and
//     exited, init reported, init exited);
//   - bwrap: bubblewrap's whole cold start of /bin/true, spawn to reaped,
//     as scripts/bench-sandbox invokes it;
//   - cold: sandbox.Run of true (cordon's cold start, less the CLI).
//
// The pool is refilled before each sample, outside the measurement, so
// that preparing the next slot does not compete for the CPUs. Reported
// are the medians and the ratios of the medians to bwrap's.
func BenchmarkWarmClaim(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Fatal("bubblewrap (bwrap) is needed for the side-by-side figure: ", err)
	}
	phase.Enable() // init's marks come back with the exit status
	p := newPool(b, 1)
	ws := b.TempDir()
	cold := testSpec(b)
	cold.Argv = []string{"true"}
	var claimExec, claimExit, bw, coldRun []float64
	ctx := context.Background()
	for b.Loop() {
		waitReady(b, p, 1)
		time.Sleep(2 * time.Millisecond)
		t0 := phase.Now()
		c, err := p.Claim(p.Key())
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(ctx, &sandbox.Launch{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		res, err := c.Wait()
		t1 := phase.Now()
		if err != nil || res.ExitCode != 0 {
			b.Fatal(err, res)
		}
		c.Destroy()
		var started int64
		for _, m := range phase.Marks() {
			if m.Name == "init: program started" && m.T > t0 {
				started = m.T
			}
		}
		if started == 0 {
			b.Fatal("no program-started mark from init")
		}
		claimExec = append(claimExec, float64(started-t0))
		claimExit = append(claimExit, float64(t1-t0))

		t0 = phase.Now()
		if err := bwrapTrue(bwrap, ws).Run(); err != nil {
			b.Fatal("bwrap: ", err)
		}
		bw = append(bw, float64(phase.Now()-t0))

		t0 = phase.Now()
		if res, err := sandbox.Run(ctx, cold); err != nil || res.ExitCode != 0 {
			b.Fatal(err, res)
		}
		coldRun = append(coldRun, float64(phase.Now()-t0))
	}
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(claimExec), "claim-exec-ns")
	b.ReportMetric(med(claimExit), "claim-exit-ns")
	b.ReportMetric(med(bw), "bwrap-ns")
	b.ReportMetric(med(coldRun), "cold-ns")
	b.ReportMetric(med(claimExec)/med(bw), "claim-exec/bwrap")
	b.ReportMetric(med(claimExit)/med(bw), "claim-exit/bwrap")
	b.ReportMetric(med(coldRun)/med(bw), "cold/bwrap")
}
