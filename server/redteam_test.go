package server_test

// Red-team probes of the control plane (issue 15 review). Each probe logs
// what it found; the ones marked FINDING assert the current (unwanted)
// behaviour so that a fix flips them.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

func TestRedteamAuthHeaders(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	k := e.keys["member"]
	cases := []struct {
		name string
		hdr  []string
		want int
	}{
		{"lowercase scheme", []string{"bearer " + k}, 200},
		{"extra spaces", []string{"Bearer    " + k + "   "}, 200},
		{"basic scheme", []string{"Basic " + k}, 401},
		{"no scheme", []string{k}, 401},
		{"prefix only", []string{"Bearer cdn_"}, 401},
		{"key with suffix", []string{"Bearer " + k + "x"}, 401},
		{"key truncated", []string{"Bearer " + k[:len(k)-1]}, 401},
		{"uppercase key", []string{"Bearer " + strings.ToUpper(k)}, 401},
		{"bogus first, valid second", []string{"Bearer cdn_bogus", "Bearer " + k}, 401},
		{"valid first, bogus second", []string{"Bearer " + k, "Bearer cdn_bogus"}, 200},
		{"admin key on tenant route", []string{"Bearer " + adminKey}, 403},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", e.url+"/v1/whoami", nil)
		for _, h := range c.hdr {
			req.Header.Add("Authorization", h)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, res.StatusCode, c.want)
		}
	}
	// explicit-admin header variants
	ceil := ceiling
	for _, v := range []string{"true", "yes", "01", "1 1", ""} { // " 1" is trimmed by textproto to "1"
		r := e.do("PUT", "/v1/tenants/"+e.tenantA+"/ceiling", adminKey, ceil, "Cordon-Explicit-Admin", v)
		if r.code != 403 {
			t.Errorf("explicit header %q: %d", v, r.code)
		}
	}
	// a tenant key with the explicit header is still not admin
	if r := e.do("PUT", "/v1/tenants/"+e.tenantA+"/ceiling", e.keys["approver"], ceil, "Cordon-Explicit-Admin", "1"); r.code != 403 {
		t.Errorf("approver on explicit-admin: %d", r.code)
	}
}

