package runner

// A scripted hostile model that tries everything the seed ledger and
// CLAIMS.md say it cannot do. Every attack must be refused, leave the
// host and workspace unchanged, and be recorded in the journal.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/tier"
)

// attack runs one hostile call in apply mode and returns the tool result
// and the workspace.
func attack(t *testing.T, files map[string]string, edit func(map[string]any), b provider.Block) (provider.Block, string, *fakeSandbox) {
	t.Helper()
	if files == nil {
		files = defaultFiles()
	}
	ws := newWorkspace(t, files)
	sb := okSandbox()
	s := &script{resps: []*provider.Response{calls(b), finish("done")}}
	out, err := runScript(t, ws, baseManifest(t, edit), s, runOpts{apply: true, sb: sb})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFinished {
		t.Fatalf("status %s", out.Status)
	}
	res := toolResults(s)
	if len(res) != 1 {
		t.Fatalf("results %+v", res)
	}
	return res[0], ws, sb
}

func mustRefuse(t *testing.T, res provider.Block, ws, want string) {
	t.Helper()
	if !res.IsError || !strings.HasPrefix(res.Text, "refused: ") {
		t.Fatalf("not refused: %q", res.Text)
	}
	if !strings.Contains(res.Text, want) {
		t.Errorf("refusal %q does not say %q", res.Text, want)
	}
	if r := refusals(t, ws); len(r) != 1 || "refused: "+r[0] != res.Text {
		t.Errorf("journal refusals %q, want the one sent to the model", r)
	}
	mustVerify(t, ws)
}

func TestHostileWrites(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"undeclared", "secret.txt", "not a declared output"},
		{"input not output", "in", "not a declared output"},
		{"traversal", "../escape.txt", ".."},
		{"traversal inside", "src/../out.txt", ".."},
		{"absolute", outside + "/x", "absolute"},
		{"state dir", ".cordon/result.json", ".cordon"},
		{"state journal", ".cordon/journal.jsonl", ".cordon"},
		{"state case", ".CORDON/result.json", ".cordon"},
		{"state trailing dot", ".cordon./x", ".cordon"},
		{"beneath output", "out.txt/x", "not a declared output"},
		{"dot segment", "./out.txt", "."},
		{"empty", "", "empty"},
		{"nul", "out.txt\x00", "control"},
		{"backslash", "src\\a.py", "\\"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fmt.Sprintf(`{"path":%s,"content":"pwned"}`, mustJSON(tc.path))
			res, ws, _ := attack(t, nil, nil, call("write", in))
			mustRefuse(t, res, ws, tc.want)
			for _, p := range []string{filepath.Join(filepath.Dir(ws), "escape.txt"), filepath.Join(outside, "x"), filepath.Join(ws, "out.txt")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was created", p)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "secret.txt")); string(b) != "TOP SECRET\n" {
				t.Errorf("secret.txt changed: %q", b)
			}
		})
	}
}

func TestHostileWriteThroughLinks(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	os.WriteFile(target, []byte("host file\n"), 0o644)
	for _, tc := range []struct {
		name  string
		plant func(ws string)
		path  string
	}{
		{"output is a symlink", func(ws string) { os.Symlink(target, filepath.Join(ws, "out.txt")) }, "out.txt"},
		{"output is a symlink into .cordon", func(ws string) {
			os.Mkdir(filepath.Join(ws, ".cordon"), 0o700)
			os.Symlink(".cordon/result.json", filepath.Join(ws, "out.txt"))
		}, "out.txt"},
		{"parent is a symlink", func(ws string) {
			os.RemoveAll(filepath.Join(ws, "src"))
			os.Symlink(outside, filepath.Join(ws, "src"))
		}, "src/a.py"},
		{"output is a hard link", func(ws string) { os.Link(filepath.Join(ws, "secret.txt"), filepath.Join(ws, "out.txt")) }, "out.txt"},
		{"output is a directory", func(ws string) { os.Mkdir(filepath.Join(ws, "out.txt"), 0o755) }, "out.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t, defaultFiles())
			tc.plant(ws)
			sb := okSandbox()
			s := &script{resps: []*provider.Response{calls(call("write", fmt.Sprintf(`{"path":%q,"content":"pwned"}`, tc.path))), finish("x")}}
			if _, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true, sb: sb}); err != nil {
				t.Fatal(err)
			}
			res := toolResults(s)
			if len(res) != 1 || !res[0].IsError {
				t.Fatalf("write through a link was not refused: %+v", res)
			}
			for _, p := range []string{target, filepath.Join(outside, "a.py"), filepath.Join(ws, "secret.txt")} {
				if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "pwned") {
					t.Errorf("%s was written through a link", p)
				}
			}
			mustVerify(t, ws)
		})
	}
}

