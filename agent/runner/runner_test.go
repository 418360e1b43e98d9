package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/provider"
)

func TestApplyWriteRunFinish(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m := baseManifest(t, nil)
	s := &script{resps: []*provider.Response{
		calls(call("read", `{"path":"in"}`)),
		calls(call("write", `{"path":"out.txt","content":"hello\n"}`), call("run", `{"argv":["python3","-m","unittest"]}`)),
		finish("done"),
	}}
	sb := okSandbox()
	out, err := runScript(t, ws, m, s, runOpts{apply: true, sb: sb})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFinished {
		t.Fatalf("status %s", out.Status)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "hello\n" {
		t.Fatalf("out.txt = %q", b)
	}
	if len(sb.specs) != 1 || strings.Join(sb.specs[0].Argv, " ") != "python3 -m unittest" {
		t.Fatalf("specs %+v", sb.specs)
	}
	if got := toolResults(s); len(got) != 3 || got[0].Text != "the input\n" {
		t.Fatalf("tool results %+v", got)
	}
	if sb.specs[0].Env != nil {
		t.Fatalf("a command got environment %v", sb.specs[0].Env)
	}
	rep := mustVerify(t, ws)
	if rep.Result.Body.Turns != 3 || len(rep.Result.Body.Writes) != 1 || !rep.Result.Body.Writes[0].Applied {
		t.Fatalf("body %+v", rep.Result.Body)
	}
}

// TestCommandEnv: a command receives the operator's values of exactly the
// variables its grant set names — not the others the operator set, not
// any the model asks for — and a run whose grants name none passes none.
func TestCommandEnv(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m := baseManifest(t, func(m map[string]any) {
		m["grants"].(map[string]any)["env"] = []string{"GOCACHE", "LANG"}
	})
	s := &script{resps: []*provider.Response{
		calls(call("run", `{"argv":["printenv","GOCACHE","SECRET_TOKEN"]}`)),
		finish("done"),
	}}
	sb := okSandbox()
	_, err := runScript(t, ws, m, s, runOpts{apply: true, sb: sb, cfg: func(c *Config) {
		c.Env = map[string]string{"GOCACHE": "/var/cache/go", "SECRET_TOKEN": "operator-only", "PATH": "/evil"}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.specs) != 1 {
		t.Fatalf("specs %+v", sb.specs)
	}
	got := sb.specs[0].Env
	if len(got) != 1 || got["GOCACHE"] != "/var/cache/go" {
		t.Fatalf("command environment %v, want only GOCACHE (LANG is granted but unset; SECRET_TOKEN and PATH are not granted)", got)
	}
}
