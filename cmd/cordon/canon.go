package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cordon-dev/cordon/evidence/canon"
)

func runCanon(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "canon: missing subcommand", hint: "use 'cordon canon jcs', 'cordon canon cbor' or 'cordon canon id'"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "jcs":
		return canonJCS(e, args)
	case "cbor":
		return canonCBOR(e, args)
	case "id":
		return canonID(e, args)
	default:
		return &usageError{msg: fmt.Sprintf("canon: unknown subcommand %q", sub), hint: "use jcs, cbor or id"}
	}
}

// canonJCS writes the RFC 8785 bytes of a JSON document, with no newline.
func canonJCS(e *env, args []string) error {
	fs := flag.NewFlagSet("canon jcs", flag.ContinueOnError)
	rfcNumbers := fs.Bool("rfc8785-numbers", false, "read numbers as IEEE-754 doubles as RFC 8785 does (rounds; never for cordon objects)")
	arg, err := parseOneArg(fs, args)
	if err != nil {
		return err
	}
	name, data, err := readInput(e, arg)
	if err != nil {
		return err
	}
	v, err := canon.Options{MaxSize: maxInput, RFC8785Numbers: *rfcNumbers}.Parse(data)
	if err != nil {
		return refused(name, err)
	}
	_, err = e.stdout.Write(v.AppendJCS(nil))
	return err
}

// canonCBOR writes the deterministic CBOR encoding of a JSON document.
func canonCBOR(e *env, args []string) error {
	fs := flag.NewFlagSet("canon cbor", flag.ContinueOnError)
	asHex := fs.Bool("hex", false, "write lower-case hex and a newline instead of binary")
	arg, err := parseOneArg(fs, args)
	if err != nil {
		return err
	}
	if !*asHex && isTerminal(e.stdout) {
		return &usageError{msg: "canon cbor: refusing to write binary CBOR to a terminal", hint: "pass --hex, or redirect standard output to a file"}
	}
	name, data, err := readInput(e, arg)
	if err != nil {
		return err
	}
	out, err := canon.CBOR(data)
	if err != nil {
		return refused(name, err)
	}
	if *asHex {
		_, err = fmt.Fprintln(e.stdout, hex.EncodeToString(out))
		return err
	}
	_, err = e.stdout.Write(out)
	return err
}

// canonID prints the ContentId of a document in the chosen form.
func canonID(e *env, args []string) error {
	fs := flag.NewFlagSet("canon id", flag.ContinueOnError)
	form := fs.String("form", "jcs", "what to hash: jcs (the JCS bytes), cbor (the deterministic CBOR bytes) or raw (the bytes as they are)")
	arg, err := parseOneArg(fs, args)
	if err != nil {
		return err
	}
	var id canon.ID
	switch *form {
	case "raw":
		name, r, closeFn, err := openInput(e, arg)
		if err != nil {
			return err
		}
		defer closeFn()
		if id, err = canon.SumReader(r); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	case "jcs", "cbor":
		name, data, err := readInput(e, arg)
		if err != nil {
			return err
		}
		var b []byte
		if *form == "jcs" {
			b, err = canon.JCS(data)
		} else {
			b, err = canon.CBOR(data)
		}
		if err != nil {
			return refused(name, err)
		}
		id = canon.Sum(b)
	default:
		return &usageError{msg: fmt.Sprintf("canon id: unknown --form %q", *form), hint: "use --form jcs, cbor or raw"}
	}
	_, err = fmt.Fprintln(e.stdout, id)
	return err
}

// refused names the input in a canon error and adds a hint for the reason.
func refused(name string, err error) error {
	err = fmt.Errorf("%s: %w", name, err)
	switch {
	case errors.Is(err, canon.ErrFloat):
		return withHint(err, "cordon documents hold integers only: use integer units (µJ, ns, ms) or a string; for RFC 8785 test data, 'cordon canon jcs --rfc8785-numbers'")
	case errors.Is(err, canon.ErrIntegerRange):
		return withHint(err, "integers must lie within ±(2^53-1); write larger values as strings")
	case errors.Is(err, canon.ErrNegativeZero):
		return withHint(err, "write 0")
	case errors.Is(err, canon.ErrDuplicateKey):
		return withHint(err, "remove one of the members: which one a reader keeps is not defined")
	case errors.Is(err, canon.ErrBOM):
		return withHint(err, "save the file as UTF-8 without a byte order mark")
	case errors.Is(err, canon.ErrLoneSurrogate), errors.Is(err, canon.ErrInvalidUTF8), errors.Is(err, canon.ErrNoncharacter):
		return withHint(err, "strings must be valid UTF-8 of Unicode scalar values, without noncharacters")
	case errors.Is(err, canon.ErrTooLarge):
		return withHint(err, fmt.Sprintf("documents are limited to %d bytes", maxInput))
	case errors.Is(err, canon.ErrTooDeep):
		return withHint(err, fmt.Sprintf("arrays and objects may nest %d deep", canon.DefaultMaxDepth))
	}
	return err
}

// isTerminal reports whether w is a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