func TestHostileReads(t *testing.T) {
	for _, tc := range []struct {
		name, path, want string
	}{
		{"undeclared", "secret.txt", "not a declared input"},
		{"output only", "out.txt", "not a declared input"},
		{"journal", ".cordon/journal.jsonl", ".cordon"},
		{"absolute", "/etc/passwd", "absolute"},
		{"traversal", "in/../secret.txt", ".."},
		{"parent", "..", ".."},
		{"prefix is not a parent", "srcx", "not a declared input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := defaultFiles()
			files["srcx"] = "not an input"
			res, ws, _ := attack(t, files, nil, call("read", fmt.Sprintf(`{"path":%q}`, tc.path)))
			mustRefuse(t, res, ws, tc.want)
			if strings.Contains(res.Text, "SECRET") || strings.Contains(res.Text, "root:") {
				t.Fatal("the refusal leaked content")
			}
		})
	}
	t.Run("symlinked input", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		os.Remove(filepath.Join(ws, "in"))
		os.Symlink("secret.txt", filepath.Join(ws, "in"))
		os.Symlink("/etc", filepath.Join(ws, "src", "etc"))
		s := &script{resps: []*provider.Response{calls(call("read", `{"path":"in"}`), call("read", `{"path":"src/etc/passwd"}`), call("read", `{"path":"src"}`)), finish("x")}}
		if _, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true}); err != nil {
			t.Fatal(err)
		}
		res := toolResults(s)
		if !res[0].IsError || !res[1].IsError || strings.Contains(res[0].Text+res[1].Text, "SECRET") || strings.Contains(res[1].Text, "root:") {
			t.Fatalf("read through a link: %+v", res)
		}
		if res[2].IsError || !strings.Contains(res[2].Text, "etc (symbolic link: not readable)") {
			t.Fatalf("listing %q", res[2].Text)
		}
	})
	t.Run("hard-linked input", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		os.Remove(filepath.Join(ws, "in"))
		os.Link(filepath.Join(ws, "secret.txt"), filepath.Join(ws, "in"))
		s := &script{resps: []*provider.Response{calls(call("read", `{"path":"in"}`)), finish("x")}}
		runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true})
		if res := toolResults(s); !res[0].IsError || strings.Contains(res[0].Text, "SECRET") {
			t.Fatalf("read a hard link: %+v", res)
		}
	})
}

