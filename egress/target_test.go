package egress

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestParseAuthority(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int
	}{
		{"allowed.test:443", "allowed.test", 443},
		{"127.0.0.1:1", "127.0.0.1", 1},
		{"[::1]:65535", "::1", 65535},
		{"[fe80::1%eth0]:80", "fe80::1%eth0", 80}, // parsed; the Enforcer refuses the zone
		{"ALLOWED.test:80", "ALLOWED.test", 80},   // parsed; the Enforcer refuses the case
		{"allowed.test", "", 0},
		{"allowed.test:", "", 0},
		{":443", "", 0},
		{"allowed.test:0", "", 0},
		{"allowed.test:0443", "", 0},
		{"allowed.test:+443", "", 0},
		{"allowed.test:-1", "", 0},
		{"allowed.test:65536", "", 0},
		{"allowed.test:443:80", "", 0},
		{"allowed.test:0x1bb", "", 0},
		{"allowed.test: 443", "", 0},
		{"allowed.test:443/", "", 0},
		{"::1:443", "", 0},
		{"[allowed.test]:443", "", 0},
		{"[127.0.0.1]:443", "", 0},
		{"http://allowed.test:443", "", 0},
		{"/path", "", 0},
		{"allowed.test:４４３", "", 0},
	} {
		got, err := parseAuthority(tc.in)
		if tc.host == "" {
			if err == nil {
				t.Errorf("parseAuthority(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got.host != tc.host || got.port != tc.port {
			t.Errorf("parseAuthority(%q) = %+v, %v; want %s port %d", tc.in, got, err, tc.host, tc.port)
		}
	}
}

func TestParseAbsolute(t *testing.T) {
	for _, tc := range []struct {
		in         string
		host       string
		port       int
		auth, path string
	}{
		{"http://allowed.test/", "allowed.test", 80, "allowed.test", "/"},
		{"http://allowed.test", "allowed.test", 80, "allowed.test", "/"},
		{"http://allowed.test?q=1", "allowed.test", 80, "allowed.test", "/?q=1"},
		{"http://allowed.test:8080/a/b?c=d", "allowed.test", 8080, "allowed.test:8080", "/a/b?c=d"},
		{"http://[::1]/x", "::1", 80, "[::1]", "/x"},
		{"http://[::1]:81/x", "::1", 81, "[::1]:81", "/x"},
		{"http://evil.test/http://allowed.test/", "evil.test", 80, "evil.test", "/http://allowed.test/"},
		{"http://evil.test?@allowed.test/", "evil.test", 80, "evil.test", "/?@allowed.test/"},
		{"http://allowed.test@evil.test/", "", 0, "", ""},
		{"http://allowed.test:80@evil.test/", "", 0, "", ""},
		{"http://@evil.test/", "", 0, "", ""},
		{"http://evil.test#@allowed.test/", "", 0, "", ""},
		{"http://allowed.test/#frag", "", 0, "", ""},
		{"http://allowed.test:/", "", 0, "", ""},
		{"http://allowed.test:080/", "", 0, "", ""},
		{"http://allowed.test:99999/", "", 0, "", ""},
		{"http:///path", "", 0, "", ""},
		{"http://", "", 0, "", ""},
		{"https://allowed.test/", "", 0, "", ""},
		{"HTTP://allowed.test/", "", 0, "", ""},
		{"ftp://allowed.test/", "", 0, "", ""},
		{"//allowed.test/", "", 0, "", ""},
		{"/", "", 0, "", ""},
		{"*", "", 0, "", ""},
		{"http://[allowed.test]/", "", 0, "", ""},
		{"http://[::1/", "", 0, "", ""},
		{"http://::1/", "", 0, "", ""},
		{"http://a]b/", "", 0, "", ""},
	} {
		got, err := parseAbsolute(tc.in)
		if tc.host == "" {
			if err == nil {
				t.Errorf("parseAbsolute(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		want := target{host: tc.host, port: tc.port, authority: tc.auth, path: tc.path}
		if err != nil || got != want {
			t.Errorf("parseAbsolute(%q) = %+v, %v; want %+v", tc.in, got, err, want)
		}
	}
}

// FuzzTarget checks both request-target parsers never panic and agree
// with independent readings: an accepted authority is exactly
// net.JoinHostPort of what was parsed, and an accepted absolute URL that
// net/url also reads has the same host, port, and no userinfo.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"allowed.test:443", "[::1]:80", "http://allowed.test/", "http://allowed.test:8080/a?b",
		"http://allowed.test@evil.test/", "http://[::1]:81/", "http://evil.test#@allowed.test/", "allowed.test:0443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if a, err := parseAuthority(s); err == nil {
			if a.port < 1 || a.port > 65535 || a.host == "" {
				t.Fatalf("parseAuthority(%q) = %+v", s, a)
			}
			if j := net.JoinHostPort(a.host, strconv.Itoa(a.port)); j != s {
				t.Errorf("parseAuthority(%q) = %+v, which joins to %q", s, a, j)
			}
		}
		a, err := parseAbsolute(s)
		if err != nil {
			return
		}
		if a.port < 1 || a.port > 65535 || a.host == "" || !strings.HasPrefix(a.path, "/") {
			t.Fatalf("parseAbsolute(%q) = %+v", s, a)
		}
		if rebuilt := "http://" + a.authority + a.path; rebuilt != s && rebuilt != s+"/" && "http://"+a.authority+a.path[1:] != s {
			t.Errorf("parseAbsolute(%q) = %+v, which rebuilds to %q", s, a, rebuilt)
		}
		u, err := url.ParseRequestURI(s)
		if err != nil || strings.Contains(a.host, "%") {
			return // net/http refuses it before the proxy sees it, or unescapes the host
		}
		port := 80
		if u.Port() != "" {
			port, _ = strconv.Atoi(u.Port())
		}
		if u.User != nil || u.Scheme != "http" || u.Hostname() != a.host || port != a.port {
			t.Errorf("parseAbsolute(%q) = %+v; net/url reads scheme %q user %v host %q port %q", s, a, u.Scheme, u.User, u.Hostname(), u.Port())
		}
	})
}

