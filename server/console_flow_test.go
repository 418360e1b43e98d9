package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/cordon-dev/cordon/risk"
	"github.com/cordon-dev/cordon/store"
)

// Hostile strings a run can put in every field the console shows.
const (
	hScript = `<script>alert(1)</script>`
	hAttr   = `"><img src=x onerror=alert(2)>`
	hJS     = `javascript:alert(3)`
	hESC    = "\x1b[31mred\x1b]0;title\x07\u009b"
)

var hostile = hScript + " " + hAttr + " " + hJS + " " + hESC

// hostileExec writes a journal full of hostile text into the run's
// workspace, and a hostile output, as a compromised agent could, and
// reports a hostile reason and change.
type hostileExec struct{ dir, out, extra string }

func (h *hostileExec) Execute(ctx context.Context, run *store.Run) store.Outcome {
	ws := filepath.Join(h.dir, "runs", run.ID, "ws")
	os.MkdirAll(filepath.Join(ws, ".cordon"), 0o700)
	entries := []struct {
		typ  string
		body map[string]any
	}{
		{"run.start", map[string]any{"model": hostile}},
		{"decision", map[string]any{"action": hostile, "rule": hAttr}},
		{"command", map[string]any{"argv": []any{hScript, hAttr}, "exit": 0, "stdout": hostile + h.extra, "stderr": hESC}},
		{"egress", map[string]any{"method": "GET", "host": hJS, "port": 80, "allow": false, "rule": hAttr, "reason": hostile}},
		{"model.response", map[string]any{"turn": 1, "stop_reason": hAttr, "text": hostile, "tool_calls": []any{map[string]any{"name": hScript, "input": hostile}}}},
		{"verify", map[string]any{"argv": []any{hJS}, "pass": false}},
		{hostileKind, map[string]any{"x": hostile}},
	}
	var j []byte
	for i, e := range entries {
		line, _ := json.Marshal(map[string]any{"index": i, "type": e.typ, "body": e.body})
		j = append(append(j, line...), '\n')
	}
	os.WriteFile(filepath.Join(ws, ".cordon", "journal.jsonl"), j, 0o600)
	os.WriteFile(filepath.Join(ws, h.out), []byte("line one\n"+hostile+"\n"), 0o600)
	zero := 0
	return store.Outcome{State: store.StateFinished, ExitCode: &zero, Tier: hAttr, Status: "finished", Reason: hostile,
		Change: []risk.File{{Path: h.out, New: []byte("line one\n" + hostile + "\n")}}}
}

// hostileKind is an entry type the journal's writer would refuse; a
// forged journal can hold it.
const hostileKind = `x"><svg onload=alert(4)>`

