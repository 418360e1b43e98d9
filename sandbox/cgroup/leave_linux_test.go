package cgroup

import (
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A thread that joined the group by JoinFiles and left it by LeaveFiles
// after forking leaves only its child in the group: the group holds the
// child alone, in every hierarchy, and is empty once the child is gone.
func TestJoinForkLeave(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, testLimits)
	if g.Version() != 1 {
		if _, err := g.LeaveFiles(); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("LeaveFiles on v2 = %v, want errors.ErrUnsupported", err)
		}
		return
	}
	join, err := g.JoinFiles()
	if err != nil {
		t.Fatal(err)
	}
	leave, err := g.LeaveFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(join) != len(leave) || len(join) != len(g.dirs) {
		t.Fatalf("%d join files, %d leave files, %d hierarchies", len(join), len(leave), len(g.dirs))
	}
	for i, f := range leave {
		if want := filepath.Join(strings.TrimSuffix(g.dirs[i], "/"+g.name), "tasks"); f.Name() != want {
			t.Errorf("leave file %d is %s, want %s", i, f.Name(), want)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", "read _")
	var stdin interface{ Close() error }
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		for _, f := range join {
			if _, err := f.Write([]byte("0")); err != nil {
				done <- err
				return
			}
		}
		w, err := cmd.StdinPipe()
		if err == nil {
			stdin = w
			err = cmd.Start()
		}
		for _, f := range leave {
			if err == nil {
				_, err = f.Write([]byte("0"))
			}
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	self := strconv.Itoa(unix.Getpid())
	for _, dir := range g.dirs {
		procs := strings.Fields(readFile(t, filepath.Join(dir, "cgroup.procs")))
		if !slices.Equal(procs, []string{strconv.Itoa(cmd.Process.Pid)}) {
			t.Errorf("%s/cgroup.procs = %v, want only the child %d (this process is %s)", dir, procs, cmd.Process.Pid, self)
		}
	}
	stdin.Close()
	cmd.Wait()
	if err := g.Kill(); err != nil { // nothing to kill: the group is empty
		t.Fatal(err)
	}
	for _, dir := range g.dirs {
		if procs := readFile(t, filepath.Join(dir, "cgroup.procs")); procs != "" {
			t.Errorf("%s/cgroup.procs = %q after the child exited", dir, procs)
		}
	}
}
