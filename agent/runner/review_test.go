package runner

// Regression tests for what a fresh-eyes review of the runner found.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/tier"
)

// childManifest is a spawn input: the parent's manifest (baseManifest)
// narrowed, with edit applied.
func childManifest(edit func(m map[string]any)) string {
	m := map[string]any{
		"type": "cordon.manifest.v1", "task": "sub", "model": map[string]any{"provider": "openai", "name": "m", "base_url": "http://127.0.0.1:1/v1"},
		"inputs": []string{"in"}, "outputs": []string{"out.txt"}, "commands": []string{"python3"},
		"grants": map[string]any{"type": "cordon.grants.v1", "code": "untrusted", "tenancy": "single", "confidential": false,
			"exec": map[string]any{"allow": []any{map[string]any{"name": "python3"}}}, "limits": map[string]any{"wall_ms": 60000}},
		"budgets": map[string]any{"max_turns": 5, "max_model_calls": 5, "max_input_tokens": 1000, "max_output_tokens": 1000,
			"wall_ms": 60000, "max_loops": 0, "max_pending_tasks": 0},
	}
	if edit != nil {
		edit(m)
	}
	return fmt.Sprintf(`{"manifest":%s}`, mustJSON(m))
}

// TestSubtaskCannotUndoVerify: a sub-task that runs after its parent was
// verified cannot leave the run "verified" if it broke what was
// verified: the parent's verify runs again and decides.
func TestSubtaskCannotUndoVerify(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	edit := func(m map[string]any) { m["verify"] = []string{"python3", "-m", "unittest"} }
	// Exits: the parent's verify passes, the final one after the child fails.
	sb := &fakeSandbox{offers: []tier.Tier{tier.S2}, exits: []int{0, 1}}
	s := &script{resps: []*provider.Response{
		calls(call("spawn", childManifest(nil))), finish("parent"),
		calls(call("write", `{"path":"out.txt","content":"BROKEN"}`)), finish("child"),
	}}
	out, err := runScript(t, ws, baseManifest(t, edit), s, runOpts{apply: true, sb: sb})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusVerifyFailed || out.Body.Tasks[0].Status != StatusVerifyFailed || len(sb.specs) != 2 {
		t.Fatalf("status %s, tasks %+v, %d verify runs", out.Status, out.Body.Tasks, len(sb.specs))
	}
	if v := ofType(entries(t, ws), "verify"); len(v) != 2 || !strings.Contains(v[1], `"final":true`) {
		t.Fatalf("verify entries %v", v)
	}
	mustVerify(t, ws)
}

// TestLoopsChargeAncestors: a sub-task's verify loops count against its
// parent's max_loops too.
func TestLoopsChargeAncestors(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	root := func(m map[string]any) {
		m["verify"] = []string{"python3", "-m", "unittest"}
		budgets(m)["max_loops"] = 2
	}
	child := childManifest(func(m map[string]any) {
		m["verify"] = []string{"python3", "-m", "unittest"}
		budgets(m)["max_loops"] = 2
	})
	// Parent: fail, fail, pass (two loops: the root's max). Child: fail,
	// with no loop left in its parent. Final parent verify: pass.
	sb := &fakeSandbox{offers: []tier.Tier{tier.S2}, exits: []int{1, 1, 0, 1, 0}}
	s := &script{resps: []*provider.Response{
		calls(call("spawn", child)), finish("p1"), finish("p2"), finish("p3"),
		finish("c1"), finish("c2"),
	}}
	out, err := runScript(t, ws, baseManifest(t, root), s, runOpts{apply: true, sb: sb})
	if err != nil {
		t.Fatal(err)
	}
	if out.Body.Loops != 2 || len(out.Body.Tasks) != 2 || out.Body.Tasks[1].Status != StatusVerifyFailed || out.Body.Tasks[1].Loops != 0 {
		t.Fatalf("loops %d, tasks %+v", out.Body.Loops, out.Body.Tasks)
	}
	if b := ofType(entries(t, ws), "budget"); len(b) != 1 || !strings.Contains(b[0], `"budget":"max_loops"`) || !strings.Contains(b[0], `"owner":"1"`) {
		t.Fatalf("budget entries %v", b)
	}
}

