package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// helloError is a TLS ClientHello the proxy refuses; its text is the
// denial's reason.
type helloError struct{ reason string }

func (e *helloError) Error() string { return e.reason }

// activity tracks when a tunnel last moved bytes, either way, and closes
// it once nothing has moved for idle. A watchdog timer does the closing,
// so that a direction blocked on a peer that does not read is covered as
// well as one waiting on a peer that does not write; no deadline is set on
// a write (a spliced write that times out would lose the bytes in its
// pipe).
type activity struct {
	base  time.Time // monotonic origin of last
	idle  time.Duration
	last  atomic.Int64 // nanoseconds since base
	idled atomic.Bool  // the watchdog closed the tunnel

	mu      sync.Mutex
	timer   *time.Timer // guarded by mu
	stopped bool        // guarded by mu
}

func newActivity(idle time.Duration) *activity {
	return &activity{base: time.Now(), idle: idle}
}

func (a *activity) touch() { a.last.Store(int64(time.Since(a.base))) }

// watch starts the watchdog: onIdle runs once nothing moved for idle.
func (a *activity) watch(onIdle func()) {
	a.touch()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timer = time.AfterFunc(a.idle, func() { a.check(onIdle) })
}

func (a *activity) check(onIdle func()) {
	quiet := time.Since(a.base) - time.Duration(a.last.Load())
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.stopped:
	case quiet >= a.idle:
		a.idled.Store(true)
		onIdle()
	default:
		a.timer.Reset(a.idle - quiet)
	}
}

