package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/mailbox"
	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant/amend"
)

// parkedRunID is the id of the one run recorded under .cordon/runs.
func parkedRunID(t *testing.T, ws string) string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(ws, StateDir, RunsDir))
	if err != nil || len(des) != 1 {
		t.Fatalf("runs: %v %v", des, err)
	}
	return des[0].Name()
}

// readRecord parses the run's durable record and checks its head.
func readRecord(t *testing.T, ws, run string, key *sign.PrivateKey) *durable.Record {
	t.Helper()
	dir := filepath.Join(ws, StateDir, RunsDir, run)
	wire, err := os.ReadFile(filepath.Join(dir, RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := durable.Parse(wire)
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	if key != nil {
		env, err := os.ReadFile(filepath.Join(dir, HeadFile))
		if err != nil {
			t.Fatal(err)
		}
		payload, err := durable.OpenHead(env, key.Public())
		if err != nil || !bytes.Equal(payload, rec.Head().JCS()) {
			t.Fatalf("signed head: %v; %s vs %s", err, payload, rec.Head().JCS())
		}
	}
	return rec
}

func kinds(rec *durable.Record) string {
	var ks []string
	for _, s := range rec.Segments() {
		ks = append(ks, s.Kind)
	}
	return strings.Join(ks, ",")
}

func parkKey(t *testing.T) *sign.PrivateKey {
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// withVerify is a manifest whose root task has a verify command.
func withVerify(m map[string]any) { m["verify"] = []string{"python3", "-m", "unittest"} }

// parkOnMailbox runs a script that writes, then waits for the operator:
// the run parks. It returns the manifest and the key.
func parkOnMailbox(t *testing.T, ws string) (*manifest.Manifest, *sign.PrivateKey, *script) {
	t.Helper()
	m, key := baseManifest(t, withVerify), parkKey(t)
	s := &script{resps: []*provider.Response{
		calls(call("write", `{"path":"out.txt","content":"draft"}`)),
		calls(call("mailbox", `{"action":"wait","text":"may I overwrite src/a.py?"}`), call("read", `{"path":"in"}`)),
	}}
	out, err := runScript(t, ws, m, s, runOpts{apply: true, cfg: func(c *Config) { c.Key, c.Park = key, true }})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusParked || out.Reason != ParkMailbox || out.Run == "" {
		t.Fatalf("outcome %s (%s)", out.Status, out.Reason)
	}
	return m, key, s
}

func resumeScript(t *testing.T, ws string, m *manifest.Manifest, key *sign.PrivateKey, s *script, edit func(*Config)) (*Outcome, error) {
	t.Helper()
	return runScript(t, ws, m, s, runOpts{apply: true, cfg: func(c *Config) {
		c.Key, c.Resume = key, true
		if edit != nil {
			edit(c)
		}
	}})
}

func finishing() *script {
	return &script{resps: []*provider.Response{calls(call("mailbox", `{"action":"read"}`)),
		calls(call("write", `{"path":"src/a.py","content":"print(2)\n"}`)), finish("done")}}
}

// TestParkOnMailboxAndResume: a run that waits for the operator's reply
// parks — the model is not called again, the turn's later tool calls are
// refused, the state and a signed durable record are left — and, after
// the reply, a resumed run continues the same conversation and journal
// to verified; the record is execute, suspend, resume, execute, close,
// with the park's idle energy; `verify run` passes, with every
// checkpoint under the agent key in force.
func TestParkOnMailboxAndResume(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m, key, s1 := parkOnMailbox(t, ws)
	if n := len(s1.requests()); n != 2 {
		t.Fatalf("the model was called %d times; a parked run calls it no more", n)
	}
	run := parkedRunID(t, ws)
	if _, err := os.Lstat(filepath.Join(ws, StateDir, LiveFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a parked run left %s: %v", LiveFile, err)
	}
	if !contains(refusals(t, ws), "the run is parking (mailbox)") {
		t.Fatalf("the call after wait ran: %v", refusals(t, ws))
	}
	rec := readRecord(t, ws, run, key)
	if h := rec.Head(); kinds(rec) != "execute,suspend" || h.State != durable.Parked || h.EnergyUJ <= 0 {
		t.Fatalf("record %s, head %+v", kinds(rec), h)
	}
	es := entries(t, ws)
	// The record's snapshot binds run.park: its tree and state, and the
	// journal up to and including it (cordon.snapshot.v2).
	last := es[len(es)-1]
	var pe entry.RunPark
	if err := json.Unmarshal(last.Body().AppendJCS(nil), &pe); err != nil || last.Type != "run.park" {
		t.Fatalf("last entry %s %s", last.Type, last.Body().AppendJCS(nil))
	}
	tid, _ := canon.ParseID(pe.Tree)
	sid, _ := canon.ParseID(pe.State)
	if snapshotID(tid, sid, journal.Head{Count: last.Index + 1, ID: last.ID()}) != rec.Head().Snapshot {
		t.Fatalf("run.park %s and the journal's head do not make the record's snapshot %s", last.Body().AppendJCS(nil), rec.Head().Snapshot)
	}
	if fi, err := os.Stat(filepath.Join(ws, StateDir, RunsDir, run, StateFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", fi, err)
	}
	// No reply yet: resuming is refused, and nothing is appended.
	before := entries(t, ws)
	if _, err := resumeScript(t, ws, m, key, finishing(), nil); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "reply") {
		t.Fatalf("resume without a reply: %v", err)
	}
	if len(entries(t, ws)) != len(before) {
		t.Fatal("a refused resume appended to the journal")
	}
	if _, err := mailbox.Post(ws, mailbox.FromOperator, "yes, go ahead", time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // some parked time
	s2 := finishing()
	out, err := resumeScript(t, ws, m, key, s2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusVerified {
		t.Fatalf("resumed run: %s", out.Status)
	}
	// The conversation continued: the first request after the resume is
	// the parked conversation, ending with the wait's tool result.
	reqs := s2.requests()
	if len(reqs[0].Messages) != len(s1.requests()[1].Messages)+2 {
		t.Fatalf("resumed with %d messages; parked after %d", len(reqs[0].Messages), len(s1.requests()[1].Messages)+2)
	}
	if tr := toolResults(s2); len(tr) == 0 || !strings.Contains(mustJSON(reqs[0].Messages), "no reply yet") || !strings.Contains(mustJSON(reqs[1].Messages), "yes, go ahead") {
		t.Fatalf("the conversation did not carry over: %s", mustJSON(reqs[1].Messages))
	}
	pub := key.Public()
	rep := runrecord.Verify(ws, &pub)
	if rep.Failed() {
		for _, c := range rep.Checks {
			t.Logf("%s: %v %s", c.Name, c.OK, c.Detail)
		}
		t.Fatal("verify run failed")
	}
	if rep.Result.Body.Turns != 5 || len(rep.Result.Body.Writes) != 2 || rep.Result.Body.Status != StatusVerified {
		t.Fatalf("body: %d turns, %d writes, %s", rep.Result.Body.Turns, len(rep.Result.Body.Writes), rep.Result.Body.Status)
	}
	es = entries(t, ws)
	// Three boundaries before the park (the last one parks), three after.
	if n, err := amend.VerifyJournal(es[rep.Result.Commitments.Since:]); err != nil || n != 6 {
		t.Fatalf("checkpoints: %d, %v", n, err)
	}
	ps := ofType(es, "run.principals")
	if len(ps) != 2 || strings.Contains(ps[0], "resume") || !strings.Contains(ps[1], `"resume":true`) || !strings.Contains(ps[1], run) {
		t.Fatalf("principals: %v", ps)
	}
	if len(ofType(es, "run.start")) != 1 || len(ofType(es, "run.resume")) != 1 {
		t.Fatal("a resume must continue the run, not start another")
	}
	rec = readRecord(t, ws, run, key)
	h := rec.Head()
	segs := rec.Segments()
	if kinds(rec) != "execute,suspend,resume,execute,close" || h.State != durable.Closed || h.Parks != 1 || h.IdleUJ <= 0 ||
		segs[2].IdleProvenance != "Estimator" || segs[2].ParkedMS < 5 || segs[3].Receipt.IsZero() || h.Manifest != m.ID() || h.Env != hostEnv {
		t.Fatalf("record %s, head %+v, resume %+v", kinds(rec), h, segs[2])
	}
	if rs := ofType(es, "run.resume"); len(rs) != 1 || !strings.Contains(rs[0], segs[1].Snapshot.String()) || segs[2].Snapshot != segs[1].Snapshot {
		t.Fatalf("run.resume %v does not name the suspend's snapshot %s", rs, segs[1].Snapshot)
	}
	// A closed record is not resumed.
	if _, err := resumeScript(t, ws, m, key, finishing(), nil); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "no parked run") {
		t.Fatalf("resume of a finished run: %v", err)
	}
}

// TestParkResumeElsewhere: a copy of the parked workspace at another
// path (as on another host) resumes to the end and verifies.
func TestParkResumeElsewhere(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m, key, _ := parkOnMailbox(t, ws)
	if _, err := mailbox.Post(ws, mailbox.FromOperator, "yes", time.Now()); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "elsewhere")
	if out, err := runShell("cp -a " + ws + " " + other); err != nil {
		t.Fatal(out)
	}
	out, err := resumeScript(t, other, m, key, finishing(), nil)
	if err != nil || out.Status != StatusVerified {
		t.Fatalf("%v %v", out, err)
	}
	pub := key.Public()
	if rep := runrecord.Verify(other, &pub); rep.Failed() {
		t.Fatalf("verify: %+v", rep.Checks)
	}
	// The original is still parked.
	if rec := readRecord(t, ws, parkedRunID(t, ws), key); rec.Head().State != durable.Parked {
		t.Fatal("the original moved on")
	}
}

// TestResumeRefusals: each way a parked run cannot be resumed is refused
// with an error naming what differs, and appends nothing.
func TestResumeRefusals(t *testing.T) {
	t.Run("no parked run", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		_, err := resumeScript(t, ws, baseManifest(t, nil), nil, finishing(), nil)
		if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "no parked run") {
			t.Fatal(err)
		}
	})
	type tc struct {
		name  string
		setup func(t *testing.T, ws, dir string, c *Config)
		want  string
	}
	cases := []tc{
		{"workspace edited", func(t *testing.T, ws, dir string, c *Config) {
			os.WriteFile(filepath.Join(ws, "src/a.py"), []byte("print(666)\n"), 0o644)
		}, "workspace tree differs from the one recorded at suspension: src/a.py (changed)"},
		{"file added", func(t *testing.T, ws, dir string, c *Config) {
			os.WriteFile(filepath.Join(ws, "new.txt"), []byte("x"), 0o644)
		}, "new.txt (added)"},
		{"state edited", func(t *testing.T, ws, dir string, c *Config) {
			b, _ := os.ReadFile(filepath.Join(dir, StateFile))
			os.WriteFile(filepath.Join(dir, StateFile), bytes.Replace(b, []byte(`"turns":2`), []byte(`"turns":0`), 1), 0o600)
		}, "state file"},
		{"another manifest", func(t *testing.T, ws, dir string, c *Config) {
			c.Manifest = baseManifest(t, func(m map[string]any) { withVerify(m); m["task"] = "Do something else." })
		}, "the manifest offered"},
		{"another grant set", func(t *testing.T, ws, dir string, c *Config) {
			c.Manifest = baseManifest(t, func(m map[string]any) {
				withVerify(m)
				m["grants"].(map[string]any)["limits"] = map[string]any{"wall_ms": 1000}
			})
		}, "the grant set offered"},
		{"another environment", func(t *testing.T, ws, dir string, c *Config) {
			c.EnvID = canon.Sum([]byte("another environment"))
		}, "the environment offered"},
		{"record tampered", func(t *testing.T, ws, dir string, c *Config) {
			b, _ := os.ReadFile(filepath.Join(dir, RecordFile))
			os.WriteFile(filepath.Join(dir, RecordFile), bytes.Replace(b, []byte(`"energy_uj":`), []byte(`"energy_uj":1`), 1), 0o644)
		}, "durable record broken"},
		{"record cut short", func(t *testing.T, ws, dir string, c *Config) {
			b, _ := os.ReadFile(filepath.Join(dir, RecordFile))
			os.WriteFile(filepath.Join(dir, RecordFile), b[:bytes.IndexByte(b, '\n')+1], 0o644)
		}, "is running, not parked"},
		{"head signed by another key", func(t *testing.T, ws, dir string, c *Config) {
			rec := readRecord(t, ws, filepath.Base(dir), nil)
			os.WriteFile(filepath.Join(dir, HeadFile), rec.Head().Seal(parkKey(t)), 0o644)
		}, "the head must be signed by the run's key"},
		{"without the run's key", func(t *testing.T, ws, dir string, c *Config) { c.Key = nil }, "resume it with its key"},
		{"another issuer", func(t *testing.T, ws, dir string, c *Config) {
			pub := parkKey(t).Public()
			c.Issuer = &pub
		}, "same issuer"},
		{"journal appended while parked", func(t *testing.T, ws, dir string, c *Config) {
			// A new run is refused while one is parked (TestExecuteWhileParked),
			// so only something else appends: simulate it.
			w, err := journal.Open(filepath.Join(ws, StateDir, JournalFile))
			if err != nil {
				t.Fatal(err)
			}
			v, _ := canon.Parse([]byte(`{"type":"cordon.memory.v1","kind":"files"}`))
			if _, err := w.Append("memory", v); err != nil {
				t.Fatal(err)
			}
			w.Close()
		}, "the journal does not end with the run's run.park"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := newWorkspace(t, defaultFiles())
			m, key, _ := parkOnMailbox(t, ws)
			mailbox.Post(ws, mailbox.FromOperator, "yes", time.Now())
			dir := filepath.Join(ws, StateDir, RunsDir, parkedRunID(t, ws))
			cfg := Config{Manifest: m, Key: key}
			c.setup(t, ws, dir, &cfg)
			jb, _ := os.ReadFile(filepath.Join(ws, StateDir, JournalFile))
			_, err := resumeScript(t, ws, cfg.Manifest, cfg.Key, finishing(), func(x *Config) { x.EnvID, x.Issuer = cfg.EnvID, cfg.Issuer })
			if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if ja, _ := os.ReadFile(filepath.Join(ws, StateDir, JournalFile)); !bytes.Equal(jb, ja) {
				t.Fatal("a refused resume changed the journal")
			}
		})
	}
}

// TestExecuteWhileParked: a new run in a workspace whose run is parked
// is refused — it would execute inside the parked run's record — and the
// journal is left as it was.
func TestExecuteWhileParked(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m, key, _ := parkOnMailbox(t, ws)
	jb, _ := os.ReadFile(filepath.Join(ws, StateDir, JournalFile))
	_, err := runScript(t, ws, m, finishing(), runOpts{apply: true, cfg: func(c *Config) { c.Key = key }})
	if !errors.Is(err, ErrParked) || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("a new run while parked: %v", err)
	}
	if ja, _ := os.ReadFile(filepath.Join(ws, StateDir, JournalFile)); !bytes.Equal(jb, ja) {
		t.Fatal("the refused run changed the journal")
	}
	// A record that does not parse may be a parked run: refused too.
	rf := filepath.Join(ws, StateDir, RunsDir, parkedRunID(t, ws), RecordFile)
	os.WriteFile(rf, []byte("garbage\n"), 0o644)
	if _, err := runScript(t, ws, m, finishing(), runOpts{apply: true, cfg: func(c *Config) { c.Key = key }}); !errors.Is(err, ErrParked) || !strings.Contains(err.Error(), "does not parse") {
		t.Fatalf("a new run beside an unreadable record: %v", err)
	}
	// A record left running by a crashed segment does not block a new
	// run (an unsigned one: a signed run does not extend a journal with
	// no result).
	ws2 := newWorkspace(t, defaultFiles())
	dir := filepath.Join(ws2, StateDir, RunsDir, "0123456789abcdef0123456789abcdef")
	os.MkdirAll(dir, 0o700)
	rec := durable.New()
	rec.Append(durable.Segment{Kind: durable.Execute, Manifest: m.ID(), Grants: m.Grants.ID(), Env: hostEnv})
	os.WriteFile(filepath.Join(dir, RecordFile), rec.Wire(), 0o644)
	if out, err := runScript(t, ws2, m, finishing(), runOpts{apply: true}); err != nil || out.Status != StatusVerified {
		t.Fatalf("a new run beside a crashed run's record: %v %v", out, err)
	}
}

