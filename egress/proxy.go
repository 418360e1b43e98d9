package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/grant"
)

// ErrInvalidConfig is wrapped by every error New returns.
var ErrInvalidConfig = errors.New("invalid egress proxy config")

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("egress proxy closed")

// Config configures a Proxy. Start from DefaultConfig.
type Config struct {
	// Enforcer decides every request. Required unless Policy is set.
	Enforcer *grant.Enforcer
	// Policy, if not nil, decides every request in place of Enforcer
	// (which is then ignored): its Enforcer can be replaced while the
	// proxy runs, and a replacement closes the connections it no longer
	// allows at once.
	Policy *Policy
	// Resolver resolves an allowed host name to its addresses. Nil means
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host).
	Resolver func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a vetted "ip:port" (never a name). Nil means a
	// net.Dialer's DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxConns bounds the client connections served at once; a connection
	// over the limit gets 503 and is closed. Must be > 0.
	MaxConns int
	// IdleTimeout closes a tunnel or request, or a keep-alive connection
	// between requests, after this long with no bytes either way. A
	// spliced tunnel (TCP to TCP on Linux) sees a slow trickle of bytes up
	// to IdleTimeout/4 late, so it may close up to that much after its last
	// byte plus IdleTimeout. Must be > 0.
	IdleTimeout time.Duration
	// HeaderTimeout bounds the time to read a request header, and a TLS
	// ClientHello once its first byte has arrived (slowloris). Must be > 0.
	HeaderTimeout time.Duration
	// DialTimeout bounds resolving and connecting to the upstream. Must be > 0.
	DialTimeout time.Duration
	// MaxHeaderBytes bounds a request header, request line included; a
	// larger one gets 431. Must be > 0.
	MaxHeaderBytes int
	// Record, if not nil, is called once per decision: at once for a
	// denial, when the connection or request ends for an allowance. It
	// must be safe for concurrent calls and should return quickly.
	Record func(Record)
	// MaxRecords caps the decisions recorded over the proxy's life, so
	// that a flood of connections cannot cost the host a record each.
	// The decision that reaches the cap is followed by one more record, a
	// denial with rule "limit" that says so; after it every new
	// connection is closed at once, unread and unrecorded, and counted in
	// Stats.Dropped. Must be > 0.
	MaxRecords int64
	// Inject adds credentials as headers to plain HTTP requests for one
	// host and port each (Injection); checked by New.
	Inject []Injection
	// Repository, if not nil, confines plain HTTP to its host and port to
	// git's smart HTTP for that one repository, and pushes to its push
	// ref (Repository); checked by New.
	Repository *Repository
}

// DefaultMaxRecords is DefaultConfig's MaxRecords.
const DefaultMaxRecords = 1024

// DefaultConfig returns a Config with the default limits: 64 connections,
// 60s idle, 10s header and dial timeouts, 16 KiB headers.
func DefaultConfig(e *grant.Enforcer) Config {
	return Config{
		Enforcer:       e,
		MaxConns:       64,
		IdleTimeout:    60 * time.Second,
		HeaderTimeout:  10 * time.Second,
		DialTimeout:    10 * time.Second,
		MaxHeaderBytes: 16 << 10,
		MaxRecords:     DefaultMaxRecords,
	}
}

// Record is one decision, for the journal.
type Record struct {
	Method string     // "CONNECT", the HTTP method, or "" when no request was read
	Host   string     // the host as requested (a name or an IP address)
	Port   int        // 0 when no request was parsed
	Addr   netip.Addr // the address dialled or refused; zero when none
	Allow  bool
	Rule   string // the grant rule that decided, or "address", "sni", "limit", "request"
	Reason string
	// Hint is, for a denial a grant entry would lift, that entry as JSON
	// for a grant set's "egress" array: {"host":"evil.example","proto":"tcp","ports":[443,443]}
	// or {"cidr":"127.0.0.1/32","proto":"tcp","ports":[8080,8080]}.
	Hint string
	// Status is the HTTP status the client got (200 for an established
	// tunnel); 0 when the connection was closed without a reply.
	Status int
	// Error says what failed after an allowance (resolving, dialling,
	// upstream I/O); for the journal only, never sent to the client.
	Error              string
	BytesUp, BytesDown int64 // tunnelled or forwarded bytes, client→upstream and back
	Start              time.Time
	Duration           time.Duration
	// Injected names the headers the proxy injected into this request
	// (Injection.Label), never their values; "" when none.
	Injected string
	// Pushed lists the commands of an allowed push to the repository
	// (Config.Repository), each "REF OLD NEW" with the object ids in hex.
	Pushed []string

	reserved bool // the request holds a record slot (Proxy.reserve)
}

