package grant

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// Adversarial tests: each case is an attack on the Enforcer or on Parse,
// taken from docs/research (grants-anchors.md §5), and asserts a concrete
// outcome. A non-canonical request must be a denial whose Rule is
// "request"; a canonical one that no rule grants is a "default" denial; a
// deny rule names itself even when no allow rule would have matched.

// advFacts are the required facts of every grant set in this file.
const advFacts = `"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false`

// advDoc returns a grant set document with the required facts and the
// given members (a comma-separated list of JSON members, or "").
func advDoc(members string) string {
	if members == "" {
		return "{" + advFacts + "}"
	}
	return "{" + advFacts + "," + members + "}"
}

// advEnforcer parses advDoc(members) and compiles it; the document must be
// valid.
func advEnforcer(t *testing.T, members string) *Enforcer {
	t.Helper()
	doc := advDoc(members)
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	return New(s)
}

// advCheck decides q and compares the outcome and the deciding rule. It also
// checks that the decision record of even the nastiest request is canonical
// JSON that canon.Parse accepts, since the journal chains those records.
func advCheck(t *testing.T, e *Enforcer, q Query, allow bool, rule string) {
	t.Helper()
	d := e.Decide(q)
	if d.Allow != allow || d.Rule != rule {
		t.Errorf("Decide(%+v) = %v (%s: %s), want %v (%s)", q, d.Allow, d.Rule, d.Reason, allow, rule)
	}
	if rule == "request" && !strings.HasPrefix(d.Reason, "request is not canonical") {
		t.Errorf("Decide(%+v).Reason = %q, want a \"request is not canonical\" reason", q, d.Reason)
	}
	if d.Grants != e.Set().ID() {
		t.Errorf("Decide(%+v).Grants = %s, want the set's ID %s", q, d.Grants, e.Set().ID())
	}
	rec := d.Record()
	if _, err := canon.Parse(rec); err != nil {
		t.Errorf("Decide(%+v).Record() = %s: not canonical JSON: %v", q, rec, err)
	}
}

// advID returns the ContentId text of b.
func advID(b string) string { return canon.Sum([]byte(b)).String() }

// advBadLastChar returns id with its last character replaced by one whose
// two spare bits are not zero: same digest bytes, non-canonical spelling.
func advBadLastChar(id string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, id[len(id)-1])
	return id[:len(id)-1] + string(alphabet[i^1])
}

func fsQ(op, p string) Query { return Query{Kind: KindFS, Op: op, Path: p} }

func egQ(host, proto string, port int) Query {
	return Query{Kind: KindEgress, Host: host, Proto: proto, Port: port}
}

func kvQ(ns, op string, key ...string) Query {
	return Query{Kind: KindKV, Namespace: ns, Op: op, Key: key}
}

func svcQ(name, method string) Query { return Query{Kind: KindService, Name: name, Method: method} }

func execQ(p, b3 string, argv ...string) Query {
	return Query{Kind: KindExec, Path: p, B3: b3, Argv: argv}
}

func TestAdversarialFS(t *testing.T) {
	e := advEnforcer(t, `
		"fs":[
			{"path":"/data","access":"ro"},
			{"path":"/data/out","access":"rw"},
			{"path":"/work","access":"rw"},
			{"path":"/opt/tools","access":"rx"},
			{"path":"/opt/dev","access":"rwx"},
			{"path":"/mixed","access":"rw"},
			{"path":"/mixed/ro","access":"ro"}
		],
		"deny":{"fs":["/data/secret","/work/.git/config"]}`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		// Controls: what the set does grant.
		{"read inside ro grant", fsQ("read", "/data/x"), true, "fs[0]"},
		{"read the granted dir itself", fsQ("read", "/data"), true, "fs[0]"},
		{"deepest granting rule decides", fsQ("read", "/data/out/r.txt"), true, "fs[1]"},
		{"write under nested rw grant", fsQ("write", "/data/out/r.txt"), true, "fs[1]"},
		{"three dots is a plain name", fsQ("read", "/data/..."), true, "fs[0]"},
		{"dot-prefixed name is a plain name", fsQ("read", "/data/..x"), true, "fs[0]"},
		{"full-width slash is a literal name byte under /data", fsQ("read", "/data/..\uff0fetc"), true, "fs[0]"},

		// 1. ".." and "." inside a granted prefix: refused, never normalized.
		{"dotdot escapes the grant", fsQ("read", "/data/../etc/passwd"), false, "request"},
		{"dotdot at the end", fsQ("read", "/data/x/.."), false, "request"},
		{"dotdot back into the grant", fsQ("read", "/data/../data/x"), false, "request"},
		{"dotdot above root", fsQ("read", "/../data/x"), false, "request"},
		{"single dot segment", fsQ("read", "/data/./x"), false, "request"},
		{"trailing dot segment", fsQ("read", "/data/."), false, "request"},
		{"write dotdot from rw into denied", fsQ("write", "/data/out/../secret/k"), false, "request"},

		// 2. Prefix confusion: coverage is by whole segments.
		{"sibling with the grant as string prefix", fsQ("read", "/data2/x"), false, "default"},
		{"longer name sharing the prefix", fsQ("read", "/database"), false, "default"},
		{"shorter name", fsQ("read", "/dat"), false, "default"},
		{"parent of the grant", fsQ("read", "/"), false, "default"},
		{"case alias of the grant", fsQ("read", "/Data/x"), false, "default"},
		{"backslash is not a separator", fsQ("read", "/data\\x"), false, "default"},
		{"full-width slash does not split segments", fsQ("read", "/data\uff0fx"), false, "default"},

		// 3. Trailing slash and double slash in requests.
		{"trailing slash", fsQ("read", "/data/"), false, "request"},
		{"trailing slash on a file", fsQ("read", "/data/x/"), false, "request"},
		{"double slash inside", fsQ("read", "/data//x"), false, "request"},
		{"leading double slash", fsQ("read", "//data/x"), false, "request"},
		{"only slashes", fsQ("read", "//"), false, "request"},

		// Relative and empty paths.
		{"relative path", fsQ("read", "data/x"), false, "request"},
		{"dot-relative path", fsQ("read", "./data/x"), false, "request"},
		{"dotdot-relative path", fsQ("read", "../data/x"), false, "request"},
		{"empty path", fsQ("read", ""), false, "request"},
		{"home-relative path", fsQ("read", "~/data"), false, "request"},

		// 8. NUL and control bytes.
		{"NUL then dotdot", fsQ("read", "/data/x\x00/../y"), false, "request"},
		{"trailing NUL", fsQ("read", "/data/x\x00"), false, "request"},
		{"C0 control", fsQ("read", "/data/\x01x"), false, "request"},
		{"newline", fsQ("read", "/data/a\nb"), false, "request"},
		{"tab", fsQ("read", "/data/a\tb"), false, "request"},
		{"DEL", fsQ("read", "/data/\x7f"), false, "request"},
		{"C1 control NEL", fsQ("read", "/data/a\u0085b"), false, "request"},
		{"invalid UTF-8", fsQ("read", "/data/\xff"), false, "request"},
		{"overlong UTF-8 slash", fsQ("read", "/data/\xc0\xafetc"), false, "request"},

		// 7. Unicode aliases: only NFC is canonical.
		{"NFD e plus combining acute", fsQ("read", "/data/cafe\u0301"), false, "request"},
		{"Angstrom sign (NFC maps it)", fsQ("read", "/data/\u212b"), false, "request"},
		{"NFD in the granted segment", fsQ("read", "/da\u0301ta/x"), false, "request"},
		// Noncharacters are not text in cordon (SPEC §2.2: a document holding
		// one is refused), so ParseQuery refuses them; the Go API must agree,
		// and the decision record cannot hold them (it writes U+FFFD).
		{"noncharacter U+FFFE", fsQ("read", "/data/\ufffe"), false, "request"},
		{"noncharacter U+FDD0", fsQ("read", "/data/\ufdd0"), false, "request"},

		// 10. Mode escalation.
		{"write under ro", fsQ("write", "/data/x"), false, "default"},
		{"exec under ro", fsQ("exec", "/data/x"), false, "default"},
		{"exec under rw", fsQ("exec", "/work/run.sh"), false, "default"},
		{"exec under rx", fsQ("exec", "/opt/tools/bin/cc"), true, "fs[3]"},
		{"read under rx", fsQ("read", "/opt/tools/bin/cc"), true, "fs[3]"},
		{"write under rx", fsQ("write", "/opt/tools/bin/cc"), false, "default"},
		{"exec under rwx", fsQ("exec", "/opt/dev/a"), true, "fs[4]"},
		{"write under rwx", fsQ("write", "/opt/dev/a"), true, "fs[4]"},
		// Allow rules are a union: a deeper ro rule does not take away the
		// write its rw parent grants (use deny.fs to carve out).
		{"deeper ro rule does not revoke write", fsQ("write", "/mixed/ro/x"), true, "fs[5]"},

		// deny.fs overrides every allow, at a parent directory and at the exact path.
		{"deny at the exact dir", fsQ("read", "/data/secret"), false, "deny.fs[0]"},
		{"deny beneath a denied dir", fsQ("read", "/data/secret/key.pem"), false, "deny.fs[0]"},
		{"deny deep beneath a denied dir", fsQ("write", "/data/secret/a/b/c"), false, "deny.fs[0]"},
		{"deny is segment-bounded", fsQ("read", "/data/secretive"), true, "fs[0]"},
		{"deny at the exact file, read", fsQ("read", "/work/.git/config"), false, "deny.fs[1]"},
		{"deny at the exact file, write", fsQ("write", "/work/.git/config"), false, "deny.fs[1]"},
		{"beneath a denied file path", fsQ("read", "/work/.git/config/x"), false, "deny.fs[1]"},
		{"sibling of a denied file", fsQ("write", "/work/.git/config.lock"), true, "fs[2]"},
		{"parent of a denied file", fsQ("read", "/work/.git"), true, "fs[2]"},

		// Unknown ops.
		{"unknown op", fsQ("append", "/data/x"), false, "request"},
		{"upper-case op", fsQ("READ", "/data/x"), false, "request"},
		{"access name as op", fsQ("ro", "/data/x"), false, "request"},
		{"empty op", fsQ("", "/data/x"), false, "request"},

		// Fields of another kind must not ride along.
		{"fs query with a host", Query{Kind: KindFS, Op: "read", Path: "/data/x", Host: "example.com"}, false, "request"},
		{"fs query with a port", Query{Kind: KindFS, Op: "read", Path: "/data/x", Port: 443}, false, "request"},
		{"fs query with argv", Query{Kind: KindFS, Op: "exec", Path: "/opt/tools/cc", Argv: []string{"cc"}}, false, "request"},
		{"fs query with a b3", Query{Kind: KindFS, Op: "exec", Path: "/opt/tools/cc", B3: advID("cc")}, false, "request"},
		{"upper-case kind", Query{Kind: "FS", Op: "read", Path: "/data/x"}, false, "request"},
		{"empty kind", Query{Op: "read", Path: "/data/x"}, false, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) { advCheck(t, e, tc.q, tc.allow, tc.rule) })
	}

	root := advEnforcer(t, `"fs":[{"path":"/","access":"ro"}],"deny":{"fs":["/etc/shadow","/proc"]}`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		{"root grant covers a file", fsQ("read", "/etc/passwd"), true, "fs[0]"},
		{"root grant covers root", fsQ("read", "/"), true, "fs[0]"},
		{"root grant is still ro", fsQ("write", "/tmp/x"), false, "default"},
		{"root grant is not exec", fsQ("exec", "/bin/sh"), false, "default"},
		{"deny under root grant", fsQ("read", "/etc/shadow"), false, "deny.fs[0]"},
		{"magic link under denied /proc", fsQ("read", "/proc/self/root"), false, "deny.fs[1]"},
		{"denied /proc itself", fsQ("read", "/proc"), false, "deny.fs[1]"},
		{"deny is segment-bounded under root", fsQ("read", "/procfs"), true, "fs[0]"},
		{"dotdot to a denied file", fsQ("read", "/tmp/../etc/shadow"), false, "request"},
		{"double slash to a denied file", fsQ("read", "//etc/shadow"), false, "request"},
		{"trailing slash on a denied dir", fsQ("read", "/proc/"), false, "request"},
	} {
		t.Run("root/"+tc.name, func(t *testing.T) { advCheck(t, root, tc.q, tc.allow, tc.rule) })
	}

	denyRoot := advEnforcer(t, `"fs":[{"path":"/data","access":"rwx"}],"deny":{"fs":["/"]}`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		{"deny of root overrides every allow", fsQ("read", "/data/x"), false, "deny.fs[0]"},
		{"deny of root denies root", fsQ("read", "/"), false, "deny.fs[0]"},
	} {
		t.Run("denyroot/"+tc.name, func(t *testing.T) { advCheck(t, denyRoot, tc.q, tc.allow, tc.rule) })
	}
}

