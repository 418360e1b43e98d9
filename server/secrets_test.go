package server_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// TestSecretRoutes: the operator writes, rotates, lists and deletes a
// tenant's secret; no answer ever holds a value, the store on disk holds
// only ciphertext, and the run's tenant resolves the current value.
func TestSecretRoutes(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	base := "/v1/tenants/" + e.tenantA + "/secrets/"
	const v1, v2 = "first-value-4f1c2a", "second-value-9d3e7b"
	for _, r := range []resp{
		e.must(200, "PUT", base+"db", adminKey, v1),
		e.must(200, "PUT", base+"db", adminKey, v2), // rotation
		e.must(200, "PUT", base+"api.key", adminKey, "third-api-key"),
	} {
		if bytes.Contains(r.body, []byte("value-")) {
			t.Errorf("an answer holds the value: %s", r.body)
		}
	}
	var list []struct {
		Name    string
		Updated time.Time
	}
	l := e.must(200, "GET", "/v1/tenants/"+e.tenantA+"/secrets", adminKey, "")
	l.json(t, &list)
	if len(list) != 2 || list[0].Name != "api.key" || list[1].Name != "db" || list[1].Updated.IsZero() || bytes.Contains(l.body, []byte("value-")) {
		t.Fatalf("list %s", l.body)
	}
	if b := e.must(200, "GET", "/v1/tenants/"+e.tenantB+"/secrets", adminKey, "").body; strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("tenant b lists %s", b)
	}
	filepath.WalkDir(filepath.Join(e.dir, "secrets"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte("value-")) {
				t.Errorf("%s holds the plaintext", p)
			}
		}
		return nil
	})
	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"PUT", base + "db", "", 400},                                    // empty value
		{"PUT", base + "db", "7-bytes", 400},                             // too short to mask without masking words
		{"PUT", base + "db", "not\xffutf-8", 400},                        // not text: it could not be masked
		{"PUT", base + "..db", "valid-value-1", 400},                     // bad name
		{"PUT", base + "-db", "valid-value-1", 400},                      // bad name
		{"PUT", "/v1/tenants/ten_nope/secrets/db", "valid-value-1", 404}, // no such tenant
		{"PUT", base + "big", strings.Repeat("x", 64<<10+1), 413},        // over MaxSecret and this server's body limit
		{"DELETE", base + "nope", "", 404},                               // no such secret
		{"GET", "/v1/tenants/ten_nope/secrets", "", 404},                 // no such tenant
		{"PUT", base + "db", "valid-value-1", 403},                       // a tenant key (below)
	} {
		k := adminKey
		if c.code == 403 {
			k = e.keys["member"]
		}
		if r := e.do(c.method, c.path, k, c.body); r.code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, r.code, r.body, c.code)
		}
	}
	// A stored value is masked wherever text leaves, from its write on:
	// here in a project a tenant wrote (a tenant that knows a value learns
	// nothing from this, and one that does not cannot read it back).
	files, _ := json.Marshal(map[string]string{"session.jsonl": replayFor("true"), "notes.txt": "see " + v2})
	e.must(200, "PUT", "/v1/projects/leak", e.keys["member"], `{"tasks":{"t":{"manifest":`+manifestFor("true")+`,"files":`+string(files)+`}}}`)
	if b := e.must(200, "GET", "/v1/projects/leak", e.keys["member"], "").body; bytes.Contains(b, []byte(v2)) || !bytes.Contains(b, []byte("[redacted")) {
		t.Errorf("a stored secret is shown unmasked: %s", b)
	}
	e.must(200, "DELETE", base+"db", adminKey, "")
	e.must(404, "DELETE", base+"db", adminKey, "")
	// The mask pool for redaction holds what the operator wrote, of
	// every tenant, and nothing else.
	vals, err := e.srv.SecretValues()
	if err != nil || len(vals) != 1 || string(vals[0].Bytes()) != "third-api-key" {
		t.Errorf("SecretValues: %v %v", vals, err)
	}
	for _, v := range vals {
		v.Destroy()
	}
}

// TestSecretsNeedBroker: a server without a master key has no secret
// routes to speak of (503 naming the fix) and refuses a project that
// names secrets, rather than accepting one that could never run.
func TestSecretsNeedBroker(t *testing.T) {
	e := newEnv(t, envOpts{broker: noBroker})
	e.setup(projectFor("true"))
	r := e.do("PUT", "/v1/tenants/"+e.tenantA+"/secrets/db", adminKey, "v")
	if r.code != 503 || !strings.Contains(string(r.body), "--master-key-file") {
		t.Errorf("PUT secret without a broker: %d %s", r.code, r.body)
	}
	var pc server.ProjectConfig
	json.Unmarshal([]byte(projectFor("true")), &pc)
	tc := pc.Tasks["t"]
	tc.Manifest = json.RawMessage(strings.Replace(string(tc.Manifest), `"exec":`, `"env":["TOKEN"],"exec":`, 1))
	tc.Secrets = []server.SecretUse{{Ref: "db", Env: "TOKEN"}}
	pc.Tasks["t"] = tc
	b, _ := json.Marshal(pc)
	_, keys := e.tenantWith("env", strings.Replace(ceiling, `"exec":`, `"env":["TOKEN"],"exec":`, 1))
	r = e.do("PUT", "/v1/projects/s", keys["member"], string(b))
	if r.code != 400 || !strings.Contains(string(r.body), "--master-key-file") {
		t.Errorf("a project naming secrets without a broker: %d %s", r.code, r.body)
	}
}

// tenantWith makes a tenant with the ceiling and a member and an
// approver, and returns its id and their keys.
func (e *env) tenantWith(name, ceiling string) (string, map[string]string) {
	e.t.Helper()
	var ten struct{ ID string }
	e.must(201, "POST", "/v1/tenants", adminKey, `{"name":"`+name+`","ceiling":`+ceiling+`}`).json(e.t, &ten)
	keys := map[string]string{}
	for _, role := range []string{"member", "approver"} {
		var u struct{ ID string }
		e.must(201, "POST", "/v1/tenants/"+ten.ID+"/users", adminKey, `{"name":"`+role+`","role":"`+role+`"}`).json(e.t, &u)
		var k struct{ Secret string }
		e.must(201, "POST", "/v1/tenants/"+ten.ID+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(e.t, &k)
		keys[role] = k.Secret
	}
	return ten.ID, keys
}

// runProject submits task t of project p, approves it and waits for it.
func (e *env) runProject(keys map[string]string) (string, *store.Run) {
	e.t.Helper()
	var r struct{ ID string }
	e.must(201, "POST", "/v1/projects/p/runs", keys["member"], `{"task":"t"}`).json(e.t, &r)
	e.must(200, "POST", "/v1/runs/"+r.ID+"/approve", keys["approver"], "")
	return r.ID, e.wait(r.ID, keys["member"], 90*time.Second)
}
