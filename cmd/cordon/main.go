// Command cordon is the command-line interface of cordon, a governed
// runtime for AI agents. Every verb is a thin call into a package; this
// file holds what they share: dispatch, flags, input and the error format.
//
// Exit status: 0 on success, 1 on a failed check or refused input, 2 on a
// usage error. Errors are one line, "cordon: error: …", optionally followed
// by one line "cordon: hint: …".
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	// Initialised before nearly every other package (it imports only
	// syscall): hands 'cordon exec' to a resident exec server.
	_ "github.com/cordon-dev/cordon/cmd/cordon/internal/handoff"
)

func main() {
	startPhases()
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	printPhases(os.Stderr)
	os.Exit(code)
}

// env is what a verb may touch: its streams. Verbs never call os.Exit.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// served is set in a warm process of a resident exec server, which
	// runs one caller's `cordon exec` (resident_linux.go).
	served *servedExec
}

type verb struct {
	name, args, summary string
	run                 func(e *env, args []string) error
}

func verbs() []verb {
	return []verb{
		{"demo", "", "canonicalize and address sample evidence, then run the conformance pack", runDemo},
		{"canon", "jcs|cbor|id [flags] [FILE|-]", "canonical forms and ContentIds of JSON documents", runCanon},
		{"grant", "check|covers|id|default|preset|policy|mint …", "decide, attenuate, address grant sets; presets; standing grants", runGrant},
		{"tier", "[--offers S0,…] [--json] GRANTS.json", "the isolation tier a grant set requires", runTier},
		{"exec", "[flags] -- PROGRAM [ARG…]", "run a command in the sandbox, with a receipt", runExec},
		{"run", "[flags] MANIFEST.json | --resume [flags] WORKSPACE", "run an agent: a model through granted tools, recorded; or resume a parked run", runRun},
		{"mail", "[--reply TEXT|-] WORKSPACE", "read an agent's messages, or reply to it", runMail},
		{"amend", "--key ISSUER.pem --grants NEW.json [--budget NAME=N] WORKSPACE", "tighten a live run's grants or budgets, as its issuer", runAmend},
		{"park", "WORKSPACE", "ask a live run to park at its next turn boundary (resume it with 'cordon run --resume')", runPark},
		{"keygen", "--out FILE", "make an Ed25519 steward key", runKeygen},
		{"pubkey", "KEY.pem", "print a key's public key and key id", runPubkey},
		{"verify", "receipt|attestation|journal|record|audit FILE…|run WS", "verify evidence offline", runVerify},
		{"journal", "repair FILE", "remove a torn last line left by a crash", runJournal},
		{"reap", "[--older-than D] [--dry-run] [--kill-frozen] [--state DIR] [--json]", "remove what dead sandbox runs left on the host", runReap},
		{"env", "ingest|verify [flags] FILE", "devcontainer.json to a signed environment manifest", runEnv},
		{"image", "unpack [--state DIR] [--json] REF", "verify an OCI image and unpack it into the cache", runImage},
		{"pool", "serve|status|stop [flags]", "keep warm sandboxes ready for 'cordon exec --pool'", runPool},
		{"freeze", "[--state DIR] [--json] RUN", "freeze a running 'cordon exec --record' command", runFreezeVerb("freeze")},
		{"thaw", "[--state DIR] [--json] RUN", "thaw a frozen 'cordon exec --record' command", runFreezeVerb("thaw")},
		{"fleet", "run|verify|prove [flags] …", "run one task over many workspaces; seal and prove a fleet record", runFleet},
		{"conformance", "[--vectors DIR] [--class C1,…]", "run the conformance vectors", runConformance},
		{"serve", "[--listen ADDR] [--database DSN]", "serve the control plane: tenants, projects, approval-gated runs", runServe},
		{"worker", "--database postgres://…", "execute the control plane's approved runs on this host", runWorker},
		{"tenant", "create|list", "manage tenants (admin key)", runTenant},
		{"user", "create --tenant ID --role R NAME", "add a user to a tenant (admin key)", runUser},
		{"key", "create|list|revoke|rotate", "manage a tenant's keys (admin key)", runKey},
		{"secret", "set|rm|ls", "manage a tenant's secrets in the credential broker (admin key)", runSecret},
		{"project", "put|get|list", "write or read a tenant's declarative projects", runProject},
		{"submit", "[--plan] PROJECT TASK", "submit a run of a project's task, pending approval", runSubmit},
		{"approve", "RUN", "approve another user's run: it executes", runDecision("approve")},
		{"reject", "RUN", "reject another user's run", runDecision("reject")},
		{"cancel", "RUN", "cancel a run, stopping it if it runs", runDecision("cancel")},
		{"review", "show|accept|decline|policy …", "review a finished run's change by its risk tier; the operator's risk policy", runReview},
		{"runs", "[RUN]", "list the tenant's runs, or show one", runRuns},
		{"logs", "[--evidence FILE] RUN", "print a run's journal, and save its evidence", runLogs},
		{"audit", "export [--out FILE]", "export the control plane's audit log, ending with its signed head", runAudit},
		{"completion", "bash|zsh|fish", "print a shell completion script", runCompletion},
		{"version", "[--json]", "print the version (also 'cordon --version')", runVersion},
		{"help", "[COMMAND [SUBCOMMAND]]", "print this help, or a command's", nil},
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch(&env{stdin: stdin, stdout: stdout, stderr: stderr}, args)
}

// dispatch runs the verb args name with e.
func dispatch(e *env, args []string) int {
	stdout, stderr := e.stdout, e.stderr
	if len(args) == 0 {
		usage(stderr)
		return report(stderr, usageErrorf("missing command"))
	}
	name := args[0]
	switch {
	case name == "help":
		return runHelp(e, args[1:])
	case isHelpArg(name):
		usage(stdout)
		return 0
	case name == "--version" || name == "-version":
		return report(stderr, runVersion(e, args[1:]))
	}
	for _, v := range verbs() {
		if v.name == name && v.run != nil {
			if len(args) > 1 && isHelpArg(args[1]) && subverbs(name) != nil {
				printVerbHelp(stdout, name, nil)
				return 0
			}
			err := v.run(e, args[1:])
			var hr *helpRequest
			if errors.As(err, &hr) {
				printVerbHelp(stdout, hr.fs.Name(), hr.fs)
				return 0
			}
			return report(stderr, err)
		}
	}
	return report(stderr, &usageError{msg: fmt.Sprintf("unknown command %q", name), hint: "run 'cordon help' for the list of commands"})
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cordon <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, v := range verbs() {
		fmt.Fprintf(w, "  %-12s %-36s %s\n", v.name, v.args, v.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "run 'cordon help COMMAND' or 'cordon COMMAND --help' for a command's flags")
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// hintError carries a hint line for the person at the terminal.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func withHint(err error, hint string) error {
	if err == nil || hint == "" {
		return err
	}
	return &hintError{err: err, hint: hint}
}

// errCheckFailed reports a failed check whose details were already printed.
var errCheckFailed = errors.New("check failed")

// report prints err in the one-line format and returns the exit status.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var es *exitStatus
	if errors.As(err, &es) {
		return es.code
	}
	status := 1
	var rf *refusal
	if errors.As(err, &rf) {
		status = rf.code
	}
	hint := ""
	var ue *usageError
	if errors.As(err, &ue) {
		status = 2
		hint = ue.hint
		if hint == "" {
			hint = "run 'cordon help' for usage"
		}
	}
	var he *hintError
	if errors.As(err, &he) {
		hint = he.hint
	}
	fmt.Fprintf(stderr, "cordon: error: %s\n", oneLine(err.Error()))
	if hint != "" {
		fmt.Fprintf(stderr, "cordon: hint: %s\n", oneLine(hint))
	}
	return status
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// helpRequest is -h or --help given to a verb: run prints the verb's
// usage and flags to stdout and exits 0.
type helpRequest struct{ fs *flag.FlagSet }

func (h *helpRequest) Error() string { return "help requested" }

// parseFlags parses flags that may appear before, between or after the
// positional arguments; "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{fs: fs}
			}
			return nil, flagError(fs, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagError is a flag package error as a usage error: flags written
// --name, and a "did you mean" moved to the hint line.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	for _, p := range []string{"for flag -", "not defined: -", "flag needs an argument: -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	hint := fmt.Sprintf("run 'cordon %s --help' for its flags", fs.Name())
	if m, suggestion, ok := strings.Cut(msg, "; did you mean "); ok {
		msg = m
		hint = "did you mean " + suggestion
		// invalid value "5" for flag --timeout: …: name the flag too.
		if _, rest, ok := strings.Cut(m, "for flag "); ok {
			if name, _, ok := strings.Cut(rest, ":"); ok {
				hint = "did you mean " + name + " " + suggestion
			}
		}
	}
	return &usageError{msg: msg, hint: hint}
}

// maxInput bounds what cordon reads from a file or standard input before
// canonicalizing; it equals the parser's own limit.
const maxInput = 32 << 20

// readInput reads the named file, or standard input for "" and "-", up
// to maxInput bytes. It returns the name to use in messages.
func readInput(e *env, arg string) (string, []byte, error) {
	name, r, closeFn, err := openInput(e, arg)
	if err != nil {
		return name, nil, err
	}
	defer closeFn()
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return name, nil, fmt.Errorf("%s: %w", name, err)
	}
	return name, data, nil
}

func openInput(e *env, arg string) (string, io.Reader, func(), error) {
	if arg == "" || arg == "-" {
		return "<stdin>", e.stdin, func() {}, nil
	}
	f, err := os.Open(arg)
	if err != nil {
		return arg, nil, nil, withHint(err, "check the path; use - to read standard input")
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return arg, nil, nil, fmt.Errorf("%s: is a directory", arg)
	}
	return arg, f, func() { f.Close() }, nil
}

// parseOneArg parses flags and returns the single optional positional
// argument.
func parseOneArg(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return "", err
	}
	return oneArg(pos)
}

// oneArg returns the single optional positional argument.
func oneArg(pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", nil
	case 1:
		return pos[0], nil
	}
	return "", usageErrorf("too many arguments: %q", pos[1:])
}
