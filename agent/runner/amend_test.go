package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/amend"
	"github.com/cordon-dev/cordon/sandbox"
)

// hooked is a script that calls hook(i) before answering call i.
type hooked struct {
	*script
	hook func(i int)
	n    int
}

func (h *hooked) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	h.hook(h.n)
	h.n++
	return h.script.Complete(ctx, req)
}

// egressProbe is a fake sandbox that, for each command, asks the
// command's egress proxy for a tunnel to each of hosts and records the
// status it answered.
type egressProbe struct {
	*fakeSandbox
	hosts  []string
	mu     sync.Mutex
	status []map[string]int
}

func (p *egressProbe) Run(ctx context.Context, s *sandbox.Spec) (*sandbox.Result, error) {
	got := map[string]int{}
	for _, h := range p.hosts {
		if s.Egress == nil {
			got[h] = -1
			continue
		}
		c, srv := net.Pipe()
		go s.Egress.ServeConn(ctx, srv)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", h, h)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
		if err == nil {
			got[h] = resp.StatusCode
		}
		c.Close()
	}
	p.mu.Lock()
	p.status = append(p.status, got)
	p.mu.Unlock()
	return p.fakeSandbox.Run(ctx, s)
}

func readLive(t testing.TB, ws string) Live {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, StateDir, LiveFile))
	if err != nil {
		t.Fatal(err)
	}
	var l Live
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func putAmendment(t testing.TB, ws, run string, n int64, env []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(ws, StateDir, AmendDir, run, strconv.FormatInt(n, 10)+".dsse"), env, 0o600); err != nil {
		t.Fatal(err)
	}
}

