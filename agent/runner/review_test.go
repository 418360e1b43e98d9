package runner

// Regression tests for what a fresh-eyes review of the runner found.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/runrecord"
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
	// Exits: the parent's verify passes, the child's too (it must keep
	// the parent's verify command), the parent's final one fails.
	sb := &fakeSandbox{offers: []tier.Tier{tier.S2}, exits: []int{0, 0, 1}}
	s := &script{resps: []*provider.Response{
		calls(call("spawn", childManifest(edit))), finish("parent"),
		calls(call("write", `{"path":"out.txt","content":"BROKEN"}`)), finish("child"),
	}}
	out, err := runScript(t, ws, baseManifest(t, edit), s, runOpts{apply: true, sb: sb})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusVerifyFailed || out.Body.Tasks[0].Status != StatusVerifyFailed || len(sb.specs) != 3 {
		t.Fatalf("status %s, tasks %+v, %d verify runs", out.Status, out.Body.Tasks, len(sb.specs))
	}
	if v := ofType(entries(t, ws), "verify"); len(v) != 3 || !strings.Contains(v[2], `"final":true`) {
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
// prefix); an unsigned run may, names the entries it inherited as an
// unfinished run, and its result says where its own entries start.
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
	// The five entries left without a result are named as an unfinished
	// run (entry 5); this run starts at 6.
	if rep.Result.Commitments.Since != 6 || len(ofType(entries(t, ws), "run.unfinished")) != 1 {
		t.Fatalf("since %d, want 6 after a run.unfinished entry", rep.Result.Commitments.Since)
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

// TestRecordBounds: what a hostile model or provider sends cannot make a
// journal entry too large after effects have happened: a huge response's
// calls are counted, not listed; refusal reasons are cut; a command whose
// record could not be journalled does not run; the key is removed from
// everything recorded.
func TestRecordBounds(t *testing.T) {
	t.Run("thousands of calls", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		var bs []provider.Block
		for i := range 4000 {
			b := call("read", `{"path":"in"}`)
			b.ID = fmt.Sprintf("%0256d", i)
			bs = append(bs, b)
		}
		s := &script{resps: []*provider.Response{calls(bs...)}}
		out, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true})
		if err != nil || out.Status != StatusModelError {
			t.Fatalf("%v %+v", err, out)
		}
		mustVerify(t, ws)
	})
	t.Run("huge member name", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		s := &script{resps: []*provider.Response{calls(call("read", `{"`+strings.Repeat("x", 2<<20-100)+`":1}`)), finish("x")}}
		out, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{})
		if err != nil || out.Status != StatusFinished || out.Body.Refused != 1 || len(refusals(t, ws)[0]) > 1100 {
			t.Fatalf("%v %+v", err, out)
		}
	})
	t.Run("oversized command record", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		args := `"python3"` + strings.Repeat(`,"`+strings.Repeat("a", 4096)+`"`, 255)
		sb := okSandbox()
		s := &script{resps: []*provider.Response{calls(call("run", `{"argv":[`+args+`]}`)), finish("x")}}
		runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true, sb: sb})
		if res := toolResults(s); len(sb.specs) != 0 || !strings.Contains(res[0].Text, "more than the journal takes") {
			t.Fatalf("ran: %d specs, %q", len(sb.specs), res[0].Text[:min(200, len(res[0].Text))])
		}
	})
	t.Run("key in what is recorded", func(t *testing.T) {
		const key = "sk-live-0123456789-ABCDEFGHIJKLMNOP-qrstuv"
		ws := newWorkspace(t, defaultFiles())
		s := &redactingScript{script: script{resps: []*provider.Response{
			calls(call("read", `{"path":"`+key+`"}`), call("mailbox", `{"action":"post","text":"k=`+key+`"}`)),
			{Content: []provider.Block{{Type: "text", Text: "summary " + key[:20]}, {Type: "text", Text: key[20:]}}, StopReason: "end_turn",
				Usage: provider.Usage{InputTokens: 1, OutputTokens: 1, Reported: true}},
		}}, key: key}
		var log bytes.Buffer
		runScript(t, ws, baseManifest(t, nil), nil, runOpts{cfg: func(c *Config) { c.Provider = s; c.Log = &log }})
		filepath.Walk(filepath.Join(ws, StateDir), func(p string, fi os.FileInfo, err error) error {
			if b, _ := os.ReadFile(p); err == nil && !fi.IsDir() && (bytes.Contains(b, []byte(key[:24])) || bytes.Contains(b, []byte(key[20:]))) {
				t.Errorf("%s holds the key", p)
			}
			return nil
		})
		if strings.Contains(log.String(), key[:24]) {
			t.Errorf("the log holds the key")
		}
	})
}

// redactingScript is a script provider that knows its key, as the real
// clients do.
type redactingScript struct {
	script
	key string
}

func (s *redactingScript) Redact(x string) string {
	x = strings.ReplaceAll(x, s.key, "[REDACTED]")
	for _, part := range []string{s.key[:20], s.key[20:]} {
		x = strings.ReplaceAll(x, part, "[REDACTED]")
	}
	return x
}

// TestVerifyDetailsPrintable: a hostile result.json cannot put terminal
// escapes or fake lines into what `cordon verify run` prints.
func TestVerifyDetailsPrintable(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	if _, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("x")}}, runOpts{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, StateDir, ResultFile)
	b, _ := os.ReadFile(p)
	var res Result
	json.Unmarshal(b, &res)
	res.Body.Status = "\x1b]0;PWNED\x07\nok   signature    signed by the trusted key"
	res.Commitments.Body = res.Body.ID().String()
	os.WriteFile(p, runrecord.JCS(res), 0o644)
	rep := runrecord.Verify(ws, nil)
	if !rep.Failed() {
		t.Fatal("a result with a made-up status verified")
	}
	for _, c := range rep.Checks {
		if strings.ContainsAny(c.Detail, "\x1b\x07\n") {
			t.Errorf("%s: raw control characters in %q", c.Name, c.Detail)
		}
	}
}

