package server_test

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/mailbox"
)

// runningRun submits and approves a run that the fake executor holds
// running, and makes its workspace (a real runner makes it when the run
// starts), so the run's mailbox is open. It returns the run and its
// workspace.
func runningRun(t *testing.T, e *env) (id, ws string) {
	t.Helper()
	id = e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var r struct{ State string }
		e.must(200, "GET", "/v1/runs/"+id, e.keys["member"], "").json(t, &r)
		if r.State == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, not running, after 10s", id, r.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ws = filepath.Join(e.dir, "runs", id, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return id, ws
}

// TestConsoleMailbox: a user reads the agent's question on the run's
// mailbox page and replies through form#reply; the reply is stored (the
// API and the agent's side read it) and shown; the form needs the CSRF
// token; another tenant's user, the admin and a reply to an ended run
// are refused.
func TestConsoleMailbox(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	id, ws := runningRun(t, e)
	if _, err := mailbox.Post(ws, mailbox.FromAgent, "Which branch should I use?", time.Now()); err != nil {
		t.Fatal(err)
	}
	c := e.mustSignIn(e.keys["member"])
	p := c.get("/console/runs/" + id + "/mailbox")
	if p.code != 200 || !strings.Contains(p.body, `id="messages"`) || !strings.Contains(p.body, "Which branch should I use?") ||
		!strings.Contains(p.body, `<span class="from">agent</span>`) || !strings.Contains(p.body, `id="reply"`) {
		t.Fatalf("mailbox page: %d\n%s", p.code, p.body)
	}

	// Without the CSRF token: refused, nothing stored.
	c2 := *c
	c2.csrf = ""
	if p := c2.post("/console/runs/"+id+"/mailbox", url.Values{"text": {"no token"}}); p.code != 403 {
		t.Fatalf("a reply without the CSRF token: %d", p.code)
	}
	if p := c.req("POST", "/console/runs/"+id+"/mailbox", url.Values{"text": {"cross-site"}, "csrf": {c.csrf}},
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); p.code != 403 {
		t.Fatalf("a cross-site reply: %d", p.code)
	}

	p = c.post("/console/runs/"+id+"/mailbox", url.Values{"text": {"Use main.\r\nThanks"}})
	if p.code != 303 || p.hdr.Get("Location") != "/console/runs/"+id+"/mailbox?posted=1" {
		t.Fatalf("reply: %d %s\n%s", p.code, p.hdr.Get("Location"), p.body)
	}
	p = c.get(p.hdr.Get("Location"))
	if !strings.Contains(p.body, `id="posted"`) || !strings.Contains(p.body, "Use main.\nThanks") ||
		!strings.Contains(p.body, `<span class="from">operator</span>`) {
		t.Fatalf("the reply is not shown:\n%s", p.body)
	}
	got, err := mailbox.List(ws, mailbox.FromOperator)
	if err != nil || len(got) != 1 || got[0].Text != "Use main.\nThanks" {
		t.Fatalf("the agent's side reads %+v, %v; want the one reply", got, err)
	}
	var api struct{ Operator []mailbox.Message }
	e.must(200, "GET", "/v1/runs/"+id+"/mailbox", e.keys["tenant"], "").json(t, &api)
	if len(api.Operator) != 1 || api.Operator[0].Text != "Use main.\nThanks" {
		t.Fatalf("the API reads %+v", api.Operator)
	}
	if exp := string(e.must(200, "GET", "/v1/audit/export", adminKey, "").body); !strings.Contains(exp, "mailbox.reply") {
		t.Error("the console's reply is not audited")
	}

	// An invalid reply (empty) is refused with the mailbox's reason.
	if p := c.post("/console/runs/"+id+"/mailbox", url.Values{"text": {""}}); p.code != 400 || !strings.Contains(p.body, `id="error"`) {
		t.Errorf("an empty reply: %d\n%s", p.code, p.body)
	}
	// Another tenant's user sees no such run; the admin holds no tenant.
	o := e.mustSignIn(e.keys["other-member"])
	if p := o.get("/console/runs/" + id + "/mailbox"); p.code != 404 || strings.Contains(p.body, "Which branch") {
		t.Errorf("another tenant's user: %d", p.code)
	}
	if p := o.post("/console/runs/"+id+"/mailbox", url.Values{"text": {"hi"}}); p.code != 404 {
		t.Errorf("another tenant's user's reply: %d", p.code)
	}
	a := e.mustSignIn(adminKey)
	if p := a.get("/console/runs/" + id + "/mailbox"); p.code != 403 {
		t.Errorf("the admin: %d", p.code)
	}
	// An ended run's mailbox is read-only.
	e.must(202, "POST", "/v1/runs/"+id+"/cancel", e.keys["member"], "")
	e.wait(id, e.keys["member"], 10*time.Second)
	p = c.get("/console/runs/" + id + "/mailbox")
	if p.code != 200 || strings.Contains(p.body, `id="reply"`) || !strings.Contains(p.body, "Use main.") {
		t.Errorf("an ended run's mailbox: %d\n%s", p.code, p.body)
	}
	if p := c.post("/console/runs/"+id+"/mailbox", url.Values{"text": {"late"}}); p.code != 409 {
		t.Errorf("a reply to an ended run: %d", p.code)
	}
	if got, _ := mailbox.List(ws, mailbox.FromOperator); len(got) != 1 {
		t.Errorf("%d replies stored, want 1", len(got))
	}
}

