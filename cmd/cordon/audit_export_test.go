package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

const auditTestAdminKey = "audit-test-admin-key-0123456789abcdef012345"

// TestAuditExportFromALiveServer: `cordon audit export --server URL
// --out FILE` from a live control plane, as the operator and as a
// tenant, verifies with `cordon verify audit --pubkey` against the key
// the server serves; an edit, a deletion, a reordering and a truncation
// of the exported file are each caught.
func TestAuditExportFromALiveServer(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	ak, _ := sign.Generate()
	s, err := server.New(server.Config{Store: st, AdminKey: auditTestAdminKey, StateDir: dir, Key: k, AuditKey: ak, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.WithoutCancel(ctx))
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	t.Setenv(serverEnv, "")
	t.Setenv(serverKeyEnv, "")
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{}`), 0o600)
	t.Setenv(clientConfigEnv, empty)
	keyFile := filepath.Join(dir, "key")
	as := func(key string) {
		os.WriteFile(keyFile, []byte(key+"\n"), 0o600)
		t.Setenv(serverKeyFile, keyFile)
	}
	cli := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != want {
			t.Fatalf("cordon %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	field := func(js, name string) string {
		var m map[string]any
		json.Unmarshal([]byte(js), &m)
		s, _ := m[name].(string)
		return s
	}
	ceiling := filepath.Join(dir, "ceiling.json")
	os.WriteFile(ceiling, []byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"true"}]},"limits":{"wall_ms":600000,"memory_bytes":1073741824,"pids":256}}`), 0o644)
	as(auditTestAdminKey)
	srv := "--server=" + hs.URL
	acme := field(cli(0, "tenant", "create", srv, "--json", "--ceiling", ceiling, "acme"), "id")
	globex := field(cli(0, "tenant", "create", srv, "--json", "--ceiling", ceiling, "globex"), "id")
	acmeKey := field(cli(0, "key", "create", srv, "--json", "--tenant", acme), "secret")
	cli(0, "key", "create", srv, "--json", "--tenant", globex)
	as("cdn_" + strings.Repeat("n", 52)) // an unknown key: a failed authentication, recorded
	cli(1, "runs", srv)

	pub := filepath.Join(dir, "audit.pub")
	os.WriteFile(pub, ak.Public().MarshalPublic(), 0o644)
	served := filepath.Join(dir, "served.pub")
	resp, err := hs.Client().Get(hs.URL + "/v1/audit.pub")
	if err != nil {
		t.Fatal(err)
	}
	b := new(bytes.Buffer)
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(b.Bytes(), ak.Public().MarshalPublic()) {
		t.Fatalf("GET /v1/audit.pub is not the audit key")
	}
	os.WriteFile(served, b.Bytes(), 0o644)

	as(auditTestAdminKey)
	all := filepath.Join(dir, "all.jsonl")
	cli(0, "audit", "export", srv, "--out", all)
	if out := cli(0, "verify", "audit", "--pubkey", served, all); !strings.Contains(out, "valid audit export: 5 records") || !strings.Contains(out, " 0 masked") {
		t.Fatalf("the operator's export: %s", out)
	}
	as(acmeKey)
	mine := filepath.Join(dir, "acme.jsonl")
	cli(0, "audit", "export", srv, "--out", mine)
	out := cli(0, "verify", "audit", "--json", "--pubkey", pub, mine)
	var v struct {
		Valid            bool
		Records          int
		Revealed, Masked int
	}
	json.Unmarshal([]byte(out), &v)
	if !v.Valid || v.Records != 5 || v.Masked == 0 || v.Revealed == 0 {
		t.Fatalf("acme's export: %s", out)
	}
	data, _ := os.ReadFile(mine)
	if bytes.Contains(data, []byte(globex)) || bytes.Contains(data, []byte(`"v":"globex"`)) {
		t.Fatal("acme's export shows globex")
	}

	lines := strings.SplitAfter(string(data), "\n")
	lines = lines[:len(lines)-1]
	tampered := map[string]string{
		"edit":     strings.Replace(string(data), `"v":"key.create"`, `"v":"key.revoke"`, 1),
		"deletion": strings.Join(append(append([]string{}, lines[:3]...), lines[4:]...), ""),
		"reorder":  strings.Join(append(append([]string{}, lines[0], lines[2], lines[1]), lines[3:]...), ""),
		"truncate": strings.Join(append(append([]string{}, lines[:len(lines)-2]...), lines[len(lines)-1]), ""),
	}
	for name, text := range tampered {
		if text == string(data) {
			t.Fatalf("%s: changed nothing", name)
		}
		f := filepath.Join(dir, name+".jsonl")
		os.WriteFile(f, []byte(text), 0o644)
		if out := cli(1, "verify", "audit", "--pubkey", pub, f); !strings.Contains(out, "audit") {
			t.Errorf("%s: %s", name, out)
		}
	}
	// Another key's signature is not the server's.
	other, _ := sign.Generate()
	op := filepath.Join(dir, "other.pub")
	os.WriteFile(op, other.Public().MarshalPublic(), 0o644)
	cli(1, "verify", "audit", "--pubkey", op, mine)
}