// String formats r in one line; for a denial it names the grant entry that
// would allow the request.
func (r Record) String() string {
	what := r.Method
	if r.Host != "" {
		if what != "" {
			what += " "
		}
		what += net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
	}
	if what == "" {
		what = "connection"
	}
	if !r.Allow {
		s := fmt.Sprintf("egress: denied %s: %s (rule %s)", what, r.Reason, r.Rule)
		if r.Hint != "" {
			s += "; to allow it, add to the grant set's \"egress\": " + r.Hint
		}
		return s
	}
	s := fmt.Sprintf("egress: allowed %s by %s", what, r.Rule)
	if r.Addr.IsValid() {
		s += " via " + r.Addr.String()
	}
	s += fmt.Sprintf(": %d bytes up, %d down in %s", r.BytesUp, r.BytesDown, r.Duration.Round(time.Millisecond))
	if r.Error != "" {
		s += "; failed: " + r.Error
	}
	return s
}

// Stats are a Proxy's counters since New.
type Stats struct {
	Conns              int64 // client connections handed to ServeConn
	Active             int64 // client connections being served now
	Denied             int64 // denial records
	Dropped            int64 // connections closed unrecorded after MaxRecords
	BytesUp, BytesDown int64 // bytes forwarded client→upstream and back, counted as they move (spliced: per MiB)
}

// Proxy is an egress proxy. Its methods are safe for concurrent use.
type Proxy struct {
	cfg Config
	pol *Policy

	conns, denied, bytesUp, bytesDown atomic.Int64
	slots, dropped                    atomic.Int64 // slots: record slots taken, at most MaxRecords; changed under recMu
	recMu                             sync.Mutex   // serializes record and reserve
	emitted                           int64        // records emitted; guarded by recMu

	wg sync.WaitGroup // one per admitted ServeConn

	mu        sync.Mutex
	closed    bool                      // guarded by mu
	active    int                       // guarded by mu
	sessions  map[*session]struct{}     // guarded by mu
	listeners map[net.Listener]struct{} // guarded by mu
}

// New validates cfg and returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	for _, c := range []struct {
		bad  bool
		what string
	}{
		{cfg.Enforcer == nil && cfg.Policy == nil, "Enforcer and Policy are nil"},
		{cfg.MaxConns <= 0, fmt.Sprintf("MaxConns %d is not positive", cfg.MaxConns)},
		{cfg.IdleTimeout <= 0, fmt.Sprintf("IdleTimeout %s is not positive", cfg.IdleTimeout)},
		{cfg.HeaderTimeout <= 0, fmt.Sprintf("HeaderTimeout %s is not positive", cfg.HeaderTimeout)},
		{cfg.DialTimeout <= 0, fmt.Sprintf("DialTimeout %s is not positive", cfg.DialTimeout)},
		{cfg.MaxHeaderBytes <= 0, fmt.Sprintf("MaxHeaderBytes %d is not positive", cfg.MaxHeaderBytes)},
		{cfg.MaxRecords <= 0, fmt.Sprintf("MaxRecords %d is not positive", cfg.MaxRecords)},
	} {
		if c.bad {
			return nil, fmt.Errorf("egress: %w: %s", ErrInvalidConfig, c.what)
		}
	}
	seen := map[string]bool{}
	for _, in := range cfg.Inject {
		if err := CheckInjection(in); err != nil {
			return nil, fmt.Errorf("egress: %w: %w", ErrInvalidConfig, err)
		}
		k := fmt.Sprintf("%s|%d|%s", in.Host, in.Port, in.Header)
		if seen[k] {
			return nil, fmt.Errorf("egress: %w: two injections of %s for %s:%d", ErrInvalidConfig, in.Header, in.Host, in.Port)
		}
		seen[k] = true
	}
	if cfg.Repository != nil {
		if err := CheckRepository(*cfg.Repository); err != nil {
			return nil, fmt.Errorf("egress: %w: %w", ErrInvalidConfig, err)
		}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	pol := cfg.Policy
	if pol == nil {
		pol = NewPolicy(cfg.Enforcer)
	}
	p := &Proxy{cfg: cfg, pol: pol, sessions: map[*session]struct{}{}, listeners: map[net.Listener]struct{}{}}
	pol.attach(p)
	return p, nil
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := p.active
	p.mu.Unlock()
	return Stats{Conns: p.conns.Load(), Active: int64(active), Denied: p.denied.Load(),
		Dropped: p.dropped.Load(), BytesUp: p.bytesUp.Load(), BytesDown: p.bytesDown.Load()}
}