func TestAdversarialEgress(t *testing.T) {
	e := advEnforcer(t, `
		"egress":[
			{"host":"example.com","proto":"tcp","ports":[443,443]},
			{"host":"*.example.net","proto":"tcp","ports":[443,443]},
			{"cidr":"10.0.0.0/8","proto":"tcp","ports":[1,65535]},
			{"cidr":"2001:db8::/32","proto":"tcp","ports":[443,443]},
			{"host":"api.example.org","proto":"tcp","ports":[8000,8080]},
			{"host":"dns.example.org","proto":"udp","ports":[53,53]},
			{"host":"xn--exmple-cua.com","proto":"tcp","ports":[443,443]},
			{"cidr":"127.0.0.0/8","proto":"tcp","ports":[8080,8080]},
			{"cidr":"::/0","proto":"tcp","ports":[22,22]},
			{"cidr":"0.0.0.0/0","proto":"udp","ports":[123,123]}
		],
		"deny":{"egress":[
			{"host":"evil.example.net"},
			{"host":"*.internal.example.net"},
			{"cidr":"10.66.0.0/16"},
			{"cidr":"169.254.0.0/16"},
			{"cidr":"2001:db8:bad::/48"}
		]}`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		// Controls.
		{"exact host", egQ("example.com", "tcp", 443), true, "egress[0]"},
		{"range low end", egQ("api.example.org", "tcp", 8000), true, "egress[4]"},
		{"range high end", egQ("api.example.org", "tcp", 8080), true, "egress[4]"},

		// 11. Case and trailing dot: refused, not folded.
		{"mixed case host", egQ("Example.COM", "tcp", 443), false, "request"},
		{"upper case host", egQ("EXAMPLE.COM", "tcp", 443), false, "request"},
		{"trailing dot", egQ("example.com.", "tcp", 443), false, "request"},
		{"trailing dot and case", egQ("Example.COM.", "tcp", 443), false, "request"},
		{"leading dot", egQ(".example.com", "tcp", 443), false, "request"},
		{"empty label", egQ("example..com", "tcp", 443), false, "request"},
		{"empty host", egQ("", "tcp", 443), false, "request"},
		{"trailing space", egQ("example.com ", "tcp", 443), false, "request"},
		{"host with a space", egQ("ex ample.com", "tcp", 443), false, "request"},
		{"underscore host", egQ("_dmarc.example.com", "tcp", 443), false, "request"},
		{"underscore in a label", egQ("a_b.example.net", "tcp", 443), false, "request"},
		{"host with a port", egQ("example.com:443", "tcp", 443), false, "request"},
		{"userinfo confusion", egQ("example.com@evil.com", "tcp", 443), false, "request"},
		{"host with a path", egQ("example.com/x", "tcp", 443), false, "request"},
		{"host with NUL", egQ("example.com\x00.evil.com", "tcp", 443), false, "request"},
		{"exact does not cover subdomains", egQ("a.example.com", "tcp", 443), false, "default"},

		// 13. Wildcards: at least one more label, never the apex, never a look-alike.
		{"wildcard skips the apex", egQ("example.net", "tcp", 443), false, "default"},
		{"wildcard skips a hyphenated look-alike", egQ("evil-example.net", "tcp", 443), false, "default"},
		{"wildcard skips a string suffix", egQ("xexample.net", "tcp", 443), false, "default"},
		{"wildcard skips the base as a prefix", egQ("example.net.evil.com", "tcp", 443), false, "default"},
		{"wildcard covers one label", egQ("a.example.net", "tcp", 443), true, "egress[1]"},
		{"wildcard covers two labels", egQ("a.b.example.net", "tcp", 443), true, "egress[1]"},
		{"wildcard request is not canonical", egQ("*.example.net", "tcp", 443), false, "request"},

		// 14. IP literal tricks: only canonical dotted quads and RFC 5952 IPv6.
		{"canonical loopback", egQ("127.0.0.1", "tcp", 8080), true, "egress[7]"},
		{"shortened IPv4", egQ("127.1", "tcp", 8080), false, "request"},
		{"hex first octet", egQ("0x7f.0.0.1", "tcp", 8080), false, "request"},
		{"hex integer", egQ("0x7f000001", "tcp", 8080), false, "request"},
		{"decimal integer", egQ("2130706433", "tcp", 8080), false, "request"},
		{"octal integer", egQ("017700000001", "tcp", 8080), false, "request"},
		{"octal first octet", egQ("010.0.0.1", "tcp", 80), false, "request"},
		{"octal loopback", egQ("0177.0.0.1", "tcp", 8080), false, "request"},
		{"leading zero last octet", egQ("127.0.0.01", "tcp", 8080), false, "request"},
		{"IPv4-mapped IPv6", egQ("::ffff:127.0.0.1", "tcp", 8080), false, "request"},
		{"IPv4-mapped IPv6 in hex", egQ("::ffff:7f00:1", "tcp", 8080), false, "request"},
		{"IPv4 with trailing dot", egQ("127.0.0.1.", "tcp", 8080), false, "request"},
		{"IPv4 with a port", egQ("127.0.0.1:8080", "tcp", 8080), false, "request"},
		{"bracketed IPv4", egQ("[127.0.0.1]", "tcp", 8080), false, "request"},
		{"bracketed IPv6", egQ("[::1]", "tcp", 22), false, "request"},
		{"five octets", egQ("10.0.0.0.1", "tcp", 80), false, "request"},
		{"zone", egQ("fe80::1%eth0", "tcp", 22), false, "request"},
		{"upper-case IPv6", egQ("2001:DB8::1", "tcp", 443), false, "request"},
		{"uncompressed IPv6", egQ("2001:db8:0:0:0:0:0:1", "tcp", 443), false, "request"},
		{"embedded dotted IPv6", egQ("::1.2.3.4", "tcp", 22), false, "request"},

		// CIDR grants: inside, outside, family.
		{"inside IPv4 cidr", egQ("10.1.2.3", "tcp", 22), true, "egress[2]"},
		{"outside IPv4 cidr", egQ("11.0.0.1", "tcp", 22), false, "default"},
		{"inside IPv6 cidr", egQ("2001:db8::1", "tcp", 443), true, "egress[3]"},
		{"outside IPv6 cidr", egQ("2001:db9::1", "tcp", 443), false, "default"},
		{"IPv6 /0 does not cover IPv4", egQ("192.0.2.1", "tcp", 22), false, "default"},
		{"IPv6 /0 covers IPv6", egQ("::1", "tcp", 22), true, "egress[8]"},
		{"IPv4 /0 does not cover IPv6", egQ("::1", "udp", 123), false, "default"},
		{"IPv4 /0 covers IPv4", egQ("192.0.2.1", "udp", 123), true, "egress[9]"},
		{"cidr grant does not cover a name", egQ("ten.example.org", "tcp", 22), false, "default"},

		// 17. Ports.
		{"port 0", egQ("example.com", "tcp", 0), false, "request"},
		{"port 65536", egQ("example.com", "tcp", 65536), false, "request"},
		{"negative port", egQ("example.com", "tcp", -1), false, "request"},
		{"port 443+65536 wraps to 443 in uint16", egQ("example.com", "tcp", 443+65536), false, "request"},
		{"port below range", egQ("api.example.org", "tcp", 7999), false, "default"},
		{"port above range", egQ("api.example.org", "tcp", 8081), false, "default"},
		{"port not granted", egQ("example.com", "tcp", 80), false, "default"},
		{"port 65535 on a full-range cidr", egQ("10.0.0.1", "tcp", 65535), true, "egress[2]"},

		// 18. Protocol is part of the capability.
		{"udp on a tcp grant", egQ("example.com", "udp", 443), false, "default"},
		{"tcp on a udp grant", egQ("dns.example.org", "tcp", 53), false, "default"},
		{"udp on a udp grant", egQ("dns.example.org", "udp", 53), true, "egress[5]"},
		{"upper-case proto", egQ("example.com", "TCP", 443), false, "request"},
		{"empty proto", egQ("example.com", "", 443), false, "request"},
		{"quic proto", egQ("example.com", "quic", 443), false, "request"},

		// deny.egress overrides allows: host, wildcard, cidr.
		{"deny host beats wildcard allow", egQ("evil.example.net", "tcp", 443), false, "deny.egress[0]"},
		{"deny host on every proto and port", egQ("evil.example.net", "udp", 53), false, "deny.egress[0]"},
		{"deny host is exact", egQ("a.evil.example.net", "tcp", 443), true, "egress[1]"},
		{"deny wildcard one label", egQ("x.internal.example.net", "tcp", 443), false, "deny.egress[1]"},
		{"deny wildcard two labels", egQ("a.b.internal.example.net", "tcp", 443), false, "deny.egress[1]"},
		// The wildcard of a deny has the same meaning as that of an allow:
		// it never covers the apex.
		{"deny wildcard skips its apex", egQ("internal.example.net", "tcp", 443), true, "egress[1]"},
		{"deny cidr beats cidr allow", egQ("10.66.1.2", "tcp", 22), false, "deny.egress[2]"},
		{"deny cidr boundary", egQ("10.67.0.0", "tcp", 22), true, "egress[2]"},
		{"deny cidr without any allow", egQ("169.254.169.254", "tcp", 80), false, "deny.egress[3]"},
		{"deny IPv6 cidr beats IPv6 /0", egQ("2001:db8:bad::1", "tcp", 22), false, "deny.egress[4]"},
		{"deny IPv6 cidr beats narrower-port allow", egQ("2001:db8:bad::1", "tcp", 443), false, "deny.egress[4]"},

		// 12. Unicode hosts: only A-labels are canonical.
		{"U-label host", egQ("ex\u00e4mple.com", "tcp", 443), false, "request"},
		{"NFD U-label host", egQ("exa\u0308mple.com", "tcp", 443), false, "request"},
		{"A-label host is canonical", egQ("xn--exmple-cua.com", "tcp", 443), true, "egress[6]"},
		{"upper-case A-label", egQ("XN--EXMPLE-CUA.COM", "tcp", 443), false, "request"},
		{"A-label is not its ASCII look-alike", egQ("example.com", "tcp", 443), true, "egress[0]"},
		{"Cyrillic a look-alike", egQ("ex\u0430mple.com", "tcp", 443), false, "request"},
		{"zero-width space", egQ("exa\u200bmple.com", "tcp", 443), false, "request"},
		{"full-width letter", egQ("\uff45xample.com", "tcp", 443), false, "request"},
		{"ideographic full stop", egQ("example\u3002com", "tcp", 443), false, "request"},

		// Fields of another kind.
		{"egress query with a path", Query{Kind: KindEgress, Host: "example.com", Proto: "tcp", Port: 443, Path: "/x"}, false, "request"},
		{"egress query with an op", Query{Kind: KindEgress, Host: "example.com", Proto: "tcp", Port: 443, Op: "read"}, false, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) { advCheck(t, e, tc.q, tc.allow, tc.rule) })
	}
}

