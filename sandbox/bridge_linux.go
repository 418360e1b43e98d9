package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// The egress bridge. The sandbox's network namespace has only loopback.
// When the grant set has egress rules, init listens on 127.0.0.1:ProxyPort
// inside it and passes every connection the program opens there to the
// parent over a SOCK_SEQPACKET control socket (fd 6) with SCM_RIGHTS.
// The parent hands each, as a connected net.Conn, to Spec.Egress, the
// proxy that decides every request. No path names the bridge: nothing in the sandbox can reach
// the proxy but through the forwarder, and when cordon goes away the
// control socket closes, init's forwarder stops, and PR_SET_PDEATHSIG
// ends the run.

// ProxyPort is the loopback port of the egress forwarder inside the
// sandbox; HTTP_PROXY and its relatives point at it.
const ProxyPort = 3128

// proxyEnv is the program's environment for proxied egress.
func proxyEnv() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	var env []string
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, name+"="+u)
	}
	for _, name := range []string{"http_proxy", "https_proxy", "all_proxy"} {
		env = append(env, name+"="+u)
	}
	return env
}

// bridgePair returns the two ends of a control socket: the parent's and
// init's.
func bridgePair() (parent, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("egress bridge: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "egress bridge"), os.NewFile(uintptr(fds[1]), "egress bridge (init)"), nil
}

// serveBridge receives connections from init until the control socket
// closes (init exited) and serves each with eg. The returned function
// waits for every connection it started to be served.
func serveBridge(ctx context.Context, ctl *os.File, eg Egress) (wait func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1)
		oob := make([]byte, unix.CmsgSpace(4))
		for {
			n, oobn, _, _, err := unix.Recvmsg(int(ctl.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || (n == 0 && oobn == 0) {
				return // init is gone
			}
			fd, err := receivedFD(oob[:oobn])
			if err != nil {
				continue // a malformed message carries nothing to serve
			}
			f := os.NewFile(uintptr(fd), "egress connection")
			c, err := net.FileConn(f)
			f.Close()
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				eg.ServeConn(ctx, c)
			}()
		}
	}()
	return func() {
		<-done
		wg.Wait()
	}
}

// receivedFD returns the one descriptor an SCM_RIGHTS message carries,
// closing any extra.
func receivedFD(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("egress bridge: malformed control message")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) == 0 {
		return -1, fmt.Errorf("egress bridge: no descriptor")
	}
	for _, extra := range fds[1:] {
		unix.Close(extra)
	}
	return fds[0], nil
}

// startForwarder listens on the proxy port inside the sandbox and relays
// every connection through a socket pair whose other end goes to the
// parent over ctl. It runs in init, before the program starts.
func startForwarder(ctl *os.File) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ProxyPort))
	if err != nil {
		return fmt.Errorf("egress forwarder: %w", err)
	}
	go func() {
		defer ln.Close()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if err := forward(ctl, c); err != nil {
				c.Close()
				if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
					return // the parent is gone: no more connections
				}
			}
		}
	}()
	return nil
}

// forward hands the accepted connection itself to the parent: a socket
// keeps working outside the network namespace it was made in, so the
// proxy reads and writes the program's connection directly (and can
// splice it), with no relay in between. Init keeps no copy.
func forward(ctl *os.File, c net.Conn) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return fmt.Errorf("egress forwarder: not a TCP connection")
	}
	f, err := tc.File() // a duplicate, blocking descriptor
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Sendmsg(int(ctl.Fd()), []byte{0}, unix.UnixRights(int(f.Fd())), nil, unix.MSG_NOSIGNAL); err != nil {
		return err
	}
	return c.Close()
}
