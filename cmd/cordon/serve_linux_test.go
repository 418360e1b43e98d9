package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/internal/proctest"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

const testAdminKey = "cli-test-admin-key-0123456789abcdef0123456789"

// TestServerRoundTrip drives the client verbs against a live control
// plane: tenant, users and keys as the operator; a project, a submitted
// run, approval by another user, the run in the sandbox, its journal and
// evidence, and `cordon verify run` on the evidence with the server's
// public key.
func TestServerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, _ := sign.Generate()
	s, err := server.New(server.Config{Store: st, AdminKey: testAdminKey, StateDir: dir, Key: k, Version: version, Execute: true})
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
	t.Setenv(serverEnv, hs.URL)
	t.Setenv(serverKeyFile, "")
	t.Setenv(serverKeyEnv, "")
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{}`), 0o600)
	t.Setenv(clientConfigEnv, empty) // not the user's own
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
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatalf("%v: %s", err, js)
		}
		s, _ := m[name].(string)
		return s
	}
	ceiling := filepath.Join(dir, "ceiling.json")
	os.WriteFile(ceiling, []byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"true"}]},"limits":{"wall_ms":600000,"memory_bytes":1073741824,"pids":256}}`), 0o644)

	// No key: refused with a hint, before anything is sent.
	if out := cli(1, "runs"); !strings.Contains(out, "no key") {
		t.Fatalf("runs without a key: %s", out)
	}
	as(testAdminKey)
	tenant := field(cli(0, "tenant", "create", "--json", "--ceiling", ceiling, "acme"), "id")
	member := field(cli(0, "user", "create", "--json", "--tenant", tenant, "--role", "member", "mia"), "id")
	approver := field(cli(0, "user", "create", "--json", "--tenant", tenant, "--role", "approver", "abe"), "id")
	memberKey := field(cli(0, "key", "create", "--json", "--tenant", tenant, "--user", member), "secret")
	approverKey := field(cli(0, "key", "create", "--json", "--tenant", tenant, "--user", approver), "secret")
	if out := cli(0, "key", "list", "--tenant", tenant); strings.Count(out, "active") != 2 || strings.Contains(out, memberKey) {
		t.Fatalf("key list:\n%s", out)
	}

	as(memberKey)
	project := filepath.Join(dir, "project.json")
	replay := `{"content":[{"type":"tool_use","id":"t1","name":"run","input":{"argv":["true"]}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"r"}
{"content":[{"type":"tool_use","id":"t2","name":"finish","input":{"summary":"done"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"r"}
`
	files, _ := json.Marshal(map[string]string{"session.jsonl": replay})
	os.WriteFile(project, []byte(`{"tasks":{"check":{"files":`+string(files)+`,"manifest":{"type":"cordon.manifest.v1","task":"Run true.",
"model":{"provider":"replay","name":"r","replay":"session.jsonl"},"inputs":[],"outputs":[],"commands":["true"],
"grants":{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"true"}]},"limits":{"wall_ms":60000,"memory_bytes":268435456,"pids":64}},
"budgets":{"max_turns":4,"max_model_calls":4,"max_input_tokens":100000,"max_output_tokens":10000,"wall_ms":120000,"max_loops":0,"max_pending_tasks":0}}}}}`), 0o644)
	cli(0, "project", "put", "ci", project)
	if out := cli(0, "submit", "--plan", "ci", "check"); !strings.Contains(out, `"executes": false`) {
		t.Fatalf("plan: %s", out)
	}
	run := field(cli(0, "submit", "--json", "ci", "check"), "id")
	// The submitter cannot approve: 403 from the server, exit 1.
	if out := cli(1, "approve", run); !strings.Contains(out, "403") {
		t.Fatalf("self approval: %s", out)
	}
	as(approverKey)
	cli(0, "approve", run)
	cli(1, "approve", run) // replayed: 409
	deadline := time.Now().Add(60 * time.Second)
	for {
		state := field(cli(0, "runs", "--json", run), "state")
		if store.Terminal(state) {
			if state != store.StateFinished {
				t.Fatalf("run %s: %s", run, cli(0, "runs", run))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %s", state)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := cli(0, "runs"); !strings.Contains(out, run+" finished") {
		t.Fatalf("runs: %s", out)
	}
	ev := filepath.Join(dir, "ev.tar.gz")
	if out := cli(0, "logs", "--evidence", ev, run); !strings.Contains(out, `"run.end"`) {
		t.Fatalf("logs: %s", out)
	}
	b, _ := os.ReadFile(ev)
	x := filepath.Join(dir, "x")
	extract(t, b, x)
	pub := filepath.Join(dir, "steward.pub")
	p := k.Public()
	os.WriteFile(pub, p.MarshalPublic(), 0o644)
	if out := cli(0, "verify", "run", "--pubkey", pub, filepath.Join(x, run)); !strings.Contains(out, "signature") {
		t.Fatalf("verify run: %s", out)
	}
	// The run's change is reviewed: the default policy needs one
	// approver, never the submitter; a decline needs a reason.
	if out := cli(0, "review", "show", run); !strings.Contains(out, "change review, risk low, needs 1 approver") {
		t.Fatalf("review show: %s", out)
	}
	cli(2, "review", "decline", run) // no reason: a usage error
	as(memberKey)
	if out := cli(1, "review", "accept", run); !strings.Contains(out, "403") {
		t.Fatalf("a member accepted: %s", out)
	}
	as(testAdminKey)
	policy := filepath.Join(dir, "risk.json")
	os.WriteFile(policy, []byte(`{"approvals":{"low":1,"medium":2,"high":2},"rules":[{"tier":"high","paths":["**"]}]}`), 0o644)
	if out := cli(0, "review", "policy", policy); !strings.Contains(out, "is in force") {
		t.Fatalf("review policy: %s", out)
	}
	if out := cli(0, "review", "policy"); !strings.Contains(out, `"high": 2`) {
		t.Fatalf("review policy get: %s", out)
	}
	as(approverKey)
	if out := cli(0, "review", "accept", "--reason", "looks right", run); !strings.Contains(out, "change accepted") || !strings.Contains(out, "looks right") {
		t.Fatalf("review accept: %s", out)
	}
	cli(1, "review", "accept", run) // decided already: 409
	// Revoked keys stop working.
	as(testAdminKey)
	keys := cli(0, "key", "list", "--json", "--tenant", tenant)
	var ks []struct{ ID, User string }
	json.Unmarshal([]byte(keys), &ks)
	for _, k := range ks {
		if k.User == approver {
			cli(0, "key", "revoke", "--tenant", tenant, k.ID)
		}
	}
	as(approverKey)
	if out := cli(1, "runs"); !strings.Contains(out, "401") {
		t.Fatalf("revoked key: %s", out)
	}
	// The config file supplies what flags and variables do not.
	conf := filepath.Join(dir, "client.json")
	adminFile := filepath.Join(dir, "admin.key")
	os.WriteFile(adminFile, []byte(testAdminKey+"\n"), 0o600)
	os.WriteFile(conf, []byte(`{"server":"`+hs.URL+`","key_file":"`+adminFile+`"}`), 0o600)
	t.Setenv(clientConfigEnv, conf)
	t.Setenv(serverEnv, "")
	t.Setenv(serverKeyFile, "")
	if out := cli(0, "tenant", "list"); !strings.Contains(out, "acme") {
		t.Fatalf("tenant list from the config file: %s", out)
	}
	os.WriteFile(conf, []byte(`{"server":"`+hs.URL+`","key":"`+testAdminKey+`"}`), 0o600)
	if out := cli(1, "tenant", "list"); !strings.Contains(out, "unknown field") {
		t.Fatalf("a config file with a key in it: %s", out)
	}
}

func extract(t *testing.T, b []byte, dir string) {
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
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		data, _ := io.ReadAll(tr)
		os.WriteFile(p, data, 0o644)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeLifecycle runs `cordon serve` (over TLS): it makes the admin
// and steward keys (0600) on first start, answers health, readiness and
// admin-only metrics, and shuts down cleanly on SIGTERM.
func TestServeLifecycle(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "--state", dir, "--listen", addr, "--grace", "5s", "--tls-cert", cert, "--tls-key", key},
			strings.NewReader(""), io.Discard, &stderr)
	}()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path, bearer string) int {
		req, _ := http.NewRequest("GET", "https://"+addr+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := hc.Do(req)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	for get("/healthz", "") != 200 {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, f := range []string{"admin.key", "steward.key"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
	// serve executes runs: it starts their sandboxes from a spawner
	// (sandbox.Spawner), its child, which ends with it.
	spawners := proctest.Spawners(t, os.Getpid())
	if len(spawners) != 1 {
		t.Fatalf("serve runs %d sandbox spawners, want 1", len(spawners))
	}
	admin, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	if c := get("/readyz", ""); c != 200 {
		t.Fatalf("readyz %d", c)
	}
	// A second server on its SQLite database (from another state
	// directory) is refused: serve is the database's one writer, and
	// caches its hot reads (store.CacheHotReads).
	other := t.TempDir()
	var oerr bytes.Buffer
	if code := run([]string{"serve", "--state", other, "--database", filepath.Join(dir, "control.db"), "--listen", "127.0.0.1:0"},
		strings.NewReader(""), io.Discard, &oerr); code == 0 || !strings.Contains(oerr.String(), "another cordon process holds this database") {
		t.Fatalf("a second server on the database: exit %d\n%s", code, oerr.String())
	}
	if c := get("/metrics", ""); c != 401 {
		t.Fatalf("metrics without a key: %d", c)
	}
	if c := get("/metrics", strings.TrimSpace(string(admin))); c != 200 {
		t.Fatalf("metrics with the admin key: %d", c)
	}
	// the console's URL is printed, and its sign-in page served
	if want := "cordon: web console at https://" + addr + "/console/login"; !strings.Contains(stderr.String(), want) {
		t.Errorf("serve does not print %q:\n%s", want, stderr.String())
	}
	if c := get("/console/login", ""); c != 200 {
		t.Errorf("the console's sign-in page: %d", c)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Fatalf("no shutdown logged:\n%s", stderr.String())
	}
	if err := syscall.Kill(spawners[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("serve's spawner %d outlives it: %v", spawners[0], err)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1.
func selfSigned(t *testing.T, dir string) (string, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}
