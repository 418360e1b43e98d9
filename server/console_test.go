package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/server"
)

// noRedirect is a client that returns redirects rather than follow them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// console is a browser's view of the console: its session cookie and
// the CSRF token its pages carry.
type console struct {
	e      *env
	base   string
	client *http.Client
	cookie *http.Cookie
	csrf   string
}

type page struct {
	code int
	hdr  http.Header
	body string
}

func (e *env) console() *console { return &console{e: e, base: e.url, client: noRedirect} }

// req sends a console request with the session cookie (if any) and the
// given headers.
func (c *console) req(method, path string, form url.Values, hdr ...string) page {
	c.e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.e.t.Fatal(err)
	}
	stream := strings.Contains(path, "/events")
	if stream {
		// an event stream runs while the run does: read what comes
		// within a moment
		ctx, cancel := context.WithTimeout(c.e.t.(*testing.T).Context(), time.Second)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.cookie != nil {
		r.AddCookie(c.cookie)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.client.Do(r)
	if err != nil {
		c.e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body) // a stream's read ends with the context
	return page{res.StatusCode, res.Header, string(b)}
}

func (c *console) get(path string) page { c.e.t.Helper(); return c.req("GET", path, nil) }

// post sends a form as the console's own pages do: same origin, with the
// session's CSRF token.
func (c *console) post(path string, form url.Values) page {
	c.e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if c.csrf != "" {
		form.Set("csrf", c.csrf)
	}
	return c.req("POST", path, form, "Origin", c.base, "Sec-Fetch-Site", "same-origin")
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// signIn signs in with key and returns the response of the sign-in.
func (c *console) signIn(key string) page {
	c.e.t.Helper()
	c.cookie, c.csrf = nil, ""
	p := c.post("/console/login", url.Values{"key": {key}})
	for _, ck := range (&http.Response{Header: p.hdr}).Cookies() {
		if (ck.Name == server.ConsoleCookie || ck.Name == server.ConsoleCookieTLS) && ck.Value != "" {
			c.cookie = ck
		}
	}
	if c.cookie != nil {
		if m := csrfInput.FindStringSubmatch(c.get("/console/runs").body); m != nil {
			c.csrf = m[1]
		}
	}
	return p
}

// mustSignIn signs in as key and fails the test if it does not work.
func (e *env) mustSignIn(key string) *console {
	e.t.Helper()
	c := e.console()
	if p := c.signIn(key); p.code != 303 || c.cookie == nil || c.csrf == "" {
		e.t.Fatalf("sign-in: %d %q, cookie %v, csrf %q", p.code, p.body, c.cookie, c.csrf)
	}
	return c
}

// signedIn reports whether the session still opens a page.
func (c *console) signedIn() bool {
	c.e.t.Helper()
	p := c.get("/console/runs")
	return p.code == 200 && strings.Contains(p.body, `id="whoami"`)
}

// TestConsoleSignIn: a user's key and the admin key sign in; an unknown,
// a revoked and a bare tenant key do not, and the failures are audited;
// the cookie is HttpOnly, SameSite=Strict, scoped to /console/.
func TestConsoleSignIn(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) {
		e := newEnv(t, envOpts{postgres: pg})
		e.setup(projectFor("true"))
		c := e.console()
		p := c.signIn(e.keys["member"])
		if p.code != 303 || p.hdr.Get("Location") != "/console/runs" || c.cookie == nil {
			t.Fatalf("member sign-in: %d %s %v", p.code, p.hdr.Get("Location"), c.cookie)
		}
		ck := c.cookie
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console/" || ck.Secure || len(ck.Value) != 64 {
			t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/console/, not Secure over plain HTTP, a 32-byte token", ck)
		}
		if strings.Contains(ck.Value, e.keys["member"]) {
			t.Error("the cookie holds the key")
		}
		runs := c.get("/console/runs")
		if runs.code != 200 || !strings.Contains(runs.body, `id="whoami"`) || !strings.Contains(runs.body, "member (member)") {
			t.Fatalf("runs page: %d %s", runs.code, runs.body)
		}
		if strings.Contains(runs.body, `id="nav-admin"`) {
			t.Error("a member sees the admin link")
		}
		// the session is stored hashed: the token is nowhere in the database
		var n int
		e.store.DB().QueryRow("SELECT COUNT(*) FROM console_sessions WHERE hash = '" + ck.Value + "'").Scan(&n)
		if n != 0 {
			t.Error("the session token is stored in the clear")
		}

		a := e.mustSignIn(adminKey)
		if b := a.get("/console/audit").body; !strings.Contains(b, `id="nav-admin"`) || !strings.Contains(b, "operator") ||
			strings.Contains(b, `id="nav-runs"`) || strings.Contains(b, `id="nav-approvals"`) {
			t.Errorf("the admin's nav is not audit and admin only, or lacks the identity:\n%s", b)
		}

		var revoked struct{ ID, Secret string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+e.member+`"}`).json(t, &revoked)
		e.must(200, "DELETE", "/v1/tenants/"+e.tenantA+"/keys/"+revoked.ID, adminKey, "")
		for _, bad := range []struct {
			name, key string
			code      int
		}{
			{"unknown", "cdn_" + strings.Repeat("a", 52), 401},
			{"not a key", "password", 401},
			{"revoked", revoked.Secret, 401},
			{"bare tenant key", e.keys["tenant"], 403},
			{"empty", "", 400},
		} {
			c := e.console()
			p := c.signIn(bad.key)
			if p.code != bad.code || c.cookie != nil || !strings.Contains(p.body, `id="login"`) {
				t.Errorf("%s key: %d, cookie %v; want %d and the form again", bad.name, p.code, c.cookie, bad.code)
			}
		}
		exp := string(e.must(200, "GET", "/v1/audit/export", adminKey, "").body)
		if got := strings.Count(exp, "console sign-in"); got != 4 {
			t.Errorf("%d failed sign-ins audited, want 4:\n%s", got, exp)
		}
	})
}

