// Package gitremote validates the remote URL of a project's git
// repository, which the tenant writes, so that git — run inside the
// sandbox, never on the host — can reach exactly one destination: one
// host and port over smart HTTP, through an egress grant of exactly that
// host and port (docs/governance.md, "Sandboxed git with one
// destination").
//
// Validation is by allowlist, not by spotting bad shapes: the URL is
// `http://` or `https://`, a canonical host (grant.CheckHost) or an IP
// address literal, an optional port, and a path of plain segments. So a
// local path, `file://`, `ext::` and every other transport helper, SSH
// (`ssh://`, `user@host:path`), userinfo, a query or fragment, percent
// escapes, whitespace and control characters, `..`, and anything
// starting with `-` (an option to git) are refused without needing a
// rule of their own.
package gitremote

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cordon-dev/cordon/grant"
)

// ErrRemote is wrapped by every refusal.
var ErrRemote = errors.New("git remote refused")

// MaxLen bounds a remote URL.
const MaxLen = 1024

// Remote is a validated remote.
type Remote struct {
	URL    string     // exactly as given (it is canonical)
	Scheme string     // "http" or "https"
	Host   string     // a canonical host name, or "" when Addr is set
	Addr   netip.Addr // an IP literal host, unmapped; zero for a name
	Port   int        // explicit or the scheme's default
	Path   string     // "/…", without a query
}

// HostString is the host as the egress proxy sees it in a request: the
// name, or the address without brackets.
func (r *Remote) HostString() string {
	if r.Addr.IsValid() {
		return r.Addr.String()
	}
	return r.Host
}

// GrantEntry is the egress grant entry of exactly this destination, as
// JSON for a grant set's "egress" array.
func (r *Remote) GrantEntry() string {
	if r.Addr.IsValid() {
		return fmt.Sprintf(`{"cidr":%q,"proto":"tcp","ports":[%d,%d]}`, netip.PrefixFrom(r.Addr, r.Addr.BitLen()).String(), r.Port, r.Port)
	}
	return fmt.Sprintf(`{"host":%q,"proto":"tcp","ports":[%d,%d]}`, r.Host, r.Port, r.Port)
}

func refuse(u, format string, args ...any) error {
	return fmt.Errorf("%w: %q: %s; a repository URL is http(s)://HOST[:PORT]/PATH with a canonical host, no user name, query or escapes", ErrRemote, clip(u), fmt.Sprintf(format, args...))
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// Parse validates a tenant's remote URL.
func Parse(u string) (*Remote, error) {
	if len(u) == 0 || len(u) > MaxLen {
		return nil, refuse(u, "1 to %d bytes", MaxLen)
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c <= ' ' || c >= 0x7f || c == '\\' || c == '%' || c == '@' || c == '?' || c == '#' || c == '"' || c == '\'' || c == '`' || c == '$' {
			return nil, refuse(u, "byte %q is not allowed", c)
		}
	}
	r := &Remote{URL: u}
	var rest string
	switch {
	case strings.HasPrefix(u, "https://"):
		r.Scheme, r.Port, rest = "https", 443, u[len("https://"):]
	case strings.HasPrefix(u, "http://"):
		r.Scheme, r.Port, rest = "http", 80, u[len("http://"):]
	default:
		return nil, refuse(u, "only http:// and https:// remotes are allowed (no local paths, file://, ssh, git://, ext:: or other transports)")
	}
	auth, path, ok := strings.Cut(rest, "/")
	if !ok {
		return nil, refuse(u, "no path")
	}
	path = "/" + path
	host := auth
	if strings.HasPrefix(auth, "[") {
		end := strings.IndexByte(auth, ']')
		if end < 0 {
			return nil, refuse(u, "unclosed [")
		}
		host = auth[1:end]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" || a.Is4In6() || a.String() != host {
			return nil, refuse(u, "the bracketed host is not a canonical IPv6 address")
		}
		r.Addr = a
		auth = auth[end+1:]
		if auth != "" && !strings.HasPrefix(auth, ":") {
			return nil, refuse(u, "bytes after the IPv6 address")
		}
		if auth != "" {
			if err := r.port(u, auth[1:]); err != nil {
				return nil, err
			}
		}
	} else {
		if h, p, ok := strings.Cut(auth, ":"); ok {
			host = h
			if err := r.port(u, p); err != nil {
				return nil, err
			}
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if !a.Is4() || a.String() != host {
				return nil, refuse(u, "host %q is not a canonical IPv4 address", host)
			}
			r.Addr = a
		} else if err := grant.CheckHost(host); err != nil {
			return nil, refuse(u, "%v", err)
		} else {
			r.Host = host
		}
	}
	if len(path) < 2 {
		return nil, refuse(u, "the path names no repository")
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, "-") || strings.Contains(seg, "::") {
			return nil, refuse(u, "path segment %q (empty, dot, dot-dot, leading '-' or '::')", seg)
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '~') {
				return nil, refuse(u, "path byte %q (use A-Z a-z 0-9 . _ - ~ and /)", c)
			}
		}
	}
	r.Path = path
	return r, nil
}

func (r *Remote) port(u, p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return refuse(u, "port %q is not 1 to 65535 without leading zeros", p)
	}
	r.Port = n
	return nil
}

// CheckGrants checks that a grant set's network reach is exactly this
// remote: one egress rule, tcp, of exactly its host (or its address, as
// a /32 or /128) and its one port, and nothing else. Git in the sandbox
// can then reach no other destination, whatever remote it is told.
func (r *Remote) CheckGrants(gs *grant.Set) error {
	want := r.GrantEntry()
	if len(gs.Egress) != 1 {
		return fmt.Errorf("%w: the grant set has %d egress rules; a task with a repository has exactly one, %s", ErrRemote, len(gs.Egress), want)
	}
	e := gs.Egress[0]
	ok := e.Proto == "tcp" && int(e.PortLo) == r.Port && int(e.PortHi) == r.Port
	if r.Addr.IsValid() {
		ok = ok && e.CIDR.IsValid() && e.CIDR.Bits() == r.Addr.BitLen() && e.CIDR.Addr() == r.Addr
	} else {
		ok = ok && !e.CIDR.IsValid() && !e.Host.Wildcard && e.Host.Name == r.Host
	}
	if !ok {
		return fmt.Errorf("%w: the grant set's egress rule is not exactly the repository's destination; it must be %s", ErrRemote, want)
	}
	return nil
}

// ParseOrigin validates an origin, http(s)://HOST[:PORT] with no path,
// by the same rules as Parse: the destination of a credential the egress
// proxy injects.
func ParseOrigin(u string) (*Remote, error) {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		rest, ok = strings.CutPrefix(u, "https://")
	}
	if !ok || strings.Contains(rest, "/") || len(u) > MaxLen-2 {
		return nil, fmt.Errorf("%w: %q: an origin is http(s)://HOST[:PORT], with a canonical host and no path, user name or query", ErrRemote, clip(u))
	}
	r, err := Parse(u + "/_")
	if err != nil {
		return nil, err
	}
	r.URL, r.Path = u, ""
	return r, nil
}
