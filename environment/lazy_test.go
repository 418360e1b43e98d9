package environment

import (
	"regexp"
	"strings"
	"testing"
)

// TestLazyPatterns pins the patterns compiled on first use (rather than at
// package initialisation) to their sources and their answers.
func TestLazyPatterns(t *testing.T) {
	for _, re := range []func() *regexp.Regexp{envName, userName, imageRef} {
		if first := re(); re() != first {
			t.Fatalf("%s is compiled again on a second use", first)
		}
	}
	for _, c := range []struct{ got, want string }{
		{envName().String(), `^[A-Za-z_][A-Za-z0-9_]*$`},
		{userName().String(), `^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10})$`},
		{imageRef().String(), `^(` + host + `)/(` + component + `(?:/` + component + `)*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?@(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`},
	} {
		if c.got != c.want {
			t.Errorf("pattern %q, want %q", c.got, c.want)
		}
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		re   func() bool
		name string
		want bool
	}{
		{func() bool { return envName().MatchString("PATH_2") }, "envName PATH_2", true},
		{func() bool { return envName().MatchString("2PATH") }, "envName 2PATH", false},
		{func() bool { return userName().MatchString("node") }, "userName node", true},
		{func() bool { return userName().MatchString("1000") }, "userName 1000", true},
		{func() bool { return userName().MatchString("Root") }, "userName Root", false},
		{func() bool { return imageRef().MatchString("registry.example:5000/a/b:1.0@" + digest) }, "imageRef with host, tag, digest", true},
		{func() bool { return imageRef().MatchString("ubuntu:24.04@" + digest) }, "imageRef without a host", false},
		{func() bool { return imageRef().MatchString("registry.example/a/b:1.0") }, "imageRef without a digest", false},
	} {
		if c.re() != c.want {
			t.Errorf("%s: matched %v, want %v", c.name, !c.want, c.want)
		}
	}
}
