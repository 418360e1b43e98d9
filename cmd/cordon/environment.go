package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordon-dev/cordon/environment"
	"github.com/cordon-dev/cordon/evidence/canon"
)

// runEnv handles environment manifests: 'cordon env ingest' turns a
// devcontainer.json into a cordon.env.v1 manifest, 'cordon env verify'
// checks one.
func runEnv(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "env: missing subcommand", hint: "use 'cordon env ingest' or 'cordon env verify'"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "ingest":
		return envIngest(e, args)
	case "verify":
		return envVerify(e, args)
	default:
		return &usageError{msg: fmt.Sprintf("env: unknown subcommand %q", sub), hint: "use ingest or verify"}
	}
}

// envIngest reads a devcontainer.json and writes its manifest, or, with a
// steward key, the manifest signed in a DSSE envelope: to --out FILE, or
// to standard output. Nothing is written when the input is refused.
func envIngest(e *env, args []string) error {
	fs := flag.NewFlagSet("env ingest", flag.ContinueOnError)
	keyFile := fs.String("key", "", "sign the manifest with this steward key (PEM); also $CORDON_KEY or $CORDON_KEY_FILE")
	out := fs.String("out", "", "write the manifest (or the signed envelope) to `FILE` instead of standard output")
	asJSON := fs.Bool("json", false, "print a JSON summary on standard output (needs --out)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("env ingest", pos, "DEVCONTAINER.json"); err != nil {
		return err
	}
	if *asJSON && *out == "" {
		return &usageError{msg: "env ingest: --json needs --out FILE", hint: "without --out, standard output carries the manifest itself"}
	}
	name, data, err := readInput(e, pos[0])
	if err != nil {
		return err
	}
	m, err := environment.Ingest(data)
	if err != nil {
		return envRefused(name, err)
	}
	key, err := stewardKey(*keyFile)
	if err != nil {
		return err
	}
	doc := m.JCS()
	keyID := ""
	if key != nil {
		doc = m.Seal(key)
		keyID = key.Public().ID().String()
	}
	if *out == "" {
		if _, err := e.stdout.Write(doc); err != nil {
			return err
		}
	} else if err := writeAtomic(*out, doc); err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e, map[string]any{"id": m.ID().String(), "image": m.Image, "signed": key != nil, "keyid": keyID, "file": *out})
	}
	signed := "unsigned"
	if key != nil {
		signed = "signed by key " + keyID
	}
	fmt.Fprintf(e.stderr, "cordon: env %s (image %s), %s\n", m.ID(), m.Image, signed)
	return nil
}

// envVerify checks a manifest, or a signed one against --pubkey, and
// prints its address.
func envVerify(e *env, args []string) error {
	fs := flag.NewFlagSet("env verify", flag.ContinueOnError)
	pubFile := fs.String("pubkey", "", "the steward's public key (PEM); required for a signed manifest")
	asJSON := fs.Bool("json", false, "print one JSON object for machines")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("env verify", pos, "MANIFEST"); err != nil {
		return err
	}
	name, data, err := readInput(e, pos[0])
	if err != nil {
		return err
	}
	var m *environment.Manifest
	signed := isEnvelope(data)
	switch {
	case signed:
		pub, err := loadPublic(e, *pubFile)
		if err != nil {
			return err
		}
		if m, err = environment.Open(data, pub); err != nil {
			return envRefused(name, err)
		}
	case *pubFile != "":
		return withHint(fmt.Errorf("%s: the manifest is not signed, so --pubkey cannot be checked", name),
			"sign it with 'cordon env ingest --key KEY', or verify it without --pubkey")
	default:
		if m, err = environment.Parse(data); err != nil {
			return envRefused(name, err)
		}
	}
	if *asJSON {
		return writeJSON(e, map[string]any{"file": name, "valid": true, "id": m.ID().String(), "image": m.Image, "signed": signed})
	}
	state := "unsigned"
	if signed {
		state = "signature valid"
	}
	_, err = fmt.Fprintf(e.stdout, "ok: env %s (image %s), %s\n", m.ID(), m.Image, state)
	return err
}

// isEnvelope tells a DSSE envelope from a bare manifest by its members.
func isEnvelope(data []byte) bool {
	v, err := canon.Parse(data)
	if err != nil {
		return false
	}
	_, ok := v.Get("payloadType")
	return ok
}

func envRefused(name string, err error) error {
	switch {
	case errors.Is(err, environment.ErrRefused):
		return withHint(fmt.Errorf("%s: %w", name, err), "cordon runs nothing a devcontainer declares and never widens the sandbox for it; docs/environments.md lists each member")
	}
	return refused(name, err)
}

// writeAtomic writes data to path through a temporary file in the same
// directory, so a reader never sees half a manifest.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".cordon-env-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
