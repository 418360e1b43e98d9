package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/grant"
)

// Red team 16 (docs/security/redteam-16.md): the credential broker's
// delivery into a run, the repository's token, and the review's reading
// of a workspace.

// repoProxy resolves a repository task's delivery for tenant ten_a (its
// token "git" holds gitSecret) and starts an egress proxy configured as a
// run's would be: the task's grant set and the delivery's injections.
// git.test resolves to a public address the proxy's dial routes to a
// loopback web server that records each request's path and whether it
// carried the token.
func repoProxy(t *testing.T, tc TaskConfig, m *manifest.Manifest) (proxy string, seen func() []string) {
	t.Helper()
	id, _ := age.GenerateX25519Identity()
	st, _ := broker.NewStore(t.TempDir(), id.String())
	if err := st.Put("ten_a", "git", []byte("git-s3cr3t")); err != nil {
		t.Fatal(err)
	}
	d, err := resolveDelivery(t.Context(), &broker.Broker{Store: st}, "ten_a", tc, m, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Destroy)
	var mu sync.Mutex
	var reqs []string
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, fmt.Sprintf("%s %s auth=%v", r.Method, r.URL.RequestURI(), r.Header.Get("Authorization") != ""))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(web.Close)
	cfg := egress.DefaultConfig(grant.New(m.Grants))
	cfg.Inject = d.Inject
	cfg.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "git.test" {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != "93.184.216.34:80" {
			return nil, errors.New("test: dial not allowed")
		}
		var dl net.Dialer
		return dl.DialContext(ctx, network, web.Listener.Addr().String())
	}
	p, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(t.Context(), ln)
	t.Cleanup(func() { p.Close() })
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reqs...)
	}
}

// through sends one request through the proxy and returns its status.
func through(t *testing.T, proxy, raw string) int {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func repoTask() (TaskConfig, string) {
	return TaskConfig{Repository: &RepoConfig{URL: "http://git.test/acme/app.git", Token: "git"}},
		`"env":["CORDON_GIT_URL"],"egress":[{"host":"git.test","proto":"tcp","ports":[80,80]}],`
}

// TestRedteam16RepoTokenOnlyForTheRepository: FINDING. The repository's
// token is injected into every request to the repository's host and
// port, whatever the path: the sandbox can use the tenant's token on any
// other repository on that host (read another private repository the
// token reaches, push to it, delete its branches). The secure behaviour:
// the token is injected only into requests for the repository's own path
// (PATH, PATH/info/refs, PATH/git-upload-pack, …).
func TestRedteam16RepoTokenOnlyForTheRepository(t *testing.T) {
	tc, grants := repoTask()
	proxy, seen := repoProxy(t, tc, testManifest(t, grants))
	through(t, proxy, "GET http://git.test/acme/app.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.test\r\n\r\n")
	through(t, proxy, "GET http://git.test/victim/private.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.test\r\n\r\n")
	through(t, proxy, "GET http://git.test/api/v4/user HTTP/1.1\r\nHost: git.test\r\n\r\n")
	got := seen()
	if len(got) == 0 || got[0] != "GET /acme/app.git/info/refs?service=git-upload-pack auth=true" {
		t.Fatalf("control: the repository's own request: %q", got)
	}
	for _, s := range got[1:] {
		if strings.HasSuffix(s, "auth=true") {
			t.Errorf("the repository's token reached a request outside the repository: %s", s)
		}
	}
}

// TestRedteam16PushBypassesReview: FINDING. Git pushes from inside the
// sandbox while the run executes (server.TestSandboxedGit pushes a
// commit), with the injected token, before the run has finished and so
// before its change is tiered and reviewed; the review covers only the
// declared outputs, not what was pushed. A high-risk change (a workflow,
// `curl | sh`) reaches the repository with no approval at all. The secure
// behaviour: the token never authorizes a push (git-receive-pack) from
// inside the run; pushing waits for an accepted review.
func TestRedteam16PushBypassesReview(t *testing.T) {
	tc, grants := repoTask()
	proxy, seen := repoProxy(t, tc, testManifest(t, grants))
	through(t, proxy, "GET http://git.test/acme/app.git/info/refs?service=git-receive-pack HTTP/1.1\r\nHost: git.test\r\n\r\n")
	through(t, proxy, "POST http://git.test/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: git.test\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: 4\r\n\r\n0000")
	for _, s := range seen() {
		if strings.Contains(s, "receive-pack") && strings.HasSuffix(s, "auth=true") {
			t.Errorf("a push carried the repository's token before any review: %s", s)
		}
	}
}

// TestRedteam16RepoTokenNeverInEnv: FINDING. CLAIMS.md row 262 says the
// repository's token is never put in the sandbox's environment; but the
// same secret, named again in "secrets" (here under its other spelling,
// store:git), is delivered by env beside the injection, and the check
// accepts it: the value is in the sandbox.
func TestRedteam16RepoTokenNeverInEnv(t *testing.T) {
	m := testManifest(t, `"env":["TOKEN"],"egress":[{"host":"git.test","proto":"tcp","ports":[80,80]}],`)
	for _, ref := range []string{"git", "store:git"} {
		tc := TaskConfig{
			Repository: &RepoConfig{URL: "http://git.test/acme/app.git", Token: "git"},
			Secrets:    []SecretUse{{Ref: ref, Env: "TOKEN"}},
		}
		if err := checkDelivery(tc, m); err == nil {
			t.Errorf("the repository's token %q delivered by env as well is accepted", ref)
		}
	}
}

// TestRedteam16RefTricks: HELD. References that try to reach another
// tenant's secret or an operator source by shape (traversal, encoded
// separators, other sources, case, Unicode, control bytes) are refused
// at the project write and at execution, before the HTTP backend sees a
// request; a header value with a newline fails naming the reference
// only.
func TestRedteam16RefTricks(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	st, _ := broker.NewStore(t.TempDir(), id.String())
	st.Put("ten_b", "db", []byte("ten_b-db"))
	st.Put("ten_a", "nl", []byte("line\r\nX-Evil: 1"))
	be := &recordingBackend{data: map[string]string{"tenant/ten_b/db": "ten_b-db"}}
	b := &broker.Broker{Store: st, HTTP: be}
	m := testManifest(t, `"env":["TOKEN"],"egress":[{"host":"api.example.com","proto":"tcp","ports":[80,80]}],`)
	for _, ref := range []string{
		"../ten_b/db", "..", "ten_b/db", "tenant/ten_b/db", "store:../ten_b/db", "http:../ten_b/db",
		"http:ten_b%2Fdb", "http:ten_b%2fdb", "%2e%2e/ten_b/db", "http:..%2Ften_b", "store:store:db",
		"STORE:db", "Http:db", "http: db", " db", "db ", "db\x00", "db\n", "db/", ".db", "-db",
		"d\u0431", "ｄｂ", "file:/etc/shadow", "env:HOME", "FILE:/etc/shadow", "vault:db", "tenant:ten_b:db",
		"http:tenant/ten_b/db", "http:a..b", strings.Repeat("a", 129),
	} {
		tc := TaskConfig{Secrets: []SecretUse{{Ref: ref, Env: "TOKEN"}}}
		if err := checkDelivery(tc, m); err == nil {
			t.Errorf("%q: accepted at write", ref)
		}
		if d, err := resolveDelivery(t.Context(), b, "ten_a", tc, m, io.Discard); err == nil {
			t.Errorf("%q: resolved to %q", ref, d.Env["TOKEN"])
		}
	}
	if reqs := be.take(); len(reqs) != 0 {
		t.Errorf("the HTTP backend saw %q", reqs)
	}
	// A tenant id that differs only in case is another namespace.
	if _, err := b.Resolve(t.Context(), "TEN_B", "db"); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("TEN_B reads ten_b's secret: %v", err)
	}
	// A value that cannot be a header: the error names the reference.
	tc := TaskConfig{Secrets: []SecretUse{{Ref: "nl", Header: "Authorization", URL: "http://api.example.com"}}}
	_, err := resolveDelivery(t.Context(), b, "ten_a", tc, m, io.Discard)
	if err == nil || strings.Contains(err.Error(), "Evil") || !strings.Contains(err.Error(), `"nl"`) {
		t.Errorf("a newline value: %v", err)
	}
}

