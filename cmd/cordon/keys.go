package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// runKeygen writes a new Ed25519 private key (PKCS#8 PEM, mode 0600, never
// over an existing file) and prints its public key as PEM on standard
// output and its key id on standard error.
func runKeygen(e *env, args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	out := fs.String("out", "", "write the private key to `FILE` (required; never overwritten)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("keygen: unexpected argument %q", pos[0])
	}
	if *out == "" {
		return &usageError{msg: "keygen: --out FILE is required", hint: "cordon keygen --out steward.pem > steward.pub"}
	}
	k, err := sign.Generate()
	if err != nil {
		return err
	}
	if err := sign.WritePrivate(*out, k); err != nil {
		return withHint(err, "choose another --out; keep private keys outside workspaces and manifests")
	}
	e.stdout.Write(k.Public().MarshalPublic())
	fmt.Fprintf(e.stderr, "cordon: wrote %s; key id %s\n", *out, k.Public().ID())
	return nil
}

// runPubkey prints the public key of a private key file as PEM, and its
// key id on standard error.
func runPubkey(e *env, args []string) error {
	fs := flag.NewFlagSet("pubkey", flag.ContinueOnError)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("pubkey", pos, "KEY.pem"); err != nil {
		return err
	}
	k, err := sign.LoadPrivate(pos[0])
	if err != nil {
		return err
	}
	e.stdout.Write(k.Public().MarshalPublic())
	fmt.Fprintf(e.stderr, "cordon: key id %s\n", k.Public().ID())
	return nil
}

func loadPublic(e *env, path string) (sign.PublicKey, error) {
	if path == "" {
		return sign.PublicKey{}, &usageError{msg: "--pubkey PEM is required", hint: "the steward's public key, as 'cordon pubkey' prints it"}
	}
	name, data, err := readInput(e, path)
	if err != nil {
		return sign.PublicKey{}, err
	}
	pub, err := sign.ParsePublic(data)
	if err != nil {
		return sign.PublicKey{}, fmt.Errorf("%s: %w", name, err)
	}
	return pub, nil
}

// The environment variables a steward key may come from.
const (
	keyEnv     = "CORDON_KEY"      // the key itself: PKCS#8 PEM text, as 'cordon keygen' writes it
	keyFileEnv = "CORDON_KEY_FILE" // the path of a file holding that PEM text
)

// stewardKey loads the steward's private key from --key FILE, else from
// the PEM text in $CORDON_KEY, else from the file named by
// $CORDON_KEY_FILE (a variable unset or empty is not set); nil when none
// is given. Both variables set is an error: which one signs is never a
// guess. Keys never come from a manifest or a workspace.
func stewardKey(file string) (*sign.PrivateKey, error) {
	if file != "" {
		return sign.LoadPrivate(file)
	}
	text, path := os.Getenv(keyEnv), os.Getenv(keyFileEnv)
	switch {
	case text != "" && path != "":
		return nil, withHint(fmt.Errorf("both $%s and $%s are set", keyEnv, keyFileEnv),
			fmt.Sprintf("unset one: $%s holds the key's PEM text, $%s the path of a key file; --key FILE overrides both", keyEnv, keyFileEnv))
	case text != "":
		return sign.LoadPrivateEnv(keyEnv, text)
	case path != "":
		k, err := sign.LoadPrivate(path)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", keyFileEnv, err)
		}
		return k, nil
	}
	return nil, nil
}