// TestConsoleCookieSecureUnderTLS: over TLS the cookie is
// __Host-cordon_console (Secure, Path=/, no Domain), the API refuses it
// (it reads no cookie), a plain cordon_console beside it is never read,
// two of it sign the request out, and every page carries HSTS.
func TestConsoleCookieSecureUnderTLS(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	ts := httptest.NewTLSServer(e.srv.Handler())
	defer ts.Close()
	c := e.console()
	c.base = ts.URL
	c.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: noRedirect.CheckRedirect}
	c.signIn(e.keys["approver"])
	if c.cookie == nil || !c.cookie.Secure || !c.cookie.HttpOnly || c.cookie.SameSite != http.SameSiteStrictMode ||
		c.cookie.Name != server.ConsoleCookieTLS || c.cookie.Path != "/" || c.cookie.Domain != "" {
		t.Fatalf("cookie under TLS: %+v, want __Host-cordon_console, Secure, HttpOnly, SameSite=Strict, Path=/, no Domain", c.cookie)
	}
	if !c.signedIn() {
		t.Fatal("the __Host- cookie opens no page")
	}
	if p := c.get("/console/runs"); p.hdr.Get("Strict-Transport-Security") != server.ConsoleHSTS {
		t.Errorf("a console page over TLS: Strict-Transport-Security %q", p.hdr.Get("Strict-Transport-Security"))
	}
	// Path=/ sends the cookie to the API too: the API never reads it
	id := e.submit(e.keys["member"])
	for _, r := range []struct{ method, path string }{{"GET", "/v1/runs"}, {"GET", "/v1/runs/" + id}, {"GET", "/v1/whoami"},
		{"POST", "/v1/runs/" + id + "/approve"}, {"POST", "/v1/projects/p/runs"}} {
		if p := c.req(r.method, r.path, url.Values{"csrf": {c.csrf}}, "Origin", ts.URL, "Sec-Fetch-Site", "same-origin"); p.code != 401 {
			t.Errorf("%s %s with the __Host- cookie: %d, want 401", r.method, r.path, p.code)
		}
	}
	// a plain cordon_console cookie (which a sibling host may set) is not
	// read under TLS, nor does it shadow the __Host- one
	other := e.mustSignIn(e.keys["other-member"])
	req, _ := http.NewRequest("GET", ts.URL+"/console/runs", nil)
	req.Header.Set("Cookie", server.ConsoleCookie+"="+other.cookie.Value+"; "+c.cookie.Name+"="+c.cookie.Value)
	res, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), "approver (approver)") {
		t.Errorf("under TLS, a plain cookie beside the __Host- one: %d, not the __Host- cookie's session", res.StatusCode)
	}
	// two __Host- cookies: signed out, the cookie cleared
	req.Header.Set("Cookie", c.cookie.Name+"="+other.cookie.Value+"; "+c.cookie.Name+"="+c.cookie.Value)
	res, err = c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 303 || res.Header.Get("Location") != "/console/login" || !strings.Contains(res.Header.Get("Set-Cookie"), server.ConsoleCookieTLS+"=;") {
		t.Errorf("two __Host- cookies: %d %s %q, want signed out and the cookie cleared", res.StatusCode, res.Header.Get("Location"), res.Header.Get("Set-Cookie"))
	}
}

