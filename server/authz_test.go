package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/server"
)

type surface struct {
	Tiers      []string `json:"tiers"`
	Elevated   []string `json:"elevated"`
	BlastRadii []string `json:"blast_radii"`
	Routes     []struct {
		Method      string `json:"method"`
		Path        string `json:"path"`
		Guard       string `json:"guard"`
		Tier        string `json:"tier"`
		BlastRadius string `json:"blast_radius"`
		Rationale   string `json:"rationale"`
	} `json:"routes"`
	Exceptions []struct {
		Method  string `json:"method"`
		Path    string `json:"path"`
		Finding string `json:"finding"`
	} `json:"exceptions"`
}

func loadSurface(t *testing.T) *surface {
	t.Helper()
	b, err := os.ReadFile("../docs/security/authz-surface.json")
	if err != nil {
		t.Fatal(err)
	}
	var s surface
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	delete(raw, "description")
	clean, _ := json.Marshal(raw)
	d = json.NewDecoder(strings.NewReader(string(clean)))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		t.Fatalf("authz-surface.json: %v", err)
	}
	return &s
}

var dangerous = []string{"execution", "secrets", "credentials"}

// checkSurface applies the manifest's rules to the live routes; it
// returns every violation.
func checkSurface(s *surface, live []server.Route, resolve func(method, path string) string) []string {
	var bad []string
	declared := map[string]int{}
	for i, r := range s.Routes {
		key := r.Method + " " + r.Path
		if _, dup := declared[key]; dup {
			bad = append(bad, key+": listed twice")
		}
		declared[key] = i
		if strings.TrimSpace(r.Rationale) == "" {
			bad = append(bad, key+": no rationale")
		}
		if !slices.Contains(s.BlastRadii, r.BlastRadius) {
			bad = append(bad, key+": unknown blast radius "+r.BlastRadius)
		}
		if server.TierOf(r.Guard) == "" {
			bad = append(bad, key+": unknown guard "+r.Guard)
		}
		if r.Tier != server.TierOf(r.Guard) {
			bad = append(bad, fmt.Sprintf("%s: declared tier %q, but guard %q implies %q", key, r.Tier, r.Guard, server.TierOf(r.Guard)))
		}
		risky := slices.Contains(dangerous, r.BlastRadius)
		// Rule B: never at the bare tenant tier, no exceptions.
		if risky && r.Tier == "tenant" {
			bad = append(bad, key+": Rule B: a bare tenant key may not carry "+r.BlastRadius)
		}
		// Rule A: elevated, or an exception with its finding.
		if risky && !server.Elevated(r.Tier) {
			ok := false
			for _, x := range s.Exceptions {
				if x.Method == r.Method && x.Path == r.Path && strings.TrimSpace(x.Finding) != "" {
					ok = true
				}
			}
			if !ok {
				bad = append(bad, key+": Rule A: "+r.BlastRadius+" blast radius at tier "+r.Tier+" without an exception carrying its finding")
			}
		}
	}
	for _, x := range s.Exceptions {
		if _, ok := declared[x.Method+" "+x.Path]; !ok {
			bad = append(bad, "exception "+x.Method+" "+x.Path+": no such route")
		}
	}
	seen := map[string]bool{}
	for _, r := range live {
		key := r.Method + " " + r.Path
		seen[key] = true
		i, ok := declared[key]
		if !ok {
			bad = append(bad, key+": served but missing from the manifest")
			continue
		}
		if s.Routes[i].Guard != r.Guard {
			bad = append(bad, fmt.Sprintf("%s: the router's guard is %q, the manifest declares %q", key, r.Guard, s.Routes[i].Guard))
		}
		if got := resolve(r.Method, r.Path); got != key {
			bad = append(bad, fmt.Sprintf("%s: the live router sends it to %q", key, got))
		}
	}
	for key := range declared {
		if !seen[key] {
			bad = append(bad, key+": in the manifest but not served")
		}
	}
	slices.Sort(bad)
	return bad
}

// concrete fills a pattern's wildcards.
func concrete(p string) string {
	r := strings.NewReplacer("{tenant}", "ten_x", "{key}", "key_x", "{project}", "p", "{run}", "run_x", "{secret}", "s", "{file}", "console.css")
	return r.Replace(p)
}

func resolver(s *server.Server) func(method, path string) string {
	return func(method, path string) string {
		req, _ := http.NewRequest(method, "http://x"+concrete(path), nil)
		_, pat := s.Mux().Handler(req)
		return pat
	}
}

// TestAuthzSurface walks the live router against
// docs/security/authz-surface.json and enforces Rules A and B.
func TestAuthzSurface(t *testing.T) {
	e := newEnv(t, envOpts{})
	if bad := checkSurface(loadSurface(t), e.srv.Routes(), resolver(e.srv)); len(bad) > 0 {
		t.Fatalf("the authorization surface does not hold:\n%s", strings.Join(bad, "\n"))
	}
}

