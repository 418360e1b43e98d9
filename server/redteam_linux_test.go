package server_test

import (
	"strings"
	"testing"
)

// A manifest pinned to an environment (manifest "env") must not run on
// the host's runtime through the control plane (`cordon run` refuses it
// without --env/--image): the project write refuses it, so it never
// reaches the sandbox.
func TestRedteamEnvPinIgnored(t *testing.T) {
	f := newFake()
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	m := strings.Replace(manifestFor("true"), `"inputs":[]`, `"env":"`+fakeEnvID+`","inputs":[]`, 1)
	proj := `{"tasks":{"t":{"manifest":` + m + `,"files":{"session.jsonl":` + jsonStr(replayFor("true")) + `}}}}`
	r := e.must(400, "PUT", "/v1/projects/envpin", e.keys["member"], proj)
	if !strings.Contains(string(r.body), "env") {
		t.Errorf("refusal does not name env: %s", r.body)
	}
	e.must(404, "POST", "/v1/projects/envpin/runs", e.keys["member"], `{"task":"t"}`)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.configs) != 0 {
		t.Errorf("executions after an env-pinned write: %d", len(f.configs))
	}
}
