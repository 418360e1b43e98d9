package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/amend"
	"github.com/cordon-dev/cordon/internal/flock"
	"github.com/cordon-dev/cordon/internal/nofollow"
)

// budgetFlags collects --budget NAME=N.
type budgetFlags amend.Budgets

func (b budgetFlags) String() string { return "" }

func (b budgetFlags) Set(s string) error {
	name, v, ok := strings.Cut(s, "=")
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil || n < 0 {
		return fmt.Errorf("want NAME=N with N ≥ 0, got %q", s)
	}
	if _, dup := b[name]; dup {
		return fmt.Errorf("%s given twice", name)
	}
	b[name] = n
	return nil
}

// runAmend writes the next signed amendment of the live run in a
// workspace: a grant set (and budgets) that only tighten the authority in
// force. The runner applies it at its next turn boundary, or at once
// while a command runs, and checks it again.
func runAmend(e *env, args []string) error {
	fs := flag.NewFlagSet("amend", flag.ContinueOnError)
	keyFile := fs.String("key", "", "the issuer's steward key (PEM): the run's issuer (cordon run --key, or --issuer)")
	grantsFile := fs.String("grants", "", "the new grant set: covered by the one in force (default: the one in force, to lower budgets only)")
	budgets := budgetFlags{}
	fs.Var(budgets, "budget", "lower a budget: NAME=N, NAME one of "+strings.Join(amend.BudgetNames, ", ")+" (repeatable)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	ws, err := oneArg(pos)
	if err != nil {
		return err
	}
	if *keyFile == "" || (*grantsFile == "" && len(budgets) == 0) {
		return &usageError{msg: "amend: --key and --grants (or --budget) are required", hint: "cordon amend WORKSPACE --key ISSUER.pem --grants NEW.json [--budget max_turns=5]"}
	}
	k, err := sign.LoadPrivate(*keyFile)
	if err != nil {
		return err
	}
	state := filepath.Join(ws, runner.StateDir)
	live, err := liveRun(state)
	if err != nil {
		return err
	}
	cur, err := grant.Parse(live.Grants)
	if err != nil {
		return fmt.Errorf("amend: %s: grants: %w", runner.LiveFile, err)
	}
	base, baseBudgets := cur, live.Budgets
	dir := filepath.Join(state, runner.AmendDir, live.Run)
	// Amendments written but not yet applied: the next amends the last of
	// them (if that one is refused, so is this one, for its base).
	n := live.Next
	for ; ; n++ {
		b, err := nofollow.Read(filepath.Join(dir, strconv.FormatInt(n, 10)+".dsse"), 4<<20)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("amend: pending amendment %d: %w", n, err)
		}
		if a, err := pendingAmendment(b); err == nil {
			base, baseBudgets = a.Grants, cloneBudgets(baseBudgets)
			for name, v := range a.Budgets {
				baseBudgets[name] = v
			}
		}
	}
	next := base
	if *grantsFile != "" {
		if next, err = loadGrants(e, *grantsFile); err != nil {
			return err
		}
	}
	if err := grant.Covers(base, next); err != nil {
		return withHint(fmt.Errorf("amend: %s is wider than the grant set in force (%s): %w", *grantsFile, base.ID(), err),
			"an amendment only tightens: remove, never add")
	}
	for name, v := range budgets {
		have, ok := baseBudgets[name]
		if !ok {
			return usageErrorf("amend: unknown budget %q (budgets: %s)", name, strings.Join(amend.BudgetNames, ", "))
		}
		if v > have {
			return fmt.Errorf("amend: %w: %s %d is above the %d in force", amend.ErrBudget, name, v, have)
		}
	}
	lowers := false
	for name, v := range budgets {
		lowers = lowers || v < baseBudgets[name]
	}
	if next.ID() == base.ID() && !lowers {
		return fmt.Errorf("amend: %w: the grant set is the one in force (%s) and no budget is lowered", amend.ErrNoop, base.ID())
	}
	a := &amend.Amendment{Run: live.Run, Issuer: k.Public().ID(), Seq: n, Base: base.ID(), Grants: next}
	if len(budgets) > 0 {
		a.Budgets = amend.Budgets(budgets)
	}
	if live.Issuer != k.Public().ID().String() {
		fmt.Fprintf(e.stderr, "cordon: warning: --key is %s, but the run's issuer is %q: the runner will refuse this amendment\n", k.Public().ID(), live.Issuer)
	}
	env, err := amend.Seal(k, a)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, strconv.FormatInt(n, 10)+".dsse")
	if err := writeExclusive(name, env); err != nil {
		return fmt.Errorf("amend: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s\n", name)
	fmt.Fprintf(e.stderr, "cordon: amendment %d of run %s written: grants %s → %s; the run applies it at its next turn boundary (or at once while a command runs), and journals it or its refusal\n",
		n, live.Run, base.ID(), next.ID())
	return nil
}

// liveRun reads the live run's LiveFile, refusing a workspace where no
// run holds the lock.
func liveRun(state string) (*runner.Live, error) {
	return liveRunFor("amend", state, "start the run with 'cordon run --key ISSUER.pem' (or --issuer ISSUER.pub); amendments apply to a live run only")
}

// liveRunFor is liveRun for the verb named in its errors.
func liveRunFor(verb, state, hint string) (*runner.Live, error) {
	if f, err := os.OpenFile(filepath.Join(state, "lock"), os.O_RDWR|flock.NoFollow, 0); err == nil {
		lerr := flock.TryLock(f)
		f.Close() // releases the lock if it was taken
		if lerr == nil {
			return nil, withHint(fmt.Errorf(verb+": %s: no run is in progress in this workspace", state), hint)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		return nil, withHint(fmt.Errorf(verb+": %s: no run has used this workspace", state), hint)
	}
	b, err := nofollow.Read(filepath.Join(state, runner.LiveFile), 16<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, withHint(fmt.Errorf(verb+": %s: no run is in progress in this workspace", state), hint)
	}
	if err != nil {
		return nil, fmt.Errorf(verb+": %w", err)
	}
	var l runner.Live
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil || l.Type != runner.LiveType {
		return nil, fmt.Errorf(verb+": %s: not a %s document: %v", runner.LiveFile, runner.LiveType, err)
	}
	if err := amend.CheckRunID(l.Run); err != nil {
		return nil, fmt.Errorf(verb+": %s: %w", runner.LiveFile, err)
	}
	return &l, nil
}

// pendingAmendment reads an amendment's payload without verifying it:
// only to find the base the next one amends.
func pendingAmendment(envelope []byte) (*amend.Amendment, error) {
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, err
	}
	p, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, err
	}
	return amend.ParseAmendment(p)
}

func cloneBudgets(b amend.Budgets) amend.Budgets {
	c := amend.Budgets{}
	for k, v := range b {
		c[k] = v
	}
	return c
}

// writeExclusive writes data to name, which must not exist, so that a
// reader never sees it partly written: a temporary file linked into
// place.
func writeExclusive(name string, data []byte) error {
	tmp := fmt.Sprintf("%s.%s.tmp", name, canon.Sum(data).String()[3:15])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, name); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: another amendment was written at the same time; run cordon amend again", name)
		}
		return err
	}
	return nil
}
