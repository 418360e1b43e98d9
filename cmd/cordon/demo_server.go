package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// demoServer is the control plane's round trip against an embedded
// server on loopback: the operator makes a tenant, a member and an
// approver; the member writes a project and submits a run, which stays
// pending; the member's own approval is refused; the approver's runs it
// in the sandbox; its evidence is downloaded and verified offline
// against the server's public key.
//
// With serveAddr (a loopback address), the server listens there and is
// left serving: the caller runs stop when it is done with it (`cordon
// demo --serve`), and the console's sign-in is printed with a user's
// key. Without it, the server is stopped before demoServer returns.
func demoServer(w io.Writer, key *sign.PrivateKey, serveAddr string) (stop func(), err error) {
	fmt.Fprintln(w, "the control plane (cordon serve, embedded SQLite, on loopback):")
	var cleanup []func()
	closeAll := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil || serveAddr == "" {
			closeAll()
			stop = nil
		}
	}()
	tmp, err := os.MkdirTemp("", "cordon-demo-server-")
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { os.RemoveAll(tmp) })
	ctx, cancel := context.WithCancel(context.Background())
	cleanup = append(cleanup, cancel)
	st, err := store.Open(ctx, filepath.Join(tmp, "control.db"))
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { st.Close() })
	// A fresh admin key each time: the demo's server may be left
	// serving (--serve), and a fixed key would be every local user's.
	admin, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	s, err := server.New(server.Config{Store: st, AdminKey: admin, StateDir: tmp, Key: key, Version: version, Execute: true, Workers: 1,
		SpareProc: os.Getenv("GOMAXPROCS") == ""}) // as serve
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	listen := "127.0.0.1:0"
	if serveAddr != "" {
		listen = serveAddr
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l, 10*time.Second) }()
	cleanup = append(cleanup, func() { cancel(); <-done })
	base := "http://" + l.Addr().String()
	call := func(method, path, key string, body any) (int, map[string]any, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		return res.StatusCode, m, b, nil
	}
	must := func(want int, method, path, key string, body any) (map[string]any, []byte, error) {
		code, m, b, err := call(method, path, key, body)
		if err == nil && code != want {
			err = fmt.Errorf("%s %s: %d %s", method, path, code, bytes.TrimSpace(b))
		}
		return m, b, err
	}
	id := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }

	ten, _, err := must(201, "POST", "/v1/tenants", admin, map[string]any{"name": "acme", "ceiling": json.RawMessage(defaultExecGrants)})
	if err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for _, role := range []string{"member", "approver"} {
		u, _, err := must(201, "POST", "/v1/tenants/"+id(ten, "id")+"/users", admin, map[string]string{"name": role, "role": role})
		if err != nil {
			return nil, err
		}
		k, _, err := must(201, "POST", "/v1/tenants/"+id(ten, "id")+"/keys", admin, map[string]string{"user": id(u, "id")})
		if err != nil {
			return nil, err
		}
		keys[role] = id(k, "secret")
	}
	fmt.Fprintf(w, "  operator   tenant acme, a member and an approver, each with a key (cdn_…, stored hashed)\n")
	replay := `{"content":[{"type":"tool_use","id":"t1","name":"run","input":{"argv":["echo","hello from the sandbox"]}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"demo"}
{"content":[{"type":"tool_use","id":"t2","name":"finish","input":{"summary":"said hello"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"demo"}
`
	manifest := json.RawMessage(`{"type":"cordon.manifest.v1","task":"Say hello.","model":{"provider":"replay","name":"demo","replay":"session.jsonl"},
"inputs":[],"outputs":[],"commands":["echo"],"grants":{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"echo"}]},"limits":{"wall_ms":60000,"memory_bytes":268435456,"pids":64}},
"budgets":{"max_turns":4,"max_model_calls":4,"max_input_tokens":10000,"max_output_tokens":1000,"wall_ms":120000,"max_loops":0,"max_pending_tasks":0}}`)
	project := map[string]any{"tasks": map[string]any{"hello": map[string]any{"manifest": manifest, "files": map[string]string{"session.jsonl": replay}}}}
	if _, _, err := must(200, "PUT", "/v1/projects/demo", keys["member"], project); err != nil {
		return nil, err
	}
	code, m, _, err := call("POST", "/v1/projects/demo/runs", keys["member"], map[string]any{"task": "hello", "command": []string{"sh", "-c", "id"}})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "  refused    a run request carrying a command: %d %s\n", code, id(m, "error"))
	run, _, err := must(201, "POST", "/v1/projects/demo/runs", keys["member"], map[string]string{"task": "hello"})
	if err != nil {
		return nil, err
	}
	rid := id(run, "id")
	fmt.Fprintf(w, "  submitted  %s by the member: %s\n", rid, id(run, "state"))
	code, m, _, err = call("POST", "/v1/runs/"+rid+"/approve", keys["member"], nil)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "  refused    approval by the member: %d %s\n", code, id(m, "error"))
	if _, _, err := must(200, "POST", "/v1/runs/"+rid+"/approve", keys["approver"], nil); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, _, err = must(200, "GET", "/v1/runs/"+rid, keys["member"], nil)
		if err != nil {
			return nil, err
		}
		if store.Terminal(id(m, "state")) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("control plane: run %s still %s", rid, id(m, "state"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if id(m, "state") != store.StateFinished {
		fmt.Fprintf(w, "  refused    the run: %s (%s)\n", id(m, "state"), id(m, "reason"))
		return closeAll, nil
	}
	fmt.Fprintf(w, "  approved   by the approver; ran in the sandbox at %s: %s\n", id(m, "tier"), id(m, "state"))
	_, ev, err := must(200, "GET", "/v1/runs/"+rid+"/evidence", keys["member"], nil)
	if err != nil {
		return nil, err
	}
	_, pubPEM, err := must(200, "GET", "/v1/steward.pub", "", nil)
	if err != nil {
		return nil, err
	}
	pub, err := sign.ParsePublic(pubPEM)
	if err != nil {
		return nil, err
	}
	x := filepath.Join(tmp, "download")
	if err := untarDemo(ev, x); err != nil {
		return nil, err
	}
	rep := runrecord.Verify(filepath.Join(x, rid), &pub)
	if rep.Failed() {
		return nil, fmt.Errorf("control plane: the run's evidence does not verify: %+v", rep.Checks)
	}
	fmt.Fprintf(w, "  verified   the downloaded evidence offline (cordon verify run --pubkey): %d checks, signed by %s\n", len(rep.Checks), pub.ID())
	if err := demoConsole(base, keys["approver"], rid); err != nil {
		return nil, fmt.Errorf("control plane: the web console: %w", err)
	}
	if serveAddr == "" {
		fmt.Fprintln(w, "  console    the run's page in the web console shows it verified too; to open it, run cordon demo --serve 127.0.0.1:8420 and follow what it prints")
		return nil, nil
	}
	fmt.Fprintf(w, "  console    the run's page in the web console shows it verified too; open %s/console/login and sign in as the approver with the key %s (the member's: %s)\n", base, keys["approver"], keys["member"])
	return closeAll, nil
}

// randomHex is n random bytes, hex-encoded.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// demoConsole signs in to the embedded server's web console as a
// browser would and checks the run's page shows its evidence verified.
func demoConsole(base, key, run string) error {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", base+"/console/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	var session *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == server.ConsoleCookie {
			session = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || session == nil {
		return fmt.Errorf("sign-in: %d", res.StatusCode)
	}
	req, _ = http.NewRequest("GET", base+"/console/runs/"+run, nil)
	req.AddCookie(session)
	res, err = c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if res.StatusCode != 200 || !bytes.Contains(b, []byte(`<section id="verify"><p class="ok">verified`)) {
		return fmt.Errorf("the run's page (%d) does not show its evidence verified", res.StatusCode)
	}
	return nil
}

// untarDemo extracts the server's evidence tar (regular files and
// directories only; names are checked to stay inside dir).
func untarDemo(b []byte, dir string) error {
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return fmt.Errorf("evidence: entry %q outside the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return err
			}
			data, err := io.ReadAll(io.LimitReader(tr, 64<<20))
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				return err
			}
		}
	}
}
