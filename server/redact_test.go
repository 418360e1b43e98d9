package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// One secret of each shape the pool knows, and the operator's value.
var (
	opSecret  = "operator-secret-0123456789"
	awsSecret = strings.Repeat("wJalrXUtnFEMIK7MDENGbPxRfiCY", 2)[:40]
	shapes    = map[string]string{
		"secret":          opSecret,
		"github":          "ghp_" + strings.Repeat("A1b2", 9),
		"github-pat":      "github_pat_" + strings.Repeat("x9", 15),
		"gitlab":          "glpat-" + strings.Repeat("Zq", 12),
		"anthropic":       "sk-ant-" + strings.Repeat("k", 30),
		"openai":          "sk-proj-" + strings.Repeat("o", 30),
		"aws-access-key":  "AKIA" + strings.Repeat("Q", 16),
		"aws-secret-key":  "aws_secret_access_key = " + awsSecret,
		"slack":           "xoxb-" + strings.Repeat("1", 20),
		"slack-webhook":   "https://hooks.slack.com/services/" + strings.Repeat("T0B1", 8),
		"cordon-key":      "cdn_" + strings.Repeat("m", 40),
		"pem-private-key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END PRIVATE KEY-----",
	}
)

// leaks returns which secrets b holds (by the part that identifies each).
func leaks(b []byte) []string {
	var out []string
	for name, s := range shapes {
		probe := s
		switch name {
		case "aws-secret-key":
			probe = awsSecret
		case "pem-private-key":
			probe = "MIIEvQIBADANBgkqhkiG9w0B"
		}
		if bytes.Contains(b, []byte(probe)) {
			out = append(out, name)
		}
	}
	return out
}

func allShapes() string {
	var b strings.Builder
	for name, s := range shapes {
		b.WriteString(name + ": " + s + "\n")
	}
	return b.String()
}

// lockedBuffer is a log sink the server writes from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// projectWith is a project with task t (runs true) whose files hold
// extra files.
func projectWith(extra map[string]string) string {
	files := map[string]string{"session.jsonl": replayFor("true")}
	for k, v := range extra {
		files[k] = v
	}
	f, _ := json.Marshal(files)
	return `{"tasks":{"t":{"manifest":` + manifestFor("true") + `,"files":` + string(f) + `}}}`
}

// TestRedactEveryPath: a secret of each shape, in a member whose name
// says nothing of secrets, never leaves the server: not in a project or
// run view, an error message, the mailbox, the audit export or the log.
func TestRedactEveryPath(t *testing.T) {
	f := newFake()
	f.block = true
	var log lockedBuffer
	e := newEnv(t, envOpts{exec: f, secrets: []string{opSecret}, configured: 1, log: &log})
	e.setup(projectFor("true"))
	all := allShapes()
	e.must(200, "PUT", "/v1/projects/p", e.keys["member"], projectWith(map[string]string{"notes.txt": all}))
	check := func(what string, b []byte) {
		t.Helper()
		if l := leaks(b); len(l) > 0 {
			t.Errorf("%s leaks %v:\n%s", what, l, b)
		}
		if !bytes.Contains(b, []byte("[redacted:")) {
			t.Errorf("%s masks nothing:\n%s", what, b)
		}
	}
	check("the project view", e.must(200, "GET", "/v1/projects/p", e.keys["tenant"], "").body)
	id := e.submit(e.keys["member"])
	check("the run view", e.must(200, "GET", "/v1/runs/"+id, e.keys["tenant"], "").body)
	for name, s := range shapes {
		b, _ := json.Marshal(map[string]string{"task": s})
		r := e.do("POST", "/v1/projects/p/runs", e.keys["member"], string(b))
		if r.code != 400 || len(leaks(r.body)) > 0 {
			t.Errorf("an error naming a %s secret: %d %s", name, r.code, r.body)
		}
	}
	e.must(404, "GET", "/v1/runs/"+shapes["github"], e.keys["tenant"], "") // logged with its path
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	<-f.started
	if err := os.MkdirAll(filepath.Join(e.dir, "runs", id, "ws"), 0o700); err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]string{"text": all})
	e.must(201, "POST", "/v1/runs/"+id+"/mailbox", e.keys["member"], string(msg))
	check("the mailbox", e.must(200, "GET", "/v1/runs/"+id+"/mailbox", e.keys["tenant"], "").body)
	tb, _ := e.export(e.keys["tenant"])
	ab, _ := e.export(adminKey)
	if l := leaks(append(tb, ab...)); len(l) > 0 {
		t.Errorf("the audit exports leak %v", l)
	}
	e.must(202, "POST", "/v1/runs/"+id+"/cancel", e.keys["member"], "")
	e.wait(id, e.keys["member"], 10*time.Second)
	if l := leaks(log.Bytes()); len(l) > 0 {
		t.Errorf("the log leaks %v", l)
	}
	if !bytes.Contains(log.Bytes(), []byte("[redacted:github]")) {
		t.Errorf("the log did not record the masked path:\n%s", log.Bytes())
	}

	// A secret the credential broker adds later is masked from then on.
	broker := "broker-stored-secret-42"
	e.must(200, "PUT", "/v1/projects/b", e.keys["member"], projectWith(map[string]string{"x.txt": broker}))
	if err := e.srv.SetSecretSource("broker", []string{broker}, 1); err != nil {
		t.Fatal(err)
	}
	if b := e.must(200, "GET", "/v1/projects/b", e.keys["tenant"], "").body; bytes.Contains(b, []byte(broker)) {
		t.Fatalf("the broker's secret leaves: %s", b)
	}
}