// TestConsoleSessionEnds: signing out, and revoking the key a session
// was opened with, each end the session.
func TestConsoleSessionEnds(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) {
		e := newEnv(t, envOpts{postgres: pg})
		e.setup(projectFor("true"))
		c := e.mustSignIn(e.keys["member"])
		old := *c.cookie
		if p := c.post("/console/logout", nil); p.code != 303 || p.hdr.Get("Location") != "/console/login" {
			t.Fatalf("sign-out: %d %s", p.code, p.hdr.Get("Location"))
		}
		c.cookie = &old // a copy of the cookie kept past sign-out
		if c.signedIn() {
			t.Error("the session works after sign-out")
		}
		if p := c.get("/console/runs"); p.code != 303 || p.hdr.Get("Location") != "/console/login" {
			t.Errorf("after sign-out: %d %s, want a redirect to sign in", p.code, p.hdr.Get("Location"))
		}

		var k struct{ ID, Secret string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+e.approver+`"}`).json(t, &k)
		c = e.mustSignIn(k.Secret)
		if !c.signedIn() {
			t.Fatal("a fresh session does not work")
		}
		e.must(200, "DELETE", "/v1/tenants/"+e.tenantA+"/keys/"+k.ID, adminKey, "")
		if c.signedIn() {
			t.Error("the session works after its key was revoked")
		}

		c = e.mustSignIn(e.keys["approver"])
		if _, err := e.store.DB().Exec("UPDATE console_sessions SET expires_at = created_at + 1 WHERE revoked_at IS NULL"); err != nil {
			t.Fatal(err)
		}
		if c.signedIn() {
			t.Error("the session works after it expired")
		}
	})
}

// TestConsoleCSRF: a state-changing console request without the
// session's CSRF token, with a wrong one, or from another origin is
// refused with 403 and changes nothing.
func TestConsoleCSRF(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	c := e.mustSignIn(e.keys["member"])
	other := e.mustSignIn(e.keys["approver"])
	cases := []struct {
		name string
		form url.Values
		hdr  []string
	}{
		{"no token", url.Values{}, []string{"Origin", e.url, "Sec-Fetch-Site", "same-origin"}},
		{"wrong token", url.Values{"csrf": {strings.Repeat("0", 64)}}, []string{"Origin", e.url, "Sec-Fetch-Site", "same-origin"}},
		{"another session's token", url.Values{"csrf": {other.csrf}}, []string{"Origin", e.url, "Sec-Fetch-Site", "same-origin"}},
		{"cross origin", url.Values{"csrf": {c.csrf}}, []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}},
		{"cross-site fetch", url.Values{"csrf": {c.csrf}}, []string{"Sec-Fetch-Site", "cross-site"}},
		{"same-site, other origin", url.Values{"csrf": {c.csrf}}, []string{"Origin", "http://sub." + strings.TrimPrefix(e.url, "http://"), "Sec-Fetch-Site", "same-site"}},
		{"foreign origin only", url.Values{"csrf": {c.csrf}}, []string{"Origin", "http://evil.example"}},
		{"neither header", url.Values{"csrf": {c.csrf}}, nil},
	}
	for _, tc := range cases {
		p := c.req("POST", "/console/logout", tc.form, tc.hdr...)
		if p.code != 403 {
			t.Errorf("%s: %d, want 403", tc.name, p.code)
		}
		if !c.signedIn() {
			t.Fatalf("%s: the refused sign-out ended the session", tc.name)
		}
	}
	// a sign-in from another origin is refused too (login CSRF)
	x := e.console()
	p := x.req("POST", "/console/login", url.Values{"key": {e.keys["member"]}}, "Origin", "https://evil.example")
	if p.code != 403 || strings.Contains(p.hdr.Get("Set-Cookie"), server.ConsoleCookie+"=") {
		t.Errorf("cross-origin sign-in: %d %q", p.code, p.hdr.Get("Set-Cookie"))
	}
	// GET changes nothing: a GET of the sign-out is no route
	if p := c.get("/console/logout"); p.code == 303 || !c.signedIn() {
		t.Errorf("GET /console/logout: %d; the session must survive a GET", p.code)
	}
	// and the right token, same-origin, works
	if p := c.post("/console/logout", nil); p.code != 303 || c.signedIn() {
		t.Errorf("sign-out with the token: %d", p.code)
	}
}

