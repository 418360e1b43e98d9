package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/agent/gitgate"
	"github.com/cordon-dev/cordon/agent/mailbox"
	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/internal/flock"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/session"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// Limits on tool calls.
const (
	MaxToolCalls       = 64                   // tool calls in one model response; a response with more ends the task
	MaxTurnResultBytes = 1 << 20              // tool result text in one turn; later calls in the turn are refused
	MaxArgs            = 256                  // argv tokens
	MaxArgBytes        = manifest.MaxArgBytes // bytes of one token
	maxCapture         = 64 << 10             // stdout or stderr kept from a command
	maxFeedback        = 16 << 10             // command output given back to the model
	maxToolInput       = 2<<20 + 1            // bytes of one tool call's input
	maxMailboxRead     = 64 << 10             // bytes of replies one mailbox read returns
)

// ShellMetacharacters are refused in every argv token of a run call
// (manifest.CheckArg).
const ShellMetacharacters = manifest.ShellMetacharacters

// gitPrefix disables, for every git the model runs, what git's own
// configuration could make it execute or show through a pager. The
// sandbox's exec control refuses anything else it would start.
var gitPrefix = []string{
	"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
	"-c", "core.editor=false", "-c", "core.sshCommand=false", "-c", "diff.external=",
	"-c", "credential.helper=", "-c", "protocol.allow=never", "-c", "commit.gpgsign=false",
	"-c", "tag.gpgsign=false", "--no-pager",
}

