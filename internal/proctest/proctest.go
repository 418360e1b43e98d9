// Package proctest finds processes for tests: the sandbox spawners a
// server process started.
package proctest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/sandbox"
)

// Spawners returns the pids of the sandbox spawners (argv[0]
// sandbox.SpawnerArg0) whose parent is pid.
func Spawners(t testing.TB, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || string(cmd) != sandbox.SpawnerArg0+"\x00" {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			found = append(found, n)
		}
	}
	return found
}