// record completes r and hands it to Config.Record. Every record takes
// one of MaxRecords slots: a request's slot is reserved when it is read,
// before anything is decided or dialled (reserve), so an allowance
// recorded when its connection ends always has one; any other record (a
// malformed request, the MaxConns refusal) takes a slot now or, with
// none left, is counted as dropped. The record that fills the last slot
// is followed by the cap's own denial. Records are emitted one at a time,
// so the cap's denial is always the last.
func (p *Proxy) record(r Record) {
	r.Duration = time.Since(r.Start)
	p.recMu.Lock()
	defer p.recMu.Unlock()
	if !r.reserved {
		if p.slots.Load() >= p.cfg.MaxRecords {
			p.dropped.Add(1)
			return
		}
		p.slots.Add(1)
	}
	p.emit(r)
	p.emitted++
	if p.emitted == p.cfg.MaxRecords {
		p.emit(Record{Rule: ruleLimit, Start: time.Now(),
			Reason: fmt.Sprintf("the cap of %d recorded egress decisions is reached; later connections and requests are closed unrecorded", p.cfg.MaxRecords)})
	}
}

// reserve takes a record slot for a request about to be decided, or
// reports that none is left: then nothing may be decided, since nothing
// could be recorded.
func (p *Proxy) reserve() bool {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	if p.slots.Load() >= p.cfg.MaxRecords {
		return false
	}
	p.slots.Add(1)
	return true
}

// capped reports whether every record slot is taken.
func (p *Proxy) capped() bool { return p.slots.Load() >= p.cfg.MaxRecords }

func (p *Proxy) emit(r Record) {
	if !r.Allow {
		p.denied.Add(1)
	}
	if p.cfg.Record != nil {
		p.cfg.Record(r)
	}
}

// Serve accepts connections from ln and serves each with ServeConn until
// ctx is done, ln fails or the proxy is closed; it closes ln. It returns
// ErrClosed after Close, ctx.Err() after cancellation, else the accept
// error.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	p.listeners[ln] = struct{}{}
	p.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer func() {
		stop()
		ln.Close()
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			switch {
			case closed:
				return ErrClosed
			case ctx.Err() != nil:
				return ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		go p.ServeConn(ctx, c)
	}
}

// Close stops the proxy: see the package doc's Shutdown. It returns once
// every ServeConn call has returned. Close is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for ln := range p.listeners {
		ln.Close()
	}
	for s := range p.sessions {
		s.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.pol.detach(p)
	return nil
}

// session is one admitted client connection and its upstream, if any.
type session struct {
	ctx    context.Context
	cancel context.CancelFunc
	client net.Conn

	// linger asks release to drain the client's input before closing, so
	// that an error reply is not lost to a reset. Owned by ServeConn's
	// goroutine.
	linger bool

	mu     sync.Mutex
	up     net.Conn   // guarded by mu
	closed bool       // guarded by mu
	host   string     // what up was allowed for; guarded by mu
	port   int        // guarded by mu
	addr   netip.Addr // guarded by mu
	cut    bool       // closed by a policy change; guarded by mu
}

// dropUp closes and forgets the upstream connection; the client's stays
// open for the reply.
func (s *session) dropUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up != nil {
		s.up.Close()
		s.up = nil
	}
}

// cutBy reports whether a policy change closed the session.
func (s *session) cutBy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

// closeAll closes the client and upstream connections; it may be called
// any number of times, from any goroutine.
func (s *session) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.client.Close()
	if s.up != nil {
		s.up.Close()
	}
}

// setUp registers the upstream connection; it reports false, having closed
// c, when the session is already closed.
func (s *session) setUp(c net.Conn, host string, port int, addr netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.up, s.host, s.port, s.addr = c, host, port, addr
	return true
}

// admit registers a new session for c, or reports why it may not be
// served: the proxy is closed (nil, false) or full (nil, true).
func (p *Proxy) admit(ctx context.Context, c net.Conn) (s *session, full bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if p.active >= p.cfg.MaxConns {
		return nil, true
	}
	p.active++
	p.wg.Add(1)
	s = &session{client: c}
	s.ctx, s.cancel = context.WithCancel(ctx)
	context.AfterFunc(s.ctx, s.closeAll)
	p.sessions[s] = struct{}{}
	return s, false
}

