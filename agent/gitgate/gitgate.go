// Package gitgate decides whether a git invocation requested by an agent may
// run. It is the gate behind a manifest that allows `git`.
//
// The threat is a model-controlled argv for a binary that can run other
// programs. git starts pagers, editors, diff and textconv drivers, gpg,
// transport helpers (--upload-pack, --receive-pack) and hooks, and it can
// be pointed at another repository, another configuration or another
// helper directory with a single flag. Check is an argv filter that narrows
// that surface to local, read-mostly subcommands:
//
//   - argv[0] must be exactly "git" (the runner resolves the binary itself);
//   - argv[1] must be one of [subcommands] spelled exactly: no abbreviation,
//     no alias, and no global option (anything starting with "-") before it;
//   - every later argument is checked the same way, wherever it stands
//     (before or after "--" or "--end-of-options", as an option or as an
//     option's separate value), against the tables [refusedLong] and
//     [refusedShort], against the path rule (no absolute path, no ".."
//     segment), against signature placeholders (%G) and against NUL, CR
//     and LF. Treating every argument as if it might be an option refuses
//     some harmless values (git commit -m "-c is fine") but never lets an
//     option through because it was mistaken for a value.
//
// Long options are matched the way git's parse-options matches them: a
// unique prefix of a long option name is accepted by git, so "--ext",
// "--open" and even "--op" must be refused like "--ext-diff" and
// "--open-files-in-pager". Check refuses "--x" when x is a prefix of a
// refused name (any length, not only 3 or more: git accepts any unique
// prefix) or when x starts with a refused name. Short options may be
// clustered ("-iO") or carry attached values ("-Oless"), so every byte of a
// single-dash argument is checked against the short table.
//
// What Check cannot see, and the runner must handle: the repository's own
// configuration and attributes are files the agent can write. Hooks,
// core.fsmonitor, filter drivers (clean/smudge run by git add and
// git status), textconv drivers (on by default for git diff, log and show),
// core.pager, core.editor, gpg.program, trailer commands and background
// auto-gc all run programs named there, whatever the argv. The gate is a
// narrowing, not a sandbox: git MUST run inside the run's sandbox, and the
// runner SHOULD pin what it can on the command line and in the environment
// (-c core.hooksPath=/dev/null, -c core.fsmonitor=false, -c gc.auto=0,
// -c maintenance.auto=false, -c gpg.program=false, GIT_CONFIG_NOSYSTEM=1,
// GIT_CONFIG_GLOBAL=/dev/null, a private HOME, GIT_EDITOR=true,
// GIT_PAGER=cat, GIT_TERMINAL_PROMPT=0, safe.bareRepository=explicit).
package gitgate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrRefused is wrapped by every error Check returns.
var ErrRefused = errors.New("git invocation refused")

// RefusalError says which argument of an argv was refused and why. It
// wraps ErrRefused.
type RefusalError struct {
	Arg    string // the refused argument, as given ("" when it is missing)
	Index  int    // its index in argv
	Reason string // why, for people
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("gitgate: git argv[%d] %q refused: %s", e.Index, e.Arg, e.Reason)
}

// Unwrap returns ErrRefused.
func (e *RefusalError) Unwrap() error { return ErrRefused }

// subcommands are the git subcommands an agent may run. Each works on the
// local repository only: none talks to a remote or runs a transport helper.
var subcommands = map[string]string{
	"init":     "creates a repository (its --template and --separate-git-dir are refused)",
	"add":      "stages files (interactive and patch modes are refused)",
	"commit":   "records the index (signing, editing and trailers are refused)",
	"cat-file": "reads objects (--textconv and --filters are refused)",
	"rev-parse": "resolves names; its --git-dir, --absolute-git-dir and " +
		"--git-common-dir are queries and allowed",
	"rev-list": "lists commits",
	"log":      "shows history (--output, --ext-diff, --textconv, --show-signature are refused)",
	"grep":     "searches (--open-files-in-pager/-O, --no-index, --ext-grep are refused)",
	"show":     "shows objects",
	"notes":    "manages notes; only the sub-subcommands in notesSubcommands",
	"gc":       "packs the repository (--auto is refused)",
	"status":   "shows the working tree state",
	"diff":     "compares trees (--no-index, --output, --ext-diff, --textconv are refused)",
}

// notesSubcommands are the `git notes` subcommands allowed. "edit" and
// "merge" are not: edit always starts an editor, and merge may stop for
// manual resolution. `git notes` alone lists notes.
var notesSubcommands = []string{"list", "show", "add", "append", "copy", "remove", "prune", "get-ref"}