// TestRedactFailLoud: secrets configured but none resolved: every
// response that would need masking is refused with a 500 that says why,
// the export too, and the log withholds its records; a secret-less
// server answers normally.
func TestRedactFailLoud(t *testing.T) {
	var log lockedBuffer
	e := newEnv(t, envOpts{configured: 2, log: &log})
	for _, path := range []string{"/healthz", "/readyz"} {
		r := e.do("GET", path, "", "")
		if r.code != 500 || !strings.Contains(string(r.body), "redaction pool empty") {
			t.Errorf("GET %s: %d %s", path, r.code, r.body)
		}
	}
	if r := e.do("GET", "/v1/audit/export", adminKey, ""); r.code != 500 || !strings.Contains(string(r.body), "withheld") {
		t.Errorf("the export under a failing pool: %d %s", r.code, r.body)
	}
	e.do("GET", "/v1/runs/"+shapes["github"], adminKey, "")
	if l := leaks(log.Bytes()); len(l) > 0 || !bytes.Contains(log.Bytes(), []byte("withheld")) {
		t.Errorf("the log under a failing pool (leaks %v):\n%s", l, log.Bytes())
	}
	ok := newEnv(t, envOpts{})
	ok.must(200, "GET", "/healthz", "", "")
}

// TestTenantCannotEraseFromItsAuditExport: a tenant that declares an
// incriminating string its "secret" — in its project's files, in a run's
// input, wherever a tenant writes — cannot mask it in its own audit
// export: the pool takes only the operator's values. A token-shaped
// string appended to the text masks that string, not the text.
func TestTenantCannotEraseFromItsAuditExport(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f, secrets: []string{opSecret}, configured: 1})
	e.setup(projectFor("true"))
	incriminating := "moving the client funds offshore tonight"
	e.must(200, "PUT", "/v1/projects/p", e.keys["member"], projectWith(map[string]string{
		"secret.txt": incriminating, "secrets.json": `{"token":"` + incriminating + `"}`}))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	<-f.started
	os.MkdirAll(filepath.Join(e.dir, "runs", id, "ws"), 0o700)
	for _, text := range []string{incriminating, incriminating + " " + shapes["github"]} {
		b, _ := json.Marshal(map[string]string{"text": text})
		e.must(201, "POST", "/v1/runs/"+id+"/mailbox", e.keys["member"], string(b))
	}
	_, recs := e.export(e.keys["member"])
	var texts []string
	for _, r := range recs {
		if revealed(r, `["event"]`) == "mailbox.reply" {
			texts = append(texts, revealed(r, `["subject","text"]`))
		}
	}
	want := []string{incriminating, incriminating + " [redacted:github]"}
	if len(texts) != 2 || texts[0] != want[0] || texts[1] != want[1] {
		t.Fatalf("the tenant's export shows %q, want %q", texts, want)
	}
	e.must(202, "POST", "/v1/runs/"+id+"/cancel", e.keys["member"], "")
	e.wait(id, e.keys["member"], 10*time.Second)
}
