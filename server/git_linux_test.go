package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// gitServer is a git smart-HTTP server on loopback (git http-backend
// behind net/http/cgi), serving one bare repository r.git whose first
// commit is "one", and recording every request with its Authorization
// header. With token set it answers 401 to any request without
// Basic x-access-token:token.
type gitServer struct {
	url, root string
	port      int
	mu        sync.Mutex
	reqs      []string
}

func newGitServer(t *testing.T, token string) *gitServer {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("the git server needs %s: %v", backend, err)
	}
	g := &gitServer{root: t.TempDir()}
	bare := filepath.Join(g.root, "r.git")
	seed := filepath.Join(t.TempDir(), "seed")
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", bare},
		{"-C", bare, "config", "http.receivepack", "true"},
		{"init", "-q", "-b", "main", seed},
	} {
		gitRun(t, args...)
	}
	os.WriteFile(filepath.Join(seed, "f"), []byte("one\n"), 0o644)
	gitRun(t, "-C", seed, "add", "f")
	gitRun(t, "-C", seed, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "one")
	gitRun(t, "-C", seed, "push", "-q", bare, "main")
	want := ""
	if token != "" {
		want = "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=cordon"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.reqs = append(g.reqs, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		g.mu.Unlock()
		if want != "" && r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.port = srv.Listener.Addr().(*net.TCPAddr).Port
	g.url = fmt.Sprintf("http://127.0.0.1:%d/r.git", g.port)
	return g
}

func (g *gitServer) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.reqs...)
}

func gitRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// gitGrants is a grant set for git in the sandbox, reaching exactly one
// loopback port.
func gitGrants(port int) string {
	return fmt.Sprintf(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"sh"},{"name":"git"}]},"fs":[{"path":"/usr/lib/git-core","access":"rx"}],
