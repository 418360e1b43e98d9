package main

import (
	"flag"
	"fmt"

	"github.com/cordon-dev/cordon/evidence/audit"
)

// verifyAudit checks an audit log export against the head the server
// signed: the chain, every revealed value, and where it ends.
func verifyAudit(e *env, args []string) error {
	fs := flag.NewFlagSet("verify audit", flag.ContinueOnError)
	pubFile := fs.String("pubkey", "", "the server's audit key (PEM public key)")
	asJSON := fs.Bool("json", false, "print one JSON object for machines")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("verify audit", pos, "EXPORT"); err != nil {
		return err
	}
	pub, err := loadPublic(e, *pubFile)
	if err != nil {
		return err
	}
	name, data, err := readInput(e, pos[0])
	if err != nil {
		return err
	}
	recs, err := audit.Verify(data, pub)
	if err != nil {
		if *asJSON {
			writeJSON(e, map[string]any{"file": name, "valid": false, "error": err.Error()})
			return errCheckFailed
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	masked, revealed := 0, 0
	for _, r := range recs {
		masked += r.Masked
		revealed += len(r.Revealed)
	}
	head := ""
	if len(recs) > 0 {
		head = recs[len(recs)-1].ID.String()
	}
	if *asJSON {
		return writeJSON(e, map[string]any{"file": name, "valid": true, "records": len(recs), "head": head, "revealed": revealed, "masked": masked})
	}
	_, err = fmt.Fprintf(e.stdout, "%s: valid audit export: %d records to head %s, as signed; %d values revealed, %d masked (fixed by the chain, not shown)\n", name, len(recs), head, revealed, masked)
	return err
}
