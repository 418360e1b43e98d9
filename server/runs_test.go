package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// TestApproveIsTheSoleTrigger: a submitted run stays pending (nothing
// executes) until an approver other than the submitter approves it;
// then it executes once and records who approved it and when.
func TestApproveIsTheSoleTrigger(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) { approveSoleTrigger(t, pg) })
}

func approveSoleTrigger(t *testing.T, pg bool) {
	f := newFake()
	e := newEnv(t, envOpts{exec: f, postgres: pg})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	// A plan executes nothing.
	var plan struct{ Executes bool }
	e.must(200, "POST", "/v1/projects/p/plan", e.keys["member"], `{"task":"t"}`).json(t, &plan)
	time.Sleep(200 * time.Millisecond)
	if n := f.executions(id); n != 0 {
		t.Fatalf("a pending run executed %d times", n)
	}
	var r store.Run
	e.must(200, "GET", "/v1/runs/"+id, e.keys["tenant"], "").json(t, &r)
	if r.State != store.StatePending {
		t.Fatalf("state %s", r.State)
	}
	// The project changes after submission: the run keeps the task it was
	// submitted with, which the approver sees.
	e.must(200, "PUT", "/v1/projects/p", e.keys["member"], projectFor("sleep", "1"))
	var shown struct {
		Snapshot struct{ Manifest struct{ Commands []string } }
	}
	e.must(200, "GET", "/v1/runs/"+id, e.keys["approver"], "").json(t, &shown)
	if c := shown.Snapshot.Manifest.Commands; len(c) != 1 || c[0] != "true" {
		t.Fatalf("the approver is shown %v, not the submitted task", c)
	}
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	got := e.wait(id, e.keys["member"], 10*time.Second)
	if got.State != store.StateFinished || got.DecidedBy != e.approver || got.DecidedAt == nil || got.SubmittedBy != e.member || got.Attempts != 1 {
		t.Fatalf("run %+v", got)
	}
	if n := f.executions(id); n != 1 {
		t.Fatalf("executed %d times", n)
	}
	f.mu.Lock()
	executed := f.configs[0]
	f.mu.Unlock()
	if !strings.Contains(executed, `"commands":["true"]`) || strings.Contains(executed, "sleep") {
		t.Fatalf("executed a task other than the submitted one: %.200s", executed)
	}
}

// TestSelfApprovalRefused: an approver cannot approve (or reject) a run
// they submitted, and a member cannot approve at all.
func TestSelfApprovalRefused(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) { selfApprovalRefused(t, pg) })
}

func selfApprovalRefused(t *testing.T, pg bool) {
	f := newFake()
	e := newEnv(t, envOpts{exec: f, postgres: pg})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["approver"])
	r := e.do("POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	if r.code != 403 || !strings.Contains(string(r.body), "submitter") {
		t.Fatalf("self approval: %d %s", r.code, r.body)
	}
	e.must(403, "POST", "/v1/runs/"+id+"/reject", e.keys["approver"], "")
	e.must(403, "POST", "/v1/runs/"+id+"/approve", e.keys["member"], "")
	e.must(403, "POST", "/v1/runs/"+id+"/approve", e.keys["tenant"], "")
	e.must(403, "POST", "/v1/runs/"+id+"/approve", adminKey, "")
	time.Sleep(100 * time.Millisecond)
	if f.executions(id) != 0 {
		t.Fatal("a self-approved run executed")
	}
}

// TestReplayedApproval: approving twice executes once; the second
// approval is 409, as is approving a rejected or cancelled run.
func TestReplayedApproval(t *testing.T) {
	f := newFake()
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	e.must(409, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	e.wait(id, e.keys["member"], 10*time.Second)
	e.must(409, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	if n := f.executions(id); n != 1 {
		t.Fatalf("executed %d times", n)
	}
	rej := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+rej+"/reject", e.keys["approver"], "")
	e.must(409, "POST", "/v1/runs/"+rej+"/approve", e.keys["approver"], "")
	can := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+can+"/cancel", e.keys["member"], "")
	e.must(409, "POST", "/v1/runs/"+can+"/approve", e.keys["approver"], "")
	time.Sleep(100 * time.Millisecond)
	if f.executions(rej)+f.executions(can) != 0 {
		t.Fatal("a rejected or cancelled run executed")
	}
}

