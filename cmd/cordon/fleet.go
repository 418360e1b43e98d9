package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/fleet"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/internal/nofollow"
)

// The files of a fleet directory (docs/SPEC.md §8.3).
const (
	fleetRecordFile = "fleet.dsse"   // the signed record
	fleetLeavesFile = "leaves.jsonl" // one leaf (JCS) per line, in order
	fleetReceipts   = "receipts"     // receipts/ITEM.jcr: each item run's receipt
)

func runFleet(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "fleet: missing subcommand", hint: "use 'cordon fleet run', 'cordon fleet verify' or 'cordon fleet prove'"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "run":
		return fleetRun(e, args)
	case "verify":
		return fleetVerify(e, args)
	case "prove":
		return fleetProve(e, args)
	default:
		return &usageError{msg: fmt.Sprintf("fleet: unknown subcommand %q", sub), hint: "use run, verify or prove"}
	}
}

// fleetRun runs one agent manifest in each workspace, up to --jobs at a
// time, and seals a fleet record over their receipts.
func fleetRun(e *env, args []string) error {
	fs := flag.NewFlagSet("fleet run", flag.ContinueOnError)
	out := fs.String("out", "", "the new directory the fleet record, leaves and receipts go to (required)")
	jobs := fs.Int("jobs", 2, "runs at a time")
	keyFile := fs.String("key", "", "the steward key that signs every item's receipt and the fleet record (default: $"+auditKeyEnv+", $CORDON_KEY or $CORDON_KEY_FILE)")
	stateDir := fs.String("state", "", "the sandbox's state directory (default: $CORDON_STATE, or /var/lib/cordon as root)")
	noGit := fs.Bool("no-git", false, "keep each item's memory in plain files")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usageErrorf("fleet run: want MANIFEST and at least one WORKSPACE")
	}
	if *out == "" {
		return &usageError{msg: "fleet run: --out DIR is required", hint: "a new directory for fleet.dsse, leaves.jsonl and receipts/"}
	}
	if *jobs < 1 || *jobs > 64 {
		return usageErrorf("fleet run: --jobs %d is outside 1…64", *jobs)
	}
	key, err := auditKey(*keyFile)
	if err != nil {
		return fmt.Errorf("fleet run: %w", err)
	}
	if key == nil {
		return withHint(errors.New("fleet run: a fleet record is signed: no steward key"), "pass --key KEY.pem (see 'cordon keygen'), or set $CORDON_KEY_FILE")
	}
	mb, err := readLimited(pos[0], maxManifestBytes)
	if err != nil {
		return fmt.Errorf("fleet run: manifest: %w", err)
	}
	m, err := manifest.Parse(mb)
	if err != nil {
		return withHint(fmt.Errorf("fleet run: %s: %w", pos[0], err), "the manifest format is docs/SPEC.md §5")
	}
	// Items are named by their workspace's base name, which must be
	// unique: the name is what a proof shows.
	var wss, names []string
	seen := map[string]string{}
	for _, w := range pos[1:] {
		abs, err := filepath.Abs(w)
		if err != nil {
			return err
		}
		name := filepath.Base(abs)
		if prev, ok := seen[name]; ok {
			return usageErrorf("fleet run: workspaces %s and %s have the same name %q; an item's name is its workspace's base name", prev, w, name)
		}
		seen[name] = w
		wss, names = append(wss, abs), append(names, name)
	}
	if err := os.Mkdir(*out, 0o755); err != nil {
		return withHint(fmt.Errorf("fleet run: --out: %w", err), "name a new directory; a fleet record is never written over")
	}
	if err := os.Mkdir(filepath.Join(*out, fleetReceipts), 0o755); err != nil {
		return err
	}
	state := ""
	if state, err = execStateDir(*stateDir); err != nil {
		return fmt.Errorf("fleet run: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	type result struct {
		status  string
		receipt []byte
		err     error
	}
	results := make([]result, len(wss))
	sem := make(chan struct{}, *jobs)
	var wg sync.WaitGroup
	for i := range wss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &results[i]
			p, err := newProvider(m, wss[i], "")
			if err != nil {
				r.err = err
				return
			}
			o, err := runner.Run(ctx, runner.Config{Workspace: wss[i], Manifest: m, Provider: p, Apply: true, Key: key,
				SandboxState: state, Memory: memory.Options{NoGit: *noGit}, Version: version})
			if err != nil {
				r.err = err
				return
			}
			r.status = o.Status
			r.receipt, r.err = nofollow.Read(filepath.Join(wss[i], runner.StateDir, runner.ReceiptFile), 1<<20)
		}()
	}
	wg.Wait()
	var leaves []fleet.Leaf
	for i, r := range results {
		if r.err != nil {
			return fmt.Errorf("fleet run: item %s (%s): %w; nothing was sealed", names[i], wss[i], r.err)
		}
		if err := os.WriteFile(filepath.Join(*out, fleetReceipts, names[i]+".jcr"), r.receipt, 0o644); err != nil {
			return err
		}
		leaves = append(leaves, fleet.Leaf{Index: uint64(i), Item: names[i], Receipt: canon.Sum(r.receipt)})
		fmt.Fprintf(e.stdout, "%s: %s\n", names[i], r.status)
	}
	t, err := fleet.Build(m.ID(), leaves)
	if err != nil {
		return fmt.Errorf("fleet run: %w", err)
	}
	var lines bytes.Buffer
	for _, l := range leaves {
		lines.Write(l.JCS())
		lines.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(*out, fleetLeavesFile), lines.Bytes(), 0o644); err != nil {
		return err
	}
	rec := t.Record()
	if err := os.WriteFile(filepath.Join(*out, fleetRecordFile), rec.Seal(key), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "fleet %s: %d items, root %x, signed by %s\n", rec.ID(), rec.Size, rec.Root, key.Public().ID())
	fmt.Fprintf(e.stdout, "verify: cordon fleet verify --pubkey KEY.pub %s\n", *out)
	return nil
}