// parkRequester is a model that, on its second call, drops a park
// request as `cordon park` does, and then asks for two reads.
type parkRequester struct {
	script
	ws string
}

func (p *parkRequester) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	if len(p.requests()) == 1 {
		b, err := os.ReadFile(filepath.Join(p.ws, StateDir, LiveFile))
		if err != nil {
			return nil, err
		}
		var l Live
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, err
		}
		os.MkdirAll(filepath.Join(p.ws, StateDir, ParkDir), 0o700)
		if err := os.WriteFile(filepath.Join(p.ws, StateDir, ParkDir, l.Run), []byte("park\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return p.script.Complete(ctx, req)
}

// TestParkOnRequest: a park request (what `cordon park` drops) parks the
// run at the next turn boundary; the turn's calls after it are refused,
// the request is consumed, and the run resumes to the end.
func TestParkOnRequest(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m, key := baseManifest(t, nil), parkKey(t)
	p := &parkRequester{ws: ws, script: script{resps: []*provider.Response{
		calls(call("read", `{"path":"in"}`)), calls(call("read", `{"path":"in"}`), call("read", `{"path":"src"}`)),
	}}}
	out, err := runScript(t, ws, m, nil, runOpts{apply: true, cfg: func(c *Config) { c.Key, c.Provider, c.Park = key, p, true }})
	if err != nil || out.Status != StatusParked || out.Reason != ParkRequest {
		t.Fatalf("%v %v", out, err)
	}
	if n := len(p.requests()); n != 2 {
		t.Fatalf("%d model calls", n)
	}
	if r := refusals(t, ws); len(r) != 2 || !strings.Contains(r[0], "parking (request)") {
		t.Fatalf("refusals %v", r)
	}
	if des, _ := os.ReadDir(filepath.Join(ws, StateDir, ParkDir)); len(des) != 0 {
		t.Fatal("the park request was not consumed")
	}
	out, err = resumeScript(t, ws, m, key, &script{resps: []*provider.Response{finish("ok")}}, nil)
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("%v %v", out, err)
	}
	mustVerify(t, ws)
}