"egress":[{"cidr":"127.0.0.1/32","proto":"tcp","ports":[%d,%d]}],"env":["CORDON_GIT_URL","CORDON_GIT_PUSH_REF"],
"limits":{"wall_ms":60000,"memory_bytes":536870912,"pids":64}}`, port, port)
}

// gitProject is a project with one task "t" whose command runs script
// (the file push.sh) in sh, under grants, with the repository (JSON, or "" for none).
func gitProject(grants, script, repository string) string {
	a, _ := json.Marshal([]string{"sh", "push.sh"})
	replay := `{"content":[{"type":"tool_use","id":"t1","name":"run","input":{"argv":` + string(a) + `}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"recorded"}
{"content":[{"type":"tool_use","id":"t2","name":"finish","input":{"summary":"done"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"recorded"}
`
	f, _ := json.Marshal(map[string]string{"session.jsonl": replay, "push.sh": script})
	m := `{"type":"cordon.manifest.v1","task":"Push a commit.",
"model":{"provider":"replay","name":"recorded","replay":"session.jsonl"},
"inputs":["push.sh"],"outputs":[],"commands":["sh"],"grants":` + grants + `,
"budgets":{"max_turns":4,"max_model_calls":4,"max_input_tokens":100000,"max_output_tokens":10000,"wall_ms":120000,"max_loops":0,"max_pending_tasks":0}}`
	task := `{"manifest":` + m + `,"files":` + string(f)
	if repository != "" {
		task += `,"repository":` + repository
	}
	return `{"tasks":{"t":` + task + `}}}`
}

// TestSandboxedGit is issue 16's done-when: a run clones a repository
// from a git server the test starts on loopback, commits and pushes —
// git running inside the sandbox, through an egress grant of exactly
// the repository's host and port, with the token from the broker
// injected by the egress proxy for that repository only (the sandbox
// never holds it). The push lands on the run's review ref
// (CORDON_GIT_PUSH_REF); a push to main is refused by the proxy and
// never reaches the server (red team 16, F1). A remote elsewhere is
// refused: at the project write, and inside the sandbox by the egress
// proxy.
func TestSandboxedGit(t *testing.T) {
	requireRoot(t, "its commands run under the project's memory and CPU limits, which a rootless run enforces only in a delegated cgroup v2 subtree")
	const token = "gittok-0123456789abcdef"
	g := newGitServer(t, token)
	other := newGitServer(t, "")
	e := newEnv(t, envOpts{real: true})
	grants := gitGrants(g.port)
	ten, keys := e.tenantWith("git", grants)
	e.must(200, "PUT", "/v1/tenants/"+ten+"/secrets/gh", adminKey, token)

	// The run's command: clone, commit, push, fetch, all in the sandbox; then
	// try the other server, which the egress grant does not reach.
	script := `set -e
git clone -q "$CORDON_GIT_URL" w
cd w
echo two >> f
git -c user.name=agent -c user.email=agent@example.com commit -qam two
git push -q origin "HEAD:$CORDON_GIT_PUSH_REF"
if git push -q origin HEAD:main 2>/dev/null; then echo pushed-main; exit 4; fi
if git push -q origin --delete "$CORDON_GIT_PUSH_REF" 2>/dev/null; then echo deleted; exit 5; fi
git fetch -q origin "$CORDON_GIT_PUSH_REF"
test "$(git rev-parse FETCH_HEAD)" = "$(git rev-parse HEAD)"
git fetch -q origin
test "$(git rev-parse origin/main)" = "$(git rev-parse HEAD~1)"
if git ls-remote ` + other.url + ` >/dev/null 2>&1; then echo reached-other; exit 3; fi`
	repo := `{"url":"` + g.url + `","token":"gh"}`
	// The run's change (its declared output w/f, the file it committed)
	// is put to review; the review shows what was pushed.
	e.must(200, "PUT", "/v1/projects/p", keys["member"], strings.Replace(gitProject(grants, script, repo), `"outputs":[]`, `"outputs":["w/f"]`, 1))
	id, got := e.runProject(keys)
	logb, _ := os.ReadFile(filepath.Join(e.dir, "runs", id, "log"))
	if got.State != store.StateFinished || got.Status != "finished" || !strings.Contains(string(logb), "run sh push.sh: exit 0") {
		t.Fatalf("run %+v\nlog:\n%s\ngit server saw %v", got, logb, g.requests())
	}
	// The commit arrived in the test's repository, on the run's review
	// ref only: main is untouched.
	bare := filepath.Join(g.root, "r.git")
	if log := gitRun(t, "-C", bare, "log", "--format=%s", server.ReviewRef(id)); log != "two\none\n" {
		t.Fatalf("the review ref's log is %q, want two, one\nrun log:\n%s", log, logb)
	}
	if log := gitRun(t, "-C", bare, "log", "--format=%s", "main"); log != "one\n" {
		t.Errorf("main's log is %q, want one: a push from the run reached main", log)
	}
	// Every request carried the injected token; one push (the review
	// ref's) reached the server, the refused ones did not.
	reqs := g.requests()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	pushes, fetches := 0, 0
	for _, r := range reqs {
		if !strings.HasSuffix(r, " "+basic) {
			t.Errorf("the git server got %q without the injected token", r)
		}
		if strings.HasPrefix(r, "POST /r.git/git-receive-pack ") {
			pushes++
		}
		if strings.HasPrefix(r, "GET /r.git/info/refs?service=git-upload-pack ") { // the clone's, then the fetch's
			fetches++
		}
	}
	if pushes != 1 || fetches < 2 {
		t.Errorf("the git server did not see a clone, one push and a fetch: %v", reqs)
	}
	if len(other.requests()) != 0 {
		t.Errorf("the other git server was reached: %v", other.requests())
	}
	// The journal records the injection by reference, never the value,
	// and the denial of the other server.
	j := string(e.must(200, "GET", "/v1/runs/"+id+"/journal", keys["member"], "").body)
	if !strings.Contains(j, `"injected":"Authorization from secret \"gh\"`) {
		t.Errorf("the journal does not record the injection:\n%.2000s", j)
	}
	if strings.Contains(j, token) || strings.Contains(j, basic[len("Basic "):]) || strings.Contains(string(logb), token) {
		t.Errorf("the journal or the log holds the token")
	}
	if !strings.Contains(j, fmt.Sprintf(`"port":%d`, other.port)) || !strings.Contains(j, `"allow":false`) {
		t.Errorf("the journal does not record the other server's denial")
	}
	// The journal names what was pushed (the review ref and the commit),
	// and the refusals of the push to main and of the deletion.
	head := strings.TrimSpace(gitRun(t, "-C", bare, "rev-parse", server.ReviewRef(id)))
	if !strings.Contains(j, `"pushed":["`+server.ReviewRef(id)+` `) || !strings.Contains(j, head) {
		t.Errorf("the journal does not record the push of %s to %s:\n%.3000s", head, server.ReviewRef(id), j)
	}
	var rv struct {
		Pushed    []string `json:"pushed"`
		Statement string   `json:"statement"`
	}
	e.must(200, "GET", "/v1/runs/"+id+"/review", keys["member"], "").json(t, &rv)
	if want := server.ReviewRef(id) + " 0000000000000000000000000000000000000000 " + head; len(rv.Pushed) != 1 || rv.Pushed[0] != want {
		t.Errorf("the review shows pushed %q, want [%q]", rv.Pushed, want)
	}
	var dsse struct {
		Payload string `json:"payload"`
	}
	json.Unmarshal([]byte(rv.Statement), &dsse)
	if p, _ := base64.StdEncoding.DecodeString(dsse.Payload); !strings.Contains(string(p), `"pushed":["`+server.ReviewRef(id)+` `) {
		t.Errorf("the signed review statement does not name the push: %q", p)
	}
	if !strings.Contains(j, `"rule":"repository"`) || !strings.Contains(j, `refs/heads/main`) || !strings.Contains(j, `deletes `+server.ReviewRef(id)) {
		t.Errorf("the journal does not record the refused push to main and the refused deletion:\n%.3000s", j)
	}

	// A remote elsewhere is refused when the project is written.
	for _, url := range []string{
		other.url, // another port
		"http://127.0.0.2:" + fmt.Sprint(g.port) + "/r.git", // another host
		"file://" + filepath.Join(g.root, "r.git"),          // a local path
		filepath.Join(g.root, "r.git"),
		"ext::sh -c id",
		"ssh://git@127.0.0.1/r.git",
		"http://x-access-token:t@127.0.0.1:" + fmt.Sprint(g.port) + "/r.git",
		"--upload-pack=id",
	} {
		b, _ := json.Marshal(map[string]string{"url": url})
		r := e.do("PUT", "/v1/projects/p", keys["member"], gitProject(grants, "true", string(b)))
		if r.code != 400 {
			t.Errorf("repository %q: %d %s, want 400", url, r.code, r.body)
		}
	}
	// … and so is a grant set that reaches further than the repository.
	wider := strings.Replace(grants, `"egress":[`, `"egress":[{"cidr":"127.0.0.1/32","proto":"tcp","ports":[`+fmt.Sprint(other.port)+`,`+fmt.Sprint(other.port)+`]},`, 1)
	if r := e.do("PUT", "/v1/tenants/"+ten+"/ceiling", adminKey, wider, server.ExplicitHeader, "1"); r.code != 200 {
		t.Fatalf("ceiling: %d %s", r.code, r.body)
	}
	if r := e.do("PUT", "/v1/projects/p", keys["member"], gitProject(wider, "true", repo)); r.code != 400 || !strings.Contains(string(r.body), "exactly one") {
		t.Errorf("a wider grant set: %d %s, want 400", r.code, r.body)
	}
}