func TestCheckHead(t *testing.T) {
	for _, tc := range []struct {
		head string
		ok   bool
	}{
		{"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", true},
		{"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n", true},
		{"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"POST http://a/ HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n", false},
		{"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", false},
		{"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"GET http://a/ HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", false},
		{"GET http://a/ HTTP/1.1\r\nX-A: 1\x00\r\n\r\n", false},
		{"GET http://a/ HTTP/1.1\r\nX-A: \x7f\r\n\r\n", false},
		{"GET http://a/ HTTP/1.1\r\nX-A:\t1\r\n\r\n", true},
		{"GET http://a/ HTTP/1.1\r\nContent-Length : 5\r\n\r\n", false},
		{"GET http://a/ HTTP/1.1\r\n: 5\r\n\r\n", false},
		{"GET http://a/ HTTP/1.1\r\nno colon\r\n\r\n", false},
		{"GET http://a/ HTTP/1.1\r\nX(A): 1\r\n\r\n", false},
	} {
		if err := checkHead([]byte(tc.head)); (err == nil) != tc.ok {
			t.Errorf("checkHead(%q) = %v, want ok=%v", tc.head, err, tc.ok)
		}
	}
}

func TestSpecial(t *testing.T) {
	for _, tc := range []struct {
		addr, prefix string // prefix "" when the address is not special
	}{
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"127.0.0.1", "127.0.0.0/8"},
		{"127.255.255.254", "127.0.0.0/8"},
		{"169.254.169.254", "169.254.169.254/32"},
		{"169.254.1.1", "169.254.0.0/16"},
		{"fd00:ec2::254", "fd00:ec2::254/128"},
		{"10.1.2.3", "10.0.0.0/8"},
		{"172.31.255.255", "172.16.0.0/12"},
		{"172.32.0.1", ""},
		{"192.168.1.1", "192.168.0.0/16"},
		{"100.100.100.200", "100.64.0.0/10"}, // Alibaba Cloud metadata
		{"0.0.0.0", "0.0.0.0/8"},
		{"224.0.0.1", "224.0.0.0/4"},
		{"255.255.255.255", "240.0.0.0/4"},
		{"::1", "::1/128"},
		{"::", "::/128"},
		{"::7f00:1", "::/96"},
		{"fe80::1", "fe80::/10"},
		{"fc00::1", "fc00::/7"},
		{"ff02::1", "ff00::/8"},
		{"64:ff9b::7f00:1", "64:ff9b::7f00:0/104"},
		{"64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe/128"},
		{"64:ff9b::5db8:d822", ""}, // NAT64 of a public address
	} {
		r, ok := special(netip.MustParseAddr(tc.addr))
		got := ""
		if ok {
			got = r.prefix.String()
		}
		if got != tc.prefix {
			t.Errorf("special(%s) = %q, want %q", tc.addr, got, tc.prefix)
		}
	}
}