func TestAdversarialExec(t *testing.T) {
	hGit, hLs, hCat, hPy, hEvil, hTool := advID("git"), advID("ls"), advID("cat"), advID("python3"), advID("evil"), advID("tool")

	names := advEnforcer(t, `"exec":{"allow":[{"name":"git","args":["log"]},{"name":"ls"}],"deny":["`+hEvil+`"]}`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		// Controls.
		{"allowed name and args", execQ("/usr/bin/git", hGit, "git", "log"), true, "exec.allow[0]"},
		{"args extend the granted prefix", execQ("/usr/bin/git", hGit, "git", "log", "--oneline"), true, "exec.allow[0]"},
		{"name rule in another dir", execQ("/tmp/git", hGit, "git", "log"), true, "exec.allow[0]"},
		{"unconstrained args", execQ("/bin/ls", hLs, "ls", "-la", "/"), true, "exec.allow[1]"},

		// 19. Argv prefix smuggling: the prefix is token-wise on argv[1:].
		{"global flag before the subcommand", execQ("/usr/bin/git", hGit, "git", "-c", "core.sshCommand=x", "log"), false, "default"},
		{"no args at all", execQ("/usr/bin/git", hGit, "git"), false, "default"},
		{"shell metacharacters in one token", execQ("/usr/bin/git", hGit, "git", "log; rm -rf ~"), false, "default"},
		{"subcommand glued to an option", execQ("/usr/bin/git", hGit, "git", "log=x"), false, "default"},
		{"pager flag before the subcommand", execQ("/usr/bin/git", hGit, "git", "--no-pager", "log"), false, "default"},
		{"case variant subcommand", execQ("/usr/bin/git", hGit, "git", "LOG"), false, "default"},
		{"empty first arg", execQ("/usr/bin/git", hGit, "git", "", "log"), false, "default"},
		{"other subcommand", execQ("/usr/bin/git", hGit, "git", "push"), false, "default"},

		// 20. Deny by hash survives rename and move, and beats allowed names.
		{"denied hash under an allowed name", execQ("/usr/bin/git", hEvil, "git", "log"), false, "exec.deny[0]"},
		{"denied hash renamed and moved", execQ("/tmp/x/renamed", hEvil, "renamed"), false, "exec.deny[0]"},
		{"denied hash as another allowed name", execQ("/home/u/ls", hEvil, "ls"), false, "exec.deny[0]"},
		{"denied hash with allowed argv", execQ("/opt/git", hEvil, "git", "log", "--oneline"), false, "exec.deny[0]"},

		// A name-only set still needs a rule.
		{"unlisted name", execQ("/bin/cat", hCat, "cat", "/etc/passwd"), false, "default"},
		{"case variant name", execQ("/usr/bin/GIT", hGit, "GIT", "log"), false, "default"},
		{"allowed name as a dir, other file", execQ("/usr/git/sh", hGit, "sh"), false, "default"},

		// Malformed requests.
		{"empty argv", execQ("/usr/bin/git", hGit), false, "request"},
		{"empty non-nil argv", Query{Kind: KindExec, Path: "/usr/bin/git", B3: hGit, Argv: []string{}}, false, "request"},
		{"NUL in an arg", execQ("/usr/bin/git", hGit, "git", "lo\x00g"), false, "request"},
		{"invalid UTF-8 arg", execQ("/usr/bin/git", hGit, "git", "log\xff"), false, "request"},
		{"b3 with upper-case prefix", execQ("/usr/bin/git", "B3:"+hGit[3:], "git", "log"), false, "request"},
		{"b3 with another algorithm prefix", execQ("/usr/bin/git", "sha256:"+hGit[3:], "git", "log"), false, "request"},
		{"b3 without prefix", execQ("/usr/bin/git", hGit[3:], "git", "log"), false, "request"},
		{"b3 with non-canonical last char", execQ("/usr/bin/git", advBadLastChar(hGit), "git", "log"), false, "request"},
		{"denied b3 with non-canonical last char", execQ("/usr/bin/git", advBadLastChar(hEvil), "git", "log"), false, "request"},
		{"b3 with padding", execQ("/usr/bin/git", hGit+"=", "git", "log"), false, "request"},
		{"b3 truncated", execQ("/usr/bin/git", hGit[:len(hGit)-1], "git", "log"), false, "request"},
		{"b3 in standard base64", execQ("/usr/bin/git", strings.NewReplacer("-", "+", "_", "/").Replace(hGit)+"+", "git", "log"), false, "request"},
		{"empty b3", execQ("/usr/bin/git", "", "git", "log"), false, "request"},
		{"relative exec path", execQ("git", hGit, "git", "log"), false, "request"},
		{"dotdot exec path", execQ("/usr/bin/../bin/git", hGit, "git", "log"), false, "request"},
		{"trailing slash exec path", execQ("/usr/bin/git/", hGit, "git", "log"), false, "request"},
		{"NUL in exec path", execQ("/usr/bin/git\x00", hGit, "git", "log"), false, "request"},
		{"exec query with an op", Query{Kind: KindExec, Path: "/usr/bin/git", B3: hGit, Argv: []string{"git", "log"}, Op: "exec"}, false, "request"},
	} {
		t.Run("names/"+tc.name, func(t *testing.T) { advCheck(t, names, tc.q, tc.allow, tc.rule) })
	}

	for _, tc := range []struct {
		name    string
		members string
		q       Query
		allow   bool
		rule    string
	}{
		{"deny hash beats allow of the same hash", `"exec":{"allow":[{"b3":"` + hGit + `"}],"deny":["` + hGit + `"]}`,
			execQ("/usr/bin/git", hGit, "git"), false, "exec.deny[0]"},
		{"deny hash beats allow of the same name and hash", `"exec":{"allow":[{"name":"git","b3":"` + hGit + `"}],"deny":["` + hGit + `"]}`,
			execQ("/usr/bin/git", hGit, "git"), false, "exec.deny[0]"},
		{"deny hash beats allow of the same name", `"exec":{"allow":[{"name":"git"}],"deny":["` + hGit + `"]}`,
			execQ("/usr/bin/git", hGit, "git"), false, "exec.deny[0]"},
		{"other hash under the same name still allowed", `"exec":{"allow":[{"name":"git"}],"deny":["` + hEvil + `"]}`,
			execQ("/usr/bin/git", hGit, "git"), true, "exec.allow[0]"},
		{"later deny entry still applies", `"exec":{"allow":[{"name":"git"}],"deny":["` + hCat + `","` + hGit + `"]}`,
			execQ("/usr/bin/git", hGit, "git"), false, "exec.deny[1]"},

		// An empty or absent exec section allows nothing.
		{"absent exec denies", ``, execQ("/usr/bin/git", hGit, "git"), false, "default"},
		{"empty allow denies", `"exec":{"allow":[]}`, execQ("/usr/bin/git", hGit, "git"), false, "default"},
		{"empty allow and deny denies", `"exec":{"allow":[],"deny":[]}`, execQ("/bin/sh", advID("sh"), "sh", "-c", "id"), false, "default"},
		{"deny-only set names the deny", `"exec":{"allow":[],"deny":["` + hEvil + `"]}`, execQ("/bin/evil", hEvil, "evil"), false, "exec.deny[0]"},
		{"deny-only set denies others by default", `"exec":{"allow":[],"deny":["` + hEvil + `"]}`, execQ("/bin/ls", hLs, "ls"), false, "default"},
		{"fs exec grant is not an exec rule", `"fs":[{"path":"/","access":"rwx"}]`, execQ("/usr/bin/git", hGit, "git"), false, "default"},
		{"empty args prefix allows any args", `"exec":{"allow":[{"name":"git","args":[]}]}`,
			execQ("/usr/bin/git", hGit, "git", "-c", "x=y", "push"), true, "exec.allow[0]"},
	} {
		t.Run("sets/"+tc.name, func(t *testing.T) { advCheck(t, advEnforcer(t, tc.members), tc.q, tc.allow, tc.rule) })
	}

	// A hash allowlist is authoritative: once any rule has a b3, a
	// name-only rule allows nothing, and a pinned name needs its hash.
	pinned := advEnforcer(t, `"exec":{"allow":[
		{"name":"git","b3":"`+hGit+`","args":["log"]},
		{"name":"python3"},
		{"b3":"`+hTool+`"}
	]}`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		{"pinned name and hash", execQ("/usr/bin/git", hGit, "git", "log"), true, "exec.allow[0]"},
		{"pinned name in another dir", execQ("/tmp/git", hGit, "git", "log"), true, "exec.allow[0]"},
		{"pinned name with smuggled args", execQ("/usr/bin/git", hGit, "git", "-c", "a=b", "log"), false, "default"},
		{"binary swap under a pinned name", execQ("/usr/bin/git", hEvil, "git", "log"), false, "default"},
		{"pinned hash under another name", execQ("/usr/bin/git2", hGit, "git2", "log"), false, "default"},
		{"name-only rule is inert", execQ("/usr/bin/python3", hPy, "python3"), false, "default"},
		{"name-only rule with a pinned hash of another name", execQ("/usr/bin/python3", hGit, "python3", "log"), false, "default"},
		{"hash-only rule under any name", execQ("/opt/anything", hTool, "anything"), true, "exec.allow[2]"},
		{"hash-only rule under a name-only rule's name", execQ("/usr/bin/python3", hTool, "python3"), true, "exec.allow[2]"},
		{"hash-only rule renamed to a pinned name", execQ("/usr/bin/git", hTool, "git", "push"), true, "exec.allow[2]"},
	} {
		t.Run("pinned/"+tc.name, func(t *testing.T) { advCheck(t, pinned, tc.q, tc.allow, tc.rule) })
	}
}

