package gitremote

import (
	"errors"
	"testing"
)

// TestRedteam16Remotes: HELD (red team 16). Remote spellings beyond
// TestRefused's table: trailing slash, tabs and CRs, IPv6 case and
// embedded IPv4, doubled ports, option text behind a path, and origins
// for an injection with a path, a port only or a scheme in another case.
func TestRedteam16Remotes(t *testing.T) {
	for _, u := range []string{
		"http://example.com/repo.git/",
		"http://example.com\t/repo.git",
		"http://example.com/repo.git\r",
		"\rhttp://example.com/repo.git",
		"http://[::ABCD]/repo.git",
		"http://[0:0:0:0:0:0:0:1]/repo.git",
		"http://[::127.0.0.1]/repo.git",
		"http://example.com:8080:8080/repo.git",
		"http://example.com:+80/repo.git",
		"http://example.com:8_0/repo.git",
		"http://example.com/repo.git/-c",
		"http://example.com/repo.git:8080",
		"http://example.com/r;x",
		"http://example.com/r|id",
		"http://example.com/r>x",
		"http://example.com/r&x",
		"http://example.com/\u00e9",
		"http://example.com/r\u2028",
		"http://xn--/repo.git",
		"http://ex--ample.com/repo.git",
		"https:///repo.git",
		"http://:80/repo.git",
		"http://example.com\\repo.git",
		"ext::http://example.com/repo.git",
		"http::http://example.com/repo.git",
		"remote-http::http://example.com/repo.git",
	} {
		if r, err := Parse(u); err == nil || !errors.Is(err, ErrRemote) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrRemote", u, r, err)
		}
	}
	for _, o := range []string{
		"http://example.com/", "http://example.com/x", "http://u@example.com", "HTTP://example.com",
		"http://example.com:0", "http://example.com:", ":80", "example.com", "http://", "http://example.com?x",
		"http://example.com#x", "http://example.com.", "http://[::1]x",
	} {
		if r, err := ParseOrigin(o); err == nil {
			t.Errorf("ParseOrigin(%q) = %+v, want an error", o, r)
		}
	}
	// A grant set of one rule reaches one destination: an address repo
	// does not accept a host rule for its address, nor a host repo a
	// CIDR rule of its address.
	name, _ := Parse("http://git.example.com/r.git")
	addr, _ := Parse("http://192.0.2.7/r.git")
	v6, _ := Parse("http://[2001:db8::7]/r.git")
	for _, c := range []struct {
		r      *Remote
		egress string
	}{
		{addr, `{"host":"git.example.com","proto":"tcp","ports":[80,80]}`},
		{name, `{"cidr":"192.0.2.7/32","proto":"tcp","ports":[80,80]}`},
		{v6, `{"cidr":"2001:db8::/64","proto":"tcp","ports":[80,80]}`},
		{addr, `{"cidr":"192.0.2.6/31","proto":"tcp","ports":[80,80]}`},
		{name, `{"host":"git.example.com","proto":"tcp","ports":[80,80]},{"host":"git.example.com","proto":"tcp","ports":[80,80]}`},
		{name, `{"host":"git.example.com","proto":"tcp","ports":[1,65535]}`},
	} {
		if err := c.r.CheckGrants(grants(t, c.egress)); err == nil {
			t.Errorf("%s with %s accepted", c.r.URL, c.egress)
		}
	}
}
