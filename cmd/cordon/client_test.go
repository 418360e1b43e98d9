package main

import (
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// clientFor parses the client flags from args, with no config file and
// the key from the environment.
func clientFor(t *testing.T, args ...string) (*client, error) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv(serverEnv, "")
	t.Setenv(serverKeyFile, "")
	t.Setenv(serverKeyEnv, "cdn_secret")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cf := addClientFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cf.client()
}

// The key is not sent over plain http to a host that is not loopback
// unless the user says --insecure-http; loopback and https are fine.
func TestClientRefusesPlainHTTPOffLoopback(t *testing.T) {
	for _, u := range []string{"http://example.com:8080", "http://10.0.0.7:8080", "http://[2001:db8::1]:80", "http://localhost.example.com"} {
		_, err := clientFor(t, "--server", u)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, "in the clear") || !strings.Contains(ue.hint, "--insecure-http") {
			t.Errorf("%s: %v", u, err)
		}
		if _, err := clientFor(t, "--server", u, "--insecure-http"); err != nil {
			t.Errorf("%s with --insecure-http: %v", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://127.9.9.9:1", "http://[::1]:8080", "http://localhost:8080", "http://LOCALHOST", "https://example.com"} {
		if _, err := clientFor(t, "--server", u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	// The environment's server is checked the same way.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(serverEnv, "http://example.com")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	if _, err := addClientFlags(fs).client(); err == nil {
		t.Errorf("$%s=http://example.com accepted", serverEnv)
	}
}

// A redirect is not followed: the key never reaches where it points.
func TestClientRefusesRedirects(t *testing.T) {
	var leaked atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
		w.Write([]byte(`{}`))
	}))
	defer target.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redir.Close()
	c, err := clientFor(t, "--server", redir.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.call("GET", "/v1/whoami", nil); err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("a redirect was followed: %v", err)
	}
	if leaked.Load() {
		t.Fatal("the key reached the redirect's target")
	}
}
