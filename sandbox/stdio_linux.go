package sandbox

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The program never receives one of cordon's own files as a standard
// stream: a terminal would let it change the operator's terminal for
// good (a dead line discipline with TIOCSETD, raw mode with TCSETS,
// stopped output with TCXONC, the window size), a regular file would
// show its host path in /proc/self/fd and let it seek or truncate, and a
// socket would be a channel of its own. Every stream that is an *os.File
// is relayed through a pipe instead; other readers and writers already
// are (os/exec copies them).

// hideFile returns w so that os/exec does not see an *os.File and copies
// it through a pipe. Two streams that are the same file stay equal, so
// that os/exec gives them one pipe and their order is kept.
func hideFile(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok {
		return struct{ io.Writer }{f}
	}
	return w
}

// stdinRelay copies a file to the program's stdin pipe until the file
// ends or stop is called. Unlike os/exec's copy of a reader, it can be
// stopped while it waits for input: a terminal never ends, and cordon
// must not go on reading the operator's input once the program is gone.
type stdinRelay struct {
	r    *os.File // the program's end
	stop func()   // ends the relay; safe to call more than once
}

// relayStdin returns src as the program's stdin: src itself when it is
// not an *os.File (os/exec copies it), or the read end of a pipe that a
// relay fills from the file.
func relayStdin(src io.Reader) (io.Reader, *stdinRelay, error) {
	f, ok := src.(*os.File)
	if !ok {
		return src, nil, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	// The relay waits in poll(2) on the file and on stopR, which ends
	// when stopW is closed.
	stopR, stopW, err := os.Pipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, nil, err
	}
	stopFd := int(stopR.Fd())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer stopR.Close()
		defer pw.Close()
		buf := make([]byte, 32<<10)
		for {
			var (
				n       int
				rerr    error
				stopped bool
			)
			cerr := rc.Control(func(fd uintptr) {
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stopFd), Events: unix.POLLIN}}
				if _, err := unix.Poll(fds, -1); err != nil {
					if !errors.Is(err, unix.EINTR) {
						rerr = err
					}
					return
				}
				if fds[1].Revents != 0 {
					stopped = true
					return
				}
				if fds[0].Revents == 0 {
					return
				}
				n, rerr = unix.Read(int(fd), buf)
				if errors.Is(rerr, unix.EAGAIN) || errors.Is(rerr, unix.EINTR) {
					rerr = nil
					return
				}
				if rerr == nil && n == 0 {
					rerr = io.EOF
				}
			})
			if cerr != nil || stopped || rerr != nil {
				return
			}
			if n > 0 {
				if _, err := pw.Write(buf[:n]); err != nil {
					return // the program closed its stdin, or the relay was stopped
				}
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			stopW.Close()
			// A write blocked on a full pipe ends too.
			_ = pw.SetWriteDeadline(time.Now())
		})
		// A read that poll(2) promised but another reader of the
		// file took first may still block: do not wait for it forever.
		waitBounded(func() { <-done }, time.Second)
	}
	return pr, &stdinRelay{r: pr, stop: stop}, nil
}