var exportLink = regexp.MustCompile(`<a id="export" href="([^"]+)"`)

// TestConsoleAudit: the audit page says the chain verifies, lists only
// the records the principal may read, filters them, and its export is
// the API's export for the same principal, byte for byte; a record
// edited in the database makes the page say the chain does not verify.
func TestConsoleAudit(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) {
		e := newEnv(t, envOpts{postgres: pg})
		e.setup(projectFor("true"))
		e.submit(e.keys["member"])
		m := e.mustSignIn(e.keys["member"])
		p := m.get("/console/audit")
		if p.code != 200 || !regexp.MustCompile(`<p id="chain" class="ok">verified: \d+ records`).MatchString(p.body) {
			t.Fatalf("audit page: %d\n%s", p.code, p.body)
		}
		if !strings.Contains(p.body, "run.submit") || !strings.Contains(p.body, e.tenantA) {
			t.Errorf("the member's page lacks its tenant's records:\n%s", p.body)
		}
		// Tenant scoping: tenant b's records (its users, its project) are
		// not on tenant a's page.
		if strings.Contains(p.body, e.tenantB) {
			t.Errorf("tenant a's page shows tenant b's records")
		}
		// The export link is the API's export for the same principal.
		l := exportLink.FindStringSubmatch(p.body)
		if l == nil {
			t.Fatal("no a#export")
		}
		for _, who := range []string{"member", "other-member"} {
			c := m
			if who != "member" {
				c = e.mustSignIn(e.keys[who])
			}
			got := c.get(l[1])
			want := e.must(200, "GET", "/v1/audit/export", e.keys[who], "")
			if got.code != 200 || got.body != string(want.body) {
				t.Errorf("%s: the console's export (%d, %d bytes) is not the API's (%d bytes)", who, got.code, len(got.body), len(want.body))
			}
			if ct := got.hdr.Get("Content-Type"); ct != "application/x-ndjson" {
				t.Errorf("export content type %q", ct)
			}
		}
		a := e.mustSignIn(adminKey)
		ap := a.get("/console/audit")
		if !strings.Contains(ap.body, e.tenantA) || !strings.Contains(ap.body, e.tenantB) || !strings.Contains(ap.body, "tenant.create") {
			t.Errorf("the operator's page lacks records")
		}
		if got, want := a.get("/console/audit/export").body, string(e.must(200, "GET", "/v1/audit/export", adminKey, "").body); got != want {
			t.Error("the operator's console export is not the API's")
		}
		// Filters.
		f := a.get("/console/audit?action=key.create")
		if n := strings.Count(f.body, `<td class="action">`); n != strings.Count(f.body, `<td class="action">key.create</td>`) || n != 6 {
			t.Errorf("action filter: %d rows (want the 6 key.create records only)", n)
		}
		f = a.get("/console/audit?actor=" + e.member)
		if n := strings.Count(f.body, `<tr class="record"`); n != 2 { // project.put and run.submit
			t.Errorf("actor filter: %d rows, want 2:\n%s", n, f.body)
		}
		// An edited record: the page says so.
		if _, err := e.store.DB().Exec(`UPDATE audit_log SET body = replace(body, 'run.submit', 'run.sUbmit')`); err != nil {
			t.Fatal(err)
		}
		p = m.get("/console/audit")
		if p.code != 200 || !strings.Contains(p.body, `<p id="chain" class="error">not verified`) || strings.Contains(p.body, `<tr class="record"`) {
			t.Errorf("a tampered chain:\n%s", p.body)
		}
	})
}

