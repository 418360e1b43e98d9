package session

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCancelledExecsLeaveNothing: Execs cancelled at different points
// (before the program starts, while it and a background child run)
// each end in a command entry and leave no descriptor and no child
// process of this one behind.
func TestCancelledExecsLeaveNothing(t *testing.T) {
	f := newFixture(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fds := func() int {
		e, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(e)
	}
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	before := fds()
	const runs = 20
	for i := range runs {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Duration(i%5)*15*time.Millisecond, cancel)
		s.Exec(ctx, Command{Argv: []string{"sh", "-c", "sleep 5 & sleep 5"}})
		cancel()
	}
	if after := fds(); after > before {
		t.Errorf("descriptors: %d before the cancelled runs, %d after", before, after)
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("child processes left: %v", kids)
	}
	commands := 0
	for _, e := range f.entries(t) {
		if e.Type == "command" {
			commands++
		}
	}
	if commands != runs+1 {
		t.Errorf("%d command entries for %d Execs", commands, runs+1)
	}
}

// children lists the processes whose parent is this one.
func children(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if fs := strings.Fields(s[i+1:]); len(fs) > 1 && fs[1] == self {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}
