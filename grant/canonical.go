package grant

import (
	"fmt"
	"net/netip"
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// checkText refuses strings that could alias another: invalid UTF-8, NUL
// and other control characters, Unicode noncharacters (which no canonical
// document can hold, docs/SPEC.md §2.2), and text that is not in NFC.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("invalid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("control character U+%04X", r)
		}
		if isNoncharacter(r) {
			return fmt.Errorf("noncharacter U+%04X", r)
		}
	}
	if !norm.NFC.IsNormalString(s) {
		return fmt.Errorf("not in Unicode NFC form")
	}
	return nil
}

// CheckPath reports whether p is a canonical absolute path: it starts with
// "/", has no empty, "." or ".." segment, no trailing "/" (except "/"
// itself), and passes checkText. Nothing is normalized.
func CheckPath(p string) error {
	if p == "" || p[0] != '/' {
		return fmt.Errorf("path %q is not absolute", p)
	}
	if err := checkText(p); err != nil {
		return fmt.Errorf("path %q: %v", p, err)
	}
	if p != "/" && path.Clean(p) != p {
		return fmt.Errorf("path %q is not canonical (empty, \".\" or \"..\" segment, or trailing slash)", p)
	}
	return nil
}

// underPath reports whether p is root or lies beneath it, on segment
// boundaries: "/data" covers "/data/x" but never "/data2". Both must have
// passed CheckPath.
func underPath(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root) && p[len(root)] == '/'
}

// hostProfile checks hosts the way the egress proxy will: IDNA 2008 lookup
// rules, on ASCII input only. A host is canonical when it is already
// what ToASCII returns for it.
var hostProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.ValidateLabels(true), idna.StrictDomainName(true), idna.VerifyDNSLength(true))

// CheckHost reports whether h is a canonical host name: lower-case ASCII
// (IDNA A-labels for non-ASCII names), no trailing dot, labels of letters,
// digits and hyphens, at most 63 bytes each and 253 in all, and not an IP
// address in any spelling (dotted, shortened, hex, octal or a bare
// integer): IP addresses belong in CIDR grants.
func CheckHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty host")
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("host %q is not canonical: byte %q (hosts are lower-case ASCII; write IDNA names as xn-- labels)", h, c)
		}
	}
	if strings.HasSuffix(h, ".") {
		return fmt.Errorf("host %q is not canonical: trailing dot", h)
	}
	last := h[strings.LastIndexByte(h, '.')+1:]
	if allDigits(last) || strings.HasPrefix(last, "0x") {
		return fmt.Errorf("host %q looks like an IP address; grant and request IP addresses as CIDRs and addresses", h)
	}
	if !strings.Contains(h, "--") && plainLDH(h) {
		return nil // what the IDNA profile accepts unchanged, without its cost
	}
	a, err := hostProfile.ToASCII(h)
	if err != nil {
		return fmt.Errorf("host %q is not a valid IDNA name: %v", h, err)
	}
	if a != h {
		return fmt.Errorf("host %q is not canonical: its IDNA form is %q", h, a)
	}
	return nil
}