// TestParkOnWallClock: a run whose wall-clock allowance runs out parks
// (reason budget); the resumed segment has the allowance again and the
// run finishes.
func TestParkOnWallClock(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m := baseManifest(t, func(m map[string]any) { budgets(m)["wall_ms"] = 300 })
	// A model that answers after the allowance, ignoring the deadline: its
	// call is charged as made, and its tool calls are refused.
	slow := &lateScript{delay: 350 * time.Millisecond}
	out, err := runScript(t, ws, m, nil, runOpts{cfg: func(c *Config) { c.Provider, c.Park = slow, true }})
	if err != nil || out.Status != StatusParked || out.Reason != ParkBudget {
		t.Fatalf("%v %v %v", out, err, ofType(entries(t, ws), "budget"))
	}
	if b := ofType(entries(t, ws), "budget"); !contains(b, "the run parks") {
		t.Fatalf("budget entries %v", b)
	}
	out, err = runScript(t, ws, m, &script{resps: []*provider.Response{calls(call("read", `{"path":"in"}`)), finish("ok")}},
		runOpts{cfg: func(c *Config) { c.Resume = true }})
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("%v %v", out, err)
	}
	mustVerify(t, ws)
	rec := readRecord(t, ws, parkedRunID(t, ws), nil)
	if kinds(rec) != "execute,suspend,resume,execute,close" {
		t.Fatalf("record %s", kinds(rec))
	}
	head, _ := os.ReadFile(filepath.Join(ws, StateDir, RunsDir, parkedRunID(t, ws), HeadJCSFile))
	if !bytes.Equal(head, rec.Head().JCS()) {
		t.Fatal("the unsigned head is not the record's")
	}
}

