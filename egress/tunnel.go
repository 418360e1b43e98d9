package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// errIdle ends a tunnel or request that moved no bytes for IdleTimeout.
var errIdle = errors.New("idle")

// helloError is a TLS ClientHello the proxy refuses; its text is the
// denial's reason.
type helloError struct{ reason string }

func (e *helloError) Error() string { return e.reason }

// activity tracks the last time a tunnel moved bytes, either way, so that
// a direction waiting on a quiet peer is not closed while the other is
// busy. Deadlines are set once and pushed back only when they fire, not on
// every read.
type activity struct {
	base time.Time // monotonic origin of last
	idle time.Duration
	last atomic.Int64 // nanoseconds since base
}

func newActivity(idle time.Duration) *activity {
	return &activity{base: time.Now(), idle: idle}
}

func (a *activity) touch() { a.last.Store(int64(time.Since(a.base))) }

// deadline is when the tunnel goes idle if nothing moves until then.
func (a *activity) deadline() time.Time {
	return a.base.Add(time.Duration(a.last.Load()) + a.idle)
}

// rearm is called when a deadline fired: it reports false when the tunnel
// really is idle, else moves the deadline with set and reports true.
func (a *activity) rearm(set func(time.Time) error) bool {
	d := a.deadline()
	if !time.Now().Before(d) {
		return false
	}
	set(d)
	return true
}

// readIdle reads into b, waiting as long as the tunnel is active.
func readIdle(c net.Conn, b []byte, a *activity) (int, error) {
	for {
		n, err := c.Read(b)
		if n > 0 {
			a.touch()
			return n, nil
		}
		if isTimeout(err) {
			if a.rearm(c.SetReadDeadline) {
				continue
			}
			return 0, errIdle
		}
		return 0, err
	}
}

// writeAll writes b to c, waiting as long as the tunnel is active.
func writeAll(c net.Conn, b []byte, a *activity) (int, error) {
	total := 0
	for len(b) > 0 {
		n, err := c.Write(b)
		total += n
		b = b[n:]
		if n > 0 {
			a.touch()
		}
		if err != nil {
			if isTimeout(err) && a.rearm(c.SetWriteDeadline) {
				continue
			}
			if isTimeout(err) {
				err = errIdle
			}
			return total, err
		}
	}
	return total, nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// pump copies src to dst until src ends, counting bytes into n and total
// as they go. It returns nil at src's EOF.
func pump(dst, src net.Conn, a *activity, n, total *atomic.Int64) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			a.touch()
			nw, err := writeAll(dst, buf[:nr], a)
			n.Add(int64(nw))
			total.Add(int64(nw))
			if err != nil {
				return err
			}
		}
		switch {
		case rerr == nil:
		case rerr == io.EOF:
			return nil
		case isTimeout(rerr):
			if !a.rearm(src.SetReadDeadline) {
				return errIdle
			}
		default:
			return rerr
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

	a := newActivity(p.cfg.IdleTimeout)
	a.touch()
	c.SetDeadline(a.deadline())
	up.SetDeadline(a.deadline())
	var up2, down atomic.Int64
	var terr tunnelErr
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := pump(c, up, a, &down, &p.bytesDown); err != nil {
			terr.set(err)
			s.closeAll()
			return
		}
		closeWrite(c)
	}()

	finish := func() {
		<-done
		rec.BytesUp, rec.BytesDown = up2.Load(), down.Load()
		if err := terr.get(); err != nil {
			if errors.Is(err, errIdle) {
				rec.Error = fmt.Sprintf("no bytes either way for %s", p.cfg.IdleTimeout)
			} else {
				rec.Error = err.Error()
			}
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
		nw, werr := writeAll(up, first, a)
		up2.Add(int64(nw))
		p.bytesUp.Add(int64(nw))
		if werr == nil {
			werr = pump(up, c, a, &up2, &p.bytesUp)
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
// as long as the tunnel is active. If they start a TLS record it reads on,
// within HeaderTimeout, until the ClientHello is complete and returns it
// parsed; a ClientHello that cannot be checked is a *helloError. It
// returns io.EOF when the client ends its side without sending anything.
func (p *Proxy) sniff(c net.Conn, pending []byte, a *activity) ([]byte, *clientHello, error) {
	buf := make([]byte, len(pending), max(len(pending), 4096))
	copy(buf, pending)
	if len(buf) == 0 {
		n, err := readIdle(c, buf[:cap(buf)], a)
		if n == 0 {
			return nil, nil, err
		}
		buf = buf[:n]
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
			c.SetReadDeadline(a.deadline())
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