// plainLDH reports whether h, already known to hold only a-z 0-9 '-' '.',
// is a host name the IDNA lookup profile returns unchanged: labels of 1 to
// 63 bytes that neither start nor end with '-', 253 bytes in all. Names
// with "--" (A-labels and reserved labels) go through the profile itself.
// TestPlainLDHMatchesIDNA checks the two agree.
func plainLDH(h string) bool {
	if len(h) > 253 {
		return false
	}
	for len(h) > 0 {
		i := strings.IndexByte(h, '.')
		label := h
		if i >= 0 {
			label, h = h[:i], h[i+1:]
			if h == "" {
				return false // trailing dot: refused earlier, but be exact
			}
		} else {
			h = ""
		}
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// HostPattern is a canonical host or "*." followed by one: the wildcard
// covers any name with at least one more label, never the apex.
type HostPattern struct {
	Name     string // canonical host, without the "*." of a wildcard
	Wildcard bool
}

func (p HostPattern) String() string {
	if p.Wildcard {
		return "*." + p.Name
	}
	return p.Name
}

func parseHostPattern(s string) (HostPattern, error) {
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		if err := CheckHost(rest); err != nil {
			return HostPattern{}, err
		}
		if !strings.Contains(rest, ".") {
			return HostPattern{}, fmt.Errorf("host %q: a wildcard must keep at least two labels (no \"*.com\")", s)
		}
		return HostPattern{Name: rest, Wildcard: true}, nil
	}
	if strings.Contains(s, "*") {
		return HostPattern{}, fmt.Errorf("host %q: \"*\" is allowed only as a whole leftmost label", s)
	}
	if err := CheckHost(s); err != nil {
		return HostPattern{}, err
	}
	return HostPattern{Name: s}, nil
}

// matches reports whether the canonical host h is covered by p.
func (p HostPattern) matches(h string) bool {
	if !p.Wildcard {
		return h == p.Name
	}
	return strings.HasSuffix(h, "."+p.Name)
}

// coversPattern reports whether every host c matches, p matches too.
func (p HostPattern) coversPattern(c HostPattern) bool {
	switch {
	case !p.Wildcard:
		return !c.Wildcard && c.Name == p.Name
	case !c.Wildcard:
		return p.matches(c.Name)
	default:
		return c.Name == p.Name || p.matches(c.Name)
	}
}

// parsePrefix parses a canonical CIDR: masked, no zone, IPv4 written as
// IPv4 (never IPv4-mapped IPv6).
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("cidr %q: %v", s, err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("cidr %q: IPv4-mapped IPv6; write the IPv4 prefix", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("cidr %q is not canonical: host bits set (want %s)", s, p.Masked())
	}
	if p.String() != s {
		return netip.Prefix{}, fmt.Errorf("cidr %q is not canonical (want %s)", s, p)
	}
	return p, nil
}

// parseAddr parses a canonical IP address for a request: IPv4 dotted quad
// or RFC 5952 IPv6, no zone, not IPv4-mapped.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("address %q: %v", s, err)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q has a zone", s)
	}
	if a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("address %q is IPv4-mapped IPv6; use the IPv4 address", s)
	}
	if a.String() != s {
		return netip.Addr{}, fmt.Errorf("address %q is not canonical (want %s)", s, a)
	}
	if a.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("address %q is the unspecified address, which connects to this host", s)
	}
	return a, nil
}

// looksLikeAddr reports whether a request host is meant as an IP literal
// (it has a ':' or only digits and dots), so it is parsed as one.
func looksLikeAddr(s string) bool {
	if strings.Contains(s, ":") {
		return true
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] == '.' || '0' <= s[i] && s[i] <= '9') {
			return false
		}
	}
	return s != ""
}

// checkIdent checks names of device classes, services, methods and kv
// namespaces: lower-case ASCII letters, digits, '-', '_' and '.', starting
// with a letter, at most 64 bytes.
func checkIdent(what, s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("%s %q: want 1 to 64 characters", what, s)
	}
	if !('a' <= s[0] && s[0] <= 'z') {
		return fmt.Errorf("%s %q: must start with a lower-case letter", what, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%s %q: byte %q is not allowed (lower-case letters, digits, - _ .)", what, s, c)
		}
	}
	return nil
}

// checkSegment checks one kv key segment: non-empty text without '/',
// no percent-encoding, not "." or "..".
func checkSegment(s string) error {
	if s == "" || s == "." || s == ".." {
		return fmt.Errorf("key segment %q is not allowed", s)
	}
	if strings.ContainsAny(s, "/%") {
		return fmt.Errorf("key segment %q contains '/' or '%%'; segments are separate array elements", s)
	}
	return checkText(s)
}

// checkEnvName checks an environment variable name: [A-Za-z_][A-Za-z0-9_]*.
func checkEnvName(s string) error {
	if s == "" {
		return fmt.Errorf("empty environment variable name")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("environment variable name %q: byte %q is not allowed", s, c)
		}
	}
	return nil
}

// checkExecName checks an executable name: a basename, no '/', not "." or
// "..", canonical text.
func checkExecName(s string) error {
	if s == "" || s == "." || s == ".." || strings.Contains(s, "/") {
		return fmt.Errorf("executable name %q must be a basename", s)
	}
	return checkText(s)
}

// checkArg checks an argv token of a grant or a request: UTF-8 without NUL
// or noncharacters. (Other control characters are legitimate in arguments.)
func checkArg(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("argument %q contains NUL", s)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("argument %q is not UTF-8", s)
	}
	for _, r := range s {
		if isNoncharacter(r) {
			return fmt.Errorf("argument %q contains noncharacter U+%04X", s, r)
		}
	}
	return nil
}

func isNoncharacter(r rune) bool {
	return r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE
}