// TestMailboxWaitWithReplyDoesNotPark: a wait with a reply already there
// says so and the run goes on; a sub-task may not wait.
func TestMailboxWaitWithReplyDoesNotPark(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	if _, err := mailbox.Post(ws, mailbox.FromOperator, "early answer", time.Now()); err != nil {
		t.Fatal(err)
	}
	s := &script{resps: []*provider.Response{calls(call("mailbox", `{"action":"wait","text":"?"}`)), finish("ok")}}
	out, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{cfg: func(c *Config) { c.Park = true }})
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("%v %v", out, err)
	}
	if tr := toolResults(s); len(tr) == 0 || !strings.Contains(tr[0].Text, "1 replies are waiting") {
		t.Fatalf("tool results %v", tr)
	}
}

// TestNoParkWithoutPark: a caller that cannot resume (Config.Park
// unset, as the control plane and fleets run) never gets a parked run:
// a wait with no reply says so and the run goes on, and a park request
// is ignored and removed when the run ends.
func TestNoParkWithoutPark(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	p := &parkRequester{ws: ws, script: script{resps: []*provider.Response{
		calls(call("mailbox", `{"action":"wait","text":"?"}`)), calls(call("read", `{"path":"in"}`)), finish("ok"),
	}}}
	out, err := runScript(t, ws, baseManifest(t, nil), nil, runOpts{cfg: func(c *Config) { c.Provider = p }})
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("%v %v", out, err)
	}
	if tr := toolResults(&p.script); !strings.Contains(tr[0].Text, "cannot park") {
		t.Fatalf("tool results %v", tr)
	}
	if des, _ := os.ReadDir(filepath.Join(ws, StateDir, ParkDir)); len(des) != 0 {
		t.Fatal("the void park request was left")
	}
	if rec := readRecord(t, ws, parkedRunID(t, ws), nil); kinds(rec) != "execute,close" {
		t.Fatalf("record %s", kinds(rec))
	}
}

