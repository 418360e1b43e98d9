package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/audit"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// export fetches the audit export as key and verifies it against the
// served audit key.
func (e *env) export(key string) ([]byte, []audit.Exported) {
	e.t.Helper()
	b := e.must(200, "GET", "/v1/audit/export", key, "").body
	pub, err := sign.ParsePublic(e.must(200, "GET", "/v1/audit.pub", "", "").body)
	if err != nil {
		e.t.Fatal(err)
	}
	recs, err := audit.Verify(b, pub)
	if err != nil {
		e.t.Fatalf("the export does not verify: %v\n%s", err, b)
	}
	return b, recs
}

func revealed(r audit.Exported, path string) string {
	v, ok := r.Revealed[path]
	if !ok {
		return ""
	}
	return v.Str()
}

// TestAuditRecordsEveryEvent drives every kind of control-plane event
// through the API and the queue and checks the export: each event is
// recorded once, a refused change not at all; the operator's export
// reveals all, a tenant's reveals only its own records, and both verify
// against the signed head.
func TestAuditRecordsEveryEvent(t *testing.T) {
	bothEngines(t, func(t *testing.T, pg bool) {
		f := newFake()
		e := newEnv(t, envOpts{exec: f, postgres: pg})
		e.setup(projectFor("true"))
		e.must(401, "GET", "/v1/whoami", "cdn_"+strings.Repeat("x", 52), "")
		run := e.submit(e.keys["member"])
		e.must(200, "POST", "/v1/runs/"+run+"/approve", e.keys["approver"], "")
		e.wait(run, e.keys["member"], 10*time.Second)
		rej := e.submit(e.keys["member"])
		e.must(200, "POST", "/v1/runs/"+rej+"/reject", e.keys["approver"], "")
		can := e.submit(e.keys["member"])
		e.must(200, "POST", "/v1/runs/"+can+"/cancel", e.keys["member"], "")
		_, before := e.export(adminKey)
		// Refused changes leave no record.
		own := e.submit(e.keys["approver"])
		_, mid := e.export(adminKey)
		e.must(403, "POST", "/v1/runs/"+own+"/approve", e.keys["approver"], "") // the submitter
		e.must(409, "POST", "/v1/runs/"+rej+"/approve", e.keys["approver"], "") // decided already
		if _, after := e.export(adminKey); len(after) != len(mid) || len(mid) != len(before)+1 {
			t.Fatalf("refused changes were recorded: %d, %d, %d records", len(before), len(mid), len(after))
		}
		var k struct{ ID string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys", adminKey, "").json(t, &k)
		var rot struct{ ID string }
		e.must(201, "POST", "/v1/tenants/"+e.tenantA+"/keys/"+k.ID+"/rotate", adminKey, "").json(t, &rot)
		e.must(200, "DELETE", "/v1/tenants/"+e.tenantA+"/keys/"+rot.ID, adminKey, "")
		e.do("PUT", "/v1/tenants/"+e.tenantA+"/ceiling", adminKey, ceiling, server.ExplicitHeader, "1")
		e.must(200, "PUT", "/v1/tenants/"+e.tenantA+"/secrets/db", adminKey, "a-stored-secret-value")
		e.must(200, "DELETE", "/v1/tenants/"+e.tenantA+"/secrets/db", adminKey, "")
		if r := e.do("PUT", "/v1/risk-policy", adminKey, `{"approvals":{"low":1,"medium":1,"high":2},"rules":[]}`, server.ExplicitHeader, "1"); r.code != 200 {
			t.Fatalf("risk policy: %d %s", r.code, r.body)
		}
		e.must(200, "POST", "/v1/runs/"+run+"/review/accept", e.keys["approver"], `{"reason":"fine"}`)
		e.must(409, "POST", "/v1/runs/"+run+"/review/accept", e.keys["approver"], "") // decided: not recorded

		_, recs := e.export(adminKey)
		count := map[string]int{}
		for _, r := range recs {
			count[revealed(r, `["event"]`)]++
			if r.Masked != 0 {
				t.Errorf("record %d: the operator's export masks %d leaves", r.Seq, r.Masked)
			}
		}
		for ev, n := range map[string]int{"auth.failure": 1, "tenant.create": 2, "user.create": 4, "key.create": 7, "project.put": 2,
			"run.submit": 4, "run.approve": 1, "run.reject": 1, "run.cancel": 1, "run.start": 1, "run.finish": 1,
			"key.rotate": 1, "key.revoke": 1, "tenant.ceiling": 1, "secret.write": 1, "secret.delete": 1, "risk.policy": 1,
			"run.review.accept": 1} {
			if count[ev] != n {
				t.Errorf("%s recorded %d times, want %d (all: %v)", ev, count[ev], n, count)
			}
		}

		// A tenant's export: its records revealed, every other masked whole.
		body, trecs := e.export(e.keys["tenant"])
		if len(trecs) != len(recs) {
			t.Fatalf("the tenant's export has %d records, the operator's %d", len(trecs), len(recs))
		}
		mine := 0
		for i, r := range trecs {
			switch tenant := revealed(recs[i], `["tenant"]`); {
			case tenant == e.tenantA:
				mine++
				if len(r.Revealed) == 0 || revealed(r, `["event"]`) != revealed(recs[i], `["event"]`) {
					t.Errorf("record %d is the tenant's, but not revealed to it", r.Seq)
				}
			case len(r.Revealed) != 0:
				t.Errorf("record %d (tenant %q) reveals %v to tenant %s", r.Seq, tenant, r.Revealed, e.tenantA)
			}
		}
		if mine == 0 || bytes.Contains(body, []byte(e.tenantB)) {
			t.Fatalf("tenant a's export: %d own records; mentions tenant b: %v", mine, bytes.Contains(body, []byte(e.tenantB)))
		}
	})
}

// TestAuditExportTampering: edits, deletions, reorderings and
// truncations of a live server's export are caught.
func TestAuditExportTampering(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	body, _ := e.export(e.keys["tenant"])
	pub, _ := sign.ParsePublic(e.must(200, "GET", "/v1/audit.pub", "", "").body)
	lines := strings.SplitAfter(string(body), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	n := len(lines) - 1          // records; the last line is the head
	join := func(ls []string) []byte { return []byte(strings.Join(ls, "")) }
	cases := map[string][]byte{
		"edit":     []byte(strings.Replace(string(body), `"v":"project.put"`, `"v":"project.del"`, 1)),
		"deletion": join(slices.Delete(slices.Clone(lines), 2, 3)),
		"reorder":  join(append(append(slices.Clone(lines[:1]), lines[2], lines[1]), lines[3:]...)),
		"truncate": join(append(slices.Clone(lines[:n-1]), lines[n])),
	}
	if bytes.Equal(cases["edit"], body) {
		t.Fatal("the edit changed nothing")
	}
	for name, b := range cases {
		if _, err := audit.Verify(b, pub); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestAuditLogEditedInTheDatabase: a record edited in the database does
// not rebuild its stored link, and the server refuses to sign a head
// over it.
func TestAuditLogEditedInTheDatabase(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	if _, err := e.store.DB().Exec(`UPDATE audit_log SET body = replace(body, 'project.put', 'project.del') WHERE seq = (SELECT MAX(seq) FROM audit_log)`); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/v1/audit/export", adminKey, "")
	if r.code != 500 || !strings.Contains(string(r.body), "does not verify") {
		t.Fatalf("export of an edited log: %d %s", r.code, r.body)
	}
}

// TestAuditKeySharedByWorkers: a process holding another audit key than
// the one the chain was written with refuses to start.
func TestAuditKeySharedByWorkers(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	k, _ := sign.Generate()
	st, err := store.Open(t.Context(), filepath.Join(e.dir, "cordon.db")) // another process's store
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := server.New(server.Config{Store: st, AdminKey: adminKey, StateDir: filepath.Join(e.dir, "w2"), Key: k, Version: "test", AuditKey: k})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "--audit-key") {
		t.Fatalf("a worker with another audit key started: %v", err)
	}
	os.RemoveAll(filepath.Join(e.dir, "w2"))
}
