package egress

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestPolicySetCutsRemovedHost: a tunnel open to a host the policy stops
// allowing is closed at once, a tunnel to a host it still allows stays
// open, and a new request to the removed host is denied.
func TestPolicySetCutsRemovedHost(t *testing.T) {
	addr, port := echoServer(t)
	both := enforcer(t, []string{hostRule("allowed.test", port), hostRule("other.test", port), cidrRule("127.0.0.1/32", port)})
	onlyOther := enforcer(t, []string{hostRule("other.test", port), cidrRule("127.0.0.1/32", port)})
	pol := NewPolicy(both)
	env := newEnv(t, nil, func(c *Config) { c.Policy = pol })
	env.allowDial(addr, addr)

	removed := env.mustConnect(fmt.Sprintf("allowed.test:%d", port))
	kept := env.mustConnect(fmt.Sprintf("other.test:%d", port))
	for _, c := range []*clientConn{removed, kept} {
		echo(t, c, "before")
	}
	start := time.Now()
	if n := pol.Set(onlyOther); n != 1 {
		t.Fatalf("Set closed %d connections, want 1", n)
	}
	wantClosed(t, removed, 2*time.Second)
	if d := time.Since(start); d > time.Second {
		t.Errorf("the removed host's tunnel closed after %s", d)
	}
	echo(t, kept, "after")
	r := env.record(1)
	if r.Host != "allowed.test" || !r.Allow || r.Error != cutReason {
		t.Fatalf("record of the cut tunnel = %+v", r)
	}
	_, resp, _ := env.connect(fmt.Sprintf("allowed.test:%d", port))
	if resp.StatusCode != 403 {
		t.Fatalf("CONNECT to the removed host after Set: %s, want 403", resp.Status)
	}
	// A nil Enforcer allows nothing, and closes the rest.
	if n := pol.Set(nil); n != 1 {
		t.Fatalf("Set(nil) closed %d, want 1", n)
	}
	wantClosed(t, kept, 2*time.Second)
	_, resp, body := env.connect(fmt.Sprintf("other.test:%d", port))
	if resp.StatusCode != 403 || !contains(body, "allows no connection") {
		t.Fatalf("CONNECT under a nil policy: %s %q", resp.Status, body)
	}
}

func echo(t *testing.T, c *clientConn, s string) {
	t.Helper()
	if _, err := io.WriteString(c.Conn, s); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(s))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != s {
		t.Fatalf("echo %q: got %q, %v", s, buf, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestPolicySetDuringDial: a request decided under the old Enforcer whose
// upstream connection is made after Set looked at the established ones
// is closed as it is registered, never tunnelled.
func TestPolicySetDuringDial(t *testing.T) {
	addr, port := echoServer(t)
	both := enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)})
	pol := NewPolicy(both)
	entered, release := make(chan struct{}), make(chan struct{})
	env := newEnv(t, nil, func(c *Config) {
		c.Policy = pol
		resolve := c.Resolver
		c.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			close(entered)
			<-release
			return resolve(ctx, host)
		}
	})
	env.allowDial(addr, addr)
	type result struct {
		status int
		body   string
	}
	done := make(chan result, 1)
	go func() {
		_, resp, body := env.connect(fmt.Sprintf("allowed.test:%d", port))
		done <- result{resp.StatusCode, body}
	}()
	<-entered // decided under both, now resolving
	if n := pol.Set(nil); n != 0 {
		t.Fatalf("Set closed %d connections, want 0 (none established yet)", n)
	}
	close(release)
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no reply to a CONNECT cut while it was dialled")
	}
	if r.status != 502 {
		t.Fatalf("CONNECT decided before Set, dialled after: %d %q, want 502", r.status, r.body)
	}
	if rec := env.record(1); rec.Error != cutReason {
		t.Fatalf("record %+v, want the cut reason", rec)
	}
}