func tools() []provider.Tool {
	return []provider.Tool{
		{Name: "read", Description: "Read a declared input file, or list a declared input directory.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"workspace-relative path"}},"required":["path"],"additionalProperties":false}`)},
		{Name: "write", Description: "Replace a declared output file with new content.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`)},
		{Name: "run", Description: "Run a declared command in the sandbox: argv[0] is the command name, no shell.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["argv"],"additionalProperties":false}`)},
		{Name: "mailbox", Description: "Post a message to the operator (action post, with text), read the operator's new replies (action read), or ask and wait for a reply (action wait, with text): with no reply waiting, the run parks at the end of this turn until the operator replies, then read the mailbox.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["post","read","wait"]},"text":{"type":"string"}},"required":["action"],"additionalProperties":false}`)},
		{Name: "spawn", Description: "Queue a sub-task under a child manifest that only narrows this task's; it runs after this task finishes.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"manifest":{"type":"object"}},"required":["manifest"],"additionalProperties":false}`)},
		{Name: "finish", Description: "Finish the task with a summary of what was done.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"],"additionalProperties":false}`)},
	}
}

// refusal is a tool call the runner refused; the model gets Reason.
type refusal struct{ reason string }

func (e *refusal) Error() string { return e.reason }

func refusef(format string, args ...any) error { return &refusal{reason: fmt.Sprintf(format, args...)} }

// decode reads a tool input strictly: a JSON object (read by canon.Parse,
// so duplicate members are refused) whose member names are exactly among
// v's JSON names — encoding/json alone would match names ignoring case
// and take the last of two spellings.
func decode(in json.RawMessage, v any) error {
	if len(in) > maxToolInput {
		return refusef("input of %d bytes is too large", len(in))
	}
	obj, err := canon.Parse(in)
	if err != nil {
		return refusef("bad input: %v", err)
	}
	if obj.Kind() != canon.KindObject {
		return refusef("bad input: want an object")
	}
	known := map[string]bool{}
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		known[name] = true
	}
	for name := range obj.Members() {
		if !known[name] {
			return refusef("bad input: unknown field %q", name)
		}
	}
	d := json.NewDecoder(bytes.NewReader(in))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return refusef("bad input: %v", err)
	}
	if d.More() {
		return refusef("bad input: trailing data")
	}
	return nil
}

// call decides and performs one tool call and returns its tool_result.
// done reports that the task ended (finish, after verify) with status.
// An error means the journal could not be written.
func (r *run) call(ctx context.Context, t *task, b provider.Block) (res provider.Block, done bool, status string, err error) {
	if _, err := r.record(entry.ToolCall{Task: t.id, ID: b.ID, Tool: b.Name, Input: canon.Sum(b.Input).String(), Args: rawJSON(callSummary(b))}); err != nil {
		return res, false, "", err
	}
	var out string
	var terr error
	switch b.Name {
	case "read":
		out, terr = r.toolRead(t, b.Input)
	case "write":
		out, terr = r.toolWrite(t, b.ID, b.Input)
	case "run":
		out, terr = r.toolRun(ctx, t, b.ID, b.Input)
	case "mailbox":
		out, terr = r.toolMailbox(t, b.Input)
	case "spawn":
		out, terr = r.toolSpawn(t, b.ID, b.Input)
	case "finish":
		var in struct {
			Summary *string `json:"summary"`
		}
		if terr = decode(b.Input, &in); terr == nil && in.Summary == nil {
			terr = refusef("bad input: summary is required")
		}
		if terr == nil {
			t.summary = r.redact(*in.Summary)
			var feedback string
			done, status, feedback, err = r.finish(ctx, t)
			if err != nil {
				return res, false, "", err
			}
			if done {
				return provider.Block{Type: "tool_result", ToolUseID: b.ID, Text: "finished: " + status}, true, status, nil
			}
			return provider.Block{Type: "tool_result", ToolUseID: b.ID, Text: feedback, IsError: true}, false, "", nil
		}
	default:
		terr = refusef("no tool %q; the tools are read, write, run, mailbox, spawn and finish", b.Name)
	}
	var rf *refusal
	switch {
	case errors.As(terr, &rf):
		res, err := r.refused(t, b, rf.reason)
		return res, false, "", err
	case terr != nil:
		return res, false, "", terr
	}
	return provider.Block{Type: "tool_result", ToolUseID: b.ID, Text: out}, false, "", nil
}

// refused records a refused call and returns its error result. The
// reason, which may quote the model's input, is cut to 1 KiB; a refusal
// that cannot be journalled ends the run.
func (r *run) refused(t *task, b provider.Block, reason string) (provider.Block, error) {
	reason = clip(reason, 1024)
	if _, err := r.record(entry.ToolRefused{Task: t.id, ID: b.ID, Tool: b.Name, Reason: reason}); err != nil {
		return provider.Block{}, err
	}
	r.body.Refused++
	r.logf("task %s: refused %s: %s", t.id, b.Name, reason)
	return provider.Block{Type: "tool_result", ToolUseID: b.ID, Text: "refused: " + reason, IsError: true}, nil
}

// covered reports whether p is one of roots or beneath one.
func covered(roots []string, p string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func (r *run) toolRead(t *task, in json.RawMessage) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decode(in, &a); err != nil {
		return "", err
	}
	if err := manifest.CheckPath(a.Path); err != nil {
		return "", refusef("%v", err)
	}
	if !covered(t.m.Inputs, a.Path) {
		return "", refusef("%s is not a declared input (inputs: %s)", a.Path, strings.Join(t.m.Inputs, ", "))
	}
	if b, ok := r.planned[a.Path]; ok {
		return string(b), nil
	}
	s, err := r.ws.read(a.Path)
	if err != nil {
		return "", refusef("%v", err)
	}
	return s, nil
}

func (r *run) toolWrite(t *task, id string, in json.RawMessage) (string, error) {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decode(in, &a); err != nil {
		return "", err
	}
	if a.Content == nil {
		return "", refusef("bad input: content is required")
	}
	if err := manifest.CheckPath(a.Path); err != nil {
		return "", refusef("%v", err)
	}
	if !slices.Contains(t.m.Outputs, a.Path) {
		return "", refusef("%s is not a declared output (outputs: %s)", a.Path, strings.Join(t.m.Outputs, ", "))
	}
	data := []byte(*a.Content)
	if len(data) > MaxWriteBytes {
		return "", refusef("content of %d bytes is more than the write tool's %d", len(data), MaxWriteBytes)
	}
	sum := canon.Sum(data)
	eff := WriteEffect{Path: a.Path, Content: sum.String(), Bytes: int64(len(data)), Applied: r.cfg.Apply}
	if !r.cfg.Apply {
		if err := r.effect(t, id, "write", eff); err != nil {
			return "", err
		}
		r.planned[a.Path] = data
		r.body.Writes = append(r.body.Writes, eff)
		return fmt.Sprintf("planned (dry run): %s, %d bytes, %s", a.Path, len(data), sum), nil
	}
	if err := r.ws.write(a.Path, data); err != nil {
		return "", refusef("%v", err)
	}
	if err := r.effect(t, id, "write", eff); err != nil {
		return "", err
	}
	r.outputs[a.Path] = sum.String()
	r.body.Writes = append(r.body.Writes, eff)
	return fmt.Sprintf("wrote %s, %d bytes", a.Path, len(data)), nil
}

// maskArgv is argv as the result records it: each argument through the
// run's redaction (the journal's copy is masked by filter).
func (r *run) maskArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = r.redact(a)
	}
	return out
}

func (r *run) effect(t *task, id, kind string, eff any) error {
	_, err := r.record(entry.Effect{Task: t.id, ID: id, Kind: kind, Effect: rawJSON(eff)})
	return err
}

// checkArgv applies the run tool's argument rules and returns the argv
// to run: the program's basename, then the arguments.
func checkArgv(m *manifest.Manifest, argv []string) ([]string, error) {
	switch {
	case len(argv) == 0:
		return nil, refusef("argv is empty")
	case len(argv) > MaxArgs:
		return nil, refusef("%d arguments; at most %d", len(argv), MaxArgs)
	}
	for i, a := range argv {
		if why := manifest.CheckArg(a); why != "" {
			return nil, refusef("argv[%d] %s", i, why)
		}
	}
	name := path.Base(argv[0])
	if name == "." || name == "/" || name == ".." || argv[0] == "" {
		return nil, refusef("argv[0] %q names no program", argv[0])
	}
	if !slices.Contains(m.Commands, name) {
		return nil, refusef("%s is not a declared command (commands: %s)", name, strings.Join(m.Commands, ", "))
	}
	out := append([]string{name}, argv[1:]...)
	if name == "git" {
		if err := gitgate.Check(out); err != nil {
			return nil, refusef("%v", err)
		}
		out = append(append([]string{"git"}, gitPrefix...), argv[1:]...)
	}
	return out, nil
}

func (r *run) toolRun(ctx context.Context, t *task, id string, in json.RawMessage) (string, error) {
	var a struct {
		Argv []string `json:"argv"`
	}
	if err := decode(in, &a); err != nil {
		return "", err
	}
	argv, err := checkArgv(t.m, a.Argv)
	if err != nil {
		return "", err
	}
	if err := r.commandAllowed(t, argv[0]); err != nil {
		return "", err
	}
	note := ""
	if a.Argv[0] != argv[0] {
		note = fmt.Sprintf("(the path in %q was discarded; %s is resolved inside the sandbox)\n", a.Argv[0], argv[0])
	}
	if !r.cfg.Apply {
		eff := RunEffect{Argv: r.maskArgv(argv), Applied: false}
		if err := r.effect(t, id, "run", eff); err != nil {
			return "", err
		}
		r.body.Runs = append(r.body.Runs, eff)
		return note + "planned (dry run): not executed", nil
	}
	out, _, err := r.execute(ctx, t, id, argv, "run", nil)
	if err != nil {
		return "", err
	}
	return note + out, nil
}

// execute runs argv in the sandbox, through the run's session, under the
// task's grants and returns the feedback for the model and whether the
// command exited 0. The session journals the exec decision, every egress
// decision and the command's outcome.
func (r *run) execute(ctx context.Context, t *task, id string, argv []string, kind string, rr *reportRun) (string, bool, error) {
	gs, err := r.grantsFor(t)
	if err != nil {
		return "", false, err
	}
	if selection.Required(gs) == tier.S3 && r.cfg.Tenant == "" {
		return "", false, refusef("the manifest's grant set is multi-tenant (S3): the operator must name the tenant (cordon run --tenant)")
	}
	limits, err := sandbox.LimitsFor(gs)
	if err != nil {
		return "", false, refusef("the manifest's grant set: %v", err)
	}
	left := time.Until(t.deadline)
	if wall := r.budgetLeft("wall_ms", time.Since(r.segStart).Milliseconds()); wall < left.Milliseconds() {
		left = time.Duration(wall) * time.Millisecond // an amendment lowered the run's wall clock
	}
	if left <= 0 {
		return "", false, refusef("the wall-clock budget is spent")
	}
	var inputs []string
	for _, p := range t.m.Inputs {
		if r.ws.exists(p) {
			inputs = append(inputs, p)
		}
	}
	// The command entry names argv and every output that comes back; if
	// it could not be journalled after the command ran, its effects
	// would be unrecorded, so a command that large is refused first.
	ab, _ := json.Marshal(argv)
	ob, _ := json.Marshal(t.m.Outputs)
	size := 4096 + len(ab) + len(ob) + 60*len(t.m.Outputs) // 60: an output's ContentId and punctuation
	if size > journal.MaxLine {
		return "", false, refusef("this command's record could reach %d bytes, more than the journal takes; use fewer or shorter arguments", size)
	}
	r.egressTask = t.id
	// The operator's values of the variables this task's grants name;
	// the model never chooses a variable or a value.
	var env map[string]string
	for _, name := range gs.Env {
		if v, ok := r.cfg.Env[name]; ok {
			if env == nil {
				env = map[string]string{}
			}
			env[name] = v
		}
	}
	if p := r.cfg.Redact; p != nil && p.Err() != nil {
		return "", false, refusef("the operator's secrets to mask resolved to nothing, so command output cannot be masked; nothing was run: %v", p.Err())
	}
	cmd := session.Command{
		Argv: argv, Inputs: inputs, Outputs: t.m.Outputs, OutputsOptional: true, Wall: min(limits.Wall, left),
		Grants: gs, Capture: maxCapture, Task: t.id, ID: id, Kind: kind, Env: env, Image: r.cfg.Image, Redact: r.cfg.Redact,
	}
	rr.apply(&cmd)
	// The command's egress policy: an amendment applied while it runs
	// replaces it, and connections it no longer allows close at once.
	cmd.EgressPolicy = egress.NewPolicy(grant.New(gs))
	stop := r.watch(t, cmd.EgressPolicy)
	out, err := r.sess.Exec(ctx, cmd)
	if werr := stop(); werr != nil {
		return "", false, werr
	}
	if err != nil {
		var ee *sandbox.ExitError
		switch {
		case errors.Is(err, session.ErrNoTier):
			return "", false, refusef("commands run only inside cordon's sandbox, and this host cannot provide it, so nothing was run: %s", oneLine(err.Error()))
		case errors.Is(err, session.ErrRefused), errors.As(err, &ee):
			return "", false, refusef("%s", oneLine(err.Error()))
		}
		return "", false, fmt.Errorf("runner: %w", err)
	}
	res := out.Result
	rr.ran(res)
	if err := r.keepOutput(out.Stdout, out.Stderr); err != nil {
		return "", false, err
	}
	outs := map[string]string{}
	for _, f := range res.Outputs {
		outs[f.Path] = f.ID.String()
		r.outputs[f.Path] = f.ID.String()
	}
	r.body.Runs = append(r.body.Runs, RunEffect{Argv: r.maskArgv(argv), Applied: true, Exit: res.ExitCode, Outputs: outs})
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d", res.ExitCode)
	if res.TimedOut {
		b.WriteString(" (killed at the wall-clock limit)")
	}
	if res.OutputsErr != nil {
		fmt.Fprintf(&b, "\noutputs not copied back: %s", oneLine(res.OutputsErr.Error()))
	}
	fmt.Fprintf(&b, "\n--- stdout ---\n%s\n--- stderr ---\n%s", tail(captured(out.Stdout), maxFeedback/2), tail(captured(out.Stderr), maxFeedback/2))
	r.logf("task %s: %s %s: exit %d", t.id, kind, strings.Join(argv, " "), res.ExitCode)
	return b.String(), res.ExitCode == 0 && res.OutputsErr == nil, nil
}

// OutputDir is where, in the state directory, a run keeps each command's
// captured stdout and stderr (masked, as digested), each under the
// base64url part of the ContentId its `command` entry names (docs/SPEC.md
// §6): the journal holds digests, and these files are what they address.
const OutputDir = "output"

// keepOutput writes captured streams to OutputDir by their ContentIds.
// A stream that cannot be kept ends the run: its entry would name
// output nobody can read.
func (r *run) keepOutput(streams ...session.Captured) error {
	dir := filepath.Join(r.state, OutputDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("runner: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("runner: %s is not a directory; remove it (cordon keeps captured output there)", dir)
	}
	for _, c := range streams {
		id := canon.Sum(c.Bytes).String()
		name := filepath.Join(dir, strings.TrimPrefix(id, "b3:"))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|flock.NoFollow, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue // the same bytes, by their address
		}
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
		_, err = f.Write(c.Bytes)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
	}
	return nil
}

// rawJSON is v, a plain value, as JSON.
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("runner: marshal: " + err.Error()) // unreachable: plain structs and maps
	}
	return b
}

// captured is a stream's kept bytes as text, noting what was not kept.
func captured(c session.Captured) string {
	s := strings.ToValidUTF8(string(c.Bytes), "\uFFFD")
	if c.Dropped > 0 {
		s += fmt.Sprintf("\n[%d more bytes not kept]", c.Dropped)
	}
	return s
}

// tail keeps the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[…]" + strings.ToValidUTF8(s[len(s)-n:], "")
}

func (r *run) toolMailbox(t *task, in json.RawMessage) (string, error) {
	var a struct {
		Action string  `json:"action"`
		Text   *string `json:"text"`
	}
	if err := decode(in, &a); err != nil {
		return "", err
	}
	switch a.Action {
	case "wait":
		if t.parent != nil {
			return "", refusef("wait parks the run, which only the root task may do; a sub-task posts and reads")
		}
		if a.Text == nil {
			return "", refusef("bad input: wait needs text")
		}
		msg, err := mailbox.Post(r.cfg.Workspace, mailbox.FromAgent, r.redact(*a.Text), time.Now())
		if err != nil {
			return "", refusef("%v", err)
		}
		if _, err := r.record(entry.Mailbox{Task: t.id, Action: "wait", Seq: msg.Seq, Text: canon.Sum([]byte(msg.Text)).String()}); err != nil {
			return "", err
		}
		n, err := mailbox.Pending(r.cfg.Workspace)
		if err != nil {
			return "", refusef("%v", err)
		}
		if n > 0 {
			return fmt.Sprintf("posted #%d; %d replies are waiting: read the mailbox", msg.Seq, n), nil
		}
		if !r.mayPark() {
			return fmt.Sprintf("posted #%d; no reply yet, and this run cannot park to wait for one: read the mailbox later", msg.Seq), nil
		}
		r.waitSeq = msg.Seq
		r.logf("task %s: posted message #%d and waits for the operator's reply; the run parks at the end of this turn (reply with 'cordon mail --reply TEXT %s', then 'cordon run --resume --manifest MANIFEST %s')",
			t.id, msg.Seq, r.cfg.Workspace, r.cfg.Workspace)
		return fmt.Sprintf("posted #%d; no reply yet: the run parks at the end of this turn and resumes when the operator has replied; then read the mailbox", msg.Seq), nil
	case "post":
		if a.Text == nil {
			return "", refusef("bad input: post needs text")
		}
		msg, err := mailbox.Post(r.cfg.Workspace, mailbox.FromAgent, r.redact(*a.Text), time.Now())
		if err != nil {
			return "", refusef("%v", err)
		}
		if _, err := r.record(entry.Mailbox{Task: t.id, Action: "post", Seq: msg.Seq, Text: canon.Sum([]byte(msg.Text)).String()}); err != nil {
			return "", err
		}
		r.logf("task %s: posted message #%d to the operator (read it with 'cordon mail %s')", t.id, msg.Seq, r.cfg.Workspace)
		return fmt.Sprintf("posted #%d", msg.Seq), nil
	case "read":
		if a.Text != nil {
			return "", refusef("bad input: read takes no text")
		}
		// Only what fits in this turn is marked read; the rest waits.
		limit := min(maxMailboxRead, t.turnLeft-1024)
		if limit <= 0 {
			return "", refusef("this turn's tool results are full; read the mailbox next turn")
		}
		msgs, more, err := mailbox.UnreadUpTo(r.cfg.Workspace, limit)
		if err != nil {
			return "", refusef("%v", err)
		}
		seqs := make([]int64, 0, len(msgs))
		var b strings.Builder
		for _, m := range msgs {
			seqs = append(seqs, m.Seq)
			fmt.Fprintf(&b, "#%d %s\n%s\n", m.Seq, m.Time, m.Text)
		}
		if _, err := r.record(entry.Mailbox{Task: t.id, Action: "read", Seqs: &seqs}); err != nil {
			return "", err
		}
		switch {
		case len(msgs) == 0 && more > 0:
			return fmt.Sprintf("%d replies are waiting, but the next does not fit in this turn's results; read the mailbox next turn", more), nil
		case len(msgs) == 0:
			return "no new replies", nil
		case more > 0:
			fmt.Fprintf(&b, "[%d more replies are waiting: read the mailbox again]\n", more)
		}
		return b.String(), nil
	default:
		return "", refusef("bad input: action must be post, read or wait")
	}
}

func (r *run) toolSpawn(t *task, id string, in json.RawMessage) (string, error) {
	var a struct {
		Manifest json.RawMessage `json:"manifest"`
	}
	if err := decode(in, &a); err != nil {
		return "", err
	}
	if len(a.Manifest) == 0 || a.Manifest[0] != '{' {
		return "", refusef("bad input: manifest must be an object")
	}
	child, err := manifest.Parse(a.Manifest)
	if err != nil {
		return "", refusef("%v", err)
	}
	if err := manifest.Covers(t.m, child); err != nil {
		return "", refusef("the sub-task would widen this task: %v", err)
	}
	if int64(len(t.pending)) >= t.m.Budgets.MaxPendingTasks {
		if err := r.budgetEvent(t, t, "max_pending_tasks", int64(len(t.pending)), t.m.Budgets.MaxPendingTasks, "would be exceeded; spawn refused"); err != nil {
			return "", err
		}
		return "", refusef("max_pending_tasks is %d and %d are queued", t.m.Budgets.MaxPendingTasks, len(t.pending))
	}
	t.pending = append(t.pending, &pendingTask{m: child, task: id})
	if _, err := r.record(entry.Spawn{Task: t.id, ID: id, Manifest: child.ID().String(), Queued: len(t.pending)}); err != nil {
		return "", err
	}
	return fmt.Sprintf("queued sub-task %s.%d (manifest %s); it runs after this task finishes", t.id, len(t.pending), child.ID()), nil
}

// finish ends a task: with a verify command (applied runs only), the
// runner runs it, and on failure returns feedback for the model while
// loops remain. done reports the task is over with status.
func (r *run) finish(ctx context.Context, t *task) (done bool, status, feedback string, err error) {
	if _, err := r.record(entry.TaskFinish{Task: t.id, Summary: canon.Sum([]byte(t.summary)).String()}); err != nil {
		return false, "", "", err
	}
	v := t.m.Verify
	if v == nil {
		return true, StatusFinished, "", nil
	}
	if !r.cfg.Apply {
		eff := RunEffect{Argv: r.maskArgv(v), Verify: true}
		if err := r.effect(t, "verify", "verify", eff); err != nil {
			return false, "", "", err
		}
		r.body.Runs = append(r.body.Runs, eff)
		return true, StatusFinished, "", nil
	}
	out, pass, cerr, err := r.verify(ctx, t, false)
	if err != nil {
		return false, "", "", err
	}
	if pass {
		return true, StatusVerified, "", nil
	}
	if cerr != nil {
		return true, StatusVerifyFailed, "", nil // nothing the model does can make it run
	}
	for a := t; a != nil; a = a.parent { // loops are charged to every ancestor
		if a.used.loops >= a.m.Budgets.MaxLoops {
			if err := r.budgetEvent(t, a, "max_loops", a.used.loops, a.m.Budgets.MaxLoops, "spent; the verify failure ends the task"); err != nil {
				return false, "", "", err
			}
			return true, StatusVerifyFailed, "", nil
		}
	}
	t.charge(func(u *usage) { u.loops++ })
	if _, err := r.record(entry.Loop{Task: t.id, Loop: t.used.loops, Limit: t.m.Budgets.MaxLoops}); err != nil {
		return false, "", "", err
	}
	return false, "", fmt.Sprintf("The verify command %q failed (attempt %d of %d); fix the problem and finish again.\n%s",
		strings.Join(v, " "), t.used.loops, t.m.Budgets.MaxLoops, out), nil
}

// verify runs the task's verify command (applied runs only) and records
// it. cerr is the refusal when it could not run; err a journal failure.
func (r *run) verify(ctx context.Context, t *task, final bool) (out string, pass bool, cerr, err error) {
	v := t.m.Verify
	argv, cerr := checkArgv(t.m, v)
	var rr *reportRun
	if cerr == nil {
		rr, cerr = r.startReport(t)
	}
	if cerr == nil {
		out, pass, cerr = r.execute(ctx, t, "verify", argv, "verify", rr)
	}
	var rf *refusal
	if cerr != nil && !errors.As(cerr, &rf) {
		return "", false, nil, cerr
	}
	if cerr != nil {
		out = "the verify command could not run: " + rf.reason
	}
	pass, note, err := r.judge(t, rr, cerr, pass)
	if err != nil {
		return "", false, nil, err
	}
	out += note
	if _, err := r.record(entry.Verify{Task: t.id, Argv: v, Pass: pass, Loop: t.used.loops, Final: final}); err != nil {
		return "", false, nil, err
	}
	return out, pass, cerr, nil
}

// toolMembers are the member names of the tools' inputs.
var toolMembers = map[string]bool{"path": true, "content": true, "argv": true, "action": true, "text": true, "manifest": true, "summary": true}

// callSummary is what the journal shows of a tool call's input, so an
// auditor can read what was asked without the contents: a path or argv
// as given (cut to 1 KiB each), and for written text, messages and
// manifests their ContentId and size. Anything that does not decode is
// left to the input's ContentId.
func callSummary(b provider.Block) map[string]any {
	var in map[string]json.RawMessage
	if json.Unmarshal(b.Input, &in) != nil {
		return map[string]any{}
	}
	out := map[string]any{}
	for k, v := range in {
		if !toolMembers[k] {
			continue // refused by the tool; the refusal says which
		}
		var str string
		var list []string
		switch {
		case (k == "content" || k == "text" || k == "summary") && json.Unmarshal(v, &str) == nil:
			out[k] = map[string]any{"b3": canon.Sum([]byte(str)).String(), "bytes": len(str)}
		case k == "manifest":
			out[k] = map[string]any{"b3": canon.Sum(v).String(), "bytes": len(v)}
		case json.Unmarshal(v, &str) == nil:
			out[k] = clip(str, 1024)
		case json.Unmarshal(v, &list) == nil && len(list) <= MaxArgs:
			for i := range list {
				list[i] = clip(list[i], 1024)
			}
			out[k] = list
		default:
			out[k] = map[string]any{"b3": canon.Sum(v).String(), "bytes": len(v)}
		}
	}
	return out
}
