package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// subverbs lists the sub-commands of the verbs that have them, in the
// order help prints them.
func subverbs(name string) []verb {
	switch name {
	case "canon":
		return []verb{
			{"jcs", "[--rfc8785-numbers] [FILE|-]", "write the RFC 8785 (JCS) bytes of a JSON document, with no newline", nil},
			{"cbor", "[--hex] [FILE|-]", "write the deterministic CBOR (RFC 8949 §4.2.1) of a JSON document", nil},
			{"id", "[--form jcs|cbor|raw] [FILE|-]", "print the ContentId (b3:…) of a document", nil},
		}
	case "grant":
		return []verb{
			{"check", "[--json] GRANTS.json QUERY.json", "decide one query and print the decision record; exit 0 allow, 1 deny", nil},
			{"covers", "PARENT.json CHILD.json", "check that CHILD only narrows PARENT", nil},
			{"id", "GRANTS.json", "validate a grant set and print its ContentId", nil},
			{"default", "", "print the built-in grant set 'cordon exec' uses without --grants", nil},
			{"policy", "--key ISSUER.pem POLICY.json", "check a standing grant's mint policy and sign it as its issuer", nil},
			{"mint", "--policy P.dsse --issuer ISSUER.pub --key HOLDER.pem [--child C.json] [--state DIR] EVENT.json", "mint a child grant set under a standing grant for an event; counted, journalled and signed", nil},
			{"preset", "[--host] go|c|rust|python|node", "print a grant set for a toolchain, to narrow", nil},
		}
	case "verify":
		return []verb{
			{"receipt", "--pubkey PEM [--journal FILE] [--json] FILE", "verify a signed receipt (JCR-1)", nil},
			{"attestation", "--pubkey PEM [--receipt FILE] [--journal FILE] [--json] FILE", "verify a signed attestation", nil},
			{"journal", "[--head ID | --signed-head FILE --pubkey PEM] [--json] FILE", "verify a journal's hash chain, optionally against a retained head", nil},
			{"record", "[--signed-head FILE --pubkey PEM] [--json] FILE", "verify a durable run record's chain from genesis, optionally against a signed head", nil},
			{"audit", "--pubkey PEM [--json] EXPORT", "verify an audit log export (masked or not) against the head the server signed", nil},
			{"run", "[--pubkey PEM] [--json] WORKSPACE", "verify an agent run's record, step by step", nil},
		}
	case "env":
		return []verb{
			{"ingest", "[--key FILE] [--out FILE] [--json] DEVCONTAINER.json", "write the cordon.env.v1 manifest of a devcontainer.json (signed with a key)", nil},
			{"verify", "[--pubkey PEM] [--json] MANIFEST", "check a manifest, or a signed one, and print its address", nil},
		}
	case "image":
		return []verb{
			{"unpack", "[--state DIR] [--json] REF", "verify an OCI layout (DIR or DIR@sha256:…) or docker save tarball and unpack it into STATE/images", nil},
		}
	case "pool":
		return []verb{
			{"serve", "[--grants FILE] [--size N] [--exec N] [--max-idle D] [--timeout D] [--tenant T] [--state DIR]", "keep N sandboxes prepared under the grant set, served on STATE/pool/pool.sock; with --exec, N warm processes that plain cordon exec commands are handed to (STATE/pool/exec.sock)", nil},
			{"status", "[--state DIR]", "print the resident pool's key, ready slots and idle-energy books (JSON)", nil},
			{"stop", "[--state DIR]", "evict every parked slot (its idle energy is overhead), stop the pool and print the final books", nil},
		}
	case "fleet":
		return []verb{
			{"run", "--out DIR [--jobs N] [--key KEY] [--state DIR] [--no-git] MANIFEST WORKSPACE…", "run MANIFEST with --apply in each workspace and seal a signed fleet record over their receipts", nil},
			{"verify", "--pubkey PEM [--proof PROOF] DIR|FLEET.dsse", "check a fleet directory (record, leaves, receipts), or one item's proof against the signed record", nil},
			{"prove", "--pubkey PEM DIR ITEM", "print the inclusion proof of one item", nil},
		}
	case "tenant":
		return []verb{
			{"create", "--ceiling GRANTS.json NAME", "create a tenant with its ceiling grant set", nil},
			{"list", "", "list the tenants", nil},
		}
	case "user":
		return []verb{
			{"create", "--tenant ID --role member|approver NAME", "add a user", nil},
		}
	case "audit":
		return []verb{
			{"export", "[--out FILE]", "the audit log as JSONL ending with its signed head: a tenant key's own records revealed, the admin key's all", nil},
		}
	case "key":
		return []verb{
			{"create", "--tenant ID [--user ID]", "issue a key (shown once, stored hashed)", nil},
			{"list", "--tenant ID", "list a tenant's keys", nil},
			{"revoke", "--tenant ID KEY-ID", "revoke a key", nil},
			{"rotate", "--tenant ID KEY-ID", "revoke a key and issue its replacement", nil},
		}
	case "secret":
		return []verb{
			{"set", "--tenant ID [--from-file FILE] NAME", "write or rotate a secret; the value comes from standard input or the file, never a flag", nil},
			{"rm", "--tenant ID NAME", "delete a secret", nil},
			{"ls", "--tenant ID", "list a tenant's secrets by name and time written (never values)", nil},
		}
	case "project":
		return []verb{
			{"put", "NAME PROJECT.json", "create or replace a project (tasks: manifest and files)", nil},
			{"get", "NAME", "print a project", nil},
			{"list", "", "list the tenant's projects", nil},
		}
	case "review":
		return []verb{
			{"show", "RUN", "print a finished run's change under review: risk tier, matched patterns, decisions", nil},
			{"accept", "[--reason TEXT] RUN", "accept a run's change as an approver (not its submitter); it is accepted once its tier's approvers have", nil},
			{"decline", "--reason TEXT RUN", "decline a run's change as an approver", nil},
			{"policy", "[POLICY.json]", "print the risk policy, or set it (admin key; an explicit operator action)", nil},
		}
	case "journal":
		return []verb{
			{"repair", "FILE", "remove a torn last line left by a crash", nil},
		}
	}
	return nil
}