func TestAdversarialKV(t *testing.T) {
	e := advEnforcer(t, `"kv":[
		{"namespace":"app","prefix":["tenant1"],"ops":["get","list"]},
		{"namespace":"app","prefix":["tenant1","out"],"ops":["put"]},
		{"namespace":"shared","prefix":[],"ops":["get"]}
	]`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		// Controls.
		{"key under the prefix", kvQ("app", "get", "tenant1", "a"), true, "kv[0]"},
		{"the prefix itself", kvQ("app", "list", "tenant1"), true, "kv[0]"},
		{"nested put grant", kvQ("app", "put", "tenant1", "out", "x"), true, "kv[1]"},
		{"get under the nested rule falls back to the parent", kvQ("app", "get", "tenant1", "out", "x"), true, "kv[0]"},
		{"whole-namespace grant", kvQ("shared", "get", "anything", "deep"), true, "kv[2]"},
		{"whole-namespace grant, empty key", kvQ("shared", "get"), true, "kv[2]"},

		// 21. Prefix confusion and encoded separators.
		{"tenant10 is not tenant1", kvQ("app", "get", "tenant10", "a"), false, "default"},
		{"tenant10 alone", kvQ("app", "get", "tenant10"), false, "default"},
		{"shorter segment", kvQ("app", "get", "tenant"), false, "default"},
		{"above the prefix", kvQ("app", "list"), false, "default"},
		{"case variant segment", kvQ("app", "get", "Tenant1", "a"), false, "default"},
		{"slash inside a segment", kvQ("app", "get", "tenant1/a"), false, "request"},
		{"slash smuggling another tenant", kvQ("app", "get", "tenant1", "../tenant2"), false, "request"},
		{"encoded slash", kvQ("app", "get", "tenant1%2Fa"), false, "request"},
		{"lower-case encoded slash", kvQ("app", "get", "tenant1", "a%2fb"), false, "request"},
		{"encoded dotdot", kvQ("app", "get", "tenant1", "%2e%2e"), false, "request"},
		{"dotdot segment", kvQ("app", "get", "tenant1", "..", "tenant2"), false, "request"},
		{"dot segment", kvQ("app", "get", "tenant1", "."), false, "request"},
		{"empty segment", kvQ("app", "get", "tenant1", ""), false, "request"},
		{"NUL in a segment", kvQ("app", "get", "tenant1", "a\x00"), false, "request"},
		{"control in a segment", kvQ("app", "get", "tenant1", "a\nb"), false, "request"},
		{"NFD segment", kvQ("app", "get", "tenant1", "cafe\u0301"), false, "request"},
		{"invalid UTF-8 segment", kvQ("app", "get", "tenant1", "\xff"), false, "request"},
		{"noncharacter segment", kvQ("app", "get", "tenant1", "\uffff"), false, "request"},

		// Ops and namespaces.
		{"op not granted", kvQ("app", "put", "tenant1", "a"), false, "default"},
		{"delete not granted anywhere", kvQ("app", "delete", "tenant1", "out", "x"), false, "default"},
		{"put not granted on whole namespace", kvQ("shared", "put", "x"), false, "default"},
		{"upper-case op", kvQ("app", "GET", "tenant1", "a"), false, "request"},
		{"unknown op", kvQ("app", "scan", "tenant1"), false, "request"},
		{"empty op", kvQ("app", "", "tenant1"), false, "request"},
		{"namespace not granted", kvQ("other", "get", "tenant1", "a"), false, "default"},
		{"namespace as prefix of granted", kvQ("ap", "get", "tenant1"), false, "default"},
		{"namespace extending granted", kvQ("app2", "get", "tenant1"), false, "default"},
		{"upper-case namespace", kvQ("App", "get", "tenant1", "a"), false, "request"},
		{"namespace with a slash", kvQ("app/tenant1", "get", "a"), false, "request"},
		{"empty namespace", kvQ("", "get", "tenant1"), false, "request"},
		{"kv query with a path", Query{Kind: KindKV, Namespace: "app", Op: "get", Key: []string{"tenant1"}, Path: "/tenant1"}, false, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) { advCheck(t, e, tc.q, tc.allow, tc.rule) })
	}
}