// TestConsoleCookieNotForAPI: the API never accepts the console's
// cookie (so a page cannot ride it to the API), and the console never
// accepts a bearer key.
func TestConsoleCookieNotForAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	c := e.mustSignIn(e.keys["approver"])
	id := e.submit(e.keys["member"])
	for _, r := range e.srv.Routes() {
		if strings.HasPrefix(r.Path, "/console/") || r.Guard == server.GuardPublic {
			continue
		}
		path := strings.NewReplacer("{tenant}", e.tenantA, "{key}", "key_x", "{project}", "p", "{run}", id, "{secret}", "s").Replace(r.Path)
		cc := *c
		cc.base = e.url
		p := cc.req(r.Method, path, url.Values{"csrf": {c.csrf}}, "Origin", e.url, "Sec-Fetch-Site", "same-origin")
		if p.code != 401 {
			t.Errorf("%s %s with the console cookie: %d, want 401", r.Method, r.Path, p.code)
		}
	}
	var run struct{ State string }
	e.must(200, "GET", "/v1/runs/"+id, e.keys["member"], "").json(t, &run)
	if run.State != "pending_approval" {
		t.Fatalf("the run is %s after requests with the cookie", run.State)
	}
	// a bearer key opens no console page
	x := e.console()
	p := x.req("GET", "/console/runs", nil, "Authorization", "Bearer "+e.keys["approver"])
	if p.code != 303 || p.hdr.Get("Location") != "/console/login" {
		t.Errorf("console page with a bearer key: %d %s, want a redirect to sign in", p.code, p.hdr.Get("Location"))
	}
}

var consoleHeaderWant = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"X-Frame-Options":         "DENY",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-store",
}

func checkConsoleHeaders(t *testing.T, what string, p page) {
	t.Helper()
	for k, v := range consoleHeaderWant {
		if got := p.hdr.Get(k); got != v {
			t.Errorf("%s (%d): %s is %q, want %q", what, p.code, k, got, v)
		}
	}
}

// TestConsoleHeaders: every console response, whatever its status and
// whoever asks, carries the CSP and the anti-framing headers.
func TestConsoleHeaders(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	who := map[string]*console{"none": e.console(), "member": e.mustSignIn(e.keys["member"]),
		"approver": e.mustSignIn(e.keys["approver"]), "admin": e.mustSignIn(adminKey)}
	for _, r := range e.srv.Routes() {
		if !strings.HasPrefix(r.Path, "/console/") || r.Path == "/console/logout" {
			continue
		}
		path := strings.NewReplacer("{run}", id, "{file}", "console.css").Replace(r.Path)
		for name, c := range who {
			var p page
			if r.Method == "POST" {
				p = c.post(path, url.Values{"reason": {"x"}})
			} else {
				p = c.get(path)
			}
			checkConsoleHeaders(t, r.Method+" "+path+" as "+name, p)
		}
	}
	for _, path := range []string{"/console/nope", "/console/static/nope.css", "/console/static/console.js", "/console/logout"} {
		checkConsoleHeaders(t, path, who["member"].get(path))
	}
	checkConsoleHeaders(t, "DELETE /console/runs", who["member"].req("DELETE", "/console/runs", nil))
	if p := who["none"].get("/console/"); p.code != 303 || p.hdr.Get("Location") != "/console/runs" {
		t.Errorf("GET /console/: %d %s, want a redirect to the runs", p.code, p.hdr.Get("Location"))
	} else {
		checkConsoleHeaders(t, "/console/", p)
	}
}