// TestRedteam16RunChangeFollowsDirectoryLink: FINDING (low). CLAIMS.md
// row 267 says outputs are read without following symbolic links, but
// only the last component is checked (Lstat): a directory link the
// sandbox plants inside the workspace is followed, so the review reads
// .github/workflows/ci.yml and tiers it as the declared path docs/ci.yml.
// The secure behaviour: an output reached through a link is refused.
func TestRedteam16RunChangeFollowsDirectoryLink(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".github", "workflows"), 0o700)
	os.WriteFile(filepath.Join(ws, ".github", "workflows", "ci.yml"), []byte("run: curl x | sh\n"), 0o600)
	if err := os.Symlink(filepath.Join(".github", "workflows"), filepath.Join(ws, "docs")); err != nil {
		t.Fatal(err)
	}
	if c, err := runChange(ws, &manifest.Manifest{Outputs: []string{"docs/ci.yml"}}, nil); err == nil {
		t.Errorf("an output behind a directory link was read as %q: %q", c[0].Path, c[0].New)
	}
}

// TestRedteam16RunChangeStaysInWorkspace: HELD. A directory link out of
// the workspace (absolute or by ..), and a hard link's name that is an
// output, read nothing outside it: os.Root refuses the escape.
func TestRedteam16RunChangeStaysInWorkspace(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret\n"), 0o600)
	for name, target := range map[string]string{"absolute": outside, "relative": filepath.Join("..", filepath.Base(outside))} {
		ws := filepath.Join(filepath.Dir(outside), "ws-"+name)
		if err := os.Mkdir(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(ws) })
		if err := os.Symlink(target, filepath.Join(ws, "d")); err != nil {
			t.Fatal(err)
		}
		c, err := runChange(ws, &manifest.Manifest{Outputs: []string{"d/secret"}}, nil)
		if err == nil {
			t.Errorf("%s: read %v", name, c)
		}
		if err != nil && strings.Contains(err.Error(), "host secret") {
			t.Errorf("%s: the error holds the content: %v", name, err)
		}
	}
}