func TestAdversarialServices(t *testing.T) {
	e := advEnforcer(t, `"services":[
		{"name":"broker","methods":["submit","status"]},
		{"name":"vault","methods":[]}
	]`)
	for _, tc := range []struct {
		name  string
		q     Query
		allow bool
		rule  string
	}{
		{"granted method", svcQ("broker", "submit"), true, "services[0]"},
		{"other granted method", svcQ("broker", "status"), true, "services[0]"},
		{"method not granted", svcQ("broker", "cancel"), false, "default"},
		{"method prefix of a granted one", svcQ("broker", "sub"), false, "default"},
		{"method extending a granted one", svcQ("broker", "submitall"), false, "default"},
		{"service with no methods", svcQ("vault", "read"), false, "default"},
		{"unknown service", svcQ("unknown", "submit"), false, "default"},
		{"service extending a granted one", svcQ("broker2", "submit"), false, "default"},
		{"dotted service name", svcQ("broker.submit", "submit"), false, "default"},
		{"upper-case method", svcQ("broker", "Submit"), false, "request"},
		{"upper-case service", svcQ("Broker", "submit"), false, "request"},
		{"empty method", svcQ("broker", ""), false, "request"},
		{"empty service", svcQ("", "submit"), false, "request"},
		{"method with a slash", svcQ("broker", "submit/../cancel"), false, "request"},
		{"service with a space", svcQ("broker ", "submit"), false, "request"},
		{"method with NUL", svcQ("broker", "submit\x00"), false, "request"},
		{"service query with an op", Query{Kind: KindService, Name: "broker", Method: "submit", Op: "get"}, false, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) { advCheck(t, e, tc.q, tc.allow, tc.rule) })
	}
}

