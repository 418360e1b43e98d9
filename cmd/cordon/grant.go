package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/exechash"
)

func runGrant(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "grant: missing subcommand", hint: "use 'cordon grant check', 'cordon grant covers', 'cordon grant id', 'cordon grant default', 'cordon grant preset', 'cordon grant policy' or 'cordon grant mint'"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "check":
		return grantCheck(e, args)
	case "covers":
		return grantCovers(e, args)
	case "id":
		return grantID(e, args)
	case "default":
		return grantDefault(e, args)
	case "policy":
		return grantPolicy(e, args)
	case "mint":
		return grantMint(e, args)
	case "preset":
		return grantPreset(e, args) // preset.go
	default:
		return &usageError{msg: fmt.Sprintf("grant: unknown subcommand %q", sub), hint: "use check, covers, id, default, preset, policy or mint"}
	}
}

func loadGrants(e *env, arg string) (*grant.Set, error) {
	name, data, err := readInput(e, arg)
	if err != nil {
		return nil, err
	}
	s, err := grant.Parse(data)
	if err != nil {
		return nil, refused(name, err)
	}
	return s, nil
}

func nArgs(verb string, args []string, names ...string) error {
	if len(args) != len(names) {
		return usageErrorf("%s: want %d arguments (%v), got %d", verb, len(names), names, len(args))
	}
	return nil
}

// grantCheck decides one query and prints the decision record; exit status
// 0 means allowed, 1 denied. With --json standard output holds only the
// record, and a denial's reason is left to it.
func grantCheck(e *env, args []string) error {
	fs := flag.NewFlagSet("grant check", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print only the decision record (JSON) and leave the reason of a denial to it; exit status 1 when denied")
	args, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("grant check", args, "GRANTS.json", "QUERY.json"); err != nil {
		return err
	}
	s, err := loadGrants(e, args[0])
	if err != nil {
		return err
	}
	name, data, err := readInput(e, args[1])
	if err != nil {
		return err
	}
	q, err := grant.ParseQuery(data)
	if err != nil {
		return refused(name, err)
	}
	if q.Kind == grant.KindExec && q.B3 == "" {
		// The enforcement point hashes the binary; the requester never
		// supplies the hash a decision rests on.
		id, err := exechash.New(1).Sum(q.Path)
		if err != nil {
			return withHint(fmt.Errorf("%s: exec query: %w", name, err), "an exec query names a file cordon can read, or carries its b3")
		}
		q.B3 = id.String()
	}
	d := grant.New(s).Decide(q)
	fmt.Fprintf(e.stdout, "%s\n", d.Record())
	if !d.Allow {
		if *asJSON {
			return errCheckFailed
		}
		return fmt.Errorf("denied by %s: %s", d.Rule, d.Reason)
	}
	return nil
}

// grantCovers checks that CHILD only narrows PARENT.
func grantCovers(e *env, args []string) error {
	args, err := parseFlags(flag.NewFlagSet("grant covers", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if err := nArgs("grant covers", args, "PARENT.json", "CHILD.json"); err != nil {
		return err
	}
	p, err := loadGrants(e, args[0])
	if err != nil {
		return err
	}
	c, err := loadGrants(e, args[1])
	if err != nil {
		return err
	}
	if err := grant.Covers(p, c); err != nil {
		var we *grant.WideningError
		if errors.As(err, &we) {
			return withHint(fmt.Errorf("%s widens %s: %w", args[1], args[0], err), "a child grant set may only narrow its parent: remove or narrow "+we.Rule)
		}
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s covers %s\n", args[0], args[1])
	return err
}

func grantID(e *env, args []string) error {
	args, err := parseFlags(flag.NewFlagSet("grant id", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if err := nArgs("grant id", args, "GRANTS.json"); err != nil {
		return err
	}
	s, err := loadGrants(e, args[0])
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, s.ID())
	return err
}

// grantDefault prints the grant set 'cordon exec' uses without --grants,
// byte for byte as embedded; 'cordon grant id' of the output is its id.
func grantDefault(e *env, args []string) error {
	args, err := parseFlags(flag.NewFlagSet("grant default", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageErrorf("grant default: unexpected argument %q", args[0])
	}
	_, err = e.stdout.Write(defaultExecGrants)
	return err
}