// loadFleet reads a fleet directory: the signed record (checked against
// pub) and the leaves, rebuilt into the tree the record names.
func loadFleet(dir string, pub sign.PublicKey) (fleet.Record, *fleet.Tree, error) {
	env, err := nofollow.Read(filepath.Join(dir, fleetRecordFile), 1<<20)
	if err != nil {
		return fleet.Record{}, nil, err
	}
	rec, err := fleet.OpenRecord(env, pub)
	if err != nil {
		return fleet.Record{}, nil, fmt.Errorf("%s: %w", fleetRecordFile, err)
	}
	raw, err := nofollow.Read(filepath.Join(dir, fleetLeavesFile), 256<<20)
	if err != nil {
		return fleet.Record{}, nil, err
	}
	var leaves []fleet.Leaf
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l, err := fleet.ParseLeaf(sc.Bytes())
		if err != nil {
			return fleet.Record{}, nil, fmt.Errorf("%s:%d: %w", fleetLeavesFile, n, err)
		}
		leaves = append(leaves, l)
	}
	if err := sc.Err(); err != nil {
		return fleet.Record{}, nil, err
	}
	t, err := fleet.Build(rec.Task, leaves)
	if err != nil {
		return fleet.Record{}, nil, fmt.Errorf("%s: %w", fleetLeavesFile, err)
	}
	if got := t.Record(); got.ID() != rec.ID() {
		return fleet.Record{}, nil, fmt.Errorf("%w: %s does not rebuild the signed root (%d items, root %x; signed: %d items, root %x)",
			fleet.ErrNotIncluded, fleetLeavesFile, got.Size, got.Root, rec.Size, rec.Root)
	}
	return rec, t, nil
}

// fleetVerify checks a whole fleet directory (the signature, every leaf,
// every receipt's hash and signature), or with --proof one item's proof
// against the signed record alone.
func fleetVerify(e *env, args []string) error {
	fs := flag.NewFlagSet("fleet verify", flag.ContinueOnError)
	pubFile := fs.String("pubkey", "", "the steward's public key (PEM)")
	proofFile := fs.String("proof", "", "verify this item's proof against the signed record FLEET.dsse (no other file needed)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("fleet verify", pos, "DIR|FLEET.dsse"); err != nil {
		return err
	}
	pub, err := loadPublic(e, *pubFile)
	if err != nil {
		return err
	}
	if *proofFile != "" {
		env, err := nofollow.Read(pos[0], 1<<20)
		if err != nil {
			return err
		}
		rec, err := fleet.OpenRecord(env, pub)
		if err != nil {
			return fmt.Errorf("%s: %w", pos[0], err)
		}
		pb, err := nofollow.Read(*proofFile, 1<<20)
		if err != nil {
			return err
		}
		p, err := fleet.ParseProof(pb)
		if err != nil {
			return fmt.Errorf("%s: %w", *proofFile, err)
		}
		if err := fleet.Verify(rec, p); err != nil {
			return fmt.Errorf("%s: %w", *proofFile, err)
		}
		_, err = fmt.Fprintf(e.stdout, "ok: item %q (receipt %s) is item %d of fleet %s (%d items, %d proof hashes)\n",
			p.Leaf.Item, p.Leaf.Receipt, p.Leaf.Index, rec.ID(), rec.Size, len(p.Hashes))
		return err
	}
	dir := pos[0]
	rec, t, err := loadFleet(dir, pub)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	for _, l := range t.Leaves {
		name := filepath.Join(dir, fleetReceipts, l.Item+".jcr")
		b, err := nofollow.Read(name, 1<<20)
		if err != nil {
			return fmt.Errorf("item %s: %w", l.Item, err)
		}
		if got := canon.Sum(b); got != l.Receipt {
			return fmt.Errorf("item %s: %s hashes to %s, its leaf names %s", l.Item, name, got, l.Receipt)
		}
		if _, _, err := receipt.Verify(b, pub); err != nil {
			return fmt.Errorf("item %s: %s: %w", l.Item, name, err)
		}
	}
	_, err = fmt.Fprintf(e.stdout, "ok: fleet %s: %d items, root %x; every leaf rebuilds the signed root and every receipt verifies\n", rec.ID(), rec.Size, rec.Root)
	return err
}

// fleetProve writes the inclusion proof of one item.
func fleetProve(e *env, args []string) error {
	fs := flag.NewFlagSet("fleet prove", flag.ContinueOnError)
	pubFile := fs.String("pubkey", "", "the steward's public key (PEM): the record is checked before a proof is made")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("fleet prove", pos, "DIR", "ITEM"); err != nil {
		return err
	}
	pub, err := loadPublic(e, *pubFile)
	if err != nil {
		return err
	}
	_, t, err := loadFleet(pos[0], pub)
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	i, ok := t.Find(pos[1])
	if !ok {
		return fmt.Errorf("fleet prove: no item %q in %s", pos[1], pos[0])
	}
	p, err := t.Prove(i)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(p.JCS())
	return err
}