func TestAdversarialParse(t *testing.T) {
	hGit := advID("git")
	for _, tc := range []struct {
		name string
		doc  string
	}{
		// Document level.
		{"empty input", ``},
		{"null", `null`},
		{"array", `[]`},
		{"empty object", `{}`},
		{"trailing comma", `{` + advFacts + `,}`},
		{"trailing garbage", advDoc("") + ` {}`},
		{"byte order mark", "\ufeff" + advDoc("")},

		// 43. Case-variant and duplicate member names.
		{"Code instead of code", `{"type":"cordon.grants.v1","Code":"untrusted","tenancy":"single","confidential":false}`},
		{"Code beside code", advDoc(`"Code":"trusted"`)},
		{"Type instead of type", `{"Type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false}`},
		{"Confidential instead of confidential", `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","Confidential":false}`},
		{"nested Path instead of path", advDoc(`"fs":[{"Path":"/data","access":"ro"}]`)},
		{"nested Access beside access", advDoc(`"fs":[{"path":"/data","access":"ro","Access":"rw"}]`)},
		{"upper-case limit name", advDoc(`"limits":{"WALL_MS":1000}`)},
		{"duplicate code", `{"type":"cordon.grants.v1","code":"untrusted","code":"trusted","tenancy":"single","confidential":false}`},
		{"duplicate code via escape", `{"type":"cordon.grants.v1","code":"untrusted","cod\u0065":"trusted","tenancy":"single","confidential":false}`},
		{"duplicate nested access", advDoc(`"fs":[{"path":"/data","access":"ro","access":"rw"}]`)},
		{"duplicate deny member", advDoc(`"deny":{"fs":["/etc"],"fs":[]}`)},
		{"duplicate limit", advDoc(`"limits":{"wall_ms":1,"wall_ms":1000000}`)},

		// 46. Unknown members, at the top and nested.
		{"unknown top-level member", advDoc(`"extra":1`)},
		{"unknown top-level kind", advDoc(`"network":[{"host":"example.com"}]`)},
		{"unknown top-level empty object", advDoc(`"x":{}`)},
		{"unknown fs member", advDoc(`"fs":[{"path":"/data","access":"ro","mode":"ro"}]`)},
		{"unknown egress member", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[443,443],"port":80}]`)},
		{"unknown exec member", advDoc(`"exec":{"allow":[],"allow_all":true}`)},
		{"unknown exec rule member", advDoc(`"exec":{"allow":[{"name":"git","argv":["log"]}]}`)},
		{"unknown limit", advDoc(`"limits":{"disk_bytes":1}`)},
		{"unknown deny member", advDoc(`"deny":{"kv":[]}`)},
		{"ports on a deny egress", advDoc(`"deny":{"egress":[{"host":"evil.com","ports":[443,443]}]}`)},
		{"unknown kv member", advDoc(`"kv":[{"namespace":"app","prefix":[],"ops":["get"],"prefixes":[]}]`)},
		{"unknown service member", advDoc(`"services":[{"name":"broker","methods":["submit"],"method":"x"}]`)},
		{"unknown device member", advDoc(`"devices":[{"class":"gpu","mode":"brokered","count":8}]`)},

		// Unknown values.
		{"unknown access", advDoc(`"fs":[{"path":"/data","access":"wx"}]`)},
		{"upper-case access", advDoc(`"fs":[{"path":"/data","access":"RO"}]`)},
		{"unknown proto", advDoc(`"egress":[{"host":"example.com","proto":"icmp","ports":[1,1]}]`)},
		{"upper-case proto", advDoc(`"egress":[{"host":"example.com","proto":"TCP","ports":[443,443]}]`)},
		{"unknown device mode", advDoc(`"devices":[{"class":"gpu","mode":"shared"}]`)},
		{"upper-case device class", advDoc(`"devices":[{"class":"GPU","mode":"direct"}]`)},
		{"unknown kv op", advDoc(`"kv":[{"namespace":"app","prefix":[],"ops":["scan"]}]`)},
		{"duplicate kv op", advDoc(`"kv":[{"namespace":"app","prefix":[],"ops":["get","get"]}]`)},
		{"unknown code", `{"type":"cordon.grants.v1","code":"partly","tenancy":"single","confidential":false}`},
		{"upper-case code", `{"type":"cordon.grants.v1","code":"Trusted","tenancy":"single","confidential":false}`},
		{"unknown tenancy", `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"shared","confidential":false}`},

		// Wrong types.
		{"confidential as a string", `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":"false"}`},
		{"confidential as an integer", `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":0}`},
		{"confidential null", `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":null}`},
		{"code as a boolean", `{"type":"cordon.grants.v1","code":true,"tenancy":"single","confidential":false}`},
		{"fs as an object", advDoc(`"fs":{"path":"/data","access":"ro"}`)},
		{"ports as an integer", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":443}]`)},
		{"ports as strings", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":["443","443"]}]`)},
		{"ports with null", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[443,null]}]`)},
		{"limits as an array", advDoc(`"limits":[1000]`)},
		{"limit as a string", advDoc(`"limits":{"wall_ms":"1000"}`)},
		{"exec as an array", advDoc(`"exec":[{"name":"git"}]`)},
		{"env as a string", advDoc(`"env":"PATH"`)},
		{"kv prefix as a string", advDoc(`"kv":[{"namespace":"app","prefix":"tenant1","ops":["get"]}]`)},

		// 27 and 44. Floats, big integers, negatives.
		{"float limit", advDoc(`"limits":{"wall_ms":1.5}`)},
		{"integral float limit", advDoc(`"limits":{"wall_ms":1.0}`)},
		{"exponent limit", advDoc(`"limits":{"wall_ms":1e3}`)},
		{"upper-case exponent limit", advDoc(`"limits":{"cpu_ms":1E3}`)},
		{"float port", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[443.0,443]}]`)},
		{"exponent port", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[443,4.43e2]}]`)},
		{"leading-zero port", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[0443,443]}]`)},
		{"integer 2^53", advDoc(`"limits":{"memory_bytes":9007199254740992}`)},
		{"integer 2^53+1", advDoc(`"limits":{"memory_bytes":9007199254740993}`)},
		{"integer 2^64-1", advDoc(`"limits":{"max_runs":18446744073709551615}`)},
		{"huge port", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[443,18446744073709551615]}]`)},
		{"negative limit", advDoc(`"limits":{"max_runs":-1}`)},
		{"most negative limit", advDoc(`"limits":{"pids":-9007199254740991}`)},
		{"negative zero limit", advDoc(`"limits":{"pids":-0}`)},

		// 3. Non-canonical grant paths.
		{"fs trailing slash", advDoc(`"fs":[{"path":"/data/","access":"ro"}]`)},
		{"fs double slash", advDoc(`"fs":[{"path":"/data//x","access":"ro"}]`)},
		{"fs leading double slash", advDoc(`"fs":[{"path":"//data","access":"ro"}]`)},
		{"fs trailing dot", advDoc(`"fs":[{"path":"/data/.","access":"ro"}]`)},
		{"fs dotdot", advDoc(`"fs":[{"path":"/data/../etc","access":"ro"}]`)},
		{"fs trailing dotdot", advDoc(`"fs":[{"path":"/data/..","access":"ro"}]`)},
		{"fs relative", advDoc(`"fs":[{"path":"data","access":"ro"}]`)},
		{"fs dot-relative", advDoc(`"fs":[{"path":"./data","access":"ro"}]`)},
		{"fs empty", advDoc(`"fs":[{"path":"","access":"ro"}]`)},
		{"fs NUL", advDoc(`"fs":[{"path":"/data\u0000/x","access":"ro"}]`)},
		{"fs control", advDoc(`"fs":[{"path":"/data\u0007","access":"ro"}]`)},
		{"fs NFD", advDoc(`"fs":[{"path":"/cafe\u0301","access":"ro"}]`)},
		{"fs missing access", advDoc(`"fs":[{"path":"/data"}]`)},
		{"deny.fs trailing slash", advDoc(`"deny":{"fs":["/etc/"]}`)},
		{"deny.fs relative", advDoc(`"deny":{"fs":["etc"]}`)},
		{"deny.fs dotdot", advDoc(`"deny":{"fs":["/data/../etc"]}`)},

		// 11-14. Non-canonical hosts and host patterns.
		{"host mixed case", advDoc(`"egress":[{"host":"Example.com","proto":"tcp","ports":[443,443]}]`)},
		{"host trailing dot", advDoc(`"egress":[{"host":"example.com.","proto":"tcp","ports":[443,443]}]`)},
		{"host empty label", advDoc(`"egress":[{"host":"example..com","proto":"tcp","ports":[443,443]}]`)},
		{"host leading dot", advDoc(`"egress":[{"host":".example.com","proto":"tcp","ports":[443,443]}]`)},
		{"host empty", advDoc(`"egress":[{"host":"","proto":"tcp","ports":[443,443]}]`)},
		{"host leading hyphen", advDoc(`"egress":[{"host":"-example.com","proto":"tcp","ports":[443,443]}]`)},
		{"host label over 63 bytes", advDoc(`"egress":[{"host":"` + strings.Repeat("a", 64) + `.com","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard over a TLD", advDoc(`"egress":[{"host":"*.com","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard in the middle", advDoc(`"egress":[{"host":"a.*.example.com","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard glued to a label", advDoc(`"egress":[{"host":"*example.com","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard inside a label", advDoc(`"egress":[{"host":"a*.example.com","proto":"tcp","ports":[443,443]}]`)},
		{"double wildcard", advDoc(`"egress":[{"host":"*.*.example.com","proto":"tcp","ports":[443,443]}]`)},
		{"double-star wildcard", advDoc(`"egress":[{"host":"**.example.com","proto":"tcp","ports":[443,443]}]`)},
		{"bare wildcard", advDoc(`"egress":[{"host":"*","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard of nothing", advDoc(`"egress":[{"host":"*.","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard trailing dot", advDoc(`"egress":[{"host":"*.example.com.","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard over an IP", advDoc(`"egress":[{"host":"*.0.0.1","proto":"tcp","ports":[443,443]}]`)},
		{"shortened IPv4 host", advDoc(`"egress":[{"host":"127.1","proto":"tcp","ports":[443,443]}]`)},
		{"dotted IPv4 as host", advDoc(`"egress":[{"host":"127.0.0.1","proto":"tcp","ports":[443,443]}]`)},
		{"hex IPv4 as host", advDoc(`"egress":[{"host":"0x7f.0.0.1","proto":"tcp","ports":[443,443]}]`)},
		{"integer IPv4 as host", advDoc(`"egress":[{"host":"2130706433","proto":"tcp","ports":[443,443]}]`)},
		{"IPv6 as host", advDoc(`"egress":[{"host":"::1","proto":"tcp","ports":[443,443]}]`)},
		{"U-label host", advDoc(`"egress":[{"host":"ex\u00e4mple.com","proto":"tcp","ports":[443,443]}]`)},
		{"underscore host", advDoc(`"egress":[{"host":"_dmarc.example.com","proto":"tcp","ports":[443,443]}]`)},
		{"host with a space", advDoc(`"egress":[{"host":"ex ample.com","proto":"tcp","ports":[443,443]}]`)},
		{"host with a port", advDoc(`"egress":[{"host":"example.com:443","proto":"tcp","ports":[443,443]}]`)},
		{"deny host mixed case", advDoc(`"deny":{"egress":[{"host":"Evil.com"}]}`)},
		{"deny wildcard over a TLD", advDoc(`"deny":{"egress":[{"host":"*.com"}]}`)},

		// CIDRs.
		{"cidr host bits set", advDoc(`"egress":[{"cidr":"10.0.0.1/8","proto":"tcp","ports":[443,443]}]`)},
		{"cidr IPv4-mapped", advDoc(`"egress":[{"cidr":"::ffff:10.0.0.0/104","proto":"tcp","ports":[443,443]}]`)},
		{"cidr IPv4-mapped space", advDoc(`"egress":[{"cidr":"::ffff:0:0/96","proto":"tcp","ports":[443,443]}]`)},
		{"cidr octal", advDoc(`"egress":[{"cidr":"010.0.0.0/8","proto":"tcp","ports":[443,443]}]`)},
		{"cidr without length", advDoc(`"egress":[{"cidr":"10.0.0.0","proto":"tcp","ports":[443,443]}]`)},
		{"cidr length too long", advDoc(`"egress":[{"cidr":"10.0.0.0/33","proto":"tcp","ports":[443,443]}]`)},
		{"cidr leading-zero length", advDoc(`"egress":[{"cidr":"10.0.0.0/08","proto":"tcp","ports":[443,443]}]`)},
		{"cidr upper-case IPv6", advDoc(`"egress":[{"cidr":"2001:DB8::/32","proto":"tcp","ports":[443,443]}]`)},
		{"cidr non-compressed IPv6", advDoc(`"egress":[{"cidr":"2001:db8:0::/48","proto":"tcp","ports":[443,443]}]`)},
		{"cidr with zone", advDoc(`"egress":[{"cidr":"fe80::%eth0/64","proto":"tcp","ports":[443,443]}]`)},
		{"deny cidr host bits set", advDoc(`"deny":{"egress":[{"cidr":"169.254.169.254/16"}]}`)},
		{"host and cidr", advDoc(`"egress":[{"host":"example.com","cidr":"10.0.0.0/8","proto":"tcp","ports":[443,443]}]`)},
		{"neither host nor cidr", advDoc(`"egress":[{"proto":"tcp","ports":[443,443]}]`)},
		{"deny with neither host nor cidr", advDoc(`"deny":{"egress":[{}]}`)},

		// 17. Ports.
		{"ports from 0", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[0,10]}]`)},
		{"ports reversed", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[10,5]}]`)},
		{"ports past 65535", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[1,65536]}]`)},
		{"ports negative", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[-1,10]}]`)},
		{"ports single element", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[443]}]`)},
		{"ports empty", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[]}]`)},
		{"ports three elements", advDoc(`"egress":[{"host":"example.com","proto":"tcp","ports":[1,2,3]}]`)},
		{"ports missing", advDoc(`"egress":[{"host":"example.com","proto":"tcp"}]`)},
		{"proto missing", advDoc(`"egress":[{"host":"example.com","ports":[443,443]}]`)},

		// Exec rules.
		{"exec rule with neither name nor b3", advDoc(`"exec":{"allow":[{}]}`)},
		{"exec rule with only args", advDoc(`"exec":{"allow":[{"args":["log"]}]}`)},
		{"exec name with a slash", advDoc(`"exec":{"allow":[{"name":"/usr/bin/git"}]}`)},
		{"exec name with a relative slash", advDoc(`"exec":{"allow":[{"name":"bin/git"}]}`)},
		{"exec name dotdot", advDoc(`"exec":{"allow":[{"name":".."}]}`)},
		{"exec name dot", advDoc(`"exec":{"allow":[{"name":"."}]}`)},
		{"exec name empty", advDoc(`"exec":{"allow":[{"name":""}]}`)},
		{"exec name NUL", advDoc(`"exec":{"allow":[{"name":"git\u0000"}]}`)},
		{"exec name NFD", advDoc(`"exec":{"allow":[{"name":"cafe\u0301"}]}`)},
		{"exec args NUL", advDoc(`"exec":{"allow":[{"name":"git","args":["lo\u0000g"]}]}`)},
		{"exec b3 upper-case prefix", advDoc(`"exec":{"allow":[{"b3":"B3:` + hGit[3:] + `"}]}`)},
		{"exec b3 non-canonical last char", advDoc(`"exec":{"allow":[{"b3":"` + advBadLastChar(hGit) + `"}]}`)},
		{"exec b3 empty", advDoc(`"exec":{"allow":[{"b3":""}]}`)},
		{"exec deny malformed", advDoc(`"exec":{"allow":[],"deny":["sha256:` + hGit[3:] + `"]}`)},
		{"exec deny non-canonical last char", advDoc(`"exec":{"allow":[],"deny":["` + advBadLastChar(hGit) + `"]}`)},
		{"exec without allow", advDoc(`"exec":{"deny":["` + hGit + `"]}`)},

		// KV, services, env.
		{"kv segment with a slash", advDoc(`"kv":[{"namespace":"app","prefix":["tenant1/a"],"ops":["get"]}]`)},
		{"kv segment with an encoded slash", advDoc(`"kv":[{"namespace":"app","prefix":["tenant1%2Fa"],"ops":["get"]}]`)},
		{"kv dotdot segment", advDoc(`"kv":[{"namespace":"app","prefix":["tenant1",".."],"ops":["get"]}]`)},
		{"kv empty segment", advDoc(`"kv":[{"namespace":"app","prefix":[""],"ops":["get"]}]`)},
		{"kv upper-case namespace", advDoc(`"kv":[{"namespace":"App","prefix":[],"ops":["get"]}]`)},
		{"service upper-case name", advDoc(`"services":[{"name":"Broker","methods":["submit"]}]`)},
		{"service duplicate method", advDoc(`"services":[{"name":"broker","methods":["submit","submit"]}]`)},
		{"service method with a slash", advDoc(`"services":[{"name":"broker","methods":["a/b"]}]`)},
		{"env leading digit", advDoc(`"env":["1PATH"]`)},
		{"env with a hyphen", advDoc(`"env":["A-B"]`)},
		{"env with an equals sign", advDoc(`"env":["LD_PRELOAD=/x.so"]`)},
		{"env duplicate", advDoc(`"env":["PATH","PATH"]`)},
		{"env empty name", advDoc(`"env":[""]`)},

		// Required facts and the type.
		{"missing code", `{"type":"cordon.grants.v1","tenancy":"single","confidential":false}`},
		{"missing tenancy", `{"type":"cordon.grants.v1","code":"untrusted","confidential":false}`},
		{"missing confidential", `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single"}`},
		{"missing type", `{"code":"untrusted","tenancy":"single","confidential":false}`},
		{"wrong type version", `{"type":"cordon.grants.v2","code":"untrusted","tenancy":"single","confidential":false}`},
		{"wrong type case", `{"type":"Cordon.Grants.V1","code":"untrusted","tenancy":"single","confidential":false}`},
		{"type of another object", `{"type":"cordon.unit.v1","code":"untrusted","tenancy":"single","confidential":false}`},
		{"empty type", `{"type":"","code":"untrusted","tenancy":"single","confidential":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse(%s) = %s, want an error wrapping ErrInvalid", tc.doc, s.JCS())
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%s) = %v, want an error wrapping ErrInvalid", tc.doc, err)
			}
			if s != nil {
				t.Errorf("Parse(%s) returned a set along with error %v", tc.doc, err)
			}
		})
	}

	// Near misses that are canonical and must parse, so that the refusals
	// above are refusals of the attack and not of everything nearby.
	for _, tc := range []struct {
		name string
		doc  string
	}{
		{"minimal", advDoc("")},
		{"A-label host", advDoc(`"egress":[{"host":"xn--exmple-cua.com","proto":"tcp","ports":[443,443]}]`)},
		{"wildcard with two labels", advDoc(`"egress":[{"host":"*.example.com","proto":"tcp","ports":[443,443]}]`)},
		{"single-label host", advDoc(`"egress":[{"host":"localhost","proto":"tcp","ports":[1,65535]}]`)},
		{"masked cidrs", advDoc(`"egress":[{"cidr":"10.0.0.0/8","proto":"udp","ports":[53,53]},{"cidr":"::/0","proto":"tcp","ports":[1,65535]},{"cidr":"0.0.0.0/0","proto":"tcp","ports":[80,80]}]`)},
		{"limits at 2^53-1 and 0", advDoc(`"limits":{"memory_bytes":9007199254740991,"max_runs":0}`)},
		{"root path", advDoc(`"fs":[{"path":"/","access":"rwx"}],"deny":{"fs":["/"]}`)},
		{"pinned exec with empty args", advDoc(`"exec":{"allow":[{"name":"git","b3":"` + hGit + `","args":[]}],"deny":["` + hGit + `"]}`)},
		{"whole-namespace kv", advDoc(`"kv":[{"namespace":"app","prefix":[],"ops":[]}]`)},
		{"reordered members", `{"confidential":true,"tenancy":"multi","code":"trusted","type":"cordon.grants.v1"}`},
	} {
		t.Run("accept/"+tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.doc)); err != nil {
				t.Errorf("Parse(%s) = %v, want a valid grant set", tc.doc, err)
			}
		})
	}
}

// TestAdversarialParseQuery attacks the query decoder: it is strict about
// member names and types, while a well-typed but non-canonical value parses
// and becomes a recorded "request" denial.
func TestAdversarialParseQuery(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
	}{
		{"case-variant member", `{"kind":"fs","op":"read","Path":"/data"}`},
		{"case-variant member beside the real one", `{"kind":"fs","op":"read","path":"/data","Path":"/etc"}`},
		{"duplicate member", `{"kind":"fs","op":"read","path":"/data","path":"/etc"}`},
		{"member of another kind", `{"kind":"fs","op":"read","path":"/data","host":"example.com"}`},
		{"unknown kind", `{"kind":"net","host":"example.com"}`},
		{"upper-case kind", `{"kind":"FS","op":"read","path":"/data"}`},
		{"missing member", `{"kind":"egress","host":"example.com","proto":"tcp"}`},
		{"float port", `{"kind":"egress","host":"example.com","proto":"tcp","port":443.0}`},
		{"leading-zero port", `{"kind":"egress","host":"example.com","proto":"tcp","port":0443}`},
		{"port as a string", `{"kind":"egress","host":"example.com","proto":"tcp","port":"443"}`},
		{"argv as a string", `{"kind":"exec","path":"/usr/bin/git","b3":"` + advID("git") + `","argv":"git log"}`},
		{"key as a string", `{"kind":"kv","namespace":"app","key":"tenant1/a","op":"get"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ParseQuery([]byte(tc.doc))
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseQuery(%s) = %+v, %v; want an error wrapping ErrInvalid", tc.doc, q, err)
			}
		})
	}

	e := advEnforcer(t, `"fs":[{"path":"/data","access":"ro"}]`)
	for _, tc := range []struct {
		name string
		doc  string
	}{
		{"dotdot path", `{"kind":"fs","op":"read","path":"/data/../etc/passwd"}`},
		{"escaped NUL path", `{"kind":"fs","op":"read","path":"/data/x\u0000/../y"}`},
		{"NFD path", `{"kind":"fs","op":"read","path":"/data/cafe\u0301"}`},
		// Ports outside 1..65535 parse, and Decide denies them as requests,
		// so the journal records the attempt.
		{"port 0", `{"kind":"egress","host":"example.com","proto":"tcp","port":0}`},
		{"port 65536", `{"kind":"egress","host":"example.com","proto":"tcp","port":65536}`},
		{"port huge", `{"kind":"egress","host":"example.com","proto":"tcp","port":9007199254740991}`},
		{"port negative", `{"kind":"egress","host":"example.com","proto":"tcp","port":-443}`},
	} {
		t.Run("decide/"+tc.name, func(t *testing.T) {
			q, err := ParseQuery([]byte(tc.doc))
			if err != nil {
				t.Fatalf("ParseQuery(%s) = %v, want a query for Decide to refuse", tc.doc, err)
			}
			advCheck(t, e, q, false, "request")
		})
	}
}