// refusedLongOption is a long option refused after the subcommand.
type refusedLongOption struct {
	name string   // without the leading "--"
	only []string // subcommands it is refused for; nil means all
	why  string
}

// refusedLong is the table of long options refused after the subcommand.
// Matching is by prefix in both directions (see the package doc), so
// "--ext" matches "ext-diff" and "--exec-path" matches "exec". Negations
// ("--no-ext-diff", "--no-textconv", "--no-gpg-sign", "--no-verify",
// "--no-edit") match no entry and are allowed, except "--no-index", which
// is listed.
var refusedLong = []refusedLongOption{
	// Transport helpers: the value is a command line run by a shell. This
	// is the argument-injection class of git wrappers (e.g. CVE-2022-24433
	// in simple-git: a model or user supplied "--upload-pack=<cmd>").
	{"upload-pack", nil, "runs the named program as the transport helper"},
	{"receive-pack", nil, "runs the named program as the transport helper"},
	{"exec", nil, "runs a program (rebase --exec, archive --exec, push/fetch helper)"},

	// grep: opens the matching files with the named program.
	{"open-files-in-pager", nil, "runs a program on the matching files"},
	{"ext-grep", nil, "old option that ran an external grep"},

	// Diff drivers configured by diff.external / diff.<driver>.command /
	// diff.<driver>.textconv run programs; the agent can write the config.
	{"ext-diff", nil, "runs the configured external diff driver"},
	{"textconv", nil, "runs the configured textconv driver"},
	{"filters", nil, "runs the configured clean/smudge filter drivers (cat-file --filters)"},

	// Writing files outside the repository, or anywhere.
	{"output", nil, "writes its output to a file (diff/log/show --output=<file>); " +
		"also refuses --output-indicator-* as a side effect of prefix matching"},

	// Configuration, repository and helper location. These are global
	// options before the subcommand; after it they are listed so that a
	// subcommand that accepts any of them (now or in a later git) stays refused.
	// CVE-2022-24765 (safe.directory) showed that pointing git at a
	// repository the attacker controls means running its config.
	{"config", nil, "sets configuration, which names programs (core.pager, core.sshCommand, …)"},
	{"config-env", nil, "sets configuration from the environment"},
	{"git-dir", nil, "points git at another repository (allowed as a query for rev-parse)"},
	{"git-common-dir", nil, "points git at another repository (allowed as a query for rev-parse)"},
	{"work-tree", nil, "points git at another working tree"},
	{"exec-path", nil, "chooses the directory git runs its helper programs from"},
	{"namespace", nil, "changes the ref namespace"},
	{"super-prefix", nil, "internal option for submodule recursion"},
	{"pager", nil, "runs a pager"},
	{"paginate", nil, "runs a pager"},

	// init.
	{"template", nil, "copies a template directory, hooks included, into the repository " +
		"(commit --template starts an editor)"},
	{"separate-git-dir", nil, "puts the repository outside the working tree"},
	{"shared", []string{"init"}, "loosens file modes of the repository to group or world writable"},

	// Programs started by commit, add and log.
	{"gpg-sign", nil, "runs gpg.program to sign"},
	{"show-signature", nil, "runs gpg.program to verify signatures"},
	{"edit", nil, "starts an editor"},
	{"interactive", nil, "starts the interactive mode, which runs an editor and interactive.diffFilter"},
	{"patch", []string{"add", "commit"}, "starts the interactive patch mode (editor, interactive.diffFilter)"},
	{"trailer", nil, "runs the trailer.<key>.cmd configured for the trailer"},

	// Reading or searching outside the repository.
	{"no-index", nil, "diff and grep work on files outside the repository"},

	// gc --auto may detach a background process that outlives the run.
	{"auto", []string{"gc"}, "may detach a background gc that outlives the run"},
}

// refusedShortOption is a short option letter refused after the subcommand,
// alone ("-O"), clustered ("-iO") or with an attached value ("-Oless").
type refusedShortOption struct {
	letter byte
	only   []string // subcommands it is refused for; nil means all
	why    string
}

