package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/runrecord"
)

// runVerify checks evidence offline: exit 0 valid, 1 invalid with the
// first reason.
func runVerify(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "verify: missing subcommand", hint: "use 'cordon verify receipt', 'cordon verify attestation', 'cordon verify journal', 'cordon verify record', 'cordon verify audit' or 'cordon verify run'"}
	}
	sub, args := args[0], args[1:]
	if sub == "run" {
		return verifyRun(e, args)
	}
	if sub == "audit" {
		return verifyAudit(e, args)
	}
	fs := flag.NewFlagSet("verify "+sub, flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object for machines")
	var pubkey, receiptFile, journalFile, head, signedHead *string
	switch sub {
	case "receipt":
		pubkey = fs.String("pubkey", "", "the steward's public key (PEM)")
		journalFile = fs.String("journal", "", "also check the run's journal: its head is the journal_root and every device class it used has a record")
	case "attestation":
		pubkey = fs.String("pubkey", "", "the steward's public key (PEM)")
		receiptFile = fs.String("receipt", "", "the receipt (JCR-1) the attestation must bind")
		journalFile = fs.String("journal", "", "the journal that must replay Consistent against the attested root")
	case "record":
		signedHead = fs.String("signed-head", "", "a signed record head (DSSE envelope): the record must end exactly there")
		pubkey = fs.String("pubkey", "", "the steward's public key (PEM), for --signed-head")
	case "journal":
		head = fs.String("head", "", "a retained head: the journal must still contain this entry id")
		signedHead = fs.String("signed-head", "", "a signed head (DSSE envelope): the journal must still hold its count and head")
		pubkey = fs.String("pubkey", "", "the steward's public key (PEM), for --signed-head")
	default:
		return &usageError{msg: fmt.Sprintf("verify: unknown subcommand %q", sub), hint: "use receipt, attestation, journal, record, audit or run"}
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("verify "+sub, pos, "FILE"); err != nil {
		return err
	}
	file := pos[0]
	result, err := verifyOne(e, sub, file, pubkey, receiptFile, journalFile, head, signedHead)
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	if *asJSON {
		out := map[string]any{"file": file, "kind": sub, "valid": err == nil}
		for k, v := range result {
			out[k] = v
		}
		if err != nil {
			out["error"] = err.Error()
		}
		if sub == "journal" {
			out["anchored"] = *head != "" || *signedHead != ""
		}
		if sub == "record" {
			out["anchored"] = *signedHead != ""
		}
		b, _ := json.Marshal(out)
		fmt.Fprintf(e.stdout, "%s\n", b)
		if err != nil {
			return errCheckFailed
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(e.stdout, "%s: valid %s", file, sub)
	for _, k := range []string{"id", "entries", "segments", "head", "state", "energy_uj", "idle_uj", "parks", "tier", "devices", "receipt"} {
		if v, ok := result[k]; ok {
			fmt.Fprintf(e.stdout, " %s=%v", k, v)
		}
	}
	fmt.Fprintln(e.stdout)
	if sub == "record" && *signedHead == "" {
		fmt.Fprintf(e.stdout, "%s: unanchored: the chain is intact from genesis, but a record cut short would pass too; pass --signed-head with the head the steward signed\n", file)
	}
	if sub == "journal" && *head == "" && *signedHead == "" {
		fmt.Fprintf(e.stdout, "%s: unanchored: the chain is intact, but a journal cut short or rewritten whole would pass too; pass --head or --signed-head with a head kept elsewhere\n", file)
	}
	return nil
}

func verifyOne(e *env, sub, file string, pubkey, receiptFile, journalFile, head, signedHead *string) (map[string]any, error) {
	_, data, err := readInput(e, file)
	if err != nil {
		return nil, err
	}
	switch sub {
	case "record":
		r, err := durable.Parse(data)
		if err != nil {
			return nil, err
		}
		h := r.Head()
		if *signedHead != "" {
			pub, err := loadPublic(e, *pubkey)
			if err != nil {
				return nil, err
			}
			_, env, err := readInput(e, *signedHead)
			if err != nil {
				return nil, err
			}
			signed, err := durable.OpenHead(env, pub)
			if err != nil {
				return nil, fmt.Errorf("--signed-head %s: %w", *signedHead, err)
			}
			if !bytes.Equal(signed, h.JCS()) {
				return nil, fmt.Errorf("%w: the record's head (%d segments, %s) is not the signed head %s: cut short, extended or rewritten", durable.ErrBroken, h.Count, h.Head, signed)
			}
		}
		return map[string]any{"segments": h.Count, "head": h.Head.String(), "state": h.State, "energy_uj": h.EnergyUJ, "idle_uj": h.IdleUJ, "parks": h.Parks}, nil
	case "journal":
		var want canon.ID
		if *head != "" {
			if want, err = canon.ParseID(*head); err != nil {
				return nil, &usageError{msg: fmt.Sprintf("--head: %v", err)}
			}
		}
		if *signedHead != "" {
			pub, err := loadPublic(e, *pubkey)
			if err != nil {
				return nil, err
			}
			_, env, err := readInput(e, *signedHead)
			if err != nil {
				return nil, err
			}
			sh, err := journal.OpenHead(env, pub)
			if err != nil {
				return nil, fmt.Errorf("--signed-head %s: %w", *signedHead, err)
			}
			if _, err := journal.VerifyAgainst(bytes.NewReader(data), sh); err != nil {
				return nil, err
			}
		}
		entries, h, err := journal.Scan(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		if *head != "" {
			found := false
			for _, en := range entries {
				found = found || en.ID() == want
			}
			if !found {
				return nil, fmt.Errorf("%w: the retained head %s is not in the journal (truncated or rewritten)", journal.ErrTruncated, want)
			}
		}
		return map[string]any{"entries": h.Count, "head": h.ID.String()}, nil
	case "receipt":
		pub, err := loadPublic(e, *pubkey)
		if err != nil {
			return nil, err
		}
		rc, id, err := receipt.Verify(data, pub)
		if err != nil {
			return nil, err
		}
		if *journalFile != "" {
			entries, err := loadJournal(e, *journalFile)
			if err != nil {
				return nil, err
			}
			if err := checkReceiptJournal(rc, entries); err != nil {
				return nil, err
			}
		}
		return map[string]any{"id": id.String(), "tier": rc.Tier, "devices": rc.Classes()}, nil
	case "attestation":
		pub, err := loadPublic(e, *pubkey)
		if err != nil {
			return nil, err
		}
		var opts attest.Options
		if *receiptFile != "" {
			_, rb, err := readInput(e, *receiptFile)
			if err != nil {
				return nil, err
			}
			rc, _, err := receipt.Verify(rb, pub)
			if err != nil {
				return nil, fmt.Errorf("--receipt %s: %w", *receiptFile, err)
			}
			opts.Receipt = rc
		}
		if *journalFile != "" {
			if opts.Journal, err = loadJournal(e, *journalFile); err != nil {
				return nil, err
			}
		}
		c, err := attest.Verify(data, pub, opts)
		if err != nil {
			return nil, err
		}
		return map[string]any{"receipt": c.Receipt, "tier": c.Tier, "devices": c.Devices}, nil
	}
	return nil, errors.New("unreachable")
}

func loadJournal(e *env, path string) ([]journal.Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, _, err := journal.Scan(f)
	if err != nil {
		return nil, fmt.Errorf("--journal %s: %w", path, err)
	}
	if entries == nil {
		entries = []journal.Entry{} // an empty journal is still a journal to check
	}
	return entries, nil
}

// checkReceiptJournal checks a receipt against its run's journal: the
// journal ends at the receipt's journal_root and every device class the
// run used has its own record.
func checkReceiptJournal(rc *receipt.Core, entries []journal.Entry) error {
	if rc.JournalRoot == "" {
		return fmt.Errorf("%w: a journal was given but the receipt has no journal_root", receipt.ErrInvalid)
	}
	if len(entries) == 0 || entries[len(entries)-1].ID().String() != rc.JournalRoot {
		return fmt.Errorf("%w: the journal does not end at the receipt's journal_root %s", journal.ErrTruncated, rc.JournalRoot)
	}
	if err := rc.CheckUsed(receipt.UsedClasses(entries)); err != nil {
		return err
	}
	return rc.CheckPoolIdle(entries)
}

func runJournal(e *env, args []string) error {
	if len(args) == 0 || args[0] != "repair" {
		return &usageError{msg: "journal: want 'cordon journal repair FILE'", hint: "to check a journal, 'cordon verify journal FILE'"}
	}
	pos, err := parseFlags(flag.NewFlagSet("journal repair", flag.ContinueOnError), args[1:])
	if err != nil {
		return err
	}
	if err := nArgs("journal repair", pos, "FILE"); err != nil {
		return err
	}
	h, err := journal.Repair(pos[0])
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s: %d entries, head %s\n", pos[0], h.Count, h.ID)
	return err
}

// verifyRunJSON prints 'cordon verify run --json': exit 1 when a check
// failed.
func verifyRunJSON(e *env, ws string, rep *runrecord.Report) error {
	type check struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	out := struct {
		Workspace string  `json:"workspace"`
		Valid     bool    `json:"valid"`
		Signed    bool    `json:"signed"`
		Trusted   bool    `json:"trusted"`
		Checks    []check `json:"checks"`
	}{Workspace: ws, Valid: !rep.Failed(), Checks: []check{}}
	out.Signed = rep.Result != nil && rep.Result.Signature != nil
	out.Trusted = out.Valid && out.Signed && rep.Trusted
	for _, c := range rep.Checks {
		out.Checks = append(out.Checks, check{c.Name, c.OK, c.Detail})
	}
	if err := writeJSON(e, out); err != nil {
		return err
	}
	if !out.Valid {
		return errCheckFailed
	}
	return nil
}