// keyEnvHelp explains where a steward key comes from; verbs that sign
// print it under their flags.
const keyEnvHelp = `environment:
  CORDON_KEY       the steward's private key itself: the PEM text that
                   'cordon keygen --out FILE' writes to FILE
  CORDON_KEY_FILE  the path of a file holding that PEM text
  --key FILE wins over both; setting both variables is an error.`

// verbNotes is text printed after a verb's flags.
func verbNotes(name string) string {
	switch name {
	case "exec", "demo":
		return keyEnvHelp
	case "run":
		return keyEnvHelp + "\n  " + auditKeyEnv + ", when set, is used before them (PEM text)."
	case "tenant", "tenant create", "tenant list", "user", "user create", "key", "key create", "key list", "key revoke", "key rotate",
		"secret", "secret set", "secret rm", "secret ls",
		"project", "project put", "project get", "project list", "submit", "approve", "reject", "cancel", "runs", "logs",
		"review", "review show", "review accept", "review decline", "review policy", "audit", "audit export":
		return clientEnvNotes
	}
	return ""
}

// findVerb returns the verb or sub-verb named by a flag set's name, such
// as "tier" or "canon jcs".
func findVerb(name string) (verb, bool) {
	top, sub, hasSub := strings.Cut(name, " ")
	for _, v := range verbs() {
		if v.name != top {
			continue
		}
		if !hasSub {
			return v, true
		}
		for _, s := range subverbs(top) {
			if s.name == sub {
				s.name = name
				return s, true
			}
		}
	}
	return verb{}, false
}

// isHelpArg reports whether arg asks for help.
func isHelpArg(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}

// printVerbHelp prints the usage of a verb or sub-verb, its flags (if fs
// is not nil) and its sub-verbs, to w.
func printVerbHelp(w io.Writer, name string, fs *flag.FlagSet) {
	v, ok := findVerb(name)
	if !ok {
		v = verb{name: name, args: "[flags]"}
	}
	fmt.Fprintf(w, "usage: cordon %s", v.name)
	if v.args != "" {
		fmt.Fprintf(w, " %s", v.args)
	}
	fmt.Fprintln(w)
	if v.summary != "" {
		fmt.Fprintf(w, "\n%s\n", v.summary)
	}
	if subs := subverbs(name); len(subs) > 0 {
		fmt.Fprintf(w, "\nsubcommands:\n")
		for _, s := range subs {
			fmt.Fprintf(w, "  %-12s %s\n", s.name, s.summary)
		}
		fmt.Fprintf(w, "\nrun 'cordon %s SUBCOMMAND --help' for its flags\n", name)
	}
	if fs != nil {
		fmt.Fprintf(w, "\nflags:\n")
		printFlags(w, fs)
	}
	if notes := verbNotes(name); notes != "" {
		fmt.Fprintf(w, "\n%s\n", notes)
	}
}

// printFlags writes a flag set's flags as the README writes them:
// "--name VALUE", then the usage indented below, then "-h, --help".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if _, ok := f.Value.(durationFlag); ok && arg == "value" {
			arg = "duration"
		}
		switch arg {
		case "":
		case "string", "value":
			arg = " VALUE"
		case "int", "uint", "int64", "uint64":
			arg = " N"
		default:
			arg = " " + strings.ToUpper(arg)
		}
		fmt.Fprintf(w, "  --%s%s\n", f.Name, arg)
		if !isZeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "        %s\n", strings.ReplaceAll(usage, "\n", "\n        "))
	})
	fmt.Fprintf(w, "  -h, --help\n        print this help\n")
}

// isZeroDefault reports whether a flag's default is a zero value, which
// help does not print.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// runHelp is 'cordon help [VERB [SUB]]': the verb's help, as --help
// prints it.
func runHelp(e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || isHelpArg(args[0]) {
		usage(e.stdout)
		return 0
	}
	if _, ok := findVerb(args[0]); !ok {
		return report(e.stderr, &usageError{msg: fmt.Sprintf("help: unknown command %q", args[0]), hint: "run 'cordon help' for the list of commands"})
	}
	return run(append(append([]string{}, args...), "--help"), e.stdin, e.stdout, e.stderr)
}