// TestAdversarialRecordsDistinct: the journal chains Decision.Record, so
// two different requests that are both allowed must never leave the same
// record; otherwise the journal cannot say which file, key or argv was used.
func TestAdversarialRecordsDistinct(t *testing.T) {
	hGit := advID("git")
	e := advEnforcer(t, `"fs":[{"path":"/data","access":"ro"}],"kv":[{"namespace":"app","prefix":[],"ops":["get"]}],"exec":{"allow":[{"name":"git"}]}`)
	for _, tc := range []struct {
		name string
		a, b Query
	}{
		{"fs path noncharacter vs replacement character", fsQ("read", "/data/\ufffe"), fsQ("read", "/data/\ufffd")},
		{"fs path two noncharacters", fsQ("read", "/data/\ufdd0"), fsQ("read", "/data/\uffff")},
		{"kv segment noncharacter vs replacement character", kvQ("app", "get", "\uffff"), kvQ("app", "get", "\ufffd")},
		{"exec argv noncharacter vs replacement character", execQ("/usr/bin/git", hGit, "git", "\ufffe"), execQ("/usr/bin/git", hGit, "git", "\ufffd")},
		{"fs plain control pair", fsQ("read", "/data/a"), fsQ("read", "/data/b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db := e.Decide(tc.a), e.Decide(tc.b)
			if da.Allow && db.Allow && string(da.Record()) == string(db.Record()) {
				t.Errorf("Decide(%+v) and Decide(%+v) are both allowed with the same record %s", tc.a, tc.b, da.Record())
			}
		})
	}
}

