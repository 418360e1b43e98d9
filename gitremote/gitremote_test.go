package gitremote

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/grant"
)

// TestRefused is the adversarial table: every way a tenant's remote URL
// could point git somewhere other than one HTTP(S) host and port, or
// smuggle an option or a transport to git, is refused.
func TestRefused(t *testing.T) {
	for _, u := range []string{
		"",
		"/srv/git/repo.git",                                      // a local path
		"./repo",                                                 // a relative path
		"../other-tenant/repo.git",                               // a relative path upward
		"file:///srv/git/repo.git",                               // file://
		"FILE:///etc",                                            // case games
		"ext::sh -c touch% /tmp/pwned",                           // ext:: transport
		"ext::ssh -o ProxyCommand=evil host",                     // ext:: with a command
		"fd::3",                                                  // fd:: transport
		"ssh://git@example.com/repo.git",                         // ssh
		"git@example.com:org/repo.git",                           // scp-like ssh
		"example.com:org/repo.git",                               // scp-like without a user
		"git://example.com/repo.git",                             // the git protocol
		"ftp://example.com/repo.git",                             // another scheme
		"HTTP://example.com/repo.git",                            // non-canonical scheme
		"Http://example.com/repo.git",                            // non-canonical scheme
		"http:/example.com/repo.git",                             // one slash
		"http:example.com/repo.git",                              // no slashes
		"http://example.com",                                     // no path
		"http://example.com/",                                    // no repository
		"http://user@example.com/repo.git",                       // userinfo
		"http://user:pass@example.com/repo.git",                  // userinfo with password
		"http://example.com@evil.com/repo.git",                   // userinfo that looks like the host
		"http://evil.com\\@example.com/repo.git",                 // backslash confusion
		"http://EXAMPLE.com/repo.git",                            // non-canonical host
		"http://example.com./repo.git",                           // trailing dot
		"http://*.example.com/repo.git",                          // wildcard
		"http://exa mple.com/repo.git",                           // space
		"http://example.com/repo.git\n",                          // newline
		"http://example.com/re\x00po.git",                        // NUL
		"http://example.com/repo.git?upload-pack=sh",             // a query
		"http://example.com/repo.git#frag",                       // a fragment
		"http://example.com/%2e%2e/repo.git",                     // escapes
		"http://ex%61mple.com/repo.git",                          // an escaped host
		"http://example.com/../repo.git",                         // dot-dot
		"http://example.com/./repo.git",                          // dot
		"http://example.com//repo.git",                           // empty segment
		"http://example.com/-repo.git",                           // a segment like an option
		"http://example.com/a::b",                                // a transport separator
		"http://example.com:0/repo.git",                          // port 0
		"http://example.com:65536/repo.git",                      // port out of range
		"http://example.com:080/repo.git",                        // leading zero
		"http://example.com:/repo.git",                           // empty port
		"http://example.com:http/repo.git",                       // named port
		"http://127.1/repo.git",                                  // a shortened address
		"http://2130706433/repo.git",                             // an integer address
		"http://0x7f.0.0.1/repo.git",                             // a hex address
		"http://127.000.000.001/repo.git",                        // zero-padded address
		"http://[::ffff:127.0.0.1]/repo.git",                     // a mapped address
		"http://[fe80::1%25eth0]/repo.git",                       // a zone
		"http://[::1/repo.git",                                   // unclosed bracket
		"http://[::1]x/repo.git",                                 // bytes after the bracket
		"http://::1/repo.git",                                    // IPv6 without brackets
		"http://example.com/repo.git --upload-pack=touch /tmp/x", // an option after a space
		"--upload-pack=touch /tmp/x",                             // an option
		"-c core.sshCommand=evil",                                // a -c option
		"-uhttp://example.com/r.git",                             // an option glued to a URL
		"http://example.com/$(id)",                               // shell expansion
		"http://example.com/`id`",                                // shell expansion
		"http://exаmple.com/repo.git",                            // Cyrillic а
		"http://example.com/" + strings.Repeat("a", MaxLen),      // too long
	} {
		if r, err := Parse(u); err == nil || !errors.Is(err, ErrRemote) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrRemote", u, r, err)
		}
	}
}

func TestAccepted(t *testing.T) {
	for u, want := range map[string]Remote{
		"https://git.example.com/org/repo.git":  {Scheme: "https", Host: "git.example.com", Port: 443, Path: "/org/repo.git"},
		"http://git.example.com:8080/repo":      {Scheme: "http", Host: "git.example.com", Port: 8080, Path: "/repo"},
		"http://127.0.0.1:9418/a/b_c-d.e~f.git": {Scheme: "http", Port: 9418, Path: "/a/b_c-d.e~f.git"},
		"http://[::1]:8080/repo.git":            {Scheme: "http", Port: 8080, Path: "/repo.git"},
	} {
		r, err := Parse(u)
		if err != nil {
			t.Errorf("Parse(%q): %v", u, err)
			continue
		}
		if r.Scheme != want.Scheme || r.Host != want.Host || r.Port != want.Port || r.Path != want.Path || r.URL != u {
			t.Errorf("Parse(%q) = %+v, want %+v", u, r, want)
		}
	}
}

func grants(t *testing.T, egress string) *grant.Set {
	t.Helper()
	gs, err := grant.Parse([]byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"egress":[` + egress + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// TestCheckGrants: a task with a repository reaches exactly its host and
// port: a wider rule, a second rule, another port or a wildcard is
// refused.
func TestCheckGrants(t *testing.T) {
	name, _ := Parse("http://git.example.com:8080/repo.git")
	addr, _ := Parse("http://127.0.0.1:8080/repo.git")
	cases := []struct {
		r      *Remote
		egress string
		ok     bool
	}{
		{name, `{"host":"git.example.com","proto":"tcp","ports":[8080,8080]}`, true},
		{addr, `{"cidr":"127.0.0.1/32","proto":"tcp","ports":[8080,8080]}`, true},
		{name, `{"host":"git.example.com","proto":"tcp","ports":[8080,8081]}`, false},
		{name, `{"host":"git.example.com","proto":"tcp","ports":[80,80]}`, false},
		{name, `{"host":"*.example.com","proto":"tcp","ports":[8080,8080]}`, false},
		{name, `{"host":"git.example.com","proto":"udp","ports":[8080,8080]}`, false},
		{name, `{"host":"git.example.com","proto":"tcp","ports":[8080,8080]},{"host":"evil.example","proto":"tcp","ports":[443,443]}`, false},
		{addr, `{"cidr":"127.0.0.0/8","proto":"tcp","ports":[8080,8080]}`, false},
		{addr, `{"cidr":"0.0.0.0/0","proto":"tcp","ports":[8080,8080]}`, false},
		{name, ``, false},
	}
	for _, c := range cases {
		err := c.r.CheckGrants(grants(t, c.egress))
		if (err == nil) != c.ok {
			t.Errorf("%s with %s: %v, want ok=%v", c.r.URL, c.egress, err, c.ok)
		}
	}
}