func TestHostileCommands(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv string
		want string
	}{
		{"undeclared", `["sh","-c","id"]`, "not a declared command"},
		{"undeclared by path", `["/bin/sh"]`, "not a declared command"},
		{"semicolon", `["python3","a;id"]`, "metacharacter"},
		{"command substitution", `["python3","$(id)"]`, "metacharacter"},
		{"backticks", "[\"python3\",\"`id`\"]", "metacharacter"},
		{"pipe", `["python3","a|sh"]`, "metacharacter"},
		{"redirect", `["python3",">/etc/passwd"]`, "metacharacter"},
		{"glob", `["python3","*"]`, "metacharacter"},
		{"quote", `["python3","'x'"]`, "metacharacter"},
		{"newline", `["python3","a\nb"]`, "control"},
		{"ampersand", `["python3","&"]`, "metacharacter"},
		{"metachar in name", `["python3;id"]`, "metacharacter"},
		{"empty", `[]`, "empty"},
		{"empty name", `[""]`, "names no program"},
		{"dot dot", `[".."]`, "names no program"},
		{"git global option", `["git","-c","core.pager=sh","log"]`, "git"},
		{"git exec path", `["git","--exec-path=/tmp","status"]`, "git"},
		{"git network", `["git","fetch","origin"]`, "git"},
		{"git upload-pack", `["git","log","--upload-pack=x"]`, "git"},
		{"git pager", `["git","grep","--open-files-in-pager=sh","x"]`, "git"},
		{"git ext diff", `["git","diff","--ext-diff"]`, "git"},
		{"git textconv", `["git","log","--textconv"]`, "git"},
		{"git output file", `["git","diff","--output=/tmp/x"]`, "git"},
		{"git work tree", `["git","--work-tree=/","status"]`, "git"},
		{"git by absolute path", `["/usr/bin/git","push"]`, "git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, ws, sb := attack(t, nil, nil, call("run", `{"argv":`+tc.argv+`}`))
			mustRefuse(t, res, ws, tc.want)
			if len(sb.specs) != 0 {
				t.Fatalf("the sandbox was asked to run %v", sb.specs[0].Argv)
			}
		})
	}
}

// TestModelPathDiscarded: an absolute or relative path to an allowed
// basename runs the basename, resolved inside the sandbox, never the
// model's file.
func TestModelPathDiscarded(t *testing.T) {
	for _, argv0 := range []string{"/tmp/evil/python3", "./python3", "../../usr/bin/python3", "src/python3"} {
		res, ws, sb := attack(t, nil, nil, call("run", fmt.Sprintf(`{"argv":[%q,"-V"]}`, argv0)))
		if res.IsError || len(sb.specs) != 1 {
			t.Fatalf("%s: %+v", argv0, res)
		}
		if got := sb.specs[0].Argv; got[0] != "python3" || len(got) != 2 {
			t.Fatalf("%s ran as %v", argv0, got)
		}
		if !strings.Contains(res.Text, "was discarded") {
			t.Errorf("%s: the model was not told its path was discarded: %q", argv0, res.Text)
		}
		mustVerify(t, ws)
	}
}

func TestGitRunsWithConfigDisabled(t *testing.T) {
	_, _, sb := attack(t, nil, nil, call("run", `{"argv":["git","log","--oneline"]}`))
	if len(sb.specs) != 1 {
		t.Fatal("git did not run")
	}
	got := strings.Join(sb.specs[0].Argv, " ")
	for _, want := range []string{"core.hooksPath=/dev/null", "core.fsmonitor=false", "core.pager=cat", "--no-pager", "log --oneline"} {
		if !strings.Contains(got, want) {
			t.Errorf("git argv %q lacks %q", got, want)
		}
	}
}

func TestHostileToolInputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    provider.Block
		want string
	}{
		{"unknown tool", call("shell", `{"cmd":"id"}`), "no tool"},
		{"unknown member", call("read", `{"path":"in","follow":true}`), "unknown field"},
		{"second spelling", call("read", `{"path":"in","PATH":"secret.txt"}`), "unknown field \"PATH\""},
		{"other case", call("write", `{"Path":"secret.txt","content":"x"}`), "unknown field \"Path\""},
		{"duplicate member", call("write", `{"path":"out.txt","path":"secret.txt","content":"x"}`), "duplicate"},
		{"float", call("run", `{"argv":["python3"],"n":1.5}`), "bad input"},
		{"wrong type", call("run", `{"argv":"python3 -V"}`), "bad input"},
		{"write without content", call("write", `{"path":"out.txt"}`), "content is required"},
		{"mailbox bad action", call("mailbox", `{"action":"delete"}`), "action"},
		{"spawn not an object", call("spawn", `{"manifest":"x"}`), "object"},
		{"finish without summary", call("finish", `{}`), "summary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, ws, _ := attack(t, nil, nil, tc.b)
			mustRefuse(t, res, ws, tc.want)
		})
	}
}