// TestCallerInputIsNotConfiguration: a run body carrying a command, a
// manifest, grants, a model endpoint or any other member is refused with
// 400 naming it; so are malformed bodies.
func TestCallerInputIsNotConfiguration(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	for _, body := range []string{
		`{"task":"t","command":["sh","-c","id"]}`,
		`{"task":"t","argv":["sh"]}`,
		`{"task":"t","manifest":{}}`,
		`{"task":"t","grants":{}}`,
		`{"task":"t","model_endpoint":"http://evil"}`,
		`{"task":"t","base_url":"http://evil"}`,
		`{"task":"t","env":{"A":"b"}}`,
		`{"task":"t","Command":"x"}`,
	} {
		r := e.do("POST", "/v1/projects/p/runs", e.keys["member"], body)
		if r.code != 400 || !strings.Contains(string(r.body), "configures execution") {
			t.Errorf("%s: %d %s", body, r.code, r.body)
		}
	}
	for body, want := range map[string]string{
		`{"task":"t","priority":1}`: "unknown field",
		`{"task":"t"} {"task":"t"}`: "not a JSON object",
		`{"task":`:                  "not a JSON object",
		`[]`:                        "not a JSON object",
		`{"task":"nope"}`:           "no such task",
		`{"task":"../x"}`:           "name one of",
	} {
		r := e.do("POST", "/v1/projects/p/runs", e.keys["member"], body)
		if r.code != 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("%s: %d %s, want 400 with %q", body, r.code, r.body, want)
		}
	}
	runs, _ := e.store.Runs(t.Context(), e.tenantA, 100)
	if len(runs) != 0 {
		t.Fatalf("%d runs created by refused bodies", len(runs))
	}
}

// TestHostileTenant: guessing ids, another tenant's keys, oversized and
// malformed bodies, projects beyond the ceiling.
func TestHostileTenant(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) { hostileTenant(t, pg) })
}

func hostileTenant(t *testing.T, pg bool) {
	e := newEnv(t, envOpts{postgres: pg})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	for _, k := range []string{"other", "other-member", "other-approver"} {
		for _, rt := range []struct{ m, p string }{{"GET", "/v1/runs/" + id}, {"GET", "/v1/runs/" + id + "/journal"},
			{"GET", "/v1/runs/" + id + "/evidence"}, {"GET", "/v1/projects/p"}} {
			e.must(404, rt.m, rt.p, e.keys[k], "")
		}
	}
	e.must(404, "POST", "/v1/runs/"+id+"/approve", e.keys["other-approver"], "")
	e.must(404, "POST", "/v1/runs/"+id+"/cancel", e.keys["other-member"], "")
	e.must(404, "POST", "/v1/projects/p/runs", e.keys["other-member"], `{"task":"t"}`)
	// Guessed ids: well-formed, random, absent.
	e.must(404, "GET", "/v1/runs/"+store.NewID("run_"), e.keys["member"], "")
	e.must(404, "GET", "/v1/runs/run_1", e.keys["member"], "")
	// Another tenant's key on this tenant's admin routes.
	e.must(403, "GET", "/v1/tenants/"+e.tenantA+"/keys", e.keys["other"], "")
	// A revoked or forged key.
	e.must(401, "GET", "/v1/runs", "cdn_"+strings.Repeat("a", 52), "")
	e.must(401, "GET", "/v1/runs", adminKey+"x", "")
	// Oversized and malformed bodies.
	big := `{"tasks":{"t":{"manifest":{},"files":{"a":"` + strings.Repeat("x", 70<<10) + `"}}}}`
	e.must(413, "PUT", "/v1/projects/p", e.keys["member"], big)
	e.must(400, "PUT", "/v1/projects/p", e.keys["member"], `{"tasks":`)
	e.must(400, "PUT", "/v1/projects/p", e.keys["member"], `{"tasks":{},"hook":"rm -rf /"}`)
	// A project beyond the ceiling: a command the ceiling does not allow.
	r := e.do("PUT", "/v1/projects/p", e.keys["member"], projectFor("python3"))
	if r.code != 400 || !strings.Contains(string(r.body), "ceiling") {
		t.Fatalf("widening project: %d %s", r.code, r.body)
	}
	// A file into the run record.
	bad := strings.Replace(projectFor("true"), `"files":{`, `"files":{".cordon/result.json":"x",`, 1)
	e.must(400, "PUT", "/v1/projects/p", e.keys["member"], bad)
	// The project is unchanged by refused writes.
	var p struct {
		Config struct{ Tasks map[string]any }
	}
	e.must(200, "GET", "/v1/projects/p", e.keys["member"], "").json(t, &p)
	if _, ok := p.Config.Tasks["t"]; !ok || len(p.Config.Tasks) != 1 {
		t.Fatalf("project changed: %+v", p)
	}
}