func TestRedteamKeysLifecycle(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	var ks []store.Key
	e.must(200, "GET", "/v1/tenants/"+e.tenantA+"/keys", adminKey, "").json(t, &ks)
	var mk string
	for _, k := range ks {
		if k.UserID == e.member {
			mk = k.ID
		}
	}
	// revoke/rotate another tenant's key through my tenant's path
	e.must(404, "DELETE", "/v1/tenants/"+e.tenantB+"/keys/"+mk, adminKey, "")
	e.must(404, "POST", "/v1/tenants/"+e.tenantB+"/keys/"+mk+"/rotate", adminKey, "")
	// key for another tenant's user
	var ub []store.User
	_ = ub
	var kb []store.Key
	e.must(200, "GET", "/v1/tenants/"+e.tenantB+"/keys", adminKey, "").json(t, &kb)
	for _, k := range kb {
		if k.UserID != "" {
			e.must(404, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+k.UserID+`"}`)
			break
		}
	}
	// rotate: old key dead, new key works with the same role
	var nk struct{ Secret, User string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys/"+mk+"/rotate", adminKey, "").json(t, &nk)
	e.must(401, "GET", "/v1/whoami", e.keys["member"], "")
	var who map[string]string
	e.must(200, "GET", "/v1/whoami", nk.Secret, "").json(t, &who)
	if who["role"] != "member" {
		t.Errorf("rotated key role %q", who["role"])
	}
	// rotate again the old (revoked) key: refused
	e.must(404, "POST", "/v1/tenants/"+e.tenantA+"/keys/"+mk+"/rotate", adminKey, "")
	// unknown members / case variants in admin bodies
	e.must(400, "POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"x","role":"approver","admin":true}`)
	e.must(400, "POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"x","role":"Approver"}`)
	// duplicate keys: last wins in Go; both values must be valid anyway
	r := e.do("POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"dup","role":"member","role":"approver"}`)
	t.Logf("duplicate role member/approver -> %d %s", r.code, r.body)
}

func TestRedteamCrossTenantAndApproval(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	for _, k := range []string{"other", "other-member", "other-approver"} {
		for _, rt := range []struct{ m, p string }{
			{"GET", "/v1/runs/" + id}, {"GET", "/v1/runs/" + id + "/journal"}, {"GET", "/v1/runs/" + id + "/evidence"},
			{"POST", "/v1/runs/" + id + "/approve"}, {"POST", "/v1/runs/" + id + "/reject"}, {"POST", "/v1/runs/" + id + "/cancel"},
			{"GET", "/v1/runs/" + id + "/mailbox"}, {"POST", "/v1/runs/" + id + "/mailbox"},
			{"GET", "/v1/projects/p"}, {"POST", "/v1/projects/p/plan"}, {"POST", "/v1/projects/p/runs"},
		} {
			r := e.do(rt.m, rt.p, e.keys[k], `{"task":"t"}`)
			if r.code != 404 && r.code != 403 && r.code != 400 {
				t.Errorf("%s %s %s as %s: %d %s", "cross", rt.m, rt.p, k, r.code, r.body)
			}
		}
	}
	// path-encoded traversal in run ids
	for _, p := range []string{"/v1/runs/..%2F..%2Fadmin.key/journal", "/v1/runs/%2e%2e/evidence", "/v1/runs/" + id + "%00/journal"} {
		r := e.do("GET", p, e.keys["member"], "")
		if r.code == 200 {
			t.Errorf("%s: 200 %s", p, r.body)
		}
		t.Logf("%s -> %d", p, r.code)
	}
	// member approving, approver approving own run
	e.must(403, "POST", "/v1/runs/"+id+"/approve", e.keys["member"], "")
	own := e.submit(e.keys["approver"])
	e.must(403, "POST", "/v1/runs/"+own+"/approve", e.keys["approver"], "")
	e.must(403, "POST", "/v1/runs/"+own+"/reject", e.keys["approver"], "")

	// a second approver, then race two approvals
	var u struct{ ID string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"approver2","role":"approver"}`).json(t, &u)
	var k struct{ Secret string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(t, &k)
	race := e.submit(e.keys["member"])
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := e.keys["approver"]
			if i%2 == 1 {
				key = k.Secret
			}
			if i%4 == 3 {
				codes[i] = e.do("POST", "/v1/runs/"+race+"/reject", key, "").code
				return
			}
			codes[i] = e.do("POST", "/v1/runs/"+race+"/approve", key, "").code
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	if ok != 1 {
		t.Errorf("racing decisions: %v, want exactly one 200", codes)
	}
	// approve after cancel / reject
	c1 := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+c1+"/cancel", e.keys["member"], "")
	e.must(409, "POST", "/v1/runs/"+c1+"/approve", e.keys["approver"], "")
	c2 := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+c2+"/reject", e.keys["approver"], "")
	e.must(409, "POST", "/v1/runs/"+c2+"/approve", k.Secret, "")
	e.must(409, "POST", "/v1/runs/"+c2+"/cancel", e.keys["member"], "")
}

// Finding 7: a second cancel of a running run must not overwrite who
// cancelled it.
func TestRedteamCancelRecordOverwritten(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	// a second member
	var u struct{ ID string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"m2","role":"member"}`).json(t, &u)
	var k struct{ Secret string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(t, &k)

	// hold the run in "running" by stopping the executor from seeing the
	// cancel quickly: cancel twice back to back.
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	<-f.started
	r1 := e.do("POST", "/v1/runs/"+id+"/cancel", e.keys["member"], "")
	r2 := e.do("POST", "/v1/runs/"+id+"/cancel", k.Secret, "")
	run := e.wait(id, e.keys["member"], 10*time.Second)
	t.Logf("cancel 1 -> %d, cancel 2 -> %d; cancelled_by=%s (member=%s, m2=%s)", r1.code, r2.code, run.CancelledBy, e.member, u.ID)
	if r1.code != 202 {
		t.Errorf("first cancel of a running run: %d", r1.code)
	}
	if r2.code != 202 && r2.code != 409 {
		t.Errorf("second cancel: %d %s", r2.code, r2.body)
	}
	if run.CancelledBy != e.member {
		t.Errorf("cancelled_by %q after a second cancel, want the first canceller %s", run.CancelledBy, e.member)
	}
}

func TestRedteamRunRequestSmuggling(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	k := e.keys["member"]
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	bodies := map[string]int{
		`{"task":"t","Command":["sh"]}`:              400,
		`{"task":"t","\u0063ommand":["sh"]}`:         400,
		`{"task":"t","COMMANDS":["sh"]}`:             400,
		`{"task":"t","inputs":{"a":"b"}}`:            400,
		`{"task":"t","task":"u"}`:                    400, // u is no task
		`{"task":"u","task":"t"}`:                    201, // last wins, consistently
		`{"TASK":"t"}`:                               201, // case-insensitive member match
		`{"taſk":"t"}`:                               201, // U+017F folds to s in encoding/json
		`{"task":"t","x":` + deep + `}`:              400,
		"{\"task\":\"t\xff\"}":                       400,
		`{"task":"t"} {"command":"sh"}`:              400,
		`[{"task":"t"}]`:                             400,
		`{"task":"t","nested":{"command":"sh"}}`:     400,
		`{"task":"t","manifest\u0000":1}`:            400,
		`{"task":"t","model_endpoint":"http://x/"}`:  400,
		`{"task":"t","Base_URL":"http://127.0.0.1"}`: 400,
	}
	for b, want := range bodies {
		r := e.do("POST", "/v1/projects/p/runs", k, b)
		name := b
		if len(name) > 60 {
			name = name[:60] + "…"
		}
		if r.code != want {
			t.Errorf("%q: %d %s, want %d", name, r.code, r.body, want)
		}
	}
	// oversized body
	big := `{"task":"t","pad":"` + strings.Repeat("a", 2<<20) + `"}`
	if r := e.do("POST", "/v1/projects/p/runs", k, big); r.code != 413 {
		t.Errorf("2 MiB body: %d", r.code)
	}
}

// Project configuration as an attack on the ceiling and the workspace.
func TestRedteamProjectConfig(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	k := e.keys["member"]
	files := func(m map[string]string) string { b, _ := json.Marshal(m); return string(b) }
	rep := replayFor("true")
	try := func(name, manifest, fs string) resp {
		return e.do("PUT", "/v1/projects/"+name, k, `{"tasks":{"t":{"manifest":`+manifest+`,"files":`+fs+`}}}`)
	}
	m := manifestFor("true")
	for _, p := range []string{"../x", "/etc/x", "a/../../x", ".cordon/x", "mem/x", "a\\b", "./a", "a//b", "a\x00b"} {
		if r := try("paths", m, files(map[string]string{"session.jsonl": rep, p: "x"})); r.code != 400 {
			t.Errorf("file path %q: %d", p, r.code)
		}
	}
	// case/trailing-dot variants of the reserved names (finding 9)
	for _, p := range []string{".CORDON/journal.jsonl", ".cordon./x", ".Cordon/mailbox/operator.jsonl", "MEM/x", "mem./x", "Mem /x"} {
		if r := try("paths", m, files(map[string]string{"session.jsonl": rep, p: "x"})); r.code != 400 {
			t.Errorf("reserved-name variant %q: %d, want 400", p, r.code)
		}
	}
	// sh is in the tenant's ceiling but what about an exec outside it
	if r := try("wide", manifestFor("curl"), files(map[string]string{"session.jsonl": replayFor("curl")})); r.code != 400 {
		t.Errorf("exec outside ceiling: %d", r.code)
	}
	// tenancy multi under a single ceiling is a narrowing: accepted
	multi := strings.Replace(m, `"tenancy":"single"`, `"tenancy":"multi"`, 1)
	t.Logf("tenancy multi under single ceiling: %d", try("multi", multi, files(map[string]string{"session.jsonl": rep})).code)
	// live provider with an internal base_url (SSRF)
	live := strings.Replace(m, `"provider":"replay","name":"recorded","replay":"session.jsonl"`, `"provider":"anthropic","name":"x","base_url":"http://127.0.0.1:8420/"`, 1)
	if r := try("ssrf", live, files(map[string]string{"session.jsonl": rep})); r.code != 400 {
		t.Errorf("live provider: %d %s", r.code, r.body)
	}
	// replay provider WITH a base_url (ignored?)
	rb := strings.Replace(m, `"replay":"session.jsonl"`, `"replay":"session.jsonl","base_url":"http://169.254.169.254/"`, 1)
	t.Logf("replay with base_url: %d %s", try("rb", rb, files(map[string]string{"session.jsonl": rep})).code, "")
	// wall budget above the operator maximum
	huge := strings.Replace(m, `"wall_ms":120000,"max_loops"`, `"wall_ms":999999999999,"max_loops"`, 1)
	if r := try("wall", huge, files(map[string]string{"session.jsonl": rep})); r.code != 400 {
		t.Errorf("wall above max: %d", r.code)
	}
	// an env-pinned manifest: cordon run refuses it without --env/--image;
	// does the server?
	envm := strings.Replace(m, `"inputs":[]`, `"env":"`+fakeEnvID+`","inputs":[]`, 1)
	r := try("envpin", envm, files(map[string]string{"session.jsonl": rep}))
	if r.code != 400 || !strings.Contains(string(r.body), "env") {
		t.Errorf("env-pinned manifest: %d %s, want 400 naming env (the server supplies no environment)", r.code, r.body)
	}
	// duplicate task names in the project: last wins, the snapshot is re-encoded
	dup := `{"tasks":{"t":{"manifest":` + m + `,"files":` + files(map[string]string{"session.jsonl": rep}) + `},"t":{"manifest":` + manifestFor("sh") + `,"files":` + files(map[string]string{"session.jsonl": replayFor("sh", "-c", "id")}) + `}}}`
	r = e.do("PUT", "/v1/projects/dup", k, dup)
	if r.code != 400 || !strings.Contains(string(r.body), "duplicate") {
		t.Errorf("duplicate task key: %d %s, want 400 naming the duplicate", r.code, r.body)
	}
}

// fakeEnvID is a syntactically valid ContentId naming no environment.
var fakeEnvID = "b3:" + strings.Repeat("A", 43)

func TestRedteamCeilingTightenedBetweenApproveAndExecute(t *testing.T) {
	f := newFake()
	f.delay = 0
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	// tighten: drop "true" from the ceiling
	tight := strings.Replace(ceiling, `{"name":"true"},`, ``, 1)
	if r := e.do("PUT", "/v1/tenants/"+e.tenantA+"/ceiling", adminKey, tight, "Cordon-Explicit-Admin", "1"); r.code != 200 {
		t.Fatalf("tighten: %d %s", r.code, r.body)
	}
	r := e.do("POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	if r.code != 409 {
		t.Errorf("approve after tightening: %d %s", r.code, r.body)
	}
	// submit under the tightened ceiling: refused
	if r := e.do("POST", "/v1/projects/p/runs", e.keys["member"], `{"task":"t"}`); r.code != 409 {
		t.Errorf("submit after tightening: %d", r.code)
	}
	_ = fmt.Sprint
}

// Two concurrent rotations of one key must yield one live replacement.
func TestRedteamRotateRace(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	var ks []store.Key
	e.must(200, "GET", "/v1/tenants/"+e.tenantA+"/keys", adminKey, "").json(t, &ks)
	id := ks[0].ID
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.do("POST", "/v1/tenants/"+e.tenantA+"/keys/"+id+"/rotate", adminKey, "").code
		}()
	}
	wg.Wait()
	n := 0
	for _, c := range codes {
		if c == 201 {
			n++
		}
	}
	if n != 1 {
		t.Errorf("concurrent rotations: %v, want exactly one 201", codes)
	}
	var after []store.Key
	e.must(200, "GET", "/v1/tenants/"+e.tenantA+"/keys", adminKey, "").json(t, &after)
	live := 0
	for _, k := range after {
		if k.RevokedAt == nil && k.UserID == ks[0].UserID {
			live++
		}
	}
	t.Logf("rotations %v; live keys of that principal afterwards: %d", codes, live)
	if live != 1 {
		t.Errorf("FINDING: %d live keys after concurrent rotation of one key", live)
	}
}

func TestRedteamListLimits(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	for _, l := range []string{"0", "-1", "1001", "abc", "1e3", "99999999999999999999"} {
		if r := e.do("GET", "/v1/runs?limit="+l, e.keys["tenant"], ""); r.code != 400 {
			t.Errorf("limit=%s: %d", l, r.code)
		}
	}
	// public routes leak nothing tenant-specific
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json", "/v1/steward.pub"} {
		r := e.do("GET", p, "", "")
		if strings.Contains(string(r.body), e.tenantA) {
			t.Errorf("%s leaks a tenant id", p)
		}
	}
	if r := e.do("GET", "/metrics", e.keys["approver"], ""); r.code != 403 {
		t.Errorf("/metrics as approver: %d", r.code)
	}
	if r := e.do("GET", "/metrics", "", ""); r.code != 401 {
		t.Errorf("/metrics public: %d", r.code)
	}
}

func jsonStr(s string) string { b, _ := json.Marshal(s); return string(b) }

// Duplicate members inside the manifest itself: which value does the
// executor's manifest.Parse take, and which does an approver's JSON
// tool see in the run's snapshot?
func TestRedteamManifestDuplicateMembers(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	m := manifestFor("true")
	for name, mm := range map[string]string{
		"commands":     strings.Replace(m, `"commands":["true"],`, `"commands":["true"],"commands":["sh"],`, 1),
		"task":         strings.Replace(m, `"task":"Run the command."`, `"task":"Run the command.","task":"Other"`, 1),
		"grants.exec":  strings.Replace(m, `"exec":{"allow":[{"name":"true"}]}`, `"exec":{"allow":[{"name":"true"}]},"exec":{"allow":[{"name":"sh"}]}`, 1),
		"model.replay": strings.Replace(m, `"replay":"session.jsonl"`, `"replay":"session.jsonl","replay":"other.jsonl"`, 1),
	} {
		proj := `{"tasks":{"t":{"manifest":` + mm + `,"files":{"session.jsonl":` + jsonStr(replayFor("true")) + `,"other.jsonl":` + jsonStr(replayFor("sh", "-c", "id")) + `}}}}`
		r := e.do("PUT", "/v1/projects/d", e.keys["member"], proj)
		if r.code != 400 || !strings.Contains(string(r.body), "duplicate") {
			t.Errorf("duplicate %s in the manifest: %d %.200s, want 400 naming the duplicate", name, r.code, r.body)
		}
	}
}

// A project's grant set may not escape the tenant's ceiling through fs,
// egress, exec args or exec deny.
func TestRedteamGrantsEscapeCeiling(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	// narrow tenant a's ceiling: sh only with fixed args
	narrow := `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"true"},{"name":"sh","args":["-c","true"]}]},
"limits":{"wall_ms":600000,"memory_bytes":1073741824,"pids":256}}`
	if r := e.do("PUT", "/v1/tenants/"+e.tenantA+"/ceiling", adminKey, narrow, "Cordon-Explicit-Admin", "1"); r.code != 200 {
		t.Fatalf("narrow ceiling: %d %s", r.code, r.body)
	}
	base := manifestFor("true")
	grantsOf := `"exec":{"allow":[{"name":"true"}]}`
	for name, g := range map[string]string{
		"fs ro /":         `"exec":{"allow":[{"name":"true"}]},"fs":[{"path":"/","access":"ro"}]`,
		"fs rwx etc":      `"exec":{"allow":[{"name":"true"}]},"fs":[{"path":"/etc","access":"rwx"}]`,
		"egress":          `"exec":{"allow":[{"name":"true"}]},"egress":[{"host":"example.com","proto":"tcp","ports":[443,443]}]`,
		"sh any args":     `"exec":{"allow":[{"name":"true"},{"name":"sh"}]}`,
		"cat not allowed": `"exec":{"allow":[{"name":"true"},{"name":"cat"}]}`,
		"trusted code":    `"exec":{"allow":[{"name":"true"}]}`,
		"bigger limits":   `"exec":{"allow":[{"name":"true"}]}`,
	} {
		m := strings.Replace(base, grantsOf, g, 1)
		switch name {
		case "trusted code":
			m = strings.Replace(m, `"code":"untrusted"`, `"code":"trusted"`, 1)
		case "bigger limits":
			m = strings.Replace(m, `"memory_bytes":268435456`, `"memory_bytes":4294967296`, 1)
		}
		proj := `{"tasks":{"t":{"manifest":` + m + `,"files":{"session.jsonl":` + jsonStr(replayFor("true")) + `}}}}`
		r := e.do("PUT", "/v1/projects/esc", e.keys["member"], proj)
		if r.code != 400 {
			t.Errorf("%s: %d %s (want 400)", name, r.code, r.body)
		} else {
			t.Logf("%s: refused: %.160s", name, r.body)
		}
	}
}

// Finding 2: gate independence covers the author of what executes. The
// project records who wrote it, the run's snapshot carries that author,
// and the author cannot approve it; another approver can.
func TestRedteamApproverAuthorsWhatTheyApprove(t *testing.T) {
	f := newFake()
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	// the approver rewrites the project: now the task runs sh
	e.must(200, "PUT", "/v1/projects/p", e.keys["approver"], projectFor("sh", "-c", "true"))
	var proj map[string]any
	e.must(200, "GET", "/v1/projects/p", e.keys["member"], "").json(t, &proj)
	if proj["updated_by"] != e.approver {
		t.Errorf("project updated_by %v, want the approver %s", proj["updated_by"], e.approver)
	}
	// a member submits "the usual task"
	id := e.submit(e.keys["member"])
	var view map[string]any
	e.must(200, "GET", "/v1/runs/"+id, e.keys["member"], "").json(t, &view)
	if view["authored_by"] != e.approver {
		t.Errorf("run authored_by %v, want the approver %s", view["authored_by"], e.approver)
	}
	// the approver cannot approve their own configuration
	r := e.must(403, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	if !strings.Contains(string(r.body), "author") {
		t.Errorf("refusal does not say why: %s", r.body)
	}
	// a project rewritten later does not change the run's author
	e.must(200, "PUT", "/v1/projects/p", e.keys["member"], projectFor("sh", "-c", "true"))
	e.must(403, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	if n := f.executions(id); n != 0 {
		t.Errorf("executions: %d", n)
	}
	// another approver can approve it
	var u struct{ ID string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/users", adminKey, `{"name":"approver2","role":"approver"}`).json(t, &u)
	var k struct{ Secret string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(t, &k)
	e.must(200, "POST", "/v1/runs/"+id+"/approve", k.Secret, "")
	if run := e.wait(id, e.keys["member"], 10*time.Second); run.State != store.StateFinished {
		t.Errorf("run %s after another approver's approval", run.State)
	}
}

// Finding 1: a list of runs (and the queue's sweeps) must not load every
// run's task snapshot; only the view of one run does.
func TestRedteamListLoadsNoSnapshots(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f})
	// a task with a large file: each snapshot is ~40 KiB
	big, _ := json.Marshal(map[string]string{"session.jsonl": replayFor("true"), "pad.txt": strings.Repeat("x", 40<<10)})
	e.setup(`{"tasks":{"t":{"manifest":` + manifestFor("true") + `,"files":` + string(big) + `}}}`)
	ids := []string{e.submit(e.keys["member"]), e.submit(e.keys["member"])}
	e.must(200, "POST", "/v1/runs/"+ids[1]+"/approve", e.keys["approver"], "")
	runs, err := e.store.Runs(t.Context(), e.tenantA, 100)
	if err != nil || len(runs) < 2 {
		t.Fatalf("Runs: %d runs, %v", len(runs), err)
	}
	for _, st := range []string{store.StatePending, store.StateQueued, store.StateRunning} {
		in, err := e.store.RunsIn(t.Context(), st)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, in...)
	}
	for _, r := range runs {
		if r.Config != nil {
			t.Errorf("run %s (%s) listed with its %d-byte snapshot", r.ID, r.State, len(r.Config))
		}
	}
	l := e.must(200, "GET", "/v1/runs", e.keys["member"], "")
	if len(l.body) > 8<<10 || strings.Contains(string(l.body), "xxxxxxxx") {
		t.Errorf("GET /v1/runs: %d bytes, with the snapshots", len(l.body))
	}
	one, err := e.store.Run(t.Context(), e.tenantA, ids[0])
	if err != nil || len(one.Config) < 40<<10 {
		t.Fatalf("Run: %v, config %d bytes", err, len(one.Config))
	}
	if v := e.must(200, "GET", "/v1/runs/"+ids[0], e.keys["member"], ""); !strings.Contains(string(v.body), "xxxxxxxx") {
		t.Errorf("the view of one run lacks its snapshot")
	}
	// Cancel: 200 while the run is queued, 202 once it has started.
	if c := e.do("POST", "/v1/runs/"+ids[1]+"/cancel", e.keys["member"], ""); c.code != 200 && c.code != 202 {
		t.Fatalf("cancel: %d %s", c.code, c.body)
	}
	e.wait(ids[1], e.keys["member"], 10*time.Second)
}

// Finding 1: a tenant's runs pending approval or queued are capped.
func TestRedteamPendingCap(t *testing.T) {
	e := newEnv(t, envOpts{pending: 3})
	e.setup(projectFor("true"))
	var ids []string
	for range 3 {
		ids = append(ids, e.submit(e.keys["member"]))
	}
	r := e.must(429, "POST", "/v1/projects/p/runs", e.keys["member"], `{"task":"t"}`)
	if !strings.Contains(string(r.body), "max-pending") {
		t.Errorf("429 without the setting: %s", r.body)
	}
	// another tenant is not affected
	e.must(201, "POST", "/v1/projects/q/runs", e.keys["other-member"], `{"task":"t"}`)
	e.must(200, "POST", "/v1/runs/"+ids[0]+"/cancel", e.keys["member"], "")
	e.submit(e.keys["member"])
}

// Finding 4: connections are bounded. More idle connections than the
// limit are held off (the limit holds: a real request waits for a slot),
// the server stays up, and the request is served once the idle ones time
// out.
func TestRedteamConnectionLimit(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	s, err := server.New(server.Config{Store: st, AdminKey: adminKey, StateDir: t.TempDir(), Key: k, Version: "test",
		MaxConns: 4, HeaderTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l, time.Second) }()
	defer func() { cancel(); <-done }()
	var idle []net.Conn
	for range 12 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond) // the first four are accepted
	start := time.Now()
	cl := &http.Client{Timeout: 10 * time.Second}
	res, err := cl.Get("http://" + l.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("a real request behind %d idle connections: %v", len(idle), err)
	}
	res.Body.Close()
	took := time.Since(start)
	if res.StatusCode != 200 {
		t.Errorf("/healthz: %d", res.StatusCode)
	}
	// 12 idle connections, 4 at a time, each closed after the 500 ms
	// header timeout: the request waited for slots, so the limit held.
	if took < 500*time.Millisecond {
		t.Errorf("the request was served in %s: the 12 idle connections were not limited to 4", took)
	}
	t.Logf("served after %s", took)
}

// Finding 6: when an execution's outcome cannot be recorded (the run was
// ended by another process meanwhile), it is counted, not dropped silently.
func TestRedteamUnrecordedOutcomeCounted(t *testing.T) {
	f := newFake()
	f.delay = 500 * time.Millisecond
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	<-f.started
	// another process (a second server's recovery) fails the run
	if ok, err := e.store.Interrupted(t.Context(), id, "taken for interrupted"); err != nil || !ok {
		t.Fatalf("Interrupted: %v %v", ok, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := e.must(200, "GET", "/metrics", adminKey, "")
		if strings.Contains(string(m.body), `cordon_runs_total{event="outcome_unrecorded"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no outcome_unrecorded count:\n%s", m.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if run := e.wait(id, e.keys["member"], time.Second); run.Reason != "taken for interrupted" {
		t.Errorf("the first record was replaced: %+v", run)
	}
}

// A run whose submitting key has been revoked (or rotated out) cannot be
// approved: a leaked key's runs wait for no busy approver's click. It can
// still be rejected or cancelled, and a run submitted with the new key
// is approved as usual.
func TestRevokedSubmitterKeyCannotBeApproved(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	ids := []string{e.submit(e.keys["member"]), e.submit(e.keys["member"]), e.submit(e.keys["member"])}
	var keys []struct{ ID, User string }
	e.must(200, "GET", "/v1/tenants/"+e.tenantA+"/keys", adminKey, "").json(t, &keys)
	var view struct {
		SubmittedKey string `json:"submitted_key"`
	}
	e.must(200, "GET", "/v1/runs/"+ids[0], e.keys["member"], "").json(t, &view)
	keyID := ""
	for _, k := range keys {
		if k.User == e.member {
			keyID = k.ID
		}
	}
	if keyID == "" || view.SubmittedKey != keyID {
		t.Fatalf("the run names submitting key %q, the member's is %q", view.SubmittedKey, keyID)
	}
	var rot struct{ Secret string }
	e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys/"+keyID+"/rotate", adminKey, "").json(t, &rot)
	r := e.must(409, "POST", "/v1/runs/"+ids[0]+"/approve", e.keys["approver"], "")
	if !strings.Contains(string(r.body), "revoked") {
		t.Errorf("the refusal does not say why: %s", r.body)
	}
	var run store.Run
	e.must(200, "GET", "/v1/runs/"+ids[0], e.keys["approver"], "").json(t, &run)
	if run.State != store.StatePending || run.DecidedBy != "" {
		t.Fatalf("a refused approval changed the run: %+v", run)
	}
	e.must(200, "POST", "/v1/runs/"+ids[1]+"/reject", e.keys["approver"], "")
	e.must(200, "POST", "/v1/runs/"+ids[2]+"/cancel", rot.Secret, "")
	id := e.submit(rot.Secret)
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
}
