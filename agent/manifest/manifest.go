// Package manifest implements the agent manifest v1 (cordon.manifest.v1)
// as specified in docs/SPEC.md §5: the strict, canonical, content-addressed
// document that fixes, for one agent run, the task, the model, the files the
// model may read and write, the commands it may run and under which grant
// set, an optional verify command, and the run's budgets.
//
// A Manifest is built only by Parse and never modified after that; its ID
// is the ContentId of the JCS form of the document as parsed. Covers
// decides whether a sub-task's manifest (spawn) only narrows its parent's.
//
// The package is pure: no I/O, no network, no environment.
package manifest

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/cordon-dev/cordon/agent/testreport"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/grant"
)

// Type is the value of a manifest's "type" member.
const Type = "cordon.manifest.v1"

// StateDir is the workspace's reserved state directory: no manifest path
// may name it or anything beneath it, and no tool may read or write it.
const StateDir = ".cordon"

// Limits of a manifest (docs/SPEC.md §5.1).
const (
	MaxTaskBytes  = 64 << 10 // task text
	MaxPathBytes  = 4096     // one workspace path
	MaxModelBytes = 256      // model name
	MaxURLBytes   = 2048     // base_url
	MaxEntries    = 1024     // inputs, outputs and commands, each
	MaxVerifyArgs = 256      // verify argv tokens
	MaxArgBytes   = 4096     // one verify token (and one argv token of the run tool)
	MaxBudget     = 1 << 40  // every budget
)

// ShellMetacharacters may appear in no verify token, as in no argv
// token of the run tool: nothing runs through a shell, so a token that
// looks as if it would is a mistake or an attack.
const ShellMetacharacters = "`$&|;<>()\\\"'*?[]{}~!#"

// Providers are the model providers a manifest may name.
var providers = []string{"anthropic", "openai", "replay"}

var (
	// ErrInvalid is wrapped by every error that refuses a manifest.
	ErrInvalid = errors.New("invalid manifest")
	// ErrWidening is wrapped by every error Covers returns.
	ErrWidening = errors.New("child manifest is not covered by its parent")
)

// Manifest is a parsed, validated agent manifest. Build one with Parse; a
// Manifest is never modified after that, and callers MUST NOT modify its
// fields or slices.
type Manifest struct {
	Task     string     // non-empty text, at most MaxTaskBytes, no NUL
	Provider string     // "anthropic", "openai" or "replay"
	Model    string     // the model name; non-empty
	BaseURL  string     // "" for the provider's default; never set for "replay"
	Replay   string     // the replay script's workspace path; set iff Provider is "replay"
	Inputs   []string   // workspace paths the model may read: files, or directories with everything beneath them
	Outputs  []string   // exact workspace file paths the model may write
	Commands []string   // command basenames the model may run
	Grants   *grant.Set // the grant set commands run under
	Verify   []string   // the verify argv, nil when absent; Verify[0] is in Commands
	// VerifyReport is what the verify command's test report must show,
	// nil when only its exit status counts; set only with Verify.
	VerifyReport *VerifyReport
	// Env is the address of the environment manifest (docs/SPEC.md §7)
	// the run must execute in; zero when the run uses the host's runtime.
	// The operator supplies that manifest and its image (cordon run --env
	// --image); one with another address is refused.
	Env     canon.ID
	Budgets Budgets

	id  canon.ID
	jcs []byte
}

// Budgets bound a run. Every budget is required: an absent budget is an
// error, never unlimited.
type Budgets struct {
	MaxTurns        int64 // model turns; ≥ 1
	MaxModelCalls   int64 // provider calls, retries included; ≥ 1
	MaxInputTokens  int64 // summed over the run; ≥ 1
	MaxOutputTokens int64 // summed over the run; ≥ 1
	WallMS          int64 // wall clock of the run, in ms; ≥ 1
	MaxLoops        int64 // loops the model may set up; ≥ 0, 0 means none
	MaxPendingTasks int64 // spawned sub-tasks pending at once; ≥ 0, 0 means the run may not spawn
}

// VerifyReport is a verify command's report requirement
// (docs/SPEC.md §5.4): the command must leave a report in Format, read
// from File or, when File is "", from its standard output, in which at
// least MinPassed tests passed and none failed.
type VerifyReport struct {
	Format    string // testreport.GoTestJSON, testreport.JUnit or testreport.TAP
	File      string // workspace path of the report; "" for standard output
	MinPassed int64  // ≥ 1
}

// From names where the report is read: "stdout" or the file's path.
func (v *VerifyReport) From() string {
	if v.File == "" {
		return "stdout"
	}
	return v.File
}