func grantSet(t testing.TB, m map[string]any) *grant.Set {
	t.Helper()
	b, _ := json.Marshal(m)
	g, err := grant.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func grantsDoc(exec []string, hosts ...string) map[string]any {
	var allow, eg []any
	for _, n := range exec {
		allow = append(allow, map[string]any{"name": n})
	}
	for _, h := range hosts {
		eg = append(eg, map[string]any{"host": h, "proto": "tcp", "ports": []int{443, 443}})
	}
	g := map[string]any{"type": "cordon.grants.v1", "code": "untrusted", "tenancy": "single", "confidential": false,
		"exec": map[string]any{"allow": allow}, "limits": map[string]any{"wall_ms": 60000}}
	if len(eg) > 0 {
		g["egress"] = eg
	}
	return g
}

// TestAmendTightensLiveRun: an amendment by the issuer, put while the
// run is live, removes a command and an egress host; from the next turn
// the command is refused and the host denied by the command's egress
// proxy, and the journal records the amendment with differing before and
// after ContentIds. A widening amendment, one by another key and a
// replay are refused and journalled, and the run goes on under the
// tightened grants. Every turn boundary has a checkpoint the agent key
// named in run.principals signed.
func TestAmendTightensLiveRun(t *testing.T) {
	issuer, _ := sign.Generate()
	other, _ := sign.Generate()
	ipub := issuer.Public()
	full := grantsDoc([]string{"python3", "git", "printenv"}, "a.example", "b.example")
	tight := grantSet(t, grantsDoc([]string{"python3", "git"}, "a.example"))
	wider := grantSet(t, grantsDoc([]string{"python3", "git"}, "a.example", "evil.example"))
	tighter := grantSet(t, grantsDoc([]string{"python3"}, "a.example"))
	ws := newWorkspace(t, defaultFiles())
	m := baseManifest(t, func(m map[string]any) { m["grants"] = full })
	var firstEnv []byte
	s := &hooked{script: &script{resps: []*provider.Response{
		calls(call("run", `{"argv":["printenv"]}`)),
		calls(call("run", `{"argv":["printenv"]}`)),
		calls(call("run", `{"argv":["python3","src/a.py"]}`)),
		finish("done"),
	}}}
	s.hook = func(i int) {
		if i != 0 {
			return
		}
		l := readLive(t, ws)
		seal := func(k *sign.PrivateKey, a *amend.Amendment) []byte {
			return sign.Seal(k, amend.AmendmentPayloadType, a.JCS())
		}
		a1 := &amend.Amendment{Run: l.Run, Issuer: ipub.ID(), Seq: 1, Base: m.Grants.ID(), Grants: tight}
		firstEnv = seal(issuer, a1)
		putAmendment(t, ws, l.Run, 1, firstEnv)
		putAmendment(t, ws, l.Run, 2, seal(issuer, &amend.Amendment{Run: l.Run, Issuer: ipub.ID(), Seq: 2, Base: tight.ID(), Grants: wider}))
		putAmendment(t, ws, l.Run, 3, seal(other, &amend.Amendment{Run: l.Run, Issuer: ipub.ID(), Seq: 3, Base: tight.ID(), Grants: tighter}))
		putAmendment(t, ws, l.Run, 4, firstEnv) // a replay
	}
	probe := &egressProbe{fakeSandbox: okSandbox(), hosts: []string{"a.example:443", "b.example:443"}}
	out, err := runScript(t, ws, m, s.script, runOpts{apply: true, sb: probe, cfg: func(c *Config) { c.Provider = s; c.Issuer = &ipub }})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFinished {
		t.Fatalf("status %s", out.Status)
	}
	es := entries(t, ws)
	var principals struct {
		Run, Agent, Issuer string
		AgentKey           string `json:"agent_key"`
	}
	if p := ofType(es, "run.principals"); len(p) != 1 || json.Unmarshal([]byte(p[0]), &principals) != nil || principals.Issuer != ipub.ID().String() {
		t.Fatalf("run.principals %v", p)
	}
	am := ofType(es, "amend")
	before := amend.State{Grants: m.Grants, Budgets: amend.Budgets{"max_turns": 20, "max_model_calls": 40, "max_input_tokens": 100000, "max_output_tokens": 100000, "wall_ms": 120000}}
	after := amend.State{Grants: tight, Budgets: before.Budgets}
	if len(am) != 1 || !strings.Contains(am[0], `"before":"`+before.ID().String()) || !strings.Contains(am[0], `"after":"`+after.ID().String()) ||
		!strings.Contains(am[0], `"grants_after":"`+tight.ID().String()) || before.ID() == after.ID() {
		t.Fatalf("amend entries %v", am)
	}
	ref := ofType(es, "amend.refused")
	if len(ref) != 3 || !strings.Contains(ref[0], "widens") || !strings.Contains(ref[1], "not signed by the run's issuer") || !strings.Contains(ref[2], "replayed") {
		t.Fatalf("amend.refused entries %v", ref)
	}
	// Turn 1 ran printenv under the manifest's grants; turn 2's printenv
	// was refused; turn 3's command ran under the tightened grants, and
	// its egress proxy denied the removed host.
	rs := refusals(t, ws)
	if len(rs) != 1 || !strings.Contains(rs[0], "printenv is not allowed by the grant set in force") {
		t.Fatalf("refusals %v", rs)
	}
	if len(probe.specs) != 2 || probe.specs[0].Grants.ID() != m.Grants.ID() || probe.specs[1].Grants.ID() != tight.ID() {
		t.Fatalf("commands ran under %d grant sets", len(probe.specs))
	}
	if st := probe.status; st[0]["b.example:443"] == 403 || st[1]["b.example:443"] != 403 || st[1]["a.example:443"] == 403 {
		t.Fatalf("egress statuses %v", st)
	}
	// Checkpoints: one per turn boundary, signed by the agent key.
	key, err := base64.RawURLEncoding.DecodeString(principals.AgentKey)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := sign.PublicKeyFromBytes(key)
	if err != nil || agent.ID().String() != principals.Agent {
		t.Fatalf("agent key: %v", err)
	}
	if n, err := amend.VerifyJournal(es); err != nil || n != 4 {
		t.Fatalf("VerifyJournal: %d checkpoints, %v", n, err)
	}
	cps := ofType(es, "checkpoint")
	if len(cps) != 4 {
		t.Fatalf("%d checkpoints, want 4", len(cps))
	}
	for i, c := range cps {
		var e struct {
			Checkpoint json.RawMessage
			Sig        string
		}
		json.Unmarshal([]byte(c), &e)
		sig, _ := base64.RawURLEncoding.DecodeString(e.Sig)
		cp, err := amend.VerifyCheckpoint(e.Checkpoint, sig, agent)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		wantGrants, wantSeq := m.Grants.ID(), int64(0)
		if i > 0 {
			wantGrants, wantSeq = tight.ID(), 1
		}
		if cp.Turn != int64(i) || cp.Grants != wantGrants || cp.Seq != wantSeq || cp.Run != principals.Run {
			t.Fatalf("checkpoint %d: %+v", i, cp)
		}
		if _, err := amend.VerifyCheckpoint(bytes.Replace(e.Checkpoint, []byte(`"turn":`), []byte(`"turn":1`), 1), sig, agent); err == nil {
			t.Fatal("a tampered checkpoint verified")
		}
	}
	if _, err := os.Stat(filepath.Join(ws, StateDir, LiveFile)); !os.IsNotExist(err) {
		t.Fatalf("live.json after the run: %v", err)
	}
	mustVerify(t, ws)
}

// TestAmendBudgets: an amendment that lowers max_turns stops the run at
// the lowered budget; a run without an issuer refuses every amendment.
func TestAmendBudgets(t *testing.T) {
	issuer, _ := sign.Generate()
	ipub := issuer.Public()
	for _, withIssuer := range []bool{true, false} {
		ws := newWorkspace(t, defaultFiles())
		m := baseManifest(t, nil)
		s := &hooked{script: &script{}}
		s.hook = func(i int) {
			if i != 0 {
				return
			}
			l := readLive(t, ws)
			a := &amend.Amendment{Run: l.Run, Issuer: ipub.ID(), Seq: 1, Base: m.Grants.ID(), Grants: m.Grants, Budgets: amend.Budgets{"max_turns": 3}}
			putAmendment(t, ws, l.Run, 1, sign.Seal(issuer, amend.AmendmentPayloadType, a.JCS()))
		}
		out, err := runScript(t, ws, m, s.script, runOpts{cfg: func(c *Config) {
			c.Provider = s
			if withIssuer {
				c.Issuer = &ipub
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		es := entries(t, ws)
		if withIssuer {
			if out.Status != StatusBudgetExhausted || out.Body.Turns != 3 || len(ofType(es, "amend")) != 1 {
				t.Fatalf("status %s after %d turns", out.Status, out.Body.Turns)
			}
		} else if out.Status != StatusBudgetExhausted || out.Body.Turns != 20 || !contains(ofType(es, "amend.refused"), "the run has no issuer") {
			t.Fatalf("without an issuer: %s after %d turns, %v", out.Status, out.Body.Turns, ofType(es, "amend.refused"))
		}
	}
}

// TestAmendCutsInFlightEgress: a command holds a connection to a granted
// host; an amendment that removes the host lands while it runs, and the
// connection is closed at once (the command itself finishes), with the
// amendment journalled before the command's outcome.
func TestAmendCutsInFlightEgress(t *testing.T) {
	issuer, _ := sign.Generate()
	ipub := issuer.Public()
	var ws string
	var m map[string]any
	base := grantsDoc([]string{"python3", "git", "printenv"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	base["egress"] = []any{map[string]any{"cidr": "127.0.0.1/32", "proto": "tcp", "ports": []int{port, port}}}
	cut := grantsDoc([]string{"python3", "git", "printenv"})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := readLive(t, ws)
		orig := grantSet(t, m["grants"].(map[string]any))
		a := &amend.Amendment{Run: l.Run, Issuer: ipub.ID(), Seq: 1, Base: orig.ID(), Grants: grantSet(t, cut)}
		putAmendment(t, ws, l.Run, 1, sign.Seal(issuer, amend.AmendmentPayloadType, a.JCS()))
		w.Header().Set("Content-Length", "100")
		for range 100 {
			io.WriteString(w, "x")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	prog := fmt.Sprintf(`import time, urllib.request
t = time.time()
n = 0
try:
    r = urllib.request.urlopen("http://127.0.0.1:%d/", timeout=20)
    while r.read(1):
        n += 1
    print("END", n)
except Exception as e:
    print("CUT", n, type(e).__name__)
print("SECONDS", int(time.time() - t))
`, port)
	ws = newWorkspace(t, pythonFiles(prog))
	s := &script{resps: []*provider.Response{calls(runPy()), finish("x")}}
	state := t.TempDir()
	if _, err := runScript(t, ws, baseManifest(t, func(mm map[string]any) {
		m = mm
		mm["grants"] = base
	}), s, runOpts{apply: true, cfg: func(c *Config) {
		c.Sandbox, c.SandboxState, c.Memory, c.Issuer = nil, state, memory.Options{}, &ipub
	}}); err != nil {
		t.Fatal(err)
	}
	res := toolResults(s)[0].Text
	for _, e := range entries(t, ws) {
		if e.Type == "amend" || e.Type == "amend.refused" || e.Type == "egress" {
			t.Logf("%s %s", e.Type, e.Body().AppendJCS(nil))
		}
	}
	if !strings.Contains(res, "CUT") || strings.Contains(res, "END 100") || !strings.Contains(res, "SECONDS 0") && !strings.Contains(res, "SECONDS 1") && !strings.Contains(res, "SECONDS 2") {
		t.Fatalf("the command's connection was not cut at once: %q", res)
	}
	es := entries(t, ws)
	var amendAt, commandAt int = -1, -1
	for i, e := range es {
		switch e.Type {
		case "amend":
			amendAt = i
		case "command":
			commandAt = i
		}
	}
	if amendAt < 0 || commandAt < amendAt {
		t.Fatalf("amend at %d, command at %d", amendAt, commandAt)
	}
	eg := ofType(es, "egress")
	if len(eg) != 1 || !strings.Contains(eg[0], "the egress policy changed") {
		t.Fatalf("egress entries %v", eg)
	}
	mustVerify(t, ws)
}