type lateScript struct{ delay time.Duration }

func (s *lateScript) Name() string { return "late" }
func (s *lateScript) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	time.Sleep(s.delay)
	return calls(call("read", `{"path":"in"}`)), nil
}

// TestIdleEnergy: the Estimator's idle energy is the idle power of one
// core over the time parked, rounded up, never zero.
func TestIdleEnergy(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{{0, 1}, {time.Nanosecond, 1}, {time.Millisecond, 2000}, {time.Second, 2_000_000}, {1000 * time.Hour, 7_200_000_000_000}} {
		if got := idleEnergy(c.d); got != c.want {
			t.Errorf("%v: %d µJ, want %d", c.d, got, c.want)
		}
	}
}

// TestAmendmentSurvivesResume: the authority in force is part of the
// parked state: an amendment applied before the park still binds after
// the resume (its removed command is refused), the live file names the
// same run and amendment, the next amendment file is the next number, and
// the resumed checkpoints name the amended grant set.
func TestAmendmentSurvivesResume(t *testing.T) {
	issuer := parkKey(t)
	ipub := issuer.Public()
	ws := newWorkspace(t, defaultFiles())
	m := baseManifest(t, func(m map[string]any) { m["grants"] = grantsDoc([]string{"python3", "git", "printenv"}) })
	tight := grantSet(t, grantsDoc([]string{"python3", "git"}))
	s1 := &hooked{script: &script{resps: []*provider.Response{
		calls(call("read", `{"path":"in"}`)),
		calls(call("mailbox", `{"action":"wait","text":"?"}`)),
	}}}
	s1.hook = func(i int) {
		if i == 0 {
			l := readLive(t, ws)
			putAmendment(t, ws, l.Run, 1, sign.Seal(issuer, amend.AmendmentPayloadType,
				(&amend.Amendment{Run: l.Run, Issuer: ipub.ID(), Seq: 1, Base: m.Grants.ID(), Grants: tight}).JCS()))
		}
	}
	cfg := func(c *Config) { c.Issuer, c.Key, c.Park = &ipub, issuer, true }
	out, err := runScript(t, ws, m, nil, runOpts{apply: true, cfg: func(c *Config) { cfg(c); c.Provider = s1 }})
	if err != nil || out.Status != StatusParked {
		t.Fatalf("%v %v", out, err)
	}
	mailbox.Post(ws, mailbox.FromOperator, "ok", time.Now())
	var live Live
	s2 := &hooked{script: &script{resps: []*provider.Response{calls(call("run", `{"argv":["printenv"]}`)), finish("done")}}}
	s2.hook = func(i int) {
		if i == 0 {
			live = readLive(t, ws)
		}
	}
	out, err = runScript(t, ws, m, nil, runOpts{apply: true, cfg: func(c *Config) { cfg(c); c.Provider, c.Resume = s2, true }})
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("%v %v", out, err)
	}
	if live.Run != out.Run || live.Seq != 1 || live.Next != 2 {
		t.Fatalf("live after resume: %+v (run %s)", live, out.Run)
	}
	if r := refusals(t, ws); !contains(r, "printenv is not allowed by the grant set in force") {
		t.Fatalf("the amendment did not survive the resume: %v", r)
	}
	cps := ofType(entries(t, ws), "checkpoint")
	if last := cps[len(cps)-1]; !strings.Contains(last, tight.ID().String()) {
		t.Fatalf("the last checkpoint does not name the amended grants: %s", last)
	}
	mustVerify(t, ws)
}
