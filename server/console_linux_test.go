package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/store"
)

// TestConsoleVerifiesRealRun: a run approved in the console executes in
// the sandbox; its page shows the journal as a timeline, the receipt, the
// server's own verification ("verified") and download links serving the
// API's bytes; evidence tampered with in the database is shown as not
// verified.
func TestConsoleVerifiesRealRun(t *testing.T) {
	e := newEnv(t, envOpts{real: true})
	e.setup(projectFor("echo", "kept output of the run"))
	id := e.submit(e.keys["member"])
	a := e.mustSignIn(e.keys["approver"])
	if p := a.post("/console/runs/"+id+"/approve", nil); p.code != 303 {
		t.Fatalf("approve: %d %s", p.code, p.body)
	}
	got := e.wait(id, e.keys["member"], 60*time.Second)
	if got.State != store.StateFinished {
		log, _ := os.ReadFile(filepath.Join(e.dir, "runs", id, "log"))
		t.Fatalf("run %+v\nlog:\n%s", got, log)
	}
	m := e.mustSignIn(e.keys["member"])
	p := m.get("/console/runs/" + id)
	checkEscaped(t, "run page", p.body)
	// Where the host runs the command (root, or rootless with a delegated
	// cgroup for its limits) the page shows its output, kept by its
	// ContentId; elsewhere the command entry shows why it did not run.
	ran := sandbox.CgroupLimits() == nil
	shown := "[stdout]\nkept output of the run\n"
	if !ran {
		shown = "$ echo kept output of the run — sandbox: required facility unavailable"
	}
	for _, want := range []string{
		`<dd id="status">finished</dd>`,
		`<li class="entry" data-kind="run.start"`, `<li class="entry" data-kind="command"`, `<li class="entry" data-kind="run.end"`,
		`<section id="receipt"><dl>`, `<section id="verify"><p class="ok">verified: every check passed`,
		shown,
		`class="evidence" id="download-journal" href="/console/runs/` + id + `/journal"`,
		`class="evidence" id="download-evidence" href="/console/runs/` + id + `/evidence"`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the run page lacks %q:\n%s", want, p.body)
		}
	}
	for which, api := range map[string]string{"journal": "journal", "evidence": "evidence"} {
		c := m.get("/console/runs/" + id + "/" + which)
		b := e.must(200, "GET", "/v1/runs/"+id+"/"+api, e.keys["member"], "").body
		if c.code != 200 || c.body != string(b) || !strings.HasPrefix(c.hdr.Get("Content-Disposition"), "attachment;") {
			t.Errorf("download %s: %d, %d bytes, want the API's %d", which, c.code, len(c.body), len(b))
		}
	}
	// kept output that no longer hashes to its ContentId is not shown as
	// the command's output
	kept, _ := filepath.Glob(filepath.Join(e.dir, "runs", id, "ws", runner.StateDir, runner.OutputDir, "*"))
	if ran && len(kept) == 0 {
		t.Fatal("the run kept no command output")
	}
	for _, f := range kept {
		if err := os.WriteFile(f, []byte("forged output\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if p := m.get("/console/runs/" + id).body; strings.Contains(p, "forged output") || strings.Contains(p, "[stdout]\nkept output of the run") || (ran && !strings.Contains(p, "(not on this host: b3:")) {
		t.Errorf("a changed output file is shown as the command's output:\n%s", p)
	}
	// tampered in the database: the page says so
	if _, err := e.store.DB().Exec(`UPDATE run_evidence SET record = ? WHERE run_id = ?`, []byte("not an archive"), id); err != nil {
		t.Fatal(err)
	}
	if p := m.get("/console/runs/" + id).body; strings.Contains(p, "verified") || !strings.Contains(p, `<section id="verify"><p class="error">FAILED: the evidence archive is malformed`) {
		t.Errorf("tampered evidence shown as verified:\n%s", p)
	}
}