// refusedShort is the table of short options refused after the subcommand.
// Short options are case-sensitive: "-S" is refused for commit, where it
// signs, and allowed for log, where it is the pickaxe.
var refusedShort = []refusedShortOption{
	{'O', nil, "grep -O runs a program on the matching files; diff -O reads an order file"},
	{'c', nil, "refused in every position: commit -c and notes -c start an editor " +
		"(log/show -c, the combined diff, is refused with it)"},
	{'S', []string{"commit"}, "commit -S runs gpg.program to sign"},
	{'e', []string{"commit", "add", "notes"}, "starts an editor"},
	{'t', []string{"commit"}, "commit -t reads a template and starts an editor"},
	{'p', []string{"add", "commit"}, "starts the interactive patch mode"},
	{'i', []string{"add"}, "add -i starts the interactive mode"},
}

// exemptLong are long options allowed, spelled exactly, for one subcommand
// although refusedLong matches them. rev-parse does not use parse-options,
// so it accepts no abbreviation, and these options there only print a path.
var exemptLong = map[string][]string{
	"rev-parse": {"git-dir", "absolute-git-dir", "git-common-dir"},
}

// globalReasons explain some global options refused before the subcommand.
// Every argument starting with "-" in that position is refused; these only
// improve the message.
var globalReasons = map[string]string{
	"-c":                   "sets configuration, which names programs (core.pager, core.sshCommand, …)",
	"--config-env":         "sets configuration from the environment",
	"-C":                   "changes to another directory",
	"--exec-path":          "chooses the directory git runs its helper programs from",
	"--git-dir":            "points git at another repository (CVE-2022-24765 class)",
	"--work-tree":          "points git at another working tree",
	"--namespace":          "changes the ref namespace",
	"--super-prefix":       "internal option for submodule recursion",
	"--bare":               "treats the directory as a bare repository",
	"-p":                   "runs a pager",
	"--paginate":           "runs a pager",
	"-P":                   "changes pager behaviour",
	"--no-pager":           "changes pager behaviour",
	"--no-replace-objects": "changes how objects are read",
	"--literal-pathspecs":  "changes how pathspecs are read",
	"--glob-pathspecs":     "changes how pathspecs are read",
	"--noglob-pathspecs":   "changes how pathspecs are read",
	"--icase-pathspecs":    "changes how pathspecs are read",
	"--no-optional-locks":  "changes locking",
	"--list-cmds":          "internal listing option",
	"--attr-source":        "reads attributes, which name drivers, from another tree",
	"--html-path":          "prints a path",
	"--man-path":           "prints a path",
	"--info-path":          "prints a path",
	"--version":            "not a subcommand",
	"--help":               "runs a pager or a browser",
}

// Check returns nil if argv is an allowed git invocation, and otherwise a
// *RefusalError, which wraps ErrRefused, naming the first refused argument.
// argv is the full argument vector, argv[0] included. Check does no I/O.
func Check(argv []string) error {
	if len(argv) == 0 {
		return refuse("", 0, "empty argv")
	}
	for i, a := range argv {
		if strings.ContainsAny(a, "\x00\n\r") {
			return refuse(a, i, "contains NUL, CR or LF")
		}
	}
	if argv[0] != "git" {
		return refuse(argv[0], 0, `argv[0] must be exactly "git"; the runner resolves the binary`)
	}
	if len(argv) < 2 {
		return refuse("", 1, "no subcommand")
	}
	sub := argv[1]
	if strings.HasPrefix(sub, "-") {
		name, _, _ := strings.Cut(sub, "=")
		why := globalReasons[name]
		if why == "" {
			why = "unknown global option"
		}
		return refuse(sub, 1, "options before the subcommand are refused: "+why)
	}
	if _, ok := subcommands[sub]; !ok {
		return refuse(sub, 1, "subcommand not allowed (abbreviations and aliases are refused); allowed: "+
			strings.Join(allowedList(), ", "))
	}
	args := argv[2:]
	if sub == "notes" {
		if err := checkNotes(args); err != nil {
			return err
		}
	}
	for j, a := range args {
		if why := argProblem(sub, a); why != "" {
			return refuse(a, j+2, why)
		}
	}
	return nil
}

func refuse(arg string, i int, why string) error {
	return &RefusalError{Arg: arg, Index: i, Reason: why}
}

func allowedList() []string {
	var l []string
	for s := range subcommands {
		l = append(l, s)
	}
	slices.Sort(l)
	return l
}

// checkNotes requires the notes sub-subcommand, if any, to be in
// notesSubcommands. Only the attached "--ref=<ref>" may precede it: with a
// separate value ("--ref foo add") the value could not be told from the
// sub-subcommand without a full option table.
func checkNotes(args []string) error {
	for j, a := range args {
		if strings.HasPrefix(a, "--ref=") {
			continue
		}
		if slices.Contains(notesSubcommands, a) {
			return nil
		}
		return refuse(a, j+2, "git notes: expected --ref=<ref> or one of "+strings.Join(notesSubcommands, ", "))
	}
	return nil // git notes [--ref=<ref>] lists notes
}

