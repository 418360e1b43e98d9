package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// hopHeaders are removed from requests and responses (RFC 9110 §7.6.1),
// with every header named in Connection and every Proxy-* header.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

// upstreamConn counts the bytes of a plain HTTP exchange and pushes both
// deadlines IdleTimeout into the future on every read and write.
type upstreamConn struct {
	net.Conn
	idle      time.Duration
	up, down  atomic.Int64 // bytes written to and read from the upstream
	totalUp   *atomic.Int64
	totalDown *atomic.Int64
}

func (c *upstreamConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Read(b)
	c.down.Add(int64(n))
	c.totalDown.Add(int64(n))
	return n, err
}

func (c *upstreamConn) Write(b []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Write(b)
	c.up.Add(int64(n))
	c.totalUp.Add(int64(n))
	return n, err
}

// idleWriter is the client side's writer for a response: each write
// pushes the write deadline IdleTimeout into the future.
type idleWriter struct {
	c    net.Conn
	idle time.Duration
}

func (w idleWriter) Write(b []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(w.idle))
	return w.c.Write(b)
}

// forward serves one plain HTTP request: decide on the URL's host and
// port, send the request in origin form to the vetted address on a new
// connection, and copy the response back. It reports whether the client
// connection may carry another request.
func (p *Proxy) forward(s *session, cr *clientReader, br *bufio.Reader, req *http.Request, rec *Record) bool {
	t, err := parseAbsolute(req.RequestURI)
	if err != nil {
		p.refuse(s, rec, http.StatusBadRequest, err.Error())
		return false
	}
	rec.Host, rec.Port = t.host, t.port
	if strings.EqualFold(req.Method, "TRACE") || strings.EqualFold(req.Method, "TRACK") {
		// A server that implements TRACE echoes the request, injected
		// headers included, back to the sandbox.
		p.refuse(s, rec, http.StatusMethodNotAllowed, req.Method+" is not forwarded: it echoes the request's headers back")
		return false
	}
	repo := p.cfg.Repository
	if repo != nil && (repo.Host != t.host || repo.Port != t.port) {
		repo = nil
	}
	push := false
	if repo != nil {
		if push, err = repo.route(req.Method, t.path); err != nil {
			p.refuseRepo(s, rec, err.Error())
			return false
		}
		if push && req.Header.Get("Content-Encoding") != "" {
			p.refuseRepo(s, rec, "a push with a Content-Encoding: the proxy reads the command list of a plain body only")
			return false
		}
	}
	if e := req.Header.Values("Expect"); len(e) > 1 || len(e) == 1 && !strings.EqualFold(e[0], "100-continue") {
		p.refuse(s, rec, http.StatusExpectationFailed, "only Expect: 100-continue is supported")
		return false
	}
	v, raw, err := p.dial(s, t.host, t.port)
	if !v.allow {
		p.deny(s, rec, v)
		return false
	}
	if err != nil {
		p.failUpstream(s, rec, v, err)
		return false
	}
	defer raw.Close()
	rec.Allow, rec.Rule, rec.Reason, rec.Addr = true, v.rule, v.reason, v.addr
	up := &upstreamConn{Conn: raw, idle: p.cfg.IdleTimeout, totalUp: &p.bytesUp, totalDown: &p.bytesDown}
	cr.idle = p.cfg.IdleTimeout // the body is read through br
	defer func() { cr.idle = 0 }()
	client := idleWriter{s.client, p.cfg.IdleTimeout}

	fail := func(status int, err error) bool {
		rec.BytesUp, rec.BytesDown = up.up.Load(), up.down.Load()
		rec.Error = err.Error()
		if s.cutBy() {
			rec.Error = cutReason
		}
		if status != 0 {
			rec.Status = status
			p.replyClose(s, status, fmt.Sprintf("egress: upstream %s failed", net.JoinHostPort(t.host, strconv.Itoa(t.port))))
		}
		p.record(*rec)
		return false
	}
	if len(req.Header.Values("Expect")) > 0 {
		if _, err := io.WriteString(client, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return fail(0, err)
		}
	}
	if push {
		cmds, head, err := repo.checkPush(req.Body)
		if err != nil {
			rec.Allow = false
			p.refuseRepo(s, rec, err.Error())
			return false
		}
		rec.Pushed = cmds
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), req.Body), req.Body}
	}
	if err := writeRequest(up, req, t, p.cfg.Inject, rec); err != nil {
		return fail(http.StatusBadGateway, fmt.Errorf("send request: %w", err))
	}
	ubr := bufio.NewReader(up)
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(ubr, &http.Request{Method: req.Method})
		if err != nil {
			return fail(http.StatusBadGateway, fmt.Errorf("read response: %w", err))
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		resp.Body.Close() // 1xx: the client's 100 Continue was sent already
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body.Close()
		return fail(http.StatusBadGateway, fmt.Errorf("upstream switched protocols, which the proxy does not allow"))
	}
	defer resp.Body.Close()

	removeHopByHop(resp.Header)
	resp.Close = req.Close
	chunked := len(resp.TransferEncoding) > 0
	switch {
	case req.ProtoAtLeast(1, 1) && resp.ContentLength < 0 && !chunked:
		resp.TransferEncoding = []string{"chunked"} // the body ended with the upstream connection
	case !req.ProtoAtLeast(1, 1) && (chunked || resp.ContentLength < 0):
		resp.TransferEncoding, resp.ContentLength, resp.Close = nil, -1, true // no chunks for HTTP/1.0
	}
	if !req.ProtoAtLeast(1, 1) && !resp.Close {
		resp.Header.Set("Connection", "keep-alive")
	}
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	bw := bufio.NewWriterSize(client, 32<<10)
	err = resp.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	rec.Status = resp.StatusCode
	rec.BytesUp, rec.BytesDown = up.up.Load(), up.down.Load()
	if err != nil {
		rec.Error = fmt.Sprintf("copy response: %v", err)
		if s.cutBy() {
			rec.Error = cutReason
		}
		p.record(*rec)
		return false
	}
	p.record(*rec)
	return !resp.Close
}

// writeRequest sends req to w in origin form, with Host set to the URL's
// authority, hop-by-hop and Proxy-* headers removed, Connection: close,
// and the body framed as the client framed it.
func writeRequest(w io.Writer, req *http.Request, t target, ins []Injection, rec *Record) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	fmt.Fprintf(bw, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, t.path, t.authority)
	h := req.Header.Clone()
	_, hadLength := h["Content-Length"]
	removeHopByHop(h)
	h.Del("Content-Length")
	h.Del("Expect")
	if labels := inject(ins, h, t); len(labels) > 0 {
		rec.Injected = strings.Join(labels, "; ")
	}
	if err := h.Write(bw); err != nil {
		return err
	}
	bw.WriteString("Connection: close\r\n")
	switch {
	case len(req.TransferEncoding) > 0:
		bw.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		cw := httputil.NewChunkedWriter(bw)
		if _, err := io.Copy(cw, req.Body); err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
		bw.WriteString("\r\n") // no trailers
	case req.ContentLength > 0 || hadLength:
		fmt.Fprintf(bw, "Content-Length: %d\r\n\r\n", req.ContentLength)
		if _, err := io.Copy(bw, req.Body); err != nil {
			return err
		}
	default:
		bw.WriteString("\r\n")
	}
	return bw.Flush()
}