// hostileProject has a task whose text, file names and output are hostile.
func hostileProject(out string) string {
	m := strings.Replace(manifestFor("true"), `"task":"Run the command."`, `"task":`+jsonString(hostile), 1)
	m = strings.Replace(m, `"outputs":[]`, `"outputs":[`+jsonString(out)+`]`, 1)
	f, _ := json.Marshal(map[string]string{"session.jsonl": replayFor("true"), hAttr + ".txt": hostile})
	return `{"tasks":{"t":{"manifest":` + m + `,"files":` + string(f) + `}}}`
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// checkEscaped parses a page as a browser would and fails if hostile
// text left its text context: any element but the console's own (no img,
// svg, iframe …), a script other than console.js, an event-handler
// attribute, a javascript: URL in an attribute, or a raw control
// character anywhere.
func checkEscaped(t *testing.T, what, body string) {
	t.Helper()
	allowed := map[string]bool{"html": true, "head": true, "meta": true, "title": true, "link": true, "script": true, "body": true,
		"header": true, "span": true, "nav": true, "a": true, "form": true, "input": true, "button": true, "main": true, "h1": true,
		"h2": true, "h3": true, "p": true, "dl": true, "dt": true, "dd": true, "section": true, "ol": true, "li": true, "pre": true,
		"code": true, "ul": true, "div": true, "details": true, "summary": true, "label": true, "textarea": true, "table": true,
		"thead": true, "tbody": true, "tr": true, "th": true, "td": true, "select": true, "option": true}
	z := html.NewTokenizer(strings.NewReader(body))
	scripts := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		if !allowed[tok.Data] {
			t.Errorf("%s: an element <%s> %v", what, tok.Data, tok.Attr)
		}
		for _, a := range tok.Attr {
			if strings.HasPrefix(strings.ToLower(a.Key), "on") {
				t.Errorf("%s: an event handler %s=%q on <%s>", what, a.Key, a.Val, tok.Data)
			}
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:") {
				t.Errorf("%s: a javascript: URL in %s on <%s>", what, a.Key, tok.Data)
			}
			if !strings.HasPrefix(a.Key, "data-") && !slices.Contains([]string{"href", "src", "action", "method", "class", "id", "type", "name", "value",
				"rel", "lang", "charset", "content", "defer", "for", "autocomplete", "required", "selected", "aria-current", "colspan", "open"}, a.Key) {
				t.Errorf("%s: an unexpected attribute %s=%q on <%s>", what, a.Key, a.Val, tok.Data)
			}
		}
		if tok.Data == "script" {
			scripts++
			if len(tok.Attr) != 2 || tok.Attr[0].Val != "/console/static/console.js" {
				t.Errorf("%s: a script %v", what, tok.Attr)
			}
		}
	}
	if scripts != 1 {
		t.Errorf("%s: %d scripts, want only console.js", what, scripts)
	}
	for _, bad := range []string{hScript, hAttr} {
		if strings.Contains(body, bad) {
			t.Errorf("%s: holds %q unescaped", what, bad)
		}
	}
	for _, c := range body {
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 && c < 0xa0 {
			t.Fatalf("%s: a raw control character %U", what, c)
		}
	}
}

