package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/server"
)

// TestDemoServe runs `cordon demo --serve` and opens the console of the
// demo's control plane as a browser would: the printed approver key
// signs in, the runs list shows the demo's run, and an interrupt stops
// the server, the demo exiting 0. An address off loopback is refused.
func TestDemoServe(t *testing.T) {
	if out, err := exec.Command("cordon", "demo", "--serve", "0.0.0.0:8420").CombinedOutput(); err == nil || !strings.Contains(string(out), "loopback") {
		t.Fatalf("demo --serve 0.0.0.0:8420: %v, %s; want a refusal naming loopback", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command("cordon", "demo", "--serve", addr)
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	keyLine := regexp.MustCompile(`open (http://\S+)/console/login and sign in as the approver with the key (cdn_\S+) `)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	var base, key string
	timeout := time.After(4 * time.Minute)
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before serving; stderr: %s", stderr.String())
			}
			if m := keyLine.FindStringSubmatch(line); m != nil {
				base, key = m[1], m[2]
			}
			ready = strings.HasPrefix(line, "the demo's control plane is serving the web console")
		case <-timeout:
			t.Fatalf("no serving line within 4 minutes; stderr: %s", stderr.String())
		}
	}
	if base != "http://"+addr || key == "" {
		t.Fatalf("console %q with key %q; want http://%s and a key", base, key, addr)
	}

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", base+"/console/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var session *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == server.ConsoleCookie {
			session = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("sign-in with the printed key: %d, cookie %v", res.StatusCode, session)
	}
	req, _ = http.NewRequest("GET", base+"/console/runs", nil)
	req.AddCookie(session)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), `class="run" data-run="run_`) {
		t.Fatalf("runs list: %d, the demo's run not listed:\n%.2000s", res.StatusCode, b)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the demo after an interrupt: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop within 30 s of an interrupt")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the demo's server still answers after the demo exited")
	}
}