// TestAuthzSurfaceCatchesDrift shows the check fails for each kind of
// drift: the rules are not vacuous.
func TestAuthzSurfaceCatchesDrift(t *testing.T) {
	e := newEnv(t, envOpts{})
	live := e.srv.Routes()
	res := resolver(e.srv)
	find := func(s *surface, path, method string) int {
		for i, r := range s.Routes {
			if r.Path == path && r.Method == method {
				return i
			}
		}
		t.Fatalf("no %s %s", method, path)
		return -1
	}
	cases := []struct {
		name string
		edit func(s *surface) []server.Route
		want string
	}{
		{"missing route", func(s *surface) []server.Route {
			s.Routes = s.Routes[1:]
			return live
		}, "missing from the manifest"},
		{"stale route", func(s *surface) []server.Route { return live[1:] }, "not served"},
		{"guard differs", func(s *surface) []server.Route {
			s.Routes[find(s, "/v1/runs/{run}", "GET")].Guard, s.Routes[find(s, "/v1/runs/{run}", "GET")].Tier = "user", "user"
			return live
		}, "the router's guard"},
		{"tier misdeclared", func(s *surface) []server.Route {
			s.Routes[find(s, "/v1/runs/{run}/approve", "POST")].Tier = "admin"
			return live
		}, "implies"},
		{"rule A", func(s *surface) []server.Route {
			s.Routes[find(s, "/v1/runs/{run}/cancel", "POST")].BlastRadius = "execution"
			return live
		}, "Rule A"},
		{"rule A exception without finding", func(s *surface) []server.Route {
			s.Exceptions[0].Finding = " "
			return live
		}, "Rule A"},
		{"rule B", func(s *surface) []server.Route {
			s.Routes[find(s, "/v1/runs/{run}/evidence", "GET")].BlastRadius = "secrets"
			s.Exceptions = append(s.Exceptions, s.Exceptions[0])
			s.Exceptions[len(s.Exceptions)-1].Path = "/v1/runs/{run}/evidence"
			s.Exceptions[len(s.Exceptions)-1].Method = "GET"
			return live
		}, "Rule B"},
		{"live route with a changed guard", func(s *surface) []server.Route {
			l := slices.Clone(live)
			for i := range l {
				if l[i].Path == "/v1/runs/{run}/approve" {
					l[i].Guard = server.GuardTenant
				}
			}
			return l
		}, "the router's guard"},
	}
	for _, c := range cases {
		s := loadSurface(t)
		l := c.edit(s)
		bad := checkSurface(s, l, res)
		if !strings.Contains(strings.Join(bad, "\n"), c.want) {
			t.Errorf("%s: want a violation mentioning %q, got %q", c.name, c.want, bad)
		}
	}
}

// TestAuthzMatrix runs every route for every kind of principal against
// the live server: none, another tenant's key, the tenant's bare key,
// a member, an approver, the admin (with and without the explicit
// header). The expected outcome comes from the route's guard in the
// manifest; allowed requests must not be refused by authentication or
// authorization (401/403), and another tenant's key never sees this
// tenant's resources (404).
func TestAuthzMatrix(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) { authzMatrix(t, pg) })
}

