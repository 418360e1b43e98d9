package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/tier"
)

// script is a scripted model: it answers with its responses in order and
// keeps every request. Past the end it keeps calling a tool that does
// nothing, so a runner that fails to stop it would loop until a budget
// stops it.
type script struct {
	mu    sync.Mutex
	resps []*provider.Response
	errs  []error // errs[i] is returned instead of resps[i] when set
	reqs  []provider.Request
}

func (s *script) Name() string { return "script" }

func (s *script) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.reqs)
	s.reqs = append(s.reqs, req)
	if i < len(s.errs) && s.errs[i] != nil {
		return nil, s.errs[i]
	}
	if i < len(s.resps) {
		r := *s.resps[i]
		return &r, nil
	}
	return calls(call("read", `{"path":"in"}`)), nil
}

func (s *script) requests() []provider.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]provider.Request(nil), s.reqs...)
}

// callSeq numbers tool_use blocks; atomic, as concurrent tests build them.
var callSeq atomic.Int64

// call is one tool_use block.
func call(name, input string) provider.Block {
	return provider.Block{Type: "tool_use", ID: fmt.Sprintf("c%d", callSeq.Add(1)), Name: name, Input: json.RawMessage(input)}
}

// calls is a response making the given tool calls.
func calls(bs ...provider.Block) *provider.Response {
	return &provider.Response{Content: bs, StopReason: "tool_use", Usage: provider.Usage{InputTokens: 10, OutputTokens: 5, Reported: true}, Attempts: 1}
}

func finish(summary string) *provider.Response {
	return calls(call("finish", fmt.Sprintf(`{"summary":%q}`, summary)))
}

// fakeSandbox records specs and plays a command: it writes the outputs a
// test asks for into the workspace, as the real sandbox's copy-back
// would, and exits with the next code.
type fakeSandbox struct {
	mu     sync.Mutex
	offers []tier.Tier
	probe  error
	specs  []*sandbox.Spec
	exits  []int
	stdout string
}

func (f *fakeSandbox) Offers() []tier.Tier   { return f.offers }
func (f *fakeSandbox) Probe(tier.Tier) error { return f.probe }
func (f *fakeSandbox) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.specs = append(f.specs, s)
	code := 0
	if len(f.exits) > 0 {
		code, f.exits = f.exits[0], f.exits[1:]
	}
	d := grant.New(s.Grants).Decide(grant.Query{Kind: grant.KindExec, Path: "/usr/bin/" + s.Argv[0], Argv: s.Argv})
	if s.Decided != nil {
		if err := s.Decided(d); err != nil {
			return nil, err
		}
	}
	if s.Stdout != nil {
		fmt.Fprint(s.Stdout, f.stdout)
	}
	return &sandbox.Result{Tier: s.Tier, GrantsID: s.Grants.ID(), ExitCode: code, Program: sandbox.Program{Path: "/usr/bin/" + s.Argv[0], B3: canon.Sum([]byte(s.Argv[0])), Decision: d}}, nil
}

func okSandbox() *fakeSandbox { return &fakeSandbox{offers: []tier.Tier{tier.S2, tier.S3}} }

// baseManifest is a manifest with generous budgets; edit changes its
// JSON object before parsing.
func baseManifest(t testing.TB, edit func(m map[string]any)) *manifest.Manifest {
	t.Helper()
	m := map[string]any{
		"type":     "cordon.manifest.v1",
		"task":     "Fix it.",
		"model":    map[string]any{"provider": "openai", "name": "m", "base_url": "http://127.0.0.1:1/v1"},
		"inputs":   []string{"in", "src"},
		"outputs":  []string{"out.txt", "src/a.py"},
		"commands": []string{"python3", "git", "printenv"},
		"grants": map[string]any{"type": "cordon.grants.v1", "code": "untrusted", "tenancy": "single", "confidential": false,
			"exec":   map[string]any{"allow": []any{map[string]any{"name": "python3"}, map[string]any{"name": "git"}, map[string]any{"name": "printenv"}}},
			"limits": map[string]any{"wall_ms": 60000}},
		"budgets": map[string]any{"max_turns": 20, "max_model_calls": 40, "max_input_tokens": 100000, "max_output_tokens": 100000,
			"wall_ms": 120000, "max_loops": 2, "max_pending_tasks": 2},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	man, err := manifest.Parse(b)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return man
}

func budgets(m map[string]any) map[string]any { return m["budgets"].(map[string]any) }

// newWorkspace makes a workspace with files (path → content).
func newWorkspace(t testing.TB, files map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	for p, c := range files {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func defaultFiles() map[string]string {
	return map[string]string{"in": "the input\n", "src/a.py": "print(1)\n", "secret.txt": "TOP SECRET\n"}
}

type runOpts struct {
	apply bool
	sb    Sandbox
	cfg   func(*Config)
	ctx   context.Context // nil: context.Background()
}

// runScript runs m in ws against the script.
func runScript(t *testing.T, ws string, m *manifest.Manifest, s *script, o runOpts) (*Outcome, error) {
	t.Helper()
	sb := o.sb
	if sb == nil {
		sb = okSandbox()
	}
	var log bytes.Buffer
	cfg := Config{Workspace: ws, Manifest: m, Provider: s, Apply: o.apply, Sandbox: sb, SandboxState: t.TempDir(),
		Memory: memory.Options{NoGit: true}, Log: &log, Version: "test"}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := Run(ctx, cfg)
	if testing.Verbose() {
		t.Logf("runner log:\n%s", log.String())
	}
	return out, err
}

// entries reads the workspace's journal, which must verify.
func entries(t *testing.T, ws string) []journal.Entry {
	t.Helper()
	f, err := os.Open(filepath.Join(ws, StateDir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	es, _, err := journal.Scan(f)
	if err != nil {
		t.Fatalf("journal: %v", err)
	}
	return es
}

// ofType returns the bodies (JCS) of the entries of one type.
func ofType(es []journal.Entry, typ string) []string {
	var out []string
	for _, e := range es {
		if e.Type == typ {
			out = append(out, string(e.Body().AppendJCS(nil)))
		}
	}
	return out
}

// refusals returns the reasons of every refused call.
func refusals(t *testing.T, ws string) []string {
	t.Helper()
	var out []string
	for _, b := range ofType(entries(t, ws), "tool.refused") {
		var r struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Reason)
	}
	return out
}

// toolResults returns the tool results the model was sent, in order.
func toolResults(s *script) []provider.Block {
	reqs := s.requests()
	if len(reqs) == 0 {
		return nil
	}
	var out []provider.Block
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				out = append(out, b)
			}
		}
	}
	return out
}

func mustVerify(t *testing.T, ws string) *runrecord.Report {
	t.Helper()
	rep := runrecord.Verify(ws, nil)
	if rep.Failed() {
		for _, c := range rep.Checks {
			t.Logf("%s: ok=%v %s", c.Name, c.OK, c.Detail)
		}
		t.Fatal("verify failed")
	}
	return rep
}

func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// slowScript answers every call after a delay with a harmless tool call.
type slowScript struct {
	delay time.Duration
	n     int
}

func (s *slowScript) Name() string { return "slow" }
func (s *slowScript) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	s.n++
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return calls(call("read", `{"path":"in"}`)), nil
}

// runShell runs a host shell command for test setup.
func runShell(cmd string) (string, error) {
	out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
	return string(out), err
}