func (p *Proxy) release(s *session) {
	if s.linger {
		lingerClose(s.client, p.cfg.HeaderTimeout)
	}
	s.cancel()
	s.closeAll()
	p.mu.Lock()
	delete(p.sessions, s)
	p.active--
	p.mu.Unlock()
	p.wg.Done()
}

// ServeConn serves one client connection: HTTP/1.1 requests (kept alive
// for plain HTTP) until one is a CONNECT, whose tunnel then carries the
// rest of the connection. It closes c before returning. Over MaxConns it
// answers 503 at once, without reading a request.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) {
	start := time.Now()
	p.conns.Add(1)
	// Every call is waited for by Close, the refused ones too: a record
	// (the MaxConns denial) is never emitted after Close returned.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	if p.capped() {
		p.dropped.Add(1)
		c.Close()
		return
	}
	s, full := p.admit(ctx, c)
	if s == nil {
		if full {
			p.record(Record{Rule: ruleLimit, Reason: fmt.Sprintf("too many connections (the limit is %d)", p.cfg.MaxConns),
				Status: http.StatusServiceUnavailable, Start: start})
			p.reply(c, http.StatusServiceUnavailable, "egress: too many connections")
			lingerClose(c, p.cfg.HeaderTimeout)
			return
		}
		c.Close()
		return
	}
	defer p.release(s)

	cr := &clientReader{c: c}
	br := bufio.NewReaderSize(cr, max(p.cfg.MaxHeaderBytes, 4096))
	for first := true; ; first = false {
		req, rec, ok := p.readRequest(s, cr, br, first)
		if ok && !p.reserve() {
			// No record slot is left (a connection admitted before the
			// cap asks after it: a kept-alive request, an idle CONNECT):
			// nothing is decided that could not be recorded.
			p.dropped.Add(1)
			return
		}
		if ok {
			rec.reserved = true
		}
		if !ok {
			if rec != nil {
				p.record(*rec)
			}
			return
		}
		if req.Method == http.MethodConnect {
			p.connect(s, br, req, rec)
			return
		}
		if !p.forward(s, cr, br, req, rec) {
			return
		}
	}
}

// clientReader is what a connection's bufio.Reader reads from. While idle
// is set, each read first pushes the read deadline idle into the future;
// otherwise the deadline set by the caller stands.
type clientReader struct {
	c    net.Conn
	idle time.Duration
}

func (r *clientReader) Read(b []byte) (int, error) {
	if r.idle > 0 {
		r.c.SetReadDeadline(time.Now().Add(r.idle))
	}
	return r.c.Read(b)
}

// readRequest reads the next request header. It reports ok == false when
// the connection should close: on a clean end between requests (rec nil)
// or after refusing a malformed request (rec set, the reply sent).
func (p *Proxy) readRequest(s *session, cr *clientReader, br *bufio.Reader, first bool) (*http.Request, *Record, bool) {
	c := s.client
	cr.idle = 0
	if !first {
		// Between requests: wait up to IdleTimeout for the next one to start.
		c.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
		if _, err := br.Peek(1); err != nil {
			return nil, nil, false
		}
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(p.cfg.HeaderTimeout))
	head, err := readHead(br, p.cfg.MaxHeaderBytes)
	if err != nil {
		if br.Buffered() == 0 {
			return nil, nil, false // nothing was sent: not a request
		}
		rec := &Record{Rule: ruleRequest, Start: start}
		switch {
		case errors.Is(err, errHeaderTooLarge):
			rec.Status, rec.Reason = http.StatusRequestHeaderFieldsTooLarge,
				fmt.Sprintf("request header larger than %d bytes", p.cfg.MaxHeaderBytes)
		case errors.Is(err, errBareLF):
			rec.Status, rec.Reason = http.StatusBadRequest, err.Error()
		case isTimeout(err):
			rec.Status, rec.Reason = http.StatusRequestTimeout,
				fmt.Sprintf("request header not complete within %s", p.cfg.HeaderTimeout)
		default:
			return nil, nil, false // the client went away mid-header
		}
		p.replyClose(s, rec.Status, "egress: "+rec.Reason)
		return nil, rec, false
	}
	if err := checkHead(head); err != nil {
		rec := &Record{Rule: ruleRequest, Reason: err.Error(), Status: http.StatusBadRequest, Start: start}
		p.replyClose(s, rec.Status, "egress: "+rec.Reason)
		return nil, rec, false
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		rec := &Record{Rule: ruleRequest, Reason: "malformed HTTP request", Error: err.Error(),
			Status: http.StatusBadRequest, Start: start}
		p.replyClose(s, rec.Status, "egress: "+rec.Reason)
		return nil, rec, false
	}
	c.SetReadDeadline(time.Time{})
	rec := &Record{Method: req.Method, Start: start}
	if req.ProtoMajor != 1 {
		rec.Rule, rec.Reason, rec.Status = ruleRequest, fmt.Sprintf("protocol %q is not HTTP/1.x", req.Proto), http.StatusHTTPVersionNotSupported
		p.replyClose(s, rec.Status, "egress: "+rec.Reason)
		return nil, rec, false
	}
	return req, rec, true
}