// argProblem returns why the argument a of subcommand sub is refused, or "".
func argProblem(sub, a string) string {
	if why := formatProblem(a); why != "" {
		return why
	}
	switch {
	case a == "--" || a == "--end-of-options" || a == "-":
		return ""
	case strings.HasPrefix(a, "--"):
		name, value, hasValue := strings.Cut(a[2:], "=")
		if why := longProblem(sub, name); why != "" {
			return why
		}
		if hasValue {
			if why := pathProblem(value); why != "" {
				return "option value: " + why
			}
		}
		return ""
	case strings.HasPrefix(a, "-"):
		for k := 1; k < len(a); k++ {
			if why := shortProblem(sub, a[k]); why != "" {
				return why
			}
		}
		// The rest of a cluster may be an attached value ("-F/etc/passwd").
		for k := 2; k < len(a); k++ {
			if why := pathProblem(a[k:]); why != "" {
				return "attached value: " + why
			}
		}
		return ""
	default:
		return pathProblem(a)
	}
}

// longProblem returns why the long option --name is refused for sub, or "".
func longProblem(sub, name string) string {
	if name == "" || strings.HasPrefix(name, "-") || !isOptionName(name) {
		return "malformed long option name (letters, digits and - only)"
	}
	if slices.Contains(exemptLong[sub], name) {
		return ""
	}
	lower := strings.ToLower(name) // git is case-sensitive; folding only refuses more
	for _, o := range refusedLong {
		if o.only != nil && !slices.Contains(o.only, sub) {
			continue
		}
		if strings.HasPrefix(o.name, lower) || strings.HasPrefix(lower, o.name) {
			return fmt.Sprintf("--%s: %s", o.name, o.why)
		}
	}
	return ""
}

func isOptionName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// shortProblem returns why the short option letter c is refused for sub,
// or "".
func shortProblem(sub string, c byte) string {
	for _, o := range refusedShort {
		if o.letter == c && (o.only == nil || slices.Contains(o.only, sub)) {
			return fmt.Sprintf("-%c: %s", c, o.why)
		}
	}
	return ""
}

// formatProblem refuses the pretty-format placeholders %G… (with an
// optional +, - or space modifier): expanding them verifies the commit
// signature, which runs gpg.program. Other placeholders, %(…) included,
// run nothing. The check applies to every argument, so a commit message
// containing "%G" is refused too.
func formatProblem(a string) string {
	for i := 0; i < len(a); i++ {
		if a[i] != '%' {
			continue
		}
		j := i + 1
		if j < len(a) && (a[j] == '+' || a[j] == '-' || a[j] == ' ') {
			j++
		}
		if j < len(a) && a[j] == 'G' {
			return "%G placeholders verify signatures, which runs gpg.program"
		}
	}
	return ""
}

// pathProblem returns why s, read as a path or pathspec, may leave the
// repository, or "". Pathspec magic (":(top)", ":/", ":!") is stripped
// first and the rest checked: magic itself only narrows a pathspec.
// Absolute paths (/, \, a drive letter, ~) and ".." segments (split on /
// and \) are refused. The rule is syntactic: a symlink inside the working
// tree that points outside is not seen, and reading through it (commit -F)
// is bounded only by the sandbox.
func pathProblem(s string) string {
	p := stripMagic(s)
	if isAbs(p) {
		return "absolute or home-relative path"
	}
	for seg := range strings.FieldsFuncSeq(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return `path with a ".." segment`
		}
	}
	return ""
}

func stripMagic(s string) string {
	if strings.HasPrefix(s, ":(") {
		if i := strings.IndexByte(s, ')'); i >= 0 {
			return s[i+1:]
		}
		return s[2:]
	}
	if rest, ok := strings.CutPrefix(s, ":"); ok {
		rest = strings.TrimLeft(rest, "/!^")
		rest, _ = strings.CutPrefix(rest, ":")
		return rest
	}
	return s
}

func isAbs(p string) bool {
	if p == "" {
		return false
	}
	switch p[0] {
	case '/', '\\', '~':
		return true
	}
	if len(p) >= 2 && p[1] == ':' && ('a' <= p[0] && p[0] <= 'z' || 'A' <= p[0] && p[0] <= 'Z') {
		return true // C: or C:\ on Windows
	}
	return false
}
