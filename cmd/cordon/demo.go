package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cordon-dev/cordon/conformance"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/session"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// runDemo is the main job on embedded defaults: it canonicalizes and
// addresses the sample evidence of the embedded conformance pack, shows
// what cordon refuses, decides sample requests against the sample grant
// set and works out its tier, then runs the whole pack.
func runDemo(e *env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	out := fs.String("out", "", "write the demo run's evidence (key, journal, receipt, attestation) to `DIR` and keep it")
	keyFile := fs.String("key", "", "sign with the steward key in `FILE` (default: $CORDON_KEY or $CORDON_KEY_FILE, else a new key)")
	serve := fs.String("serve", "", "after the demo, keep its control plane serving the web console on the loopback `ADDR` (e.g. 127.0.0.1:8420) until interrupted")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("demo: unexpected argument %q", pos[0])
	}
	if *serve != "" && !loopbackAddr(*serve) {
		return usageErrorf("demo: --serve %q: the demo's server listens only on a loopback address with a port, such as 127.0.0.1:8420 (use cordon serve for anything else)", *serve)
	}
	files, err := conformance.Load(conformance.V1())
	if err != nil {
		return fmt.Errorf("embedded vectors: %w", err)
	}
	sample := func(id string) []byte {
		for _, f := range files {
			for _, v := range f.Vectors {
				if v.ID == id {
					b, _ := v.Bytes()
					return b
				}
			}
		}
		return nil
	}
	w := e.stdout
	fmt.Fprintln(w, "cordon demo: the canonical evidence core")
	fmt.Fprintln(w)

	for _, s := range []struct{ title, id string }{
		{"grant set", "C1-001-grant-set"},
		{"unit descriptor", "C1-002-unit-descriptor"},
		{"attestation core", "C1-004-attestation-core"},
	} {
		in := sample(s.id)
		v, err := canon.Parse(in)
		if err != nil {
			return fmt.Errorf("%s sample: %w", s.title, err)
		}
		jcs := v.AppendJCS(nil)
		cb, err := v.CBOR()
		if err != nil {
			return fmt.Errorf("%s sample: %w", s.title, err)
		}
		fmt.Fprintf(w, "%s (%d bytes of JSON as written)\n", s.title, len(in))
		fmt.Fprintf(w, "  JCS        %d bytes  %s\n", len(jcs), canon.Sum(jcs))
		fmt.Fprintf(w, "  det-CBOR   %d bytes  %s\n", len(cb), canon.Sum(cb))
	}
	rc := sample("C1-003-receipt-core")
	if err := canon.CheckCBOR(rc); err != nil {
		return fmt.Errorf("receipt core sample: %w", err)
	}
	fmt.Fprintf(w, "receipt core (%d bytes of deterministic CBOR)\n", len(rc))
	fmt.Fprintf(w, "  verified   decoded strictly, re-encoded, bytes equal  %s\n", canon.Sum(rc))
	fmt.Fprintln(w)

	fmt.Fprintln(w, "refused, never rounded or fixed up:")
	for _, bad := range []string{
		`{"energy_uj": 1.5}`,
		`{"start_ns": 1764480000123456789}`,
		`{"tier": "S2", "tier": "S0"}`,
		`{"exit": -0}`,
		`{"path": "\udc00"}`,
	} {
		_, err := canon.Parse([]byte(bad))
		if err == nil {
			return fmt.Errorf("demo: %s was accepted", bad)
		}
		fmt.Fprintf(w, "  %-36s %v\n", bad, err)
	}
	for _, bad := range []string{"b3:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmJ", "sha256:rxNJufX5oaagQE3qNtzJSZvLJcmtwRK3zJqTyuQfMmI"} {
		_, err := canon.ParseID(bad)
		if err == nil {
			return fmt.Errorf("demo: %s was accepted", bad)
		}
		fmt.Fprintf(w, "  %-36s %v\n", bad[:min(len(bad), 34)]+"…", err)
	}
	fmt.Fprintln(w)

	// Grants: the sample grant set decides requests, deny by default.
	gs, err := grant.Parse(sample("C1-001-grant-set"))
	if err != nil {
		return fmt.Errorf("grant set sample: %w", err)
	}
	enf := grant.New(gs)
	fmt.Fprintf(w, "decisions under the grant set %s:\n", gs.ID())
	queries := []grant.Query{
		{Kind: grant.KindFS, Op: "write", Path: "/work/out/report.xml"},
		{Kind: grant.KindFS, Op: "write", Path: "/usr/lib/python3/site.py"},
		{Kind: grant.KindFS, Op: "read", Path: "/work/../etc/shadow"},
		{Kind: grant.KindEgress, Host: "api.example.com", Proto: "tcp", Port: 443},
		{Kind: grant.KindDevice, Class: "gpu", Mode: "brokered"},
		{Kind: grant.KindEnv, Name: "AWS_SECRET_ACCESS_KEY"},
	}
	for _, q := range queries {
		d := enf.Decide(q)
		outcome := "deny "
		if d.Allow {
			outcome = "allow"
		}
		fmt.Fprintf(w, "  %s  %-16s %s\n", outcome, d.Rule, d.Reason)
	}
	req := selection.Required(gs)
	fmt.Fprintf(w, "required tier: %s", req)
	host := selection.Host{Offers: sandbox.Offers()}
	if _, err := host.Select(gs); err != nil {
		fmt.Fprintf(w, " (this host offers %s: a run would be refused, never run unenforced)", tier.FormatList(host.Offers))
	} else {
		fmt.Fprintf(w, " (this host offers %s)", tier.FormatList(host.Offers))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)

	if err := demoSandbox(w); err != nil {
		return err
	}
	fmt.Fprintln(w)

	dir := *out
	if dir == "" {
		tmp, err := os.MkdirTemp("", "cordon-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "evidence")
	}
	key, err := stewardKey(*keyFile)
	if err != nil {
		return err
	}
	newKey := key == nil
	if newKey {
		if key, err = sign.Generate(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	if err := demoAgent(w, filepath.Join(dir, "agent"), *out != "", key); err != nil {
		return err
	}
	fmt.Fprintln(w)
	stopServer, err := demoServer(w, key, *serve)
	if err != nil {
		return err
	}
	if stopServer != nil {
		defer stopServer()
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "evidence of this synthetic run (%s):\n", dir)
	unit, _ := canon.Parse(sample("C1-002-unit-descriptor"))
	unitID, _ := unit.ID()
	if err := demoEvidence(e, dir, *out != "", key, newKey, gs, unitID, queries); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "conformance pack (embedded v1):")
	if err := runPack(e, conformance.V1(), "embedded v1 vectors", conformance.Options{}); err != nil || stopServer == nil {
		return err
	}
	fmt.Fprintf(w, "\nthe demo's control plane is serving the web console on http://%s/console/login (the keys are printed above); press Ctrl-C to stop it\n", *serve)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

// loopbackAddr reports whether addr is host:port with a loopback IP
// literal (or "localhost") as its host.
func loopbackAddr(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// demoJob is the command the demo runs in the sandbox: it counts the
// words of its one input into its one output, then tries to read host
// secrets and reach the network, which must fail.
const demoJob = `wc -w < notes.txt > out/count.txt
cat /etc/shadow 2>&1 | head -n 1
cat .env 2>&1 | head -n 1
python3 -c 'import socket; socket.create_connection(("127.0.0.1", 22), 1)' 2>&1 | tail -n 1`

// demoSandbox runs demoJob in cordon's sandbox on the embedded default
// grant set, when this host offers S2; otherwise it says why not.
func demoSandbox(w io.Writer) error {
	fmt.Fprintln(w, "a sandboxed run (S2, the embedded default grant set of 'cordon exec'):")
	gsBytes := defaultExecGrants
	if b, note, err := rootlessDefaultGrants(); err != nil {
		return err
	} else if b != nil {
		fmt.Fprintln(w, "  note: "+note)
		gsBytes = b
	}
	gs, err := grant.Parse(gsBytes)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "cordon-demo-sandbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ws, state := filepath.Join(tmp, "ws"), filepath.Join(tmp, "state")
	for _, d := range []string{ws, state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("the quick brown fox jumps over the lazy dog\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("API_KEY=never-staged\n"), 0o600); err != nil {
		return err
	}
	ctx := context.Background()
	s, err := session.Open(ctx, session.Config{Grants: gs, StateDir: state, Workspace: ws, Version: version})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Plan().Err; err != nil {
		fmt.Fprintf(w, "  refused    %v\n", err)
		return nil
	}
	var stdout strings.Builder
	out, err := s.Exec(ctx, session.Command{
		Argv: []string{"sh", "-c", demoJob}, Inputs: []string{"notes.txt"}, Outputs: []string{"out/count.txt"},
		Stdout: &stdout, Stderr: &stdout,
	})
	if err != nil {
		return fmt.Errorf("sandboxed run: %w", err)
	}
	res := out.Result
	if res.OutputsErr != nil {
		return fmt.Errorf("sandboxed run: outputs: %w", res.OutputsErr)
	}
	count, err := os.ReadFile(filepath.Join(ws, "out", "count.txt"))
	if err != nil {
		return fmt.Errorf("sandboxed run: %w", err)
	}
	fmt.Fprintf(w, "  ran        sh -c … as host uid %d: exit %d, cpu %.1f ms, peak memory %d KiB, wall %.1f ms\n",
		res.HostUID, res.ExitCode, float64(res.CPUNanos)/1e6, res.PeakMemoryBytes>>10, float64(res.Wall().Microseconds())/1e3)
	for _, f := range res.Outputs {
		fmt.Fprintf(w, "  output     %s = %q  %s\n", f.Path, strings.TrimSpace(string(count)), f.ID)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		fmt.Fprintf(w, "  refused    %s\n", line)
	}
	return nil
}