// stop stops the watchdog.
func (a *activity) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	if a.timer != nil {
		a.timer.Stop()
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// spliceChunk is how many bytes one splice call may move before the
// counters are updated.
const spliceChunk = 1 << 20

// pump copies src to dst until src ends, counting bytes into n and total
// and touching a as they go. It returns nil at src's EOF. Between two TCP
// connections on Linux it splices (no copy through user space) in chunks,
// with a read deadline every tick so that a slow trickle still shows as
// activity; otherwise it copies through a buffer.
func pump(dst, src net.Conn, a *activity, tick time.Duration, n, total *atomic.Int64) error {
	if runtime.GOOS == "linux" {
		// The kernel splices from TCP or unix stream sockets into TCP
		// (TCPConn.ReadFrom), and from TCP into unix stream sockets
		// (TCPConn.WriteTo): the sandbox's connections arrive as unix
		// sockets, upstreams are TCP.
		switch d := dst.(type) {
		case *net.TCPConn:
			switch src.(type) {
			case *net.TCPConn, *net.UnixConn:
				return splice(d, src, a, tick, n, total)
			}
		case *net.UnixConn:
			if s, ok := src.(*net.TCPConn); ok {
				return spliceTo(d, s, a, tick, n, total)
			}
		}
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			a.touch()
			nw, err := dst.Write(buf[:nr])
			n.Add(int64(nw))
			total.Add(int64(nw))
			if err != nil {
				return err
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

func splice(dst *net.TCPConn, src net.Conn, a *activity, tick time.Duration, n, total *atomic.Int64) error {
	lr := &io.LimitedReader{R: src}
	src.SetReadDeadline(time.Now().Add(tick))
	for {
		lr.N = spliceChunk
		k, err := dst.ReadFrom(lr)
		if k > 0 {
			a.touch()
			n.Add(k)
			total.Add(k)
		}
		switch {
		case err == nil && lr.N > 0:
			return nil // src is at EOF
		case err == nil:
		case isTimeout(err): // the read deadline: nothing is lost in a splice's pipe
			src.SetReadDeadline(time.Now().Add(tick))
		default:
			return err
		}
	}
}

// spliceTo is splice for a TCP source and a unix socket destination:
// TCPConn.WriteTo splices until src's EOF, or until the read deadline of
// the tick, when the counters are updated and it is called again.
func spliceTo(dst *net.UnixConn, src *net.TCPConn, a *activity, tick time.Duration, n, total *atomic.Int64) error {
	src.SetReadDeadline(time.Now().Add(tick))
	for {
		k, err := src.WriteTo(dst)
		if k > 0 {
			a.touch()
			n.Add(k)
			total.Add(k)
		}
		switch {
		case err == nil:
			return nil // src is at EOF
		case isTimeout(err): // the read deadline: nothing is lost in a splice's pipe
			src.SetReadDeadline(time.Now().Add(tick))
		default:
			return err
		}
	}
}

// tunnelErr keeps the first error of a tunnel's two directions.
type tunnelErr struct {
	mu  sync.Mutex
	err error // guarded by mu
}

func (t *tunnelErr) set(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func (t *tunnelErr) get() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// connect serves a CONNECT request: decide, dial the vetted address,
// answer 200, check a TLS ClientHello, then tunnel until both directions
// end, the tunnel goes idle or the session is closed.
func (p *Proxy) connect(s *session, br *bufio.Reader, req *http.Request, rec *Record) {
	t, err := parseAuthority(req.RequestURI)
	if err != nil {
		p.refuse(s, rec, http.StatusBadRequest, err.Error())
		return
	}
	rec.Host, rec.Port = t.host, t.port
	if req.ContentLength != 0 || len(req.TransferEncoding) > 0 {
		p.refuse(s, rec, http.StatusBadRequest, "a CONNECT request has no body")
		return
	}
	if r := p.cfg.Repository; r != nil && r.Host == t.host && r.Port == t.port {
		p.refuseRepo(s, rec, "a tunnel to the repository's host and port would carry requests the proxy cannot read; git reaches the repository by plain HTTP")
		return
	}
	v, up, err := p.dial(s, t.host, t.port)
	if !v.allow {
		p.deny(s, rec, v)
		return
	}
	if err != nil {
		p.failUpstream(s, rec, v, err)
		return
	}
	rec.Allow, rec.Rule, rec.Reason, rec.Addr = true, v.rule, v.reason, v.addr
	c := s.client
	c.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		rec.Error = fmt.Sprintf("write 200 to client: %v", err)
		p.record(*rec)
		return
	}
	rec.Status = http.StatusOK

	// Bytes the client sent after the request header are the tunnel's
	// first bytes; after this, br is no longer used.
	pending, _ := br.Peek(br.Buffered())
	pending = append([]byte(nil), pending...)

	c.SetDeadline(time.Time{})
	a := newActivity(p.cfg.IdleTimeout)
	a.watch(s.closeAll)
	defer a.stop()
	tick := max(p.cfg.IdleTimeout/4, 10*time.Millisecond)
	var up2, down atomic.Int64
	var terr tunnelErr
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := pump(c, up, a, tick, &down, &p.bytesDown); err != nil {
			terr.set(err)
			s.closeAll()
			return
		}
		closeWrite(c)
	}()

	finish := func() {
		<-done
		a.stop()
		rec.BytesUp, rec.BytesDown = up2.Load(), down.Load()
		if s.cutBy() {
			rec.Error = cutReason
		} else if a.idled.Load() {
			rec.Error = fmt.Sprintf("no bytes either way for %s", p.cfg.IdleTimeout)
		} else if err := terr.get(); err != nil {
			rec.Error = err.Error()
		}
		p.record(*rec)
	}

	first, hello, err := p.sniff(c, pending, a)
	var he *helloError
	switch {
	case errors.As(err, &he):
		s.closeAll()
		rec.Allow, rec.Rule, rec.Reason = false, ruleSNI, he.reason
		finish()
		return
	case err == nil && hello != nil && hello.ech:
		s.closeAll()
		rec.Allow, rec.Rule, rec.Reason = false, ruleSNI, "the ClientHello offers Encrypted Client Hello, which hides the server name"
		finish()
		return
	case err == nil && hello != nil && hello.serverName != "" && asciiLower(hello.serverName) != t.host:
		s.closeAll()
		rec.Allow, rec.Rule = false, ruleSNI
		rec.Reason = fmt.Sprintf("SNI %q does not match CONNECT host %q", hello.serverName, t.host)
		finish()
		return
	case err == io.EOF:
		closeWrite(up)
	case err != nil:
		terr.set(err)
		s.closeAll()
	default:
		nw, werr := up.Write(first)
		up2.Add(int64(nw))
		p.bytesUp.Add(int64(nw))
		if werr == nil {
			werr = pump(up, c, a, tick, &up2, &p.bytesUp)
		}
		if werr != nil {
			terr.set(werr)
			s.closeAll()
		} else {
			closeWrite(up)
		}
	}
	finish()
}

// sniff returns the client's first bytes in the tunnel, waiting for them
// as long as the tunnel is active (the watchdog ends the wait). If they start a TLS record it reads on,
// within HeaderTimeout, until the ClientHello is complete and returns it
// parsed; a ClientHello that cannot be checked is a *helloError. It
// returns io.EOF when the client ends its side without sending anything.
func (p *Proxy) sniff(c net.Conn, pending []byte, a *activity) ([]byte, *clientHello, error) {
	buf := make([]byte, len(pending), max(len(pending), 4096))
	copy(buf, pending)
	for len(buf) == 0 {
		n, err := c.Read(buf[:cap(buf)])
		buf = buf[:n]
		if n > 0 {
			a.touch()
		} else if err != nil {
			return nil, nil, err
		}
	}
	if !isTLSRecordType(buf[0]) {
		return buf, nil, nil
	}
	c.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	for {
		h, done, err := parseClientHello(buf)
		if err != nil {
			return nil, nil, &helloError{"TLS ClientHello refused: " + err.Error()}
		}
		if done {
			c.SetReadDeadline(time.Time{})
			return buf, &h, nil
		}
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), maxHelloBytes))
			copy(grown, buf)
			buf = grown
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			a.touch()
		}
		switch {
		case isTimeout(err):
			return nil, nil, &helloError{fmt.Sprintf("TLS ClientHello not complete within %s", p.cfg.HeaderTimeout)}
		case err == io.EOF:
			return nil, nil, &helloError{"the connection ended inside the TLS ClientHello"}
		case err != nil:
			return nil, nil, err
		}
	}
}

// asciiLower maps A-Z to a-z and leaves every other byte alone (unlike
// strings.ToLower, which maps U+212A KELVIN SIGN to "k").
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
