package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/standing"
	"github.com/cordon-dev/cordon/grant/standing/mintdb"
)

// grantPolicy checks a mint policy and signs it with the issuer's key:
// the policy must name that key as its issuer.
func grantPolicy(e *env, args []string) error {
	fs := flag.NewFlagSet("grant policy", flag.ContinueOnError)
	keyFile := fs.String("key", "", "the issuer's steward key (PEM); the policy's issuer member must be its key id")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("grant policy", pos, "POLICY.json"); err != nil {
		return err
	}
	if *keyFile == "" {
		return &usageError{msg: "grant policy: --key ISSUER.pem is required", hint: "the issuer signs the policy it names itself in"}
	}
	k, err := sign.LoadPrivate(*keyFile)
	if err != nil {
		return err
	}
	name, data, err := readInput(e, pos[0])
	if err != nil {
		return err
	}
	p, err := standing.ParsePolicy(data)
	if err != nil {
		return withHint(fmt.Errorf("%s: %w", name, err), "a policy is read in canonical form: 'cordon canon jcs' writes it")
	}
	if p.Issuer != k.Public().ID() {
		return fmt.Errorf("%s: %w: the policy names issuer %s; --key is %s", name, standing.ErrSigner, p.Issuer, k.Public().ID())
	}
	if _, err := e.stdout.Write(sign.Seal(k, standing.PolicyPayloadType, p.JCS())); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "cordon: policy %s signed by issuer %s for holder %s\n", p.ID(), p.Issuer, p.Holder)
	return nil
}

// grantMint mints one child grant set under a signed policy for an
// event: decided, counted and recorded in the state directory's mint
// database in one transaction, journalled, and signed by the holder.
func grantMint(e *env, args []string) error {
	fs := flag.NewFlagSet("grant mint", flag.ContinueOnError)
	policyFile := fs.String("policy", "", "the signed mint policy (DSSE envelope), as 'cordon grant policy' writes it")
	issuerFile := fs.String("issuer", "", "the issuer's public key (PEM): the policy must be signed by it")
	keyFile := fs.String("key", "", "the holder's key (PEM): signs the child; the policy must name it as holder")
	childFile := fs.String("child", "", "a child grant set narrower than the policy's bounds (default: the bounds)")
	stateDir := fs.String("state", "", "the state directory holding standing/mints.db and standing/mints.jsonl (default: $CORDON_STATE, or /var/lib/cordon as root)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("grant mint", pos, "EVENT.json"); err != nil {
		return err
	}
	if *policyFile == "" || *keyFile == "" {
		return &usageError{msg: "grant mint: --policy and --key are required", hint: "cordon grant mint --policy P.dsse --issuer ISSUER.pub --key HOLDER.pem EVENT.json"}
	}
	issuer, err := loadPublic(e, *issuerFile)
	if err != nil {
		return err
	}
	holder, err := sign.LoadPrivate(*keyFile)
	if err != nil {
		return err
	}
	_, penv, err := readInput(e, *policyFile)
	if err != nil {
		return err
	}
	p, err := standing.OpenPolicy(penv, issuer)
	if err != nil {
		return fmt.Errorf("%s: %w", *policyFile, err)
	}
	ename, edata, err := readInput(e, pos[0])
	if err != nil {
		return err
	}
	ev, err := standing.ParseEvent(edata)
	if err != nil {
		return fmt.Errorf("%s: %w", ename, err)
	}
	var child *grant.Set
	if *childFile != "" {
		if child, err = loadGrants(e, *childFile); err != nil {
			return err
		}
	}
	state, err := execStateDir(*stateDir)
	if err != nil {
		return fmt.Errorf("grant mint: %w", err)
	}
	dir := filepath.Join(state, "standing")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	db, err := mintdb.Open(filepath.Join(dir, "mints.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, m, err := db.Mint(ctx, p, ev, child, time.Now(), func(m *standing.Minted) ([]byte, error) { return standing.Seal(p, m, holder) })
	if err != nil {
		var hint string
		switch {
		case errors.Is(err, standing.ErrRate), errors.Is(err, standing.ErrExhausted):
			hint = "the policy's rate or total is reached; the issuer can sign a new policy"
		case errors.Is(err, grant.ErrWidening):
			hint = "a child may only narrow the policy's bounds"
		}
		return withHint(fmt.Errorf("grant mint: %w", err), hint)
	}
	w, err := journal.Open(filepath.Join(dir, "mints.jsonl"))
	if err != nil {
		return fmt.Errorf("grant mint: the mint of child %d is committed but its journal cannot be opened: %w; the child is not handed out", m.Seq, err)
	}
	defer w.Close()
	body, err := entry.Encode(entry.Mint{Policy: m.Policy.String(), Event: m.Event.String(), EventID: ev.ID, Seq: m.Seq, AtMS: m.AtMS, Grants: m.Grants.ID().String()})
	if err == nil {
		_, err = w.Append("mint", body)
	}
	if err != nil {
		return fmt.Errorf("grant mint: the mint of child %d is committed but could not be journalled: %w; the child is not handed out", m.Seq, err)
	}
	if _, err := e.stdout.Write(env); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "cordon: minted child %d of policy %s for event %q: grants %s\n", m.Seq, m.Policy, ev.ID, m.Grants.ID())
	return nil
}