// TestConsoleRunsList: the list shows the tenant's runs (none to the
// operator, none of another tenant's to a user), each linking to
// its page, filtered by status and project.
func TestConsoleRunsList(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	done := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+done+"/approve", e.keys["approver"], "")
	e.wait(done, e.keys["member"], 30*time.Second)
	pending := e.submit(e.keys["member"])
	var other struct{ ID string }
	e.must(201, "POST", "/v1/projects/q/runs", e.keys["other-member"], `{"task":"t"}`).json(t, &other)

	row := func(id string) string {
		return `<tr class="run" data-run="` + id + `"><td><a href="/console/runs/` + id + `">`
	}
	m := e.mustSignIn(e.keys["member"])
	all := m.get("/console/runs").body
	if !strings.Contains(all, row(done)) || !strings.Contains(all, row(pending)) || strings.Contains(all, other.ID) {
		t.Errorf("the member's list:\n%s", all)
	}
	if b := m.get("/console/runs?status=pending_approval").body; strings.Contains(b, row(done)) || !strings.Contains(b, row(pending)) {
		t.Errorf("filtered by status:\n%s", b)
	}
	if b := m.get("/console/runs?project=p&status=finished").body; !strings.Contains(b, row(done)) || strings.Contains(b, row(pending)) {
		t.Errorf("filtered by project and status:\n%s", b)
	}
	if b := m.get("/console/runs?project=zzz").body; strings.Contains(b, `class="run"`) {
		t.Errorf("filtered by another project:\n%s", b)
	}
	if p := m.get("/console/runs?status=%3Cscript%3E"); p.code != 400 {
		t.Errorf("a bad status: %d", p.code)
	}
	// the operator reads no tenant's runs, as on the API (red team F1),
	// and its sign-in lands on the audit log
	adm := e.console()
	if p := adm.signIn(adminKey); p.code != 303 || p.hdr.Get("Location") != "/console/audit" {
		t.Errorf("the operator's sign-in: %d to %q, want the audit log", p.code, p.hdr.Get("Location"))
	}
	for _, path := range []string{"/console/runs", "/console/runs/" + done, "/console/runs/" + done + "/journal", "/console/runs/" + done + "/evidence", "/console/runs/" + done + "/events"} {
		if p := adm.get(path); p.code != 403 || strings.Contains(p.body, row(done)) || !strings.Contains(p.body, "/console/audit") {
			t.Errorf("the operator's %s: %d, want 403 pointing at the audit log:\n%s", path, p.code, p.body)
		}
	}
	if p := e.mustSignIn(e.keys["other-approver"]).get("/console/runs/" + done); p.code != 404 {
		t.Errorf("another tenant's run page: %d", p.code)
	}
}

// TestConsoleSignOutEverywhere: form#logout-all ends every session of
// the caller's key and none of another key's; without the CSRF token it
// ends nothing (red team F9).
func TestConsoleSignOutEverywhere(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	c1, c2 := e.mustSignIn(e.keys["member"]), e.mustSignIn(e.keys["member"])
	other := e.mustSignIn(e.keys["approver"])
	if b := c1.get("/console/runs").body; !strings.Contains(b, `<form id="logout-all" method="post" action="/console/logout-all">`) {
		t.Fatalf("no form#logout-all in the header:\n%s", b)
	}
	if p := c1.req("POST", "/console/logout-all", url.Values{}, "Origin", e.url, "Sec-Fetch-Site", "same-origin"); p.code != 403 || !c2.signedIn() {
		t.Fatalf("sign out everywhere without the token: %d, or it ended a session", p.code)
	}
	if p := c1.post("/console/logout-all", nil); p.code != 303 || p.hdr.Get("Location") != "/console/login" {
		t.Fatalf("sign out everywhere: %d %s", p.code, p.hdr.Get("Location"))
	}
	if c1.signedIn() || c2.signedIn() {
		t.Error("a session of the key is live after sign out everywhere")
	}
	if !other.signedIn() {
		t.Error("another key's session ended")
	}
}

// TestConsoleRunPageBounded: a journal longer than the page shows is cut
// to its last entries with a note, and the live stream resumes after the
// journal's last entry, not the page's count (red team F5).
func TestConsoleRunPageBounded(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	id, _ := heldRun(t, e)
	var entries []map[string]any
	for i := range 2100 {
		entries = append(entries, map[string]any{"type": "command", "body": map[string]any{"argv": []any{"echo", i}, "exit": 0}})
	}
	writeJournal(e.dir, id, entries)
	p := e.mustSignIn(e.keys["member"]).get("/console/runs/" + id)
	if p.code != 200 || strings.Count(p.body, `<li class="entry"`) != 2000 || !strings.Contains(p.body, `id="timeline-omitted"`) ||
		!strings.Contains(p.body, "the 100 before them are not shown") || !strings.Contains(p.body, `data-index="2099"`) ||
		strings.Contains(p.body, `data-index="99"`) || !strings.Contains(p.body, "events?after=2100") {
		t.Errorf("run page of a 2100-entry journal: %d, %d entries shown", p.code, strings.Count(p.body, `<li class="entry"`))
	}
}