// TestConsoleHostileContent: a run whose journal, output, file names,
// diff, reason and tier hold markup, event handlers, javascript: URLs and
// terminal escapes renders all of it as escaped, visible text, on the
// run page, the runs list, the approvals queue and the event stream.
func TestConsoleHostileContent(t *testing.T) {
	dir := t.TempDir()
	out := `"><img src=x onerror=alert(5)>.txt`
	e := newEnv(t, envOpts{dir: dir, exec: &hostileExec{dir: dir, out: out}})
	e.setup(projectFor("true"))
	e.must(200, "PUT", "/v1/projects/p", e.keys["member"], hostileProject(out))
	id := e.submit(e.keys["member"])
	m := e.mustSignIn(e.keys["member"])

	pending := m.get("/console/approvals")
	checkEscaped(t, "approvals (pending)", pending.body)
	if !strings.Contains(pending.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the task's text is not shown escaped:\n%s", pending.body)
	}

	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	e.wait(id, e.keys["member"], 30*time.Second)

	a := e.mustSignIn(e.keys["approver"])
	for what, p := range map[string]page{"run page": m.get("/console/runs/" + id), "runs": m.get("/console/runs"), "approvals": a.get("/console/approvals")} {
		if p.code != 200 {
			t.Fatalf("%s: %d %s", what, p.code, p.body)
		}
		checkEscaped(t, what, p.body)
	}
	run := m.get("/console/runs/" + id).body
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",       // text, escaped
		"&#34;&gt;&lt;img src=x onerror=alert(2)&gt;", // attribute breakout, escaped
		`\x1b[31mred\x1b]0;title\x07\u009b`,           // terminal escapes, visible
		"javascript:alert(3)",                         // as text only
		`data-kind="x&#34;&gt;&lt;svg onload=alert(4)&gt;"`,
		`class="entry" data-kind="command"`, `class="entry" data-kind="egress"`, `class="entry" data-kind="model.response"`,
	} {
		if !strings.Contains(run, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	q := a.get("/console/approvals").body
	for _, want := range []string{`class="risk-tier"`, "&#34;&gt;&lt;img src=x onerror=alert(5)&gt;.txt", `&#43;&lt;script&gt;alert(1)&lt;/script&gt;`} {
		if !strings.Contains(q, want) {
			t.Errorf("the approvals queue lacks %q (the diff, escaped):\n%s", want, q)
		}
	}
	ev := m.get("/console/runs/" + id + "/events")
	if ev.hdr.Get("Content-Type") != "text/event-stream" || !strings.Contains(ev.body, "event: entry") || !strings.Contains(ev.body, "event: end") {
		t.Fatalf("events: %q %s", ev.hdr.Get("Content-Type"), ev.body)
	}
	for _, c := range ev.body {
		if c < 0x20 && c != '\n' || c >= 0x80 && c < 0xa0 {
			t.Fatalf("the event stream holds a raw control character %U", c)
		}
	}
	if strings.Contains(ev.body, "<script") || strings.Contains(ev.body, "<img") {
		t.Error("the event stream holds raw markup")
	}
}

// TestConsoleGateIndependence: the submitter sees their own run in the
// queue and on its page with no approve form, and a forged approve POST
// (valid session, valid CSRF token) is refused by the same rule as the
// API's; another approver's form works, through the same function.
func TestConsoleGateIndependence(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) {
		e := newEnv(t, envOpts{postgres: pg})
		e.setup(projectFor("true"))
		// the approver submits: approver-role, but the submitter
		id := e.submit(e.keys["approver"])
		sub := e.mustSignIn(e.keys["approver"])
		q := sub.get("/console/approvals").body
		if !strings.Contains(q, `class="pending" data-run="`+id+`"`) {
			t.Fatalf("the submitter does not see their run in the queue:\n%s", q)
		}
		if strings.Contains(q, `action="/console/runs/`+id+`/approve"`) || strings.Contains(q, `class="approve"`) {
			t.Error("the submitter is offered an approve form in the queue")
		}
		if p := sub.get("/console/runs/" + id).body; strings.Contains(p, `id="approve"`) || strings.Contains(p, `id="reject"`) {
			t.Error("the submitter is offered approve/reject on the run page")
		}
		api := e.do("POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
		forged := sub.post("/console/runs/"+id+"/approve", url.Values{"reason": {"mine"}})
		if api.code != 403 || forged.code != 403 || !strings.Contains(forged.body, "the submitter of a run cannot approve or reject it") {
			t.Fatalf("self-approval: API %d, console %d %s; want both 403 by the same rule", api.code, forged.code, forged.body)
		}
		var run struct{ State string }
		e.must(200, "GET", "/v1/runs/"+id, e.keys["member"], "").json(t, &run)
		if run.State != store.StatePending {
			t.Fatalf("the run is %s after a refused self-approval", run.State)
		}

		// a member's run: the approver may decide, and does, in the console
		id2 := e.submit(e.keys["member"])
		mem := e.mustSignIn(e.keys["member"])
		if q := mem.get("/console/approvals").body; !strings.Contains(q, `data-run="`+id2+`"`) || strings.Contains(q, `class="approve"`) {
			t.Error("a member sees no run, or an approve form")
		}
		if p := sub.get("/console/runs/" + id2).body; !strings.Contains(p, `id="approve"`) || !strings.Contains(p, `id="reject"`) {
			t.Fatal("another approver is not offered approve/reject")
		}
		if p := sub.post("/console/runs/"+id2+"/approve", url.Values{"reason": {"looks right"}}); p.code != 303 {
			t.Fatalf("console approve: %d %s", p.code, p.body)
		}
		r := e.wait(id2, e.keys["member"], 30*time.Second)
		if r.DecidedBy != e.approver {
			t.Errorf("decided by %q, want the approver", r.DecidedBy)
		}
		exp := string(e.must(200, "GET", "/v1/audit/export", adminKey, "").body)
		if !strings.Contains(exp, "looks right") {
			t.Error("the console approval's reason is not in the audit log")
		}
		// a replayed approval is refused as the API's is
		if p := sub.post("/console/runs/"+id2+"/approve", nil); p.code != 409 {
			t.Errorf("a second approval: %d, want 409", p.code)
		}
		// a finished run's change: its submitter (an approver) is offered
		// no accept form and a forged accept is refused as the API's is;
		// a second approver accepts it in the console
		var u struct{ ID string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"second","role":"approver"}`).json(t, &u)
		var k struct{ Secret string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(t, &k)
		second := e.mustSignIn(k.Secret)
		if p := second.post("/console/runs/"+id+"/approve", nil); p.code != 303 {
			t.Fatalf("the second approver's approval: %d %s", p.code, p.body)
		}
		e.wait(id, e.keys["member"], 30*time.Second)
		q = sub.get("/console/approvals").body
		if !strings.Contains(q, `data-run="`+id+`"`) || !strings.Contains(q, `class="risk-tier"`) || strings.Contains(q, `action="/console/runs/`+id+`/review/accept"`) {
			t.Errorf("the submitter's queue: their finished run missing, or an accept form offered:\n%s", q)
		}
		apiAccept := e.do("POST", "/v1/runs/"+id+"/review/accept", e.keys["approver"], "")
		if p := sub.post("/console/runs/"+id+"/review/accept", nil); p.code != 403 || apiAccept.code != 403 {
			t.Errorf("the submitter's accept: console %d, API %d; want 403 both", p.code, apiAccept.code)
		}
		if q := second.get("/console/approvals").body; !strings.Contains(q, `action="/console/runs/`+id+`/review/accept"`) {
			t.Errorf("the second approver is not offered the accept form:\n%s", q)
		}
		if p := second.post("/console/runs/"+id+"/review/accept", url.Values{"reason": {"fine"}}); p.code != 303 {
			t.Errorf("the second approver's accept: %d %s", p.code, p.body)
		}
		var rv struct{ State string }
		e.must(200, "GET", "/v1/runs/"+id+"/review", e.keys["member"], "").json(t, &rv)
		if rv.State != store.ReviewAccepted {
			t.Errorf("the review is %s after the console's accept", rv.State)
		}

		// the CSRF token is required on the decision forms too
		sub.csrf = strings.Repeat("0", 64)
		id3 := e.submit(e.keys["member"])
		if p := sub.post("/console/runs/"+id3+"/approve", nil); p.code != 403 {
			t.Errorf("approve with a wrong CSRF token: %d", p.code)
		}
		e.must(200, "GET", "/v1/runs/"+id3, e.keys["member"], "").json(t, &run)
		if run.State != store.StatePending {
			t.Fatalf("the run is %s after a refused forged approval", run.State)
		}

		// the project's author may not approve its runs either
		e.must(200, "PUT", "/v1/projects/p", e.keys["approver"], projectFor("true"))
		id5 := e.submit(e.keys["member"])
		author := e.mustSignIn(e.keys["approver"])
		if p := author.get("/console/runs/" + id5).body; strings.Contains(p, `id="approve"`) {
			t.Error("the author is offered the approve form")
		}
		if p := author.post("/console/runs/"+id5+"/approve", nil); p.code != 403 || !strings.Contains(p.body, "the author of a run") {
			t.Errorf("the author's forged approval: %d %s", p.code, p.body)
		}
	})
}

// TestConsoleRedacts: a console page is masked by the redaction pool as
// the API's JSON is (the operator's secret and a token's shape in a run's
// output become [redacted:…]), and a pool that fails loud withholds every
// page.
func TestConsoleRedacts(t *testing.T) {
	dir := t.TempDir()
	tok := "ghp_" + strings.Repeat("A1b2", 9)
	htmlSecret := `op<secret>&"value'+123`
	x := &hostileExec{dir: dir, out: "out.txt", extra: " secret " + opSecret + " token " + tok + " html " + htmlSecret}
	e := newEnv(t, envOpts{dir: dir, exec: x, secrets: []string{opSecret, htmlSecret}, configured: 2})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	e.wait(id, e.keys["member"], 30*time.Second)
	p := e.mustSignIn(e.keys["member"]).get("/console/runs/" + id)
	if p.code != 200 || strings.Contains(p.body, opSecret) || strings.Contains(p.body, tok) || !strings.Contains(p.body, "[redacted:") {
		t.Errorf("the run page is not masked (%d):\n%s", p.code, p.body)
	}
	ev := e.mustSignIn(e.keys["member"]).get("/console/runs/" + id + "/events")
	if !strings.Contains(ev.body, "event: entry") || strings.Contains(ev.body, opSecret) || strings.Contains(ev.body, tok) || strings.Contains(ev.body, `op\u003csecret`) {
		t.Errorf("the event stream is not masked:\n%s", ev.body)
	}
	// a secret with characters the page escapes is masked before escaping
	if strings.Contains(p.body, "op&lt;secret&gt;") || strings.Contains(p.body, "value&#39;&#43;123") {
		t.Errorf("the escaped form of a secret is on the page:\n%s", p.body)
	}

	bad := newEnv(t, envOpts{configured: 2})
	for _, path := range []string{"/console/login", "/console/runs"} {
		c := bad.console()
		c.client = http.DefaultClient // follow the redirect to the sign-in page
		if p := c.get(path); p.code != 500 || !strings.Contains(p.body, "withheld") {
			t.Errorf("GET %s under a failing pool: %d %s", path, p.code, p.body)
		}
	}
}

// slowExec writes its journal an entry at a time, as a run does.
type slowExec struct {
	dir  string
	step time.Duration
}

func (x *slowExec) Execute(ctx context.Context, run *store.Run) store.Outcome {
	j := filepath.Join(x.dir, "runs", run.ID, "ws", ".cordon", "journal.jsonl")
	os.MkdirAll(filepath.Dir(j), 0o700)
	f, _ := os.OpenFile(j, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	defer f.Close()
	for i, typ := range []string{"run.start", "command", "run.end"} {
		time.Sleep(x.step)
		line, _ := json.Marshal(map[string]any{"index": i, "type": typ, "body": map[string]any{"status": "finished", "argv": []any{"echo", "hi"}, "exit": 0}})
		// half a line first: the stream must not send a torn entry
		f.Write(line[:len(line)/2])
		time.Sleep(x.step / 2)
		f.Write(append(line[len(line)/2:], '\n'))
	}
	zero := 0
	return store.Outcome{State: store.StateFinished, ExitCode: &zero, Tier: "S2", Status: "finished"}
}

// TestConsoleLiveEvents: the run page's event stream sends the run's
// state changes and each journal entry once, whole and in order, as the
// run writes them, and ends when the run has; a reconnect resumes after
// the entries the browser has.
func TestConsoleLiveEvents(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, envOpts{dir: dir, exec: &slowExec{dir: dir, step: 150 * time.Millisecond}})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	m := e.mustSignIn(e.keys["member"])
	page := m.get("/console/runs/" + id).body
	if !strings.Contains(page, `data-events="/console/runs/`+id+`/events?after=0"`) {
		t.Fatalf("the pending run's page does not subscribe:\n%s", page)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+"/console/runs/"+id+"/events?after=0", nil)
	req.AddCookie(m.cookie)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("events: %v", res.Header)
	}
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	var events []string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sc.Scan() {
			if l := sc.Text(); l != "" {
				events = append(events, l)
			}
			if sc.Text() == "event: end" {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the stream did not end; got %q", events)
	}
	got := strings.Join(events, "\n")
	for _, want := range []string{"event: status\ndata: pending_approval", "data: running", "data: finished",
		"id: 1\nevent: entry\ndata: {\"index\":0,\"kind\":\"run.start\"", "id: 2\nevent: entry\ndata: {\"index\":1,\"kind\":\"command\",\"summary\":\"$ echo hi → exit 0\"",
		"id: 3\nevent: entry\ndata: {\"index\":2,\"kind\":\"run.end\"", "event: end"} {
		if !strings.Contains(got, want) {
			t.Errorf("the stream lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "event: entry"); n != 3 {
		t.Errorf("%d entries sent, want 3 (each once):\n%s", n, got)
	}
	// a reconnect after two entries gets the third only
	again := m.req("GET", "/console/runs/"+id+"/events", nil, "Last-Event-ID", "2")
	if n := strings.Count(again.body, "event: entry"); n != 1 || !strings.Contains(again.body, `"kind":"run.end"`) {
		t.Errorf("resumed stream: %s", again.body)
	}
}