func TestEmptySetDeniesEverything(t *testing.T) {
	const doc = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false}`
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	if s.Trusted || s.MultiTenant || s.Confidential {
		t.Errorf("Parse(%s) facts = trusted %v, multi %v, confidential %v; want all false", doc, s.Trusted, s.MultiTenant, s.Confidential)
	}
	for _, f := range s.Limits.fields() {
		if *f.v != nil {
			t.Errorf("Parse(%s) limit %s = %d, want absent (not granted)", doc, f.name, **f.v)
		}
	}
	e := New(s)
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"device brokered", Query{Kind: KindDevice, Class: "cpu", Mode: "brokered"}},
		{"device direct", Query{Kind: KindDevice, Class: "gpu", Mode: "direct"}},
		{"fs read root", fsQ("read", "/")},
		{"fs write", fsQ("write", "/tmp/x")},
		{"fs exec", fsQ("exec", "/bin/sh")},
		{"egress host", egQ("example.com", "tcp", 443)},
		{"egress IPv4", egQ("127.0.0.1", "tcp", 80)},
		{"egress IPv6", egQ("::1", "udp", 53)},
		{"kv", kvQ("app", "get", "tenant1")},
		{"kv empty key", kvQ("app", "list")},
		{"service", svcQ("broker", "submit")},
		{"exec", execQ("/bin/sh", advID("sh"), "sh")},
		{"env", Query{Kind: KindEnv, Name: "PATH"}},
	} {
		t.Run(tc.name, func(t *testing.T) { advCheck(t, e, tc.q, false, "default") })
	}
}