// TestNoGitMemoryRecorded: without git the run goes on with file-backed
// memory, and the journal says the store was unavailable and why.
func TestNoGitMemoryRecorded(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	t.Setenv("PATH", t.TempDir()) // no git to be found
	out, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("remember me")}},
		runOpts{cfg: func(c *Config) { c.Memory = memory.Options{} }})
	if err != nil || out.Status != StatusFinished || out.Body.Memory != memory.KindFile {
		t.Fatalf("%v %+v", err, out)
	}
	start := ofType(entries(t, ws), "run.start")[0]
	if !strings.Contains(start, `"kind":"file"`) || !strings.Contains(start, "git") {
		t.Fatalf("run.start does not say the git store is unavailable: %s", start)
	}
	if b, err := os.ReadFile(filepath.Join(ws, StateDir, "mem", "last.json")); err != nil || !strings.Contains(string(b), "remember me") {
		t.Fatalf("file memory: %q %v", b, err)
	}
}

// TestLimitsAtTheirBounds: each documented limit holds at its bound and
// refuses one past it.
func TestLimitsAtTheirBounds(t *testing.T) {
	t.Run("read size", func(t *testing.T) {
		files := defaultFiles()
		files["src/big"] = strings.Repeat("x", MaxReadBytes+1)
		files["src/max"] = strings.Repeat("x", MaxReadBytes)
		ws := newWorkspace(t, files)
		s := &script{resps: []*provider.Response{calls(call("read", `{"path":"src/max"}`)), calls(call("read", `{"path":"src/big"}`)), finish("x")}}
		runScript(t, ws, baseManifest(t, nil), s, runOpts{})
		reqs := s.requests()
		first := reqs[1].Messages[len(reqs[1].Messages)-1].Content[0]
		second := reqs[2].Messages[len(reqs[2].Messages)-1].Content[0]
		if first.IsError || len(first.Text) != MaxReadBytes || !second.IsError || !strings.Contains(second.Text, "more than the limit") {
			t.Fatalf("read at the bound: %v %d; past it: %q", first.IsError, len(first.Text), second.Text)
		}
	})
	t.Run("write size", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		big := strings.Repeat("y", MaxWriteBytes+1)
		s := &script{resps: []*provider.Response{calls(call("write", `{"path":"out.txt","content":"`+big+`"}`)), finish("x")}}
		runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true})
		if res := toolResults(s); !res[0].IsError || !strings.Contains(res[0].Text, "more than the write tool's") {
			t.Fatalf("%q", res[0].Text[:min(100, len(res[0].Text))])
		}
		if _, err := os.Stat(filepath.Join(ws, "out.txt")); err == nil {
			t.Fatal("an oversized write landed")
		}
	})
	t.Run("max_tokens and charged attempts", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		s := &script{errs: []error{fmt.Errorf("connection reset")}}
		out, _ := runScript(t, ws, baseManifest(t, nil), s, runOpts{})
		req := s.requests()[0]
		if req.MaxTokens != provider.DefaultMaxTokens || req.MaxAttempts != 40 || out.Body.ModelCalls != 40 {
			t.Fatalf("max_tokens %d, attempts %d, charged %d", req.MaxTokens, req.MaxAttempts, out.Body.ModelCalls)
		}
		if e := ofType(entries(t, ws), "model.error"); len(e) != 1 || !strings.Contains(e[0], `"charged_calls":40`) {
			t.Fatalf("model.error %v", e)
		}
	})
	t.Run("exactly 64 calls run", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		var bs []provider.Block
		for range MaxToolCalls {
			bs = append(bs, call("read", `{"path":"in"}`))
		}
		s := &script{resps: []*provider.Response{calls(bs...), finish("x")}}
		out, _ := runScript(t, ws, baseManifest(t, nil), s, runOpts{})
		if out.Status != StatusFinished || len(ofType(entries(t, ws), "tool.call")) != MaxToolCalls+1 {
			t.Fatalf("status %s", out.Status)
		}
	})
	t.Run("state dir not a directory", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		os.WriteFile(filepath.Join(ws, StateDir), []byte("x"), 0o600)
		_, err := runScript(t, ws, baseManifest(t, nil), &script{}, runOpts{})
		if err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("%v", err)
		}
	})
}

// TestUnfinishedRunNamed: entries a killed run left after the last result
// are named by the next run before it starts its own.
func TestUnfinishedRunNamed(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	if _, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("one")}}, runOpts{}); err != nil {
		t.Fatal(err)
	}
	jp := filepath.Join(ws, StateDir, JournalFile)
	n := len(entries(t, ws))
	for _, typ := range []string{"run.start", "model.request"} { // a run that was killed here
		v, _ := canon.Parse([]byte(`{"crashed":true}`))
		if _, err := journal.Append(jp, typ, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("two")}}, runOpts{}); err != nil {
		t.Fatal(err)
	}
	u := ofType(entries(t, ws), "run.unfinished")
	if len(u) != 1 || u[0] != fmt.Sprintf(`{"entries":2,"from":%d,"type":"cordon.run.unfinished.v1"}`, n) {
		t.Fatalf("run.unfinished %v", u)
	}
	if rep := mustVerify(t, ws); rep.Result.Commitments.Since != int64(n+3) {
		t.Fatalf("since %d, want %d", rep.Result.Commitments.Since, n+3)
	}
}