var newKeyRe = regexp.MustCompile(`<pre id="new-key">(cdn_[A-Za-z0-9_-]+)</pre>`)

// TestConsoleAdmin: the operator creates a tenant and a key in the
// console; the key is shown once (the page after it, and a reload, never
// show it); revoking it in the console makes the API refuse it; a tenant
// user gets 403 on the admin page and on every admin POST, which change
// nothing.
func TestConsoleAdmin(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	a := e.mustSignIn(adminKey)
	p := a.get("/console/admin")
	if p.code != 200 || !strings.Contains(p.body, `id="tenants"`) || !strings.Contains(p.body, `id="create-tenant"`) {
		t.Fatalf("admin page: %d\n%s", p.code, p.body)
	}
	// A bad name and a bad ceiling are refused with the API's reasons.
	if p := a.post("/console/admin/tenants", url.Values{"name": {"Bad Name"}, "ceiling": {ceiling}}); p.code != 400 || !strings.Contains(p.body, "tenant name") {
		t.Errorf("a bad name: %d", p.code)
	}
	if p := a.post("/console/admin/tenants", url.Values{"name": {"c"}, "ceiling": {`{"type":"nope"}`}}); p.code != 400 || !strings.Contains(p.body, "ceiling") {
		t.Errorf("a bad ceiling: %d", p.code)
	}
	p = a.post("/console/admin/tenants", url.Values{"name": {"c"}, "ceiling": {ceiling}})
	loc := p.hdr.Get("Location")
	if p.code != 303 || !strings.HasPrefix(loc, "/console/admin?tenant=ten_") {
		t.Fatalf("create tenant: %d %s\n%s", p.code, loc, p.body)
	}
	tid := strings.TrimSuffix(strings.TrimPrefix(loc, "/console/admin?tenant="), "&created=1")
	p = a.get(loc)
	if !strings.Contains(p.body, `id="keys"`) || !strings.Contains(p.body, `id="create-key"`) || !strings.Contains(p.body, `id="projects"`) ||
		!strings.Contains(p.body, `data-tenant="`+tid+`"`) || !strings.Contains(p.body, `&#34;untrusted&#34;`) {
		t.Fatalf("the new tenant's page:\n%s", p.body)
	}

	p = a.post("/console/admin/tenants/"+tid+"/keys", url.Values{"user": {""}})
	m := newKeyRe.FindStringSubmatch(p.body)
	if p.code != 201 || m == nil {
		t.Fatalf("create key: %d\n%s", p.code, p.body)
	}
	secret := m[1]
	var who struct{ Tenant string }
	e.must(200, "GET", "/v1/whoami", secret, "").json(t, &who)
	if who.Tenant != tid {
		t.Fatalf("the new key is tenant %q's, want %q", who.Tenant, tid)
	}
	// Shown once: the tenant's page (what "back" and a reload show) has
	// its id and first characters only.
	p = a.get("/console/admin?tenant=" + tid)
	if strings.Contains(p.body, secret) || strings.Contains(p.body, `id="new-key"`) {
		t.Fatal("the key is shown again")
	}
	kid := regexp.MustCompile(`<tr class="key" data-key="(key_[^"]+)"`).FindStringSubmatch(p.body)
	if kid == nil || !strings.Contains(p.body, `<form class="revoke"`) {
		t.Fatalf("no key row with a revoke form:\n%s", p.body)
	}
	// A member cannot use the admin page or its forms, even with a valid
	// CSRF token of their own session.
	mem := e.mustSignIn(e.keys["member"])
	if p := mem.get("/console/admin"); p.code != 403 || strings.Contains(p.body, `id="tenants"`) {
		t.Errorf("a member's admin page: %d", p.code)
	}
	if p := mem.get("/console/admin?tenant=" + tid); p.code != 403 || strings.Contains(p.body, kid[1]) {
		t.Errorf("a member's view of a tenant: %d", p.code)
	}
	for _, post := range []struct {
		path string
		form url.Values
	}{
		{"/console/admin/tenants", url.Values{"name": {"evil"}, "ceiling": {ceiling}}},
		{"/console/admin/tenants/" + tid + "/keys", url.Values{}},
		{"/console/admin/tenants/" + tid + "/keys/" + kid[1] + "/revoke", url.Values{}},
	} {
		if p := mem.post(post.path, post.form); p.code != 403 {
			t.Errorf("a member's POST %s: %d", post.path, p.code)
		}
	}
	appr := e.mustSignIn(e.keys["approver"])
	if p := appr.get("/console/admin"); p.code != 403 {
		t.Errorf("an approver's admin page: %d", p.code)
	}
	var ts []struct{ Name string }
	e.must(200, "GET", "/v1/tenants", adminKey, "").json(t, &ts)
	if len(ts) != 3 {
		t.Errorf("%d tenants after the member's POSTs, want 3", len(ts))
	}
	// The admin's forms need the CSRF token too.
	noTok := *a
	noTok.csrf = ""
	if p := noTok.post("/console/admin/tenants/"+tid+"/keys/"+kid[1]+"/revoke", url.Values{}); p.code != 403 {
		t.Errorf("a revoke without the CSRF token: %d", p.code)
	}
	e.must(200, "GET", "/v1/whoami", secret, "")

	p = a.post("/console/admin/tenants/"+tid+"/keys/"+kid[1]+"/revoke", url.Values{})
	if p.code != 303 {
		t.Fatalf("revoke: %d\n%s", p.code, p.body)
	}
	e.must(401, "GET", "/v1/whoami", secret, "")
	p = a.get("/console/admin?tenant=" + tid)
	if !strings.Contains(p.body, `<td class="status">revoked`) || strings.Contains(p.body, `<form class="revoke"`) {
		t.Errorf("the revoked key's row:\n%s", p.body)
	}
	// Revoking twice: the API's answer (no unrevoked key), not a 500.
	if p := a.post("/console/admin/tenants/"+tid+"/keys/"+kid[1]+"/revoke", url.Values{}); p.code != 404 {
		t.Errorf("revoking twice: %d", p.code)
	}
	// A key for a user, from the console: it signs in.
	p = a.post("/console/admin/tenants/"+e.tenantA+"/keys", url.Values{"user": {e.approver}})
	m = newKeyRe.FindStringSubmatch(p.body)
	if p.code != 201 || m == nil {
		t.Fatalf("a user's key: %d", p.code)
	}
	e.mustSignIn(m[1])
	// The tenant's projects are listed.
	if p := a.get("/console/admin?tenant=" + e.tenantA); !strings.Contains(p.body, `<tr class="project"><td>p</td>`) {
		t.Errorf("tenant a's projects:\n%s", p.body)
	}
	if p := a.get("/console/admin?tenant=ten_nosuch"); p.code != 404 {
		t.Errorf("an unknown tenant: %d", p.code)
	}
}

// TestConsoleOriginNull: a real browser posts the console's forms with
// "Origin: null" (the pages' Referrer-Policy is no-referrer) and
// Sec-Fetch-Site: same-origin; that passes, and "null" with no
// Sec-Fetch-Site, or with a cross-site one, does not.
func TestConsoleOriginNull(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	c := e.console()
	for _, h := range []struct {
		site string
		code int
	}{{"same-origin", 303}, {"", 403}, {"cross-site", 403}, {"same-site", 403}} {
		hdr := []string{"Origin", "null"}
		if h.site != "" {
			hdr = append(hdr, "Sec-Fetch-Site", h.site)
		}
		if p := c.req("POST", "/console/login", url.Values{"key": {e.keys["member"]}}, hdr...); p.code != h.code {
			t.Errorf("Origin: null, Sec-Fetch-Site %q: %d, want %d", h.site, p.code, h.code)
		}
	}
}
