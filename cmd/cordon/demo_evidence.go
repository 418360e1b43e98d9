package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordon-dev/cordon/energy"
	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
)

// demoEvidence writes the evidence of a synthetic run into dir: a steward
// key, the run's journal (the decisions the demo made), a signed journal
// head, a receipt sealed under the key and an attestation; a new key
// (newKey) is written there too. Nothing was
// executed: the attestation's host says "synthetic", and the energy record
// is the Estimator's, with the meters' unavailability reported.
func demoEvidence(e *env, dir string, keep bool, key *sign.PrivateKey, newKey bool, gs *grant.Set, unit canon.ID, decisions []grant.Decision, wall time.Duration) error {
	w := e.stdout
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	k := key
	if newKey {
		if err := sign.WritePrivate(filepath.Join(dir, "steward.pem"), k); err != nil {
			return err
		}
	}
	files := map[string][]byte{"steward.pub": k.Public().MarshalPublic()}

	jpath := filepath.Join(dir, "journal.jsonl")
	var last journal.Entry
	for _, d := range decisions {
		body, err := canon.Parse(d.Record())
		if err != nil {
			return err
		}
		if last, err = journal.Append(jpath, "decision", body); err != nil {
			return err
		}
	}
	files["head.json"] = journal.SignHead(k, journal.Head{Count: int64(len(decisions)), ID: last.ID()})

	// Energy: hardware meters where the host has them; here, say why not.
	for _, probe := range []func() error{
		func() error { _, err := energy.NewRAPL(""); return err },
		func() error {
			m, err := energy.NewNVML()
			if err == nil {
				m.Close()
			}
			return err
		},
	} {
		if err := probe(); err != nil {
			fmt.Fprintf(w, "  meter      %v\n", err)
		}
	}
	cpuNS := uint64(wall.Nanoseconds())
	est, err := energy.DefaultCoefficients.Estimate(cpuNS, cpuNS, 1)
	if err != nil {
		return err
	}
	end := uint64(time.Now().UnixNano())
	rc := &receipt.Core{
		Type: receipt.Type, Unit: unit.String(), Grants: gs.ID().String(), Tier: "S2",
		StartNS: end - cpuNS, EndNS: end, Exit: 0, Outputs: map[string]string{},
		Devices:     []receipt.Device{{Class: "cpu", Provenance: receipt.Estimator, EstimatedUJ: est, BusyNS: cpuNS}},
		JournalRoot: last.ID().String(),
	}
	rc.Finish()
	env, _, err := receipt.Seal(k, rc)
	if err != nil {
		return err
	}
	files["receipt.jcr"] = env
	att, err := attest.Sign(k, attest.For(rc, attest.Host{Kernel: "synthetic (cordon demo: nothing was executed)", Cordon: version, Tiers: []string{"S2"}}))
	if err != nil {
		return err
	}
	files["attestation.json"] = att
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}

	// Verify what was written, as a third party would.
	pub := k.Public()
	_, id, err := receipt.Verify(env, pub)
	if err != nil {
		return fmt.Errorf("demo receipt: %w", err)
	}
	if _, err := attest.Verify(att, pub, attest.Options{Receipt: rc}); err != nil {
		return fmt.Errorf("demo attestation: %w", err)
	}
	fmt.Fprintf(w, "  journal    %d decisions, head %s (signed head in head.json)\n", len(decisions), last.ID())
	fmt.Fprintf(w, "  receipt    %s: cpu %d µJ (Estimator), %d ns\n", id, est, cpuNS)
	fmt.Fprintf(w, "  attested   by steward key %s\n", pub.ID())
	if !keep {
		fmt.Fprintln(w, "  verify     the files are removed on exit; 'cordon demo --out DIR' keeps them for 'cordon verify'")
		return nil
	}
	fmt.Fprintf(w, "  verify     cordon verify attestation %s --pubkey %s --receipt %s --journal %s\n",
		filepath.Join(dir, "attestation.json"), filepath.Join(dir, "steward.pub"), filepath.Join(dir, "receipt.jcr"), jpath)
	return nil
}
