package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cordon-dev/cordon/agent/mailbox"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/store"
)

// The console in a real browser (headless Chromium, browser_harness):
// one server with the real sandboxed runner, people signed in in their
// own browser contexts, selecting by the ids of docs/console.md.

// The hostile strings every field a run can influence carries.
const (
	pwnScript = `<script>window.__pwned=1</script>`
	pwnAttr   = `"><img src=x onerror="window.__pwned=1">`
	pwnLink   = `javascript:window.__pwned=1`
	pwnTitle  = "\x1b]0;pwned-title\x07"
)

// replayOf is a replay session: one tool call per turn, then finish.
func replayOf(calls ...string) string {
	var b strings.Builder
	for i, c := range calls {
		fmt.Fprintf(&b, `{"content":[{"type":"tool_use","id":"t%d",%s}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"recorded"}`+"\n", i, c)
	}
	return b.String()
}

// taskOf is a project task: a replay manifest with commands and outputs.
func taskOf(task string, commands, outputs []string, session string) string {
	cmds, _ := json.Marshal(commands)
	outs, _ := json.Marshal(outputs)
	var allow []string
	for _, c := range commands {
		allow = append(allow, `{"name":"`+c+`"}`)
	}
	f, _ := json.Marshal(map[string]string{"session.jsonl": session})
	return `{"manifest":{"type":"cordon.manifest.v1","task":` + jsonString(task) + `,
"model":{"provider":"replay","name":"recorded","replay":"session.jsonl"},
"inputs":[],"outputs":` + string(outs) + `,"commands":` + string(cmds) + `,
"grants":{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
 "exec":{"allow":[` + strings.Join(allow, ",") + `]},"limits":{"wall_ms":60000,"memory_bytes":268435456,"pids":64}},
"budgets":{"max_turns":10,"max_model_calls":10,"max_input_tokens":100000,"max_output_tokens":10000,"wall_ms":120000,"max_loops":0,"max_pending_tasks":0}},"files":` + string(f) + `}`
}

// consoleProject has two tasks: "t" says hello and finishes; "evil"
// puts the hostile strings into everything a run writes that a page
// shows: its task text (the plan), commands' text run and refused (one a
// terminal title escape), a refused file name, a mailbox message, its
// summary, and a file's content (its change).
func consoleProject() string {
	hostile := strings.Join([]string{pwnScript, pwnAttr, pwnLink}, "\n")
	t := taskOf("Say hello.", []string{"echo"}, []string{},
		replayOf(`"name":"run","input":{"argv":["echo","hello"]}`, `"name":"finish","input":{"summary":"said hello"}`))
	evil := taskOf(hostile, []string{"echo"}, []string{"out.txt"},
		replayOf(`"name":"write","input":{"path":"out.txt","content":`+jsonString(hostile+"\n"+pwnTitle+"\n")+`}`,
			`"name":"run","input":{"argv":["echo",`+jsonString(pwnLink)+`]}`,
			`"name":"run","input":{"argv":["echo",`+jsonString(pwnTitle)+`]}`,
			`"name":"run","input":{"argv":["echo",`+jsonString(pwnScript)+`]}`,
			`"name":"write","input":{"path":`+jsonString(pwnAttr+".txt")+`,"content":"x"}`,
			`"name":"mailbox","input":{"action":"post","text":`+jsonString(hostile)+`}`,
			`"name":"finish","input":{"summary":`+jsonString(hostile)+`}`))
	return `{"tasks":{"t":` + t + `,"evil":` + evil + `}}`
}

// signIn signs the tab in with key on the console's own form.
func (tb *tab) signIn(url, key string) {
	tb.t.Helper()
	tb.do("open the sign-in page", 15*time.Second, chromedp.Navigate(url+"/console/login"), chromedp.WaitVisible(chromedp.ID("login")))
	tb.do("enter the key", 15*time.Second, chromedp.SendKeys(chromedp.ID("key"), key))
	tb.submit("sign in", "#signin", "#whoami")
}

// submit clicks sel (a form's button) and waits for the page it loads
// to show wait: a mark set on the old page must be gone, so an element
// the old page also had does not count.
func (tb *tab) submit(step, sel, wait string) {
	tb.t.Helper()
	tb.js(`(window.__old = 1) === 1`)
	tb.do(step, 15*time.Second, chromedp.Click(chromedp.CSS(sel)))
	tb.until(step+": the next page", 15*time.Second, `window.__old === undefined && document.readyState === "complete" && document.querySelector(`+jsonString(wait)+`) !== null`)
}