// reply writes a complete error response with a one-line body and asks
// the client to close.
func (p *Proxy) reply(c net.Conn, code int, line string) {
	body := line + "\n"
	c.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
	c.SetWriteDeadline(time.Time{})
}

// replyClose replies like reply; the connection then closes, lingering.
func (p *Proxy) replyClose(s *session, code int, line string) {
	p.reply(s.client, code, line)
	s.linger = true
}

// lingerClose half-closes c and discards what the client still sends for
// up to d before closing, so that closing with unread input does not reset
// the connection before the client has read the reply.
func lingerClose(c net.Conn, d time.Duration) {
	closeWrite(c)
	c.SetReadDeadline(time.Now().Add(min(d, 250*time.Millisecond)))
	var buf [4096]byte
	for n := 0; n < 64<<10; {
		m, err := c.Read(buf[:])
		n += m
		if err != nil {
			break
		}
	}
	c.Close()
}

// closeWrite half-closes c when it can.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dial resolves (through vet) and connects to host:port, registering the
// upstream connection with the session.
func (p *Proxy) dial(s *session, host string, port int) (verdict, net.Conn, error) {
	ctx, cancel := context.WithTimeout(s.ctx, p.cfg.DialTimeout)
	defer cancel()
	v := p.vet(ctx, host, port)
	if !v.allow || v.err != nil {
		return v, nil, v.err
	}
	var first error
	for _, a := range v.addrs {
		up, err := p.cfg.Dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			v.addr = a
			if !s.setUp(up, host, port, a) {
				return v, nil, errors.New("connection closed")
			}
			// A policy replaced since vet decided: Set closes what it
			// saw established; this connection may have been set up
			// after it looked, so it is checked here.
			if e := p.pol.Enforcer(); e != v.enf && !p.allows(e, host, a, port) {
				s.dropUp()
				return v, nil, errors.New(cutReason)
			}
			return v, up, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return v, nil, fmt.Errorf("dial %s port %d: %w", host, port, first)
}

// deny records a denial and answers the client with its one-line form.
func (p *Proxy) deny(s *session, rec *Record, v verdict) {
	rec.Allow, rec.Rule, rec.Reason, rec.Hint, rec.Addr = false, v.rule, v.reason, v.hint, v.addr
	rec.Status = http.StatusForbidden
	p.record(*rec)
	p.replyClose(s, rec.Status, rec.String())
}

// refuseRepo records a request the repository's confinement refuses
// (rule "repository", 403).
func (p *Proxy) refuseRepo(s *session, rec *Record, reason string) {
	rec.Allow, rec.Rule, rec.Reason, rec.Status = false, ruleRepository, reason, http.StatusForbidden
	p.record(*rec)
	p.replyClose(s, rec.Status, "egress: refused: "+reason)
}

// refuse records a refusal of a malformed request (rule "request", 400).
func (p *Proxy) refuse(s *session, rec *Record, code int, reason string) {
	rec.Rule, rec.Reason, rec.Status = ruleRequest, reason, code
	p.record(*rec)
	p.replyClose(s, code, "egress: "+reason)
}

// failUpstream records an allowed request whose upstream failed, and
// answers 502 without the details.
func (p *Proxy) failUpstream(s *session, rec *Record, v verdict, err error) {
	rec.Allow, rec.Rule, rec.Reason, rec.Addr = true, v.rule, v.reason, v.addr
	rec.Status, rec.Error = http.StatusBadGateway, err.Error()
	p.record(*rec)
	p.replyClose(s, rec.Status, fmt.Sprintf("egress: cannot reach %s: %s", net.JoinHostPort(rec.Host, strconv.Itoa(rec.Port)), upstreamReason(err)))
}

// upstreamReason names why an allowed upstream could not be reached, in
// words safe to give the client: a class of failure, never the error's
// text (which can carry resolved addresses and internals).
func upstreamReason(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, errResolve) && (!errors.As(err, &dnsErr) || dnsErr.IsNotFound):
		return "the name does not resolve"
	case errors.Is(err, errResolve):
		return "the name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "timed out"
	default:
		return "the connection failed"
	}
}