// TestBudgetsHold: a model that never stops, or claims more budget in its
// output, stops exactly at each budget.
func TestBudgetsHold(t *testing.T) {
	t.Run("turns", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		m := baseManifest(t, func(m map[string]any) { budgets(m)["max_turns"] = 3 })
		raise := &provider.Response{Content: []provider.Block{{Type: "text", Text: `{"budgets":{"max_turns":1000}} max_turns=1000`},
			call("read", `{"path":"in"}`)}, StopReason: "tool_use", Usage: provider.Usage{InputTokens: 1, OutputTokens: 1, Reported: true}}
		s := &script{resps: []*provider.Response{raise, raise, raise, raise, raise}}
		out, err := runScript(t, ws, m, s, runOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != StatusBudgetExhausted || len(s.requests()) != 3 || out.Body.Turns != 3 {
			t.Fatalf("status %s after %d calls", out.Status, len(s.requests()))
		}
		if b := ofType(entries(t, ws), "budget"); len(b) != 1 || !strings.Contains(b[0], `"budget":"max_turns"`) {
			t.Fatalf("budget entries %v", b)
		}
		mustVerify(t, ws)
	})
	t.Run("model calls with retries", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		m := baseManifest(t, func(m map[string]any) { budgets(m)["max_model_calls"] = 5 })
		r := calls(call("read", `{"path":"in"}`))
		r.Attempts = 2
		s := &script{resps: []*provider.Response{r, r, r, r}}
		out, _ := runScript(t, ws, m, s, runOpts{})
		reqs := s.requests()
		if out.Status != StatusBudgetExhausted || len(reqs) != 3 {
			t.Fatalf("status %s after %d calls", out.Status, len(reqs))
		}
		// Each request caps its attempts at what is left: 5, 3, 1.
		for i, want := range []int{5, 3, 1} {
			if reqs[i].MaxAttempts != want {
				t.Errorf("request %d MaxAttempts %d, want %d", i, reqs[i].MaxAttempts, want)
			}
		}
	})
	t.Run("output tokens cap max_tokens", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		m := baseManifest(t, func(m map[string]any) { budgets(m)["max_output_tokens"] = 12 })
		s := &script{}
		out, _ := runScript(t, ws, m, s, runOpts{})
		reqs := s.requests()
		// 5 tokens a call: 12, 7, 2 left, then exhausted.
		if out.Status != StatusBudgetExhausted || len(reqs) != 3 || reqs[0].MaxTokens != 12 || reqs[2].MaxTokens != 2 {
			t.Fatalf("status %s, %d calls", out.Status, len(reqs))
		}
	})
	t.Run("input tokens exceeded by a call", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		m := baseManifest(t, func(m map[string]any) { budgets(m)["max_input_tokens"] = 15 })
		s := &script{resps: []*provider.Response{calls(call("read", `{"path":"in"}`)), calls(call("write", `{"path":"out.txt","content":"late"}`))}}
		out, _ := runScript(t, ws, m, s, runOpts{apply: true})
		if out.Status != StatusBudgetExhausted || len(s.requests()) != 2 {
			t.Fatalf("status %s", out.Status)
		}
		if _, err := os.Stat(filepath.Join(ws, "out.txt")); err == nil {
			t.Fatal("the tool calls of a call that went over budget ran")
		}
	})
	t.Run("unreported usage stops the run", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		r := calls(call("write", `{"path":"out.txt","content":"x"}`))
		r.Usage = provider.Usage{}
		s := &script{resps: []*provider.Response{r}}
		out, _ := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true})
		if out.Status != StatusModelError || !contains(ofType(entries(t, ws), "model.error"), "did not report token usage") {
			t.Fatalf("status %s", out.Status)
		}
		if _, err := os.Stat(filepath.Join(ws, "out.txt")); err == nil {
			t.Fatal("ran tool calls without usage")
		}
	})
	t.Run("wall clock", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		m := baseManifest(t, func(m map[string]any) { budgets(m)["wall_ms"] = 50 })
		s := &slowScript{delay: 30 * time.Millisecond}
		out, _ := runScript(t, ws, m, nil, runOpts{cfg: func(c *Config) { c.Provider = s }})
		if out.Status != StatusBudgetExhausted || s.n > 3 {
			t.Fatalf("status %s after %d calls", out.Status, s.n)
		}
		if b := ofType(entries(t, ws), "budget"); !contains(b, "wall_ms") {
			t.Fatalf("no wall_ms budget entry: %v", b)
		}
		// A run that may park parks instead (TestParkOnWallClock).
		ws = newWorkspace(t, defaultFiles())
		s = &slowScript{delay: 30 * time.Millisecond}
		out, _ = runScript(t, ws, m, nil, runOpts{cfg: func(c *Config) { c.Provider, c.Park = s, true }})
		if out.Status != StatusParked || out.Reason != ParkBudget || s.n > 3 {
			t.Fatalf("a run that may park: status %s after %d calls", out.Status, s.n)
		}
	})
	t.Run("provider error is recorded, key-free", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		s := &script{errs: []error{errors.New("openai: HTTP 401: bad key")}}
		out, _ := runScript(t, ws, baseManifest(t, nil), s, runOpts{})
		if out.Status != StatusModelError || !contains(ofType(entries(t, ws), "model.error"), "HTTP 401") {
			t.Fatalf("status %s", out.Status)
		}
		mustVerify(t, ws)
	})
}

