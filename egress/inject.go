package egress

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Injection adds one header, holding a credential the sandbox never sees,
// to every plain HTTP request the proxy forwards to exactly one host and
// port (docs/governance.md, "Delivery into a run"). The host is compared
// with the request's host as the proxy parsed it, byte for byte: no
// suffix, no wildcard, no other port. A request through a CONNECT tunnel
// is never touched (its bytes are not parsed), so an HTTPS destination
// gets no injection.
type Injection struct {
	Host   string
	Port   int
	Header string // a canonical header name, e.g. "Authorization"
	// Value is the header's value. The caller owns it and wipes it once
	// the proxy is closed; the proxy never records or logs it.
	Value []byte
	// Label names the injection in the proxy's records (Record.Injected),
	// e.g. `Authorization from secret "gh"`; never the value.
	Label string
	// Path, if not "", narrows the injection to requests whose path
	// (before the query) is Path or below it (Path + "/…"), in the one
	// spelling checkRepoPath allows: a request path with a dot or empty
	// segment, or any percent escape, gets no injection. Path is "/…"
	// without a trailing slash.
	Path string
}

// forbiddenInject are headers an injection may not set: framing, routing
// and hop-by-hop headers the proxy itself writes or removes.
var forbiddenInject = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Te": true, "Trailer": true, "Upgrade": true, "Expect": true,
	"Proxy-Connection": true, "Proxy-Authorization": true, "Proxy-Authenticate": true,
}

// CheckInjection checks one injection's host, port and header name.
func CheckInjection(in Injection) error {
	switch {
	case in.Host == "" || strings.Trim(in.Host, "abcdefghijklmnopqrstuvwxyz0123456789.-:") != "":
		return fmt.Errorf("egress: injection host %q is not a canonical host name or address", in.Host)
	case in.Port < 1 || in.Port > 65535:
		return fmt.Errorf("egress: injection port %d is not 1 to 65535", in.Port)
	case !httpguts.ValidHeaderFieldName(in.Header) || textproto.CanonicalMIMEHeaderKey(in.Header) != in.Header:
		return fmt.Errorf("egress: injection header %q is not a canonical header name (e.g. Authorization)", in.Header)
	case forbiddenInject[in.Header] || strings.HasPrefix(in.Header, "Proxy-"):
		return fmt.Errorf("egress: injection header %q frames or routes the request; the proxy sets it", in.Header)
	case in.Path != "" && checkRepoPath(in.Path) != nil:
		return fmt.Errorf("egress: injection path %q: %v", in.Path, checkRepoPath(in.Path))
	case len(in.Value) == 0 || !httpguts.ValidHeaderFieldValue(string(in.Value)):
		return fmt.Errorf("egress: the value injected as %s for %s is empty or holds bytes a header cannot (a newline, a control character)", in.Header, in.Host)
	}
	return nil
}

// inject sets the headers of the injections for t on h, replacing what
// the client sent under those names (the sandbox cannot choose the
// value), and returns their labels. h is the header as sent upstream,
// after the hop-by-hop ones are removed, so a client's Connection header
// cannot name an injected header away.
func inject(ins []Injection, h http.Header, t target) []string {
	var labels []string
	for _, in := range ins {
		if in.Host == t.host && in.Port == t.port && in.covers(t.path) {
			h[in.Header] = []string{string(in.Value)}
			labels = append(labels, in.Label)
		}
	}
	return labels
}

// covers reports whether the injection applies to a request for target
// (origin-form path and query).
func (in Injection) covers(target string) bool {
	if in.Path == "" {
		return true
	}
	p, _, _ := strings.Cut(target, "?")
	return checkRequestPath(p) == nil && (p == in.Path || strings.HasPrefix(p, in.Path+"/"))
}
