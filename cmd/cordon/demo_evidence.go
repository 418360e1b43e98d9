package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/session"
)

// demoEvidence writes the evidence of a synthetic run into dir, through
// a session as every run's evidence is made: a steward key, the run's
// journal (the session's decisions on the queries, then how energy was
// metered), a signed journal head, a receipt sealed under the key and an
// attestation; a new key (newKey) is written there too. Nothing was
// executed: the attestation's host says "synthetic", and the energy
// record is a hardware meter's where the host has one, else the
// Estimator's, with the reason in the journal's meter entry.
func demoEvidence(e *env, dir string, keep bool, key *sign.PrivateKey, newKey bool, gs *grant.Set, unit canon.ID, queries []grant.Query) error {
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
	jw, err := journal.Open(jpath)
	if err != nil {
		return err
	}
	defer jw.Close()
	rec := session.NewRecorder(jw, nil)
	s, err := session.Open(context.Background(), session.Config{Grants: gs, Recorder: rec, Version: version})
	if err != nil {
		return err
	}
	defer s.Close()
	for _, q := range queries {
		if _, err := s.Decide(q); err != nil {
			return err
		}
	}
	sealed, err := s.Seal(k, session.SealInput{Unit: unit, Kernel: "synthetic (cordon demo: nothing was executed)"})
	if err != nil {
		return err
	}
	head := rec.Head()
	files["head.json"] = journal.SignHead(k, head)
	files["receipt.jcr"] = sealed.Receipt
	files["attestation.json"] = sealed.Attestation
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}

	// Verify what was written, as a third party would.
	pub := k.Public()
	if _, _, err := receipt.Verify(sealed.Receipt, pub); err != nil {
		return fmt.Errorf("demo receipt: %w", err)
	}
	if _, err := attest.Verify(sealed.Attestation, pub, attest.Options{Receipt: sealed.Core}); err != nil {
		return fmt.Errorf("demo attestation: %w", err)
	}
	fmt.Fprintf(w, "  journal    %d decisions, then how energy was metered; head %s (signed head in head.json)\n", len(queries), head.ID)
	for _, m := range sealed.Energy.Meters {
		if m.Reason != "" {
			fmt.Fprintf(w, "  meter      %s: %s\n", m.Class, m.Reason)
		}
	}
	for _, d := range sealed.Core.Devices {
		figure := fmt.Sprintf("%d µJ estimated", d.EstimatedUJ)
		if d.MeasuredUJ != nil {
			figure = fmt.Sprintf("%d µJ measured", *d.MeasuredUJ)
		}
		fmt.Fprintf(w, "  receipt    %s: %s %s (%s), %d ns busy\n", sealed.ID, d.Class, figure, d.Provenance, d.BusyNS)
	}
	fmt.Fprintf(w, "  attested   by steward key %s\n", pub.ID())
	if !keep {
		fmt.Fprintln(w, "  verify     the files are removed on exit; 'cordon demo --out DIR' keeps them for 'cordon verify'")
		return nil
	}
	fmt.Fprintf(w, "  verify     cordon verify attestation %s --pubkey %s --receipt %s --journal %s\n",
		filepath.Join(dir, "attestation.json"), filepath.Join(dir, "steward.pub"), filepath.Join(dir, "receipt.jcr"), jpath)
	return nil
}
