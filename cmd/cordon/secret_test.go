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

	"filippo.io/age"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// TestSecretVerbs: `cordon secret set` reads the value from standard
// input or a file (one trailing newline dropped), never from a flag or an
// argument; ls lists names only; rm deletes; the master key comes from a
// file in age-keygen's format.
func TestSecretVerbs(t *testing.T) {
	dir := t.TempDir()
	id, _ := age.GenerateX25519Identity()
	keyFile := filepath.Join(dir, "master.key")
	os.WriteFile(keyFile, []byte("# created: 2026-01-01T00:00:00Z\n# public key: "+id.Recipient().String()+"\n"+id.String()+"\n"), 0o600)
	brk, err := openBroker(keyFile, dir)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("not a key\n"), 0o600)
	if _, err := openBroker(bad, dir); err == nil || !strings.Contains(err.Error(), "master key") {
		t.Errorf("a bad master key: %v", err)
	}
	st, err := store.Open(t.Context(), filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	s, err := server.New(server.Config{Store: st, AdminKey: testAdminKey, StateDir: dir, Key: k, Version: version, Broker: brk})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	tn, err := st.CreateTenant(t.Context(), "acme", []byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(serverEnv, hs.URL)
	t.Setenv(serverKeyEnv, testAdminKey)
	t.Setenv(serverKeyFile, "")
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{}`), 0o600)
	t.Setenv(clientConfigEnv, empty)
	cli := func(want int, stdin string, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(stdin), &out, &errb); code != want {
			t.Fatalf("cordon %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	resolve := func(name string) string {
		v, err := brk.Resolve(context.Background(), tn.ID, name)
		if err != nil {
			return "error: " + err.Error()
		}
		defer v.Destroy()
		return string(v.Bytes())
	}
	cli(0, "s3cr3t-from-stdin\n", "secret", "set", "--tenant", tn.ID, "db")
	if got := resolve("db"); got != "s3cr3t-from-stdin" {
		t.Errorf("db = %q", got)
	}
	vf := filepath.Join(dir, "v")
	os.WriteFile(vf, []byte("from-a-file\r\n"), 0o600)
	cli(0, "", "secret", "set", "--tenant", tn.ID, "--from-file", vf, "api")
	if got := resolve("api"); got != "from-a-file" {
		t.Errorf("api = %q", got)
	}
	// A value as a flag or an extra argument is a usage error.
	cli(2, "", "secret", "set", "--tenant", tn.ID, "--value", "x", "db")
	cli(2, "", "secret", "set", "--tenant", tn.ID, "db", "x")
	if out := cli(2, "", "secret", "set", "--tenant", tn.ID, "db"); !strings.Contains(out, "empty") {
		t.Errorf("an empty value: %s", out)
	}
	out := cli(0, "", "secret", "ls", "--json", "--tenant", tn.ID)
	var list []struct{ Name string }
	json.Unmarshal([]byte(out), &list)
	if len(list) != 2 || list[0].Name != "api" || strings.Contains(out, "from-") || strings.Contains(out, "s3cr3t") {
		t.Errorf("ls: %s", out)
	}
	cli(0, "", "secret", "rm", "--tenant", tn.ID, "db")
	if got := resolve("db"); !strings.Contains(got, "no such secret") {
		t.Errorf("after rm: %q", got)
	}
	if out := cli(1, "", "secret", "rm", "--tenant", tn.ID, "db"); !strings.Contains(out, "404") {
		t.Errorf("rm twice: %s", out)
	}
}