// TestToolCallsBounded: a response with more than MaxToolCalls calls runs
// none of them; the tool results of one turn are capped.
func TestToolCallsBounded(t *testing.T) {
	t.Run("calls per response", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		var bs []provider.Block
		for range MaxToolCalls + 1 {
			bs = append(bs, call("write", `{"path":"out.txt","content":"x"}`))
		}
		s := &script{resps: []*provider.Response{calls(bs...)}}
		out, _ := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true})
		if out.Status != StatusModelError || len(ofType(entries(t, ws), "tool.call")) != 0 {
			t.Fatalf("status %s", out.Status)
		}
		if _, err := os.Stat(filepath.Join(ws, "out.txt")); err == nil {
			t.Fatal("a call ran")
		}
	})
	t.Run("result bytes per turn", func(t *testing.T) {
		files := defaultFiles()
		files["in"] = strings.Repeat("x", 200<<10)
		ws := newWorkspace(t, files)
		var bs []provider.Block
		for range 10 {
			bs = append(bs, call("read", `{"path":"in"}`))
		}
		s := &script{resps: []*provider.Response{calls(bs...), finish("x")}}
		runScript(t, ws, baseManifest(t, nil), s, runOpts{})
		res := toolResults(s)
		served := 0
		for _, r := range res {
			if !r.IsError {
				served++
			}
		}
		if served != 6 || !strings.Contains(res[9].Text, "this turn's tool results already hold") {
			t.Fatalf("%d reads served", served)
		}
	})
}

// TestSignedRunNeedsAResult: a signed run does not extend a journal whose
// result is gone, even when what is left is a valid chain (a truncated
// prefix); an unsigned run may, and its result says where its own
// entries start.
func TestSignedRunNeedsAResult(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	k, _ := sign.Generate()
	signed := func(c *Config) { c.Key = k }
	if _, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("one")}}, runOpts{cfg: signed}); err != nil {
		t.Fatal(err)
	}
	jp := filepath.Join(ws, StateDir, JournalFile)
	b, _ := os.ReadFile(jp)
	lines := bytes.SplitAfter(b, []byte("\n"))
	os.WriteFile(jp, bytes.Join(lines[:5], nil), 0o600)
	os.Remove(filepath.Join(ws, StateDir, ResultFile))
	_, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("two")}}, runOpts{cfg: signed})
	if err == nil || !strings.Contains(err.Error(), "no result.json to check them against") {
		t.Fatalf("signed run on a truncated journal without a result: %v", err)
	}
	out, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("two")}}, runOpts{})
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("unsigned run: %v", err)
	}
	rep := mustVerify(t, ws)
	if rep.Result.Commitments.Since != 5 {
		t.Fatalf("since %d, want 5", rep.Result.Commitments.Since)
	}
}

// TestPlantedStateFilesRefused: anything but a regular file where the
// runner keeps a state file refuses the run before it starts.
func TestPlantedStateFilesRefused(t *testing.T) {
	for _, name := range []string{ManifestFile, ReceiptFile, AttestationFile, PubkeyFile} {
		ws := newWorkspace(t, defaultFiles())
		os.MkdirAll(filepath.Join(ws, StateDir, name, "x"), 0o700)
		s := &script{resps: []*provider.Response{calls(call("write", `{"path":"out.txt","content":"x"}`)), finish("x")}}
		_, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true})
		if err == nil || !strings.Contains(err.Error(), "is a directory, not a regular file") {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "out.txt")); err == nil || len(s.requests()) != 0 {
			t.Fatalf("%s: the run went ahead", name)
		}
	}
}

// TestOperatorLogEscaped: model-chosen text reaches the operator's
// terminal escaped, and bidirectional and control characters in argv are
// refused.
func TestOperatorLogEscaped(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	var log bytes.Buffer
	s := &script{resps: []*provider.Response{calls(
		call("\x1b]0;PWNED\x07\x1b[2J", `{}`),
		call("run", `{"argv":["python3","\u202eexe.txt"]}`),
		call("run", `{"argv":["python3","\u0085"]}`),
	), finish("x")}}
	runScript(t, ws, baseManifest(t, nil), s, runOpts{cfg: func(c *Config) { c.Log = &log }})
	if bytes.ContainsAny(log.Bytes(), "\x1b\x07") || strings.Contains(log.String(), "\u202e") {
		t.Fatalf("raw escapes reached the log: %q", log.String())
	}
	res := toolResults(s)
	if !strings.Contains(res[1].Text, "format character") || !strings.Contains(res[2].Text, "control or format") {
		t.Fatalf("results %+v", res)
	}
}
