package sandbox

import (
	"strings"
	"testing"
)

// Red team (docs/security/redteam-spawner.md, finding 1): the program
// started through a spawner had the signals the spawner ignored
// (SIGINT, SIGHUP: an ignored signal stays ignored across fork and
// exec) ignored too; started directly it has none ignored. The signal
// dispositions and mask, umask and rlimits are compared.
func TestRedteamSpawner1SignalDisposition(t *testing.T) {
	sp := testSpawner(t)
	script := `while IFS= read -r l; do case "$l" in SigBlk*|SigIgn*|SigCgt*) echo "$l";; esac; done </proc/self/status; umask; ulimit -a`
	state := t.TempDir()
	run := func(opts ...option) outcome {
		return sandboxed(t, []string{"sh", "-c", script}, append(opts, func(s *Spec) { s.StateDir = state })...)
	}
	direct := run()
	spawned := run(withSpawner(sp))
	direct.mustExit(t, 0)
	spawned.mustExit(t, 0)
	if direct.stdout != spawned.stdout {
		t.Errorf("the program's signal dispositions, umask or rlimits differ through the spawner:\ndirect:\n%s\nspawned:\n%s", direct.stdout, spawned.stdout)
	}
	if want := "SigIgn:\t0000000000000000\n"; !strings.Contains(direct.stdout, want) {
		t.Errorf("started directly, the program ignores signals (the check would prove nothing):\n%s", direct.stdout)
	}
}
