package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPrivateSocketsLeaveUmask: making the pool's and the resident exec
// server's sockets 0600 never changes the process's umask, which applies
// to every goroutine: a directory another goroutine makes meanwhile (a
// slot's run record directory, when a server starts) keeps its mode. The
// sockets are 0600 all the same.
func TestPrivateSocketsLeaveUmask(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	bad := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d := filepath.Join(dir, "d"+strconv.Itoa(i))
			var st unix.Stat_t
			if err := os.Mkdir(d, 0o700); err != nil {
				bad <- err.Error()
				return
			}
			if err := unix.Stat(d, &st); err != nil || st.Mode&0o700 != 0o700 {
				bad <- fmt.Sprintf("%s was made mode %#o, want 0700: the umask changed under it (%v)", d, st.Mode&0o777, err)
				return
			}
			_ = os.Remove(d)
		}
	}()
	state := t.TempDir()
	mode := func(p string) uint32 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Mode & 0o777
	}
	for i := 0; i < 300; i++ {
		ln, err := listenPool(state)
		if err != nil {
			t.Fatal(err)
		}
		if m := mode(poolSocket(state)); m != 0o600 {
			t.Fatalf("the pool socket is mode %#o, want 0600", m)
		}
		ln.Close()
		f, err := listenResident(state)
		if err != nil {
			t.Fatal(err)
		}
		if m := mode(residentSocket(state)); m != 0o600 {
			t.Fatalf("the resident exec socket is mode %#o, want 0600", m)
		}
		f.Close()
	}
	close(stop)
	wg.Wait()
	select {
	case b := <-bad:
		t.Fatal(b)
	default:
	}
}