// budgetFields lists the budgets with their JSON names and minimums.
func (b *Budgets) fields() []budgetField {
	return []budgetField{
		{"max_turns", &b.MaxTurns, 1},
		{"max_model_calls", &b.MaxModelCalls, 1},
		{"max_input_tokens", &b.MaxInputTokens, 1},
		{"max_output_tokens", &b.MaxOutputTokens, 1},
		{"wall_ms", &b.WallMS, 1},
		{"max_loops", &b.MaxLoops, 0},
		{"max_pending_tasks", &b.MaxPendingTasks, 0},
	}
}

type budgetField struct {
	name string
	v    *int64
	min  int64
}

// ID returns the manifest's ContentId: BLAKE3 of its JCS form.
func (m *Manifest) ID() canon.ID { return m.id }

// JCS returns the canonical bytes of the manifest.
func (m *Manifest) JCS() []byte { return append([]byte(nil), m.jcs...) }

// Parse parses and validates a manifest (docs/SPEC.md §5). It refuses
// anything canon.Parse refuses (duplicate members included), unknown
// members at any level, a wrong "type", and every rule of §5.1 broken. The
// input need not be in JCS form; the ID is that of the canonical form, so
// two spellings of one document have one ID. Errors wrap ErrInvalid and
// name the JSON path of the offending member.
func Parse(data []byte) (*Manifest, error) {
	v, err := canon.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	m := &Manifest{}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	if typ, _ := o.Str("type", true); r.Err() == nil && typ != Type {
		r.Fail("type", "want %q, got %q", Type, typ)
	}

	m.Task, _ = o.Str("task", true)
	check(r, "task", checkTask(m.Task))

	if mo, ok := o.Object("model", true); ok {
		m.Provider, _ = mo.Str("provider", true)
		m.Model, _ = mo.Str("name", true)
		var hasURL, hasReplay bool
		m.BaseURL, hasURL = mo.Str("base_url", false)
		m.Replay, hasReplay = mo.Str("replay", false)
		mo.End()
		if r.Err() == nil && !contains(providers, m.Provider) {
			r.Fail(mo.Path("provider"), "want one of %q, got %q", providers, m.Provider)
		}
		check(r, mo.Path("name"), checkModel(m.Model))
		switch {
		case r.Err() != nil:
		case hasURL && m.Provider == "replay":
			r.Fail(mo.Path("base_url"), "the replay provider takes no base_url")
		case hasURL:
			check(r, mo.Path("base_url"), checkBaseURL(m.BaseURL))
		}
		switch {
		case r.Err() != nil:
		case m.Provider == "replay" && !hasReplay:
			r.Fail(mo.Path("replay"), "required member is missing (provider is \"replay\")")
		case m.Provider != "replay" && hasReplay:
			r.Fail(mo.Path("replay"), "only the replay provider takes a replay script")
		case hasReplay:
			check(r, mo.Path("replay"), CheckPath(m.Replay))
		}
	}

	m.Inputs = readPaths(r, o, "inputs")
	m.Outputs = readPaths(r, o, "outputs")
	for i, p := range m.Outputs {
		for _, q := range m.Outputs {
			if r.Err() == nil && p != q && under(q, p) {
				r.Fail(fmt.Sprintf("outputs[%d]", i), "%q lies beneath output %q: outputs are files", p, q)
			}
		}
	}

	m.Commands, _ = o.Strings("commands", true)
	if r.Err() == nil && len(m.Commands) > MaxEntries {
		r.Fail("commands", "%d entries, limit %d", len(m.Commands), MaxEntries)
	}
	for i, c := range m.Commands {
		check(r, fmt.Sprintf("commands[%d]", i), checkCommand(c))
	}
	checkDistinct(r, "commands", m.Commands)

	o.Use("grants")
	switch gv, ok := v.Get("grants"); {
	case r.Err() != nil:
	case !ok:
		r.Fail("grants", "required member is missing")
	default:
		g, err := grant.FromValue(gv)
		if err != nil {
			r.Fail("grants", "%v", err)
			break
		}
		m.Grants = g
		for i, c := range m.Commands {
			if r.Err() == nil && !grantsName(g, c) {
				r.Fail(fmt.Sprintf("commands[%d]", i), "command %q has no exec.allow rule with that name in grants", c)
			}
		}
	}

	if argv, ok := o.Strings("verify", false); ok {
		m.Verify = argv
		switch {
		case r.Err() != nil:
		case len(argv) == 0:
			r.Fail("verify", "an empty argv (omit verify for none)")
		case len(argv) > MaxVerifyArgs:
			r.Fail("verify", "%d tokens, limit %d", len(argv), MaxVerifyArgs)
		case !contains(m.Commands, argv[0]):
			r.Fail("verify[0]", "%q is not among commands", argv[0])
		}
		for i, a := range argv {
			if r.Err() == nil {
				if why := CheckArg(a); why != "" {
					r.Fail(fmt.Sprintf("verify[%d]", i), "%s", why)
				}
			}
		}
	}

	if vo, ok := o.Object("verify_report", false); ok {
		v := &VerifyReport{}
		m.VerifyReport = v
		v.Format, _ = vo.Str("format", true)
		v.MinPassed, _ = vo.Int("min_passed", true)
		var hasFile bool
		v.File, hasFile = vo.Str("file", false)
		vo.End()
		switch {
		case r.Err() != nil:
		case m.Verify == nil:
			r.Fail("verify_report", "a report requirement without a verify command")
		case !testreport.Known(v.Format):
			r.Fail(vo.Path("format"), "want one of %q, got %q", testreport.Formats, v.Format)
		case v.MinPassed < 1 || v.MinPassed > MaxBudget:
			r.Fail(vo.Path("min_passed"), "want 1 ≤ n ≤ 2^40, got %d (a report of no passing test proves nothing)", v.MinPassed)
		case hasFile:
			check(r, vo.Path("file"), checkReportFile(m, v.File))
		}
	}

	if e, ok := o.Str("env", false); ok && r.Err() == nil {
		id, err := canon.ParseID(e)
		if err != nil {
			r.Fail("env", "not the ContentId of an environment manifest: %v", err)
		}
		m.Env = id
	}

	if b, ok := o.Object("budgets", true); ok {
		for _, f := range m.Budgets.fields() {
			n, _ := b.Int(f.name, true)
			if r.Err() == nil && (n < f.min || n > MaxBudget) {
				r.Fail(b.Path(f.name), "want %d ≤ n ≤ 2^40, got %d", f.min, n)
			}
			*f.v = n
		}
		b.End()
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	m.jcs = v.AppendJCS(nil)
	m.id = canon.Sum(m.jcs)
	return m, nil
}

// checkReportFile accepts a report path that nothing but the verify
// command can put in the workspace: no tool writes it (it is not an
// output), no command copies it back (it is not an output) and no run
// stages it in (it is neither an input nor beneath one); nor may it lie
// above an input or output, or be the replay script. The runner also
// removes any file there before each verify run, so a report left by an
// earlier run or planted in the workspace never counts.
func checkReportFile(m *Manifest, p string) error {
	if err := CheckPath(p); err != nil {
		return err
	}
	for _, o := range m.Outputs {
		if under(o, p) || under(p, o) {
			return fmt.Errorf("%q is or contains output %q: the model could write the report; name a path only the verify command writes", p, o)
		}
	}
	for _, i := range m.Inputs {
		if under(i, p) || under(p, i) {
			return fmt.Errorf("%q is, contains or lies beneath input %q: a report must come from the verify run, not be staged into it", p, i)
		}
	}
	if m.Replay != "" && (under(m.Replay, p) || under(p, m.Replay)) {
		return fmt.Errorf("%q is the replay script's path", p)
	}
	return nil
}

// readPaths reads a required array of distinct workspace paths.
func readPaths(r *jsonv.Reader, o *jsonv.Obj, name string) []string {
	ps, _ := o.Strings(name, true)
	if r.Err() == nil && len(ps) > MaxEntries {
		r.Fail(name, "%d entries, limit %d", len(ps), MaxEntries)
	}
	for i, p := range ps {
		check(r, fmt.Sprintf("%s[%d]", name, i), CheckPath(p))
	}
	checkDistinct(r, name, ps)
	return ps
}

// grantsName reports whether g has an exec.allow rule naming cmd. This is
// a static consistency check, not a decision: the Enforcer still decides
// every execution (hash pins, args, denies) at run time.
func grantsName(g *grant.Set, cmd string) bool {
	for _, e := range g.Exec {
		if e.Name == cmd {
			return true
		}
	}
	return false
}

// CheckPath reports whether p is a canonical workspace-relative path that
// a manifest may name: 1 to MaxPathBytes bytes of UTF-8 in NFC, without
// control characters (C0, DEL, C1), noncharacters or '\'; not absolute;
// no empty, "." or ".." segment and no trailing '/' (path.Clean(p) == p);
// and not StateDir or beneath it. The first segment is compared with
// StateDir ignoring case and trailing dots and spaces, since some file
// systems alias those spellings. Nothing is normalized. The runner's tools
// use it for every path the model names.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case len(p) > MaxPathBytes:
		return fmt.Errorf("path of %d bytes, limit %d", len(p), MaxPathBytes)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not UTF-8", p)
	}
	for _, c := range p {
		switch {
		case c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0):
			return fmt.Errorf("path %q contains control character U+%04X", p, c)
		case isNoncharacter(c):
			return fmt.Errorf("path %q contains noncharacter U+%04X", p, c)
		case c == '\\':
			return fmt.Errorf("path %q contains '\\'", p)
		}
	}
	if !norm.NFC.IsNormalString(p) {
		return fmt.Errorf("path %q is not in Unicode NFC form", p)
	}
	if p[0] == '/' {
		return fmt.Errorf("path %q is absolute; want a workspace-relative path", p)
	}
	if path.Clean(p) != p || p == "." {
		return fmt.Errorf("path %q is not canonical (empty, \".\" or \"..\" segment, or trailing slash)", p)
	}
	first, _, _ := strings.Cut(p, "/")
	if first == ".." {
		return fmt.Errorf("path %q leaves the workspace", p)
	}
	if strings.EqualFold(strings.TrimRight(first, ". "), StateDir) {
		return fmt.Errorf("path %q is in the reserved state directory %s", p, StateDir)
	}
	return nil
}

