package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// target is a parsed request target: the host and port the decision is
// made on, and for plain HTTP the authority and path to forward.
type target struct {
	host      string // as written, without brackets; canonical form is judged by the Enforcer
	port      int    // 1..65535
	authority string // host[:port] for the upstream Host header (plain HTTP)
	path      string // origin-form path and query, starting with "/" (plain HTTP)
}

// parseAuthority parses a CONNECT request target, "host:port" (RFC 9110
// §9.3.6): a port is required and written in decimal without sign or
// leading zeros; an IPv6 literal is bracketed, and brackets hold nothing
// else.
func parseAuthority(s string) (target, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return target{}, fmt.Errorf("target %q is not host:port", s)
	}
	if host == "" {
		return target{}, fmt.Errorf("target %q has no host", s)
	}
	bracketed := strings.HasPrefix(s, "[")
	if bracketed != strings.Contains(host, ":") {
		return target{}, fmt.Errorf("target %q: only IPv6 addresses are written in brackets, and they must be", s)
	}
	port, err := parsePort(p)
	if err != nil {
		return target{}, fmt.Errorf("target %q: %v", s, err)
	}
	return target{host: host, port: port, authority: s}, nil
}

// parsePort parses a port: decimal digits, no sign, no leading zero,
// 1..65535.
func parsePort(p string) (int, error) {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return 0, fmt.Errorf("port %q is not a decimal number from 1 to 65535", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, fmt.Errorf("port %q is not a decimal number from 1 to 65535", p)
		}
	}
	n, _ := strconv.Atoi(p)
	if n > 65535 {
		return 0, fmt.Errorf("port %q is not a decimal number from 1 to 65535", p)
	}
	return n, nil
}

// parseAbsolute parses a plain request's target in absolute form,
// "http://host[:port][/path][?query]" (RFC 9112 §3.2.2). It refuses every
// other scheme (https belongs in a CONNECT tunnel), userinfo, fragments,
// an empty port and anything parseAuthority refuses. The port defaults to
// 80; an empty path becomes "/".
func parseAbsolute(s string) (target, error) {
	rest, ok := strings.CutPrefix(s, "http://")
	if !ok {
		if i := strings.Index(s, "://"); i > 0 && strings.EqualFold(s[:i], "https") {
			return target{}, fmt.Errorf("target %q: https goes through CONNECT, not an absolute URL", s)
		}
		return target{}, fmt.Errorf("target %q is not an absolute http:// URL", s)
	}
	if strings.ContainsRune(rest, '#') {
		return target{}, fmt.Errorf("target %q has a fragment", s)
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth, path := rest[:end], rest[end:]
	switch {
	case strings.ContainsRune(auth, '@'):
		return target{}, fmt.Errorf("target %q has userinfo", s)
	case auth == "":
		return target{}, fmt.Errorf("target %q has no host", s)
	case path == "":
		path = "/"
	case path[0] == '?':
		path = "/" + path
	}
	var t target
	if strings.HasSuffix(auth, "]") || !strings.Contains(auth, ":") {
		// No port: the whole authority is the host, bracketed when IPv6.
		h := auth
		if strings.HasPrefix(h, "[") {
			h = strings.TrimSuffix(h[1:], "]")
			if !strings.Contains(h, ":") || strings.ContainsAny(h, "[]") {
				return target{}, fmt.Errorf("target %q: only IPv6 addresses are written in brackets", s)
			}
		} else if strings.ContainsAny(h, "[]") {
			return target{}, fmt.Errorf("target %q: misplaced bracket", s)
		}
		t = target{host: h, port: 80, authority: auth}
	} else {
		var err error
		if t, err = parseAuthority(auth); err != nil {
			return target{}, fmt.Errorf("target %q: %v", s, err)
		}
	}
	t.path = path
	return t, nil
}

// Errors from reading a request header; the message is sent to the client.
var (
	errHeaderTooLarge = errors.New("request header too large")
	errBareLF         = errors.New("request header line ends in a bare LF, not CRLF")
)

// readHead waits until br holds a complete request header (through the
// empty line) and returns it without consuming it. br's buffer must hold
// at least max bytes. Every line must end in CRLF.
func readHead(br *bufio.Reader, max int) ([]byte, error) {
	scanned := 0
	for {
		if n := br.Buffered(); n > scanned {
			b, _ := br.Peek(n)
			for i := scanned; i < n; i++ {
				if b[i] != '\n' {
					continue
				}
				if i == 0 || b[i-1] != '\r' {
					return nil, errBareLF
				}
				if i >= 3 && b[i-3] == '\r' && b[i-2] == '\n' {
					return b[:i+1], nil
				}
			}
			scanned = n
		}
		if scanned >= max {
			return nil, errHeaderTooLarge
		}
		if _, err := br.Peek(scanned + 1); err != nil {
			return nil, err
		}
	}
}

// isToken reports whether b is an RFC 9110 §5.6.2 token, as a header
// field name must be (no spaces, no separators).
func isToken(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return len(b) > 0
}

// checkHead refuses what net/http would accept but a proxy must not pass
// on: control characters, obsolete line folding, and framing that two
// parsers could read differently, header names that are not tokens (Content-Length with Transfer-Encoding,
// either one repeated) — request smuggling (RFC 9112 §6.3, §11.2).
func checkHead(head []byte) error {
	lines := bytes.Split(bytes.TrimSuffix(head, []byte("\r\n\r\n")), []byte("\r\n"))
	var cl, te int
	for i, line := range lines {
		for _, c := range line {
			if c < 0x20 && c != '\t' || c == 0x7f {
				return fmt.Errorf("control character %#02x in the request header", c)
			}
		}
		if i == 0 {
			continue
		}
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			return errors.New("obsolete line folding in the request header")
		}
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok || !isToken(name) {
			return fmt.Errorf("malformed header field name %q", name)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			cl++
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			te++
		}
	}
	switch {
	case cl > 0 && te > 0:
		return errors.New("request has both Content-Length and Transfer-Encoding")
	case cl > 1:
		return errors.New("request has more than one Content-Length")
	case te > 1:
		return errors.New("request has more than one Transfer-Encoding")
	}
	return nil
}