func authzMatrix(t *testing.T, pg bool) {
	e := newEnv(t, envOpts{postgres: pg})
	e.setup(projectFor("true"))
	s := loadSurface(t)
	principals := []string{"none", "other", "tenant", "member", "approver", "admin", "explicit"}
	allow := map[string][]string{
		"public":          principals,
		"tenant":          {"other", "tenant", "member", "approver"},
		"user":            {"member", "approver"},
		"approver":        {"approver"},
		"admin":           {"admin", "explicit"},
		"explicit-admin":  {"explicit"},
		"tenant-or-admin": {"other", "tenant", "member", "approver", "admin", "explicit"},
	}
	for _, r := range s.Routes {
		for _, p := range principals {
			// Fresh resources for each cell, in tenant a.
			run := e.submit(e.keys["member"])
			var key struct{ ID string }
			e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, "").json(t, &key)
			proj := "p"
			if r.Method == "PUT" && r.Path == "/v1/projects/{project}" {
				// another project: a write makes its writer the author of
				// p's runs, whom gate independence bars from approving them
				proj = "w"
			}
			if strings.HasPrefix(r.Path, "/v1/runs/{run}/review") || strings.HasPrefix(r.Path, "/console/runs/{run}/review") {
				// a finished run, whose change is waiting for review
				e.must(200, "POST", "/v1/runs/"+run+"/approve", e.keys["approver"], "")
				e.wait(run, e.keys["member"], 30*time.Second)
			}
			path := strings.NewReplacer("{tenant}", e.tenantA, "{key}", key.ID, "{project}", proj, "{run}", run, "{secret}", "s").Replace(r.Path)
			body := ""
			switch r.Method + " " + r.Path {
			case "POST /v1/tenants":
				body = fmt.Sprintf(`{"name":"m%d","ceiling":%s}`, len(path)+int(e.tenantCount()), ceiling)
			case "PUT /v1/tenants/{tenant}/ceiling":
				body = ceiling
			case "POST /v1/tenants/{tenant}/users":
				body = fmt.Sprintf(`{"name":"u%d","role":"member"}`, e.tenantCount())
			case "PUT /v1/projects/{project}":
				body = projectFor("true")
			case "PUT /v1/tenants/{tenant}/secrets/{secret}":
				body = "value-of-a-secret"
			case "DELETE /v1/tenants/{tenant}/secrets/{secret}":
				e.must(200, "PUT", "/v1/tenants/"+e.tenantA+"/secrets/s", adminKey, "value-of-a-secret")
			case "POST /v1/projects/{project}/plan", "POST /v1/projects/{project}/runs":
				body = `{"task":"t"}`
			case "POST /v1/runs/{run}/review/decline":
				body = `{"reason":"not this change"}`
			case "PUT /v1/risk-policy":
				body = `{"approvals":{"low":1,"medium":1,"high":2},"rules":[]}`
			}
			if strings.HasPrefix(r.Path, "/console/") {
				consoleCell(t, e, r.Method, r.Path, path, r.Guard, p)
				continue
			}
			k, hdr := e.keys[p], []string{}
			if p == "explicit" {
				k, hdr = adminKey, []string{server.ExplicitHeader, "1"}
			}
			got := e.do(r.Method, path, k, body, hdr...)
			ok := slices.Contains(allow[r.Guard], p)
			cell := fmt.Sprintf("%s %s as %s: %d %s", r.Method, r.Path, p, got.code, strings.TrimSpace(string(got.body)))
			switch {
			case !ok && p == "none" && got.code != 401:
				t.Errorf("%s, want 401", cell)
			case !ok && p != "none" && got.code != 403:
				t.Errorf("%s, want 403", cell)
			case ok && p == "other" && strings.Contains(r.Path, "{") && got.code != 404:
				t.Errorf("%s, want 404: another tenant's resource", cell)
			case ok && p != "other" && (got.code == 401 || got.code == 403 || got.code == 404 || got.code >= 500):
				// approving one's own run is 403 by gate independence:
				// the approver submitted nothing here, the member did.
				t.Errorf("%s, want it allowed", cell)
			}
		}
	}
}

// consoleCell is one cell of the matrix for a console route: the same
// principals, each signed in to the console (a bare tenant key cannot
// sign in, so "tenant" has no session, as "none"; "other" is tenant b's
// approver; "explicit" is the admin), the expected outcome by guard for
// what each principal is.
// A request without a session is sent to sign in (a GET, 303) or refused
// (401).
func consoleCell(t *testing.T, e *env, method, pattern, path, guard, p string) {
	t.Helper()
	allow := map[string][]string{
		"public":          {"none", "tenant", "other", "member", "approver", "admin", "explicit"},
		"tenant":          {"other", "member", "approver"},
		"user":            {"other", "member", "approver"},
		"approver":        {"other", "approver"},
		"admin":           {"admin", "explicit"},
		"tenant-or-admin": {"other", "member", "approver", "admin", "explicit"},
	}
	ok := slices.Contains(allow[guard], p)
	c := e.console()
	switch p {
	case "other":
		c = e.mustSignIn(e.keys["other-approver"])
	case "member", "approver":
		c = e.mustSignIn(e.keys[p])
	case "admin", "explicit":
		c = e.mustSignIn(adminKey)
	}
	path = strings.ReplaceAll(path, "{file}", "console.css")
	var got page
	if method == "POST" {
		form := url.Values{"reason": {"a reason"}}
		if pattern == "/console/login" {
			form.Set("key", e.keys["member"])
		}
		got = c.post(path, form)
	} else {
		got = c.get(path)
	}
	cell := fmt.Sprintf("%s %s as %s (console): %d", method, pattern, p, got.code)
	signedOut := p == "none" || p == "tenant"
	switch {
	case !ok && signedOut && method == "GET" && !strings.HasSuffix(pattern, "/events") && (got.code != 303 || got.hdr.Get("Location") != "/console/login"):
		t.Errorf("%s, want 303 to /console/login", cell)
	case !ok && signedOut && (method == "POST" || strings.HasSuffix(pattern, "/events")) && got.code != 401:
		t.Errorf("%s, want 401", cell)
	case !ok && !signedOut && got.code != 403:
		t.Errorf("%s, want 403", cell)
	case ok && p == "other" && strings.Contains(pattern, "{run}") && got.code != 404:
		t.Errorf("%s, want 404: another tenant's resource", cell)
	case ok && p != "other" && (got.code == 401 || got.code == 403 || got.code == 404 || got.code >= 500):
		t.Errorf("%s, want it allowed: %.300s", cell, got.body)
	}
}

func (e *env) tenantCount() int {
	n := 0
	e.store.DB().QueryRow("SELECT COUNT(*) FROM users").Scan(&n)
	return n
}
