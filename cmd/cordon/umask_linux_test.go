package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// The process's umask is never changed to make a socket: another
// goroutine making a directory meanwhile would get it. It did, once:
// `pool serve` made STATE/runs mode 0600 (0700 under a umask of 0177)
// while it bound its socket, and every later run of that state
// directory was refused (rootless; root does not need the x bit).
func TestSocketsLeaveUmaskAlone(t *testing.T) {
	state := t.TempDir()
	umask := func() string {
		st, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return ""
		}
		for l := range strings.Lines(string(st)) {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	want := umask()
	if want == "" {
		t.Fatal("no Umask line in /proc/self/status")
	}
	var stop, bad atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if umask() != want {
				bad.Store(true)
			}
		}
	}()
	defer func() {
		stop.Store(true)
		<-done
		if bad.Load() {
			t.Error("the process's umask changed while sockets were made")
		}
	}()
	for range 200 {
		l, err := listenPrivate(filepath.Join(state, "pool", "test.sock"), "busy %s")
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		f, err := listenResident(state)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(residentSocket(state))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the resident socket: %v, %v; want mode 0600", fi, err)
		}
		f.Close()
		os.Remove(residentSocket(state))
	}
}