// withT is the environment for use in the subtest t.
func withT(e *env, t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// open navigates to path and waits for the element sel.
func (tb *tab) open(url, path, sel string) {
	tb.t.Helper()
	tb.do("open "+path, 15*time.Second, chromedp.Navigate(url+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// text is an element's textContent now.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return get(tb, "read "+sel, 10*time.Second, chromedp.Evaluate[string](`(document.querySelector(`+jsonString(sel)+`) || {textContent: ""}).textContent`))
}

// js evaluates a boolean expression in the page.
func (tb *tab) js(expr string) bool {
	tb.t.Helper()
	return get(tb, "evaluate "+expr, 10*time.Second, chromedp.Evaluate[bool](expr))
}

// until polls a boolean expression in the page (no page script: CDP's
// evaluate, so the console's CSP does not apply) until it holds.
func (tb *tab) until(what string, within time.Duration, expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(within)
	for !tb.js(expr) {
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: %s: not within %s (on %s)", tb.name, what, within, tb.location())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fetchB64 fetches a same-origin URL from the page, with its cookie, and
// returns the body.
func (tb *tab) fetch(href string) []byte {
	tb.t.Helper()
	s := get(tb, "fetch "+href, 20*time.Second, chromedp.Evaluate[string](`fetch(`+jsonString(href)+`).then(r => r.ok ? r.arrayBuffer() : Promise.reject(new Error("HTTP " + r.status))).then(b => {
  const u = new Uint8Array(b); let s = "";
  for (let i = 0; i < u.length; i += 0x8000) s += String.fromCharCode.apply(null, u.subarray(i, i + 0x8000));
  return btoa(s);
})`, chromedp.EvalAwaitPromise))
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		tb.t.Fatal(err)
	}
	return b
}

// TestConsoleInBrowser drives the console in headless Chromium: sign-in,
// a run submitted through the API and approved in the console by a
// second user, watched live until it finishes, its evidence downloaded
// and verified; a mailbox reply; the audit export; the admin's forms;
// hostile content on every page; a phone's width; a screenshot of each
// page.
func TestConsoleInBrowser(t *testing.T) {
	start := time.Now()
	e := newEnv(t, envOpts{real: true})
	e.setup(consoleProject())
	b := newBrowser(t, 1280, 800)
	dir := shots(t)
	member := b.newTab("member")
	approver := b.newTab("approver")

	var runID string
	t.Run("sign in", func(t *testing.T) {
		member, approver, e := member.in(t), approver.in(t), withT(e, t)
		member.open(e.url, "/console/login", "#login")
		member.screenshot(dir, "login")
		member.signIn(e.url, e.keys["member"])
		if w := member.text("#whoami"); !strings.Contains(w, "member") {
			t.Fatalf("#whoami %q", w)
		}
		if member.js(`document.querySelector("#nav-admin") !== null`) {
			t.Error("a member sees #nav-admin")
		}
		approver.signIn(e.url, e.keys["approver"])
		if w := approver.text("#whoami"); !strings.Contains(w, "approver") {
			t.Fatalf("#whoami %q", w)
		}
	})

	t.Run("approve and watch live", func(t *testing.T) {
		member, approver, e := member.in(t), approver.in(t), withT(e, t)
		runID = e.submit(e.keys["member"]) // through the API, as the member
		member.open(e.url, "/console/runs", `tr.run[data-run="`+runID+`"]`)
		member.screenshot(dir, "runs")
		member.open(e.url, "/console/runs/"+runID, "#status")
		if member.js(`document.querySelector("form#approve") !== null`) {
			t.Error("the submitter sees form#approve")
		}
		// A mark on the page: still there at the end means no reload.
		member.js(`(window.__stay = 1) === 1`)

		approver.open(e.url, "/console/approvals", `.pending[data-run="`+runID+`"]`)
		approver.screenshot(dir, "approvals")
		approver.submit("approve", `.pending[data-run="`+runID+`"] form.approve button`, "main")
		member.until("#status says finished, live", 60*time.Second,
			`/finished|verified/.test(document.querySelector("#status").textContent)`)
		if !member.js(`window.__stay === 1`) {
			t.Fatal("the run page reloaded; it should update in place (SSE)")
		}
		if !member.js(`document.querySelectorAll("#timeline li.entry").length > 0`) {
			t.Error("no timeline entries")
		}
		got := e.wait(runID, e.keys["member"], 5*time.Second)
		if got.State != store.StateFinished {
			t.Fatalf("run %+v", got)
		}
	})

	t.Run("verify and download evidence", func(t *testing.T) {
		member, e := member.in(t), withT(e, t)
		member.open(e.url, "/console/runs/"+runID, "#verify")
		if v := member.text("#verify"); !strings.Contains(v, "verified") {
			t.Fatalf("#verify %q", v)
		}
		member.screenshot(dir, "run")
		href := get(member, "the evidence link", 5*time.Second, chromedp.Evaluate[string](
			`(Array.from(document.querySelectorAll("a.evidence")).find(a => /\/evidence$/.test(a.pathname)) || {href: ""}).href`))
		if href == "" {
			t.Fatal("no a.evidence link to the evidence bundle")
		}
		ev := member.fetch(href)
		pubPEM := e.must(200, "GET", "/v1/steward.pub", "", "").body
		pub, err := sign.ParsePublic(pubPEM)
		if err != nil {
			t.Fatal(err)
		}
		d := t.TempDir()
		untar(t, ev, d)
		if rep := runrecord.Verify(filepath.Join(d, runID), &pub); rep.Failed() || !rep.Trusted {
			t.Fatalf("the downloaded evidence does not verify: %+v", rep.Checks)
		}
	})

	t.Run("mailbox reply", func(t *testing.T) {
		// A run held running by a fake executor on a second server, its
		// question posted as the agent's side does (agent/mailbox): a real
		// run's commands cannot be held open in the rootless pass, where
		// the sandbox refuses them without a delegated cgroup.
		f := newFake()
		f.block = true
		e2 := newEnv(t, envOpts{exec: f})
		e2.setup(projectFor("true"))
		id, ws := runningRun(t, e2)
		if _, err := mailbox.Post(ws, mailbox.FromAgent, "Which branch should I use?", time.Now()); err != nil {
			t.Fatal(err)
		}
		member := b.newTab("member on the second server").in(t)
		member.signIn(e2.url, e2.keys["member"])
		member.open(e2.url, "/console/runs/"+id+"/mailbox", `#messages .message[data-from="agent"]`)
		if m := member.text(`#messages .message[data-from="agent"]`); !strings.Contains(m, "Which branch should I use?") {
			t.Fatalf("the agent's message reads %q", m)
		}
		member.do("write a reply", 15*time.Second, chromedp.SendKeys(chromedp.ID("text"), "Use main, please."))
		member.submit("send the reply", "#send", "#posted")
		if m := member.text(`#messages .message[data-from="operator"]`); !strings.Contains(m, "Use main, please.") {
			t.Fatalf("the reply reads %q", m)
		}
		member.screenshot(dir, "mailbox")
		got, err := mailbox.List(ws, mailbox.FromOperator)
		if err != nil || len(got) != 1 || got[0].Text != "Use main, please." {
			t.Fatalf("the agent's side reads %+v, %v", got, err)
		}
		e2.must(202, "POST", "/v1/runs/"+id+"/cancel", e2.keys["member"], "")
		e2.wait(id, e2.keys["member"], 10*time.Second)
	})

	t.Run("audit export", func(t *testing.T) {
		member, e := member.in(t), withT(e, t)
		member.open(e.url, "/console/audit", "#chain")
		if c := member.text("#chain"); !strings.Contains(c, "verified") || strings.Contains(c, "not verified") {
			t.Fatalf("#chain %q", c)
		}
		member.screenshot(dir, "audit")
		href := get(member, "the export link", 5*time.Second, chromedp.Evaluate[string](`document.querySelector("a#export").href`))
		got := member.fetch(href)
		want := e.must(200, "GET", "/v1/audit/export", e.keys["member"], "").body
		if string(got) != string(want) {
			t.Fatalf("the console's export (%d bytes) is not the API's for the member (%d bytes)", len(got), len(want))
		}
	})

	t.Run("admin", func(t *testing.T) {
		e := withT(e, t)
		admin := b.newTab("admin").in(t)
		admin.signIn(e.url, adminKey)
		admin.open(e.url, "/console/admin", "#tenants")
		// A real browser's form post: Origin, Sec-Fetch-Site and the CSRF
		// token as the browser sends them.
		admin.do("fill in a tenant", 15*time.Second, chromedp.SendKeys(chromedp.ID("tenant-name"), "made-in-browser"),
			chromedp.SetValue(chromedp.ID("tenant-ceiling"), ceiling))
		admin.submit("create the tenant", "#create-tenant button", "#keys")
		admin.submit("create a key", "#create-key button", "#new-key")
		key := admin.text("#new-key")
		e.must(200, "GET", "/v1/whoami", key, "")
		admin.submit("back to the tenant", "#back", "#keys")
		admin.screenshot(dir, "admin")
		if admin.js(`document.body.textContent.includes(` + jsonString(key) + `)`) {
			t.Fatal("the key is shown again")
		}
		admin.submit("revoke it", "form.revoke button", "#keys")
		e.must(401, "GET", "/v1/whoami", key, "")
	})

	t.Run("hostile content", func(t *testing.T) {
		member, approver, e := member.in(t), approver.in(t), withT(e, t)
		var r struct{ ID string }
		e.must(201, "POST", "/v1/projects/p/runs", e.keys["member"], `{"task":"evil"}`).json(t, &r)
		e.must(200, "POST", "/v1/runs/"+r.ID+"/approve", e.keys["approver"], "")
		e.wait(r.ID, e.keys["member"], 60*time.Second)
		// A rejected run with a hostile reason (the audit log shows it).
		var r2 struct{ ID string }
		e.must(201, "POST", "/v1/projects/p/runs", e.keys["member"], `{"task":"t"}`).json(t, &r2)
		approver.open(e.url, "/console/runs/"+r2.ID, "form#reject")
		approver.do("write a hostile reason", 15*time.Second,
			chromedp.SetValue(chromedp.CSS("form#reject textarea[name=reason]"), pwnScript+pwnAttr+pwnLink))
		approver.submit("reject", "form#reject button", "#status")
		j := string(e.must(200, "GET", "/v1/runs/"+r.ID+"/journal", e.keys["member"], "").body)
		for _, s := range []string{`<script>window.__pwned=1</script>`, `onerror=\"window.__pwned=1\"`, "javascript:window.__pwned=1", `\u001b]0;pwned-title`} {
			if !strings.Contains(j, s) {
				t.Errorf("the hostile run's journal lacks %q: the test does not test what it says\n%s", s, j)
			}
		}
		viewer := b.newTab("viewer").in(t)
		viewer.signIn(e.url, e.keys["approver"])
		for _, pg := range []struct{ path, sel string }{
			{"/console/runs", "#runs"},
			{"/console/runs/" + r.ID, "#timeline"},
			{"/console/runs/" + r.ID + "/mailbox", "#messages"},
			{"/console/runs/" + r2.ID, "#status"},
			{"/console/approvals", "#queue"},
			{"/console/audit", "#audit"},
		} {
			viewer.open(e.url, pg.path, pg.sel)
			if !viewer.js(`window.__pwned === undefined`) {
				t.Errorf("%s: window.__pwned is set: a hostile script ran", pg.path)
			}
			checks := map[string]string{
				"a script other than console.js":   `Array.from(document.scripts).every(s => s.getAttribute("src") === "/console/static/console.js")`,
				"an element with an event handler": `!Array.from(document.querySelectorAll("*")).some(el => Array.from(el.attributes).some(a => /^on/i.test(a.name)))`,
				"a javascript: link or action":     `!Array.from(document.querySelectorAll("[href],[src],[action]")).some(el => /^\s*javascript:/i.test(el.getAttribute("href") || el.getAttribute("src") || el.getAttribute("action")))`,
				"an <img> element":                 `document.images.length === 0`,
				"a title set by an escape":         `!document.title.includes("pwned")`,
				"a raw ESC character":              `!document.body.textContent.includes("\x1b")`,
			}
			for what, js := range checks {
				if !viewer.js(js) {
					t.Errorf("%s: %s", pg.path, what)
				}
			}
		}
		viewer.open(e.url, "/console/runs/"+r.ID, "#timeline")
		body := viewer.text("#timeline")
		for _, s := range []string{pwnScript, `onerror="window.__pwned=1"`, pwnLink, `\x1b]0;pwned-title`} {
			if !strings.Contains(body, s) {
				t.Errorf("the run page does not show %q as text", s)
			}
		}
		for _, tb := range []*tab{viewer, approver, member} {
			for _, m := range tb.errors() {
				if strings.Contains(m, "Content Security Policy") || strings.Contains(m, "exception") {
					t.Errorf("%s's console: %s", tb.name, m)
				}
			}
		}
	})

	t.Run("phone width", func(t *testing.T) {
		e := withT(e, t)
		phone := b.newTab("phone").in(t)
		phone.viewport(390, 844, chromedp.EmulateMobile)
		phone.signIn(e.url, e.keys["member"])
		for _, pg := range []struct{ path, sel, name string }{
			{"/console/runs", "#runs", "runs-narrow"},
			{"/console/runs/" + runID, "#timeline", "run-narrow"},
		} {
			phone.open(e.url, pg.path, pg.sel)
			// The page itself does not scroll sideways; a table may, inside
			// its own scrolling container.
			if !phone.js(`document.documentElement.scrollWidth <= window.innerWidth + 1`) {
				w := get(phone, "widths", 5*time.Second, chromedp.Evaluate[string](`document.documentElement.scrollWidth + " > " + window.innerWidth`))
				t.Errorf("%s at 390px: the page is wider than the screen (%s)", pg.path, w)
			}
			if !phone.js(`Array.from(document.querySelectorAll("table")).every(t => { for (let p = t.parentElement; p; p = p.parentElement) { if (/auto|scroll/.test(getComputedStyle(p).overflowX)) return true; } return false; })`) {
				t.Errorf("%s: a table outside a scrolling container", pg.path)
			}
			phone.screenshot(dir, pg.name)
		}
	})
	t.Logf("the console in a browser: %s, screenshots in %s", time.Since(start).Round(time.Millisecond), dir)
}