// under reports whether p is root or lies beneath it, on segment
// boundaries. Both must have passed CheckPath.
func under(root, p string) bool {
	return p == root || strings.HasPrefix(p, root) && p[len(root)] == '/'
}

func isNoncharacter(c rune) bool {
	return c >= 0xfdd0 && c <= 0xfdef || c&0xfffe == 0xfffe
}

func checkTask(s string) error {
	switch {
	case s == "":
		return errors.New("empty task")
	case len(s) > MaxTaskBytes:
		return fmt.Errorf("task of %d bytes, limit %d", len(s), MaxTaskBytes)
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("task contains NUL")
	}
	return nil
}

func checkModel(s string) error {
	if s == "" || len(s) > MaxModelBytes {
		return fmt.Errorf("model name of %d bytes; want 1 to %d", len(s), MaxModelBytes)
	}
	for _, c := range s {
		if c <= 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("model name %q contains a space or control character", s)
		}
	}
	return nil
}

// checkBaseURL accepts an absolute http or https URL with a host and
// without user info, query or fragment, written as net/url writes it.
func checkBaseURL(s string) error {
	if len(s) > MaxURLBytes {
		return fmt.Errorf("base_url of %d bytes, limit %d", len(s), MaxURLBytes)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("base_url %q: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("base_url %q: want an http or https URL", s)
	case u.Host == "" || u.Opaque != "":
		return fmt.Errorf("base_url %q: want a host", s)
	case u.User != nil:
		return fmt.Errorf("base_url %q: user info is not allowed", s)
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "?"):
		return fmt.Errorf("base_url %q: a query is not allowed", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("base_url %q: a fragment is not allowed", s)
	case u.String() != s:
		return fmt.Errorf("base_url %q is not canonical (want %q)", s, u.String())
	}
	return nil
}

// checkCommand accepts a basename of 1 to 64 bytes of [A-Za-z0-9._+-],
// other than "." and "..".
func checkCommand(s string) error {
	if s == "" || len(s) > 64 || s == "." || s == ".." {
		return fmt.Errorf("command %q: want a basename of 1 to 64 bytes, not \".\" or \"..\"", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			return fmt.Errorf("command %q: byte %q is not in [A-Za-z0-9._+-]", s, c)
		}
	}
	return nil
}

func check(r *jsonv.Reader, path string, err error) {
	if err != nil {
		r.Fail(path, "%v", err)
	}
}

func checkDistinct(r *jsonv.Reader, path string, got []string) {
	seen := map[string]bool{}
	for i, g := range got {
		if seen[g] {
			r.Fail(fmt.Sprintf("%s[%d]", path, i), "duplicate %q", g)
		}
		seen[g] = true
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CheckArg says what is wrong with an argv token that a command would
// run with ("" if nothing): the runner applies it to every token of a run
// call, and Parse to the verify command, so a manifest never declares a
// verify command that could never run.
func CheckArg(a string) string {
	switch {
	case len(a) > MaxArgBytes:
		return fmt.Sprintf("longer than %d bytes", MaxArgBytes)
	case !utf8.ValidString(a):
		return "not valid UTF-8"
	case strings.IndexByte(a, 0) >= 0:
		return "argument contains NUL"
	case strings.ContainsAny(a, ShellMetacharacters):
		return fmt.Sprintf("%q holds a shell metacharacter (one of %s); nothing is run through a shell", a, ShellMetacharacters)
	case strings.IndexFunc(a, func(c rune) bool { return unicode.IsControl(c) || unicode.Is(unicode.Cf, c) }) >= 0:
		return "holds a control or format character"
	}
	return ""
}
