package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/store"
)

// TestEvidenceVerifiesOffline runs a submitted, approved run through the
// queue, the agent runner and the sandbox, downloads its evidence, and
// verifies it offline against the server's public key, as
// `cordon verify run --pubkey` does.
func TestEvidenceVerifiesOffline(t *testing.T) {
	e := newEnv(t, envOpts{real: true})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	got := e.wait(id, e.keys["member"], 60*time.Second)
	if got.State != store.StateFinished || got.Tier == "" || got.Status == "" {
		log, _ := os.ReadFile(filepath.Join(e.dir, "runs", id, "log"))
		t.Fatalf("run %+v\nlog:\n%s", got, log)
	}
	pubPEM := e.must(200, "GET", "/v1/steward.pub", "", "").body
	pub, err := sign.ParsePublic(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	j := e.must(200, "GET", "/v1/runs/"+id+"/journal", e.keys["tenant"], "")
	if !bytes.Contains(j.body, []byte(`"run.end"`)) {
		t.Fatalf("journal without run.end: %.300s", j.body)
	}
	ev := e.must(200, "GET", "/v1/runs/"+id+"/evidence", e.keys["member"], "")
	// finding 11: evidence is never content-sniffed (a journal holds the
	// agent's text)
	for _, which := range []string{"journal", "evidence"} {
		req, _ := http.NewRequest("GET", e.url+"/v1/runs/"+id+"/"+which, nil)
		req.Header.Set("Authorization", "Bearer "+e.keys["member"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", which, got)
		}
	}
	dir := t.TempDir()
	untar(t, ev.body, dir)
	ws := filepath.Join(dir, id)
	rep := runrecord.Verify(ws, &pub)
	if rep.Failed() || !rep.Trusted {
		t.Fatalf("evidence does not verify: %+v", rep.Checks)
	}
	// Tampering is caught: the evidence is checked, not trusted.
	res := filepath.Join(ws, runrecord.StateDir, runrecord.ResultFile)
	b, _ := os.ReadFile(res)
	os.WriteFile(res, bytes.Replace(b, []byte(`"finished"`), []byte(`"verified"`), 1), 0o644)
	if rep := runrecord.Verify(ws, &pub); !rep.Failed() {
		t.Fatal("a tampered result verifies")
	}
}

func untar(t *testing.T, b []byte, dir string) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(h.Name, "..") {
			t.Fatalf("entry %q", h.Name)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			data, _ := io.ReadAll(tr)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMultiTenantRunAtS3: a tenant whose ceiling is multi-tenant runs its
// projects at S3, as that tenant (its own uid range), and the run records
// the tier.
func TestMultiTenantRunAtS3(t *testing.T) {
	requireRoot(t, "S3 gives each tenant a host id range of its own, which only root can map")
	e := newEnv(t, envOpts{real: true})
	multi := func(s string) string { return strings.ReplaceAll(s, `"tenancy":"single"`, `"tenancy":"multi"`) }
	var ten struct{ ID string }
	e.must(201, "POST", "/v1/tenants", adminKey, `{"name":"m","ceiling":`+multi(ceiling)+`}`).json(t, &ten)
	keys := map[string]string{}
	for _, role := range []string{"member", "approver"} {
		var u struct{ ID string }
		e.must(201, "POST", "/v1/tenants/"+ten.ID+"/users", adminKey, `{"name":"`+role+`","role":"`+role+`"}`).json(t, &u)
		var k struct{ Secret string }
		e.must(201, "POST", "/v1/tenants/"+ten.ID+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(t, &k)
		keys[role] = k.Secret
	}
	// A single-tenant project under a multi-tenant ceiling is refused.
	e.must(400, "PUT", "/v1/projects/p", keys["member"], projectFor("true"))
	e.must(200, "PUT", "/v1/projects/p", keys["member"], multi(projectFor("true")))
	id := e.submit(keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", keys["approver"], "")
	got := e.wait(id, keys["member"], 60*time.Second)
	if got.State != store.StateFinished || got.Tier != "S3" {
		log, _ := os.ReadFile(filepath.Join(e.dir, "runs", id, "log"))
		t.Fatalf("run %+v\nlog:\n%s", got, log)
	}
}

// requireRoot skips a test that needs root when the suite does not run as
// root; as root it never skips.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: %s (uid %d)", why, os.Geteuid())
	}
}
