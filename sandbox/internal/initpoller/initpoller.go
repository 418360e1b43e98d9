// Package initpoller, imported only by package sandbox's tests, starts
// Go's network poller in a process started as sandbox init, before
// package sandbox's own init runs init's main: as a package's init can in
// cordon's binary (a dependency that opened a file at start did). The
// poller's descriptor then lies above the ones init was given, and init
// must not close it ("epollwait on fd … failed with 9").
package initpoller

import (
	"os"
	"time"
)

// initArg0 is sandbox.InitArg0 (a test checks they agree).
const initArg0 = "cordon-sandbox-init"

// Started reports whether this process started the poller.
var Started bool

func init() {
	if len(os.Args) == 0 || os.Args[0] != initArg0 {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	_ = r.SetReadDeadline(time.Now().Add(time.Hour))
	go func() {
		var b [1]byte
		_, _ = r.Read(b[:]) // parked in the poller until init exits
		w.Close()
	}()
	Started = true
}

// Arg0 is the name it recognizes init by.
func Arg0() string { return initArg0 }