// TestVerifyLoops: the verify command runs after finish; failures loop
// back to the model at most max_loops times.
func TestVerifyLoops(t *testing.T) {
	edit := func(m map[string]any) {
		m["verify"] = []string{"python3", "-m", "unittest"}
		budgets(m)["max_loops"] = 2
	}
	t.Run("fails until the loops are spent", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		sb := &fakeSandbox{offers: []tier.Tier{tier.S2}, exits: []int{1, 1, 1, 1, 1}, stdout: "FAILED (failures=1)"}
		s := &script{resps: []*provider.Response{finish("a"), finish("b"), finish("c"), finish("d")}}
		out, err := runScript(t, ws, baseManifest(t, edit), s, runOpts{apply: true, sb: sb})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != StatusVerifyFailed || len(sb.specs) != 3 || len(s.requests()) != 3 || out.Body.Loops != 2 {
			t.Fatalf("status %s, %d verify runs, %d model calls, %d loops", out.Status, len(sb.specs), len(s.requests()), out.Body.Loops)
		}
		if res := toolResults(s); !res[len(res)-1].IsError || !strings.Contains(res[len(res)-1].Text, "FAILED (failures=1)") {
			t.Fatalf("the model was not given the failure: %+v", res)
		}
		mustVerify(t, ws)
	})
	t.Run("passes on the second try", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		sb := &fakeSandbox{offers: []tier.Tier{tier.S2}, exits: []int{1, 0}}
		s := &script{resps: []*provider.Response{finish("a"), finish("b")}}
		out, _ := runScript(t, ws, baseManifest(t, edit), s, runOpts{apply: true, sb: sb})
		if out.Status != StatusVerified || out.Body.Loops != 1 {
			t.Fatalf("status %s loops %d", out.Status, out.Body.Loops)
		}
	})
	t.Run("zero loops", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		sb := &fakeSandbox{offers: []tier.Tier{tier.S2}, exits: []int{1, 0}}
		s := &script{resps: []*provider.Response{finish("a"), finish("b")}}
		out, _ := runScript(t, ws, baseManifest(t, func(m map[string]any) { edit(m); budgets(m)["max_loops"] = 0 }), s, runOpts{apply: true, sb: sb})
		if out.Status != StatusVerifyFailed || len(s.requests()) != 1 {
			t.Fatalf("status %s after %d calls", out.Status, len(s.requests()))
		}
	})
}