// TestCeilingTightenedStopsRuns: a run submitted under a ceiling that is
// then tightened is refused at approval.
func TestCeilingTightenedStopsRuns(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	tight := strings.Replace(ceiling, `{"name":"true"},`, "", 1)
	e.must(403, "PUT", "/v1/tenants/"+e.tenantA+"/ceiling", adminKey, tight) // admin alone is not enough
	r := e.do("PUT", "/v1/tenants/"+e.tenantA+"/ceiling", adminKey, tight, server.ExplicitHeader, "1")
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	r = e.do("POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	if r.code != 409 || !strings.Contains(string(r.body), "ceiling") {
		t.Fatalf("approve after tightening: %d %s", r.code, r.body)
	}
}

// TestCancelStopsRunning: cancel of a running run stops its execution
// and records cancelled with who.
func TestCancelStopsRunning(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) { cancelStopsRunning(t, pg) })
}

func cancelStopsRunning(t *testing.T, pg bool) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f, postgres: pg})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not start")
	}
	e.must(202, "POST", "/v1/runs/"+id+"/cancel", e.keys["member"], "")
	got := e.wait(id, e.keys["member"], 10*time.Second)
	if got.State != store.StateCancelled || got.CancelledBy != e.member || got.CancelledAt == nil {
		t.Fatalf("run %+v", got)
	}
}

// TestWallTimeBounded: a run that does not end is stopped at the
// operator's maximum wall time and failed with the reason.
func TestWallTimeBounded(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f, maxWall: 500 * time.Millisecond, rescue: 5 * time.Second})
	e.setup(strings.Replace(projectFor("true"), `"wall_ms":120000`, `"wall_ms":400`, 1))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	got := e.wait(id, e.keys["member"], 10*time.Second)
	if got.State != store.StateFailed || !strings.Contains(got.Reason, "maximum wall time") {
		t.Fatalf("run %+v", got)
	}
}

// TestSlowClients: a client that sends its headers or its body too
// slowly is disconnected.
func TestSlowClients(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(t.Context(), dir+"/c.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	s, err := server.New(server.Config{Store: st, AdminKey: adminKey, StateDir: dir, Key: k, Version: "test",
		HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 600 * time.Millisecond, Executor: newFake()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l, 5*time.Second) }()
	defer func() { cancel(); <-done }()
	closedWithin := func(what string, send func(c net.Conn)) {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		send(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		for {
			if _, err := br.ReadByte(); err != nil {
				break
			}
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: the connection stayed open %s", what, d)
		}
	}
	closedWithin("slow headers", func(c net.Conn) { fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") })
	closedWithin("slow body", func(c net.Conn) {
		fmt.Fprintf(c, "POST /v1/tenants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{", adminKey)
	})
}

// TestMailbox: the tenant's users reach a running run's mailbox over the
// API; before the run has a workspace, and after it ends, posting is
// refused; strict bodies.
func TestMailbox(t *testing.T) {
	f := newFake()
	f.block = true
	e := newEnv(t, envOpts{exec: f})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(409, "POST", "/v1/runs/"+id+"/mailbox", e.keys["member"], `{"text":"hi"}`)
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	<-f.started
	if err := os.MkdirAll(filepath.Join(e.dir, "runs", id, "ws"), 0o700); err != nil { // the fake executor makes none
		t.Fatal(err)
	}
	e.must(400, "POST", "/v1/runs/"+id+"/mailbox", e.keys["member"], `{"text":"hi","from":"agent"}`)
	e.must(400, "POST", "/v1/runs/"+id+"/mailbox", e.keys["member"], `{"text":"a\u0000b"}`)
	e.must(403, "POST", "/v1/runs/"+id+"/mailbox", e.keys["tenant"], `{"text":"hi"}`)
	e.must(404, "POST", "/v1/runs/"+id+"/mailbox", e.keys["other-member"], `{"text":"hi"}`)
	e.must(201, "POST", "/v1/runs/"+id+"/mailbox", e.keys["member"], `{"text":"carry on"}`)
	var box struct {
		Agent, Operator []struct {
			Seq  int
			Text string
		}
	}
	e.must(200, "GET", "/v1/runs/"+id+"/mailbox", e.keys["tenant"], "").json(t, &box)
	if len(box.Operator) != 1 || box.Operator[0].Text != "carry on" || len(box.Agent) != 0 {
		t.Fatalf("mailbox %+v", box)
	}
	e.must(202, "POST", "/v1/runs/"+id+"/cancel", e.keys["member"], "")
	e.wait(id, e.keys["member"], 10*time.Second)
	e.must(409, "POST", "/v1/runs/"+id+"/mailbox", e.keys["member"], `{"text":"late"}`)
}
