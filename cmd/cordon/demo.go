package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordon-dev/cordon/conformance"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/tier"
)

// runDemo is the main job on embedded defaults: it canonicalizes and
// addresses the sample evidence of the embedded conformance pack, shows
// what cordon refuses, decides sample requests against the sample grant
// set and works out its tier, then runs the whole pack.
func runDemo(e *env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	out := fs.String("out", "", "write the demo run's evidence (key, journal, receipt, attestation) to `DIR` and keep it")
	keyFile := fs.String("key", "", "sign with the steward key in `FILE` (default: $CORDON_KEY, else a new key)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("demo: unexpected argument %q", pos[0])
	}
	started := time.Now()
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
	var decisions []grant.Decision
	for _, q := range []grant.Query{
		{Kind: grant.KindFS, Op: "write", Path: "/work/out/report.xml"},
		{Kind: grant.KindFS, Op: "write", Path: "/usr/lib/python3/site.py"},
		{Kind: grant.KindFS, Op: "read", Path: "/work/../etc/shadow"},
		{Kind: grant.KindEgress, Host: "api.example.com", Proto: "tcp", Port: 443},
		{Kind: grant.KindDevice, Class: "gpu", Mode: "brokered"},
		{Kind: grant.KindEnv, Name: "AWS_SECRET_ACCESS_KEY"},
	} {
		d := enf.Decide(q)
		decisions = append(decisions, d)
		outcome := "deny "
		if d.Allow {
			outcome = "allow"
		}
		fmt.Fprintf(w, "  %s  %-16s %s\n", outcome, d.Rule, d.Reason)
	}
	req := tier.Required(gs)
	fmt.Fprintf(w, "required tier: %s", req)
	host := tier.Host{Offers: sandbox.Offers()}
	if _, err := host.Select(gs); err != nil {
		fmt.Fprintf(w, " (this host offers %s: a run would be refused, never run unenforced)", tier.FormatList(host.Offers))
	} else {
		fmt.Fprintf(w, " (this host offers %s)", tier.FormatList(host.Offers))
	}
	fmt.Fprintln(w)
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
	fmt.Fprintf(w, "evidence of this synthetic run (%s):\n", dir)
	unit, _ := canon.Parse(sample("C1-002-unit-descriptor"))
	unitID, _ := unit.ID()
	key, err := stewardKey(*keyFile)
	if err != nil {
		return err
	}
	if err := demoEvidence(e, dir, *out != "", key, gs, unitID, decisions, time.Since(started)); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "conformance pack (embedded v1):")
	return runPack(e, conformance.V1(), "embedded v1 vectors", conformance.Options{})
}