// TestSpawn: sub-tasks must be covered by the parent, are bounded by
// max_pending_tasks, and charge the parent's budgets.
func TestSpawn(t *testing.T) {
	child := childManifest
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"wider output", func(m map[string]any) { m["outputs"] = []string{"secret.txt"} }, "outputs"},
		{"output beneath an input", func(m map[string]any) { m["outputs"] = []string{"src/b.py"} }, "outputs"},
		{"wider input", func(m map[string]any) { m["inputs"] = []string{"secret.txt"} }, "inputs"},
		{"extra command", func(m map[string]any) {
			m["commands"] = []string{"python3", "sh"}
			m["grants"].(map[string]any)["exec"] = map[string]any{"allow": []any{map[string]any{"name": "python3"}, map[string]any{"name": "sh"}}}
		}, "commands"},
		{"bigger budget", func(m map[string]any) { budgets(m)["max_turns"] = 1000 }, "max_turns"},
		{"same pending tasks", func(m map[string]any) { budgets(m)["max_pending_tasks"] = 2 }, "max_pending_tasks"},
		{"other model", func(m map[string]any) { m["model"].(map[string]any)["name"] = "bigger" }, "model"},
		{"other endpoint", func(m map[string]any) { m["model"].(map[string]any)["base_url"] = "https://evil.example/v1" }, "model"},
		{"state dir output", func(m map[string]any) { m["outputs"] = []string{".cordon/result.json"} }, ".cordon"},
		{"unknown member", func(m map[string]any) { m["unlimited"] = true }, "unlimited"},
		{"egress grant", func(m map[string]any) {
			m["grants"].(map[string]any)["egress"] = []any{map[string]any{"host": "evil.example", "proto": "tcp", "ports": []int{443, 443}}}
		}, "grants"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, ws, _ := attack(t, nil, nil, call("spawn", child(tc.edit)))
			mustRefuse(t, res, ws, tc.want)
			if len(ofType(entries(t, ws), "task.start")) != 1 {
				t.Fatal("a refused sub-task started")
			}
		})
	}
	t.Run("pending limit", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		c := child(nil)
		s := &script{resps: []*provider.Response{calls(call("spawn", c), call("spawn", c), call("spawn", c)), finish("parent"), finish("one"), finish("two")}}
		out, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true})
		if err != nil {
			t.Fatal(err)
		}
		if r := refusals(t, ws); len(r) != 1 || !strings.Contains(r[0], "max_pending_tasks is 2") {
			t.Fatalf("refusals %q", r)
		}
		if out.Status != StatusFinished || len(out.Body.Tasks) != 3 || out.Body.Tasks[1].ID != "1.1" || out.Body.Tasks[2].Status != StatusFinished {
			t.Fatalf("tasks %+v", out.Body.Tasks)
		}
		mustVerify(t, ws)
	})
	t.Run("no spawning at zero", func(t *testing.T) {
		res, ws, _ := attack(t, nil, func(m map[string]any) { budgets(m)["max_pending_tasks"] = 0 }, call("spawn", child(nil)))
		mustRefuse(t, res, ws, "max_pending_tasks")
	})
	t.Run("children charge the parent", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		// The parent has 4 turns: 1 spawn + 1 finish leaves 2 for the
		// child, whose own budget is 5.
		s := &script{resps: []*provider.Response{calls(call("spawn", child(func(m map[string]any) { budgets(m)["max_turns"] = 4 }))), finish("parent")}}
		out, _ := runScript(t, ws, baseManifest(t, func(m map[string]any) { budgets(m)["max_turns"] = 4 }), s, runOpts{})
		if len(out.Body.Tasks) != 2 || out.Body.Tasks[1].Status != StatusBudgetExhausted || out.Body.Tasks[1].Turns != 2 || out.Body.Turns != 4 {
			t.Fatalf("tasks %+v, turns %d", out.Body.Tasks, out.Body.Turns)
		}
		if b := ofType(entries(t, ws), "budget"); len(b) != 1 || !strings.Contains(b[0], `"owner":"1"`) {
			t.Fatalf("budget entries %v", b)
		}
	})
}
