// Package entry defines every journal entry cordon writes, as typed
// bodies (docs/SPEC.md §4.3.1 lists them: type, members, who writes it,
// when). A journal line's type member is a body's Name ("command",
// "egress", "run.start", …); the body itself carries a type member naming
// its schema and version, "cordon.<name>.v1". Encode is the only way a
// body becomes a journal value, so no writer can invent a schema.
//
// The package is pure: it imports only the canonical forms, so offline
// verifiers can read entries without linking the sandbox, the egress
// proxy or a model provider.
package entry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// Version is the schema version of every body in this file.
const Version = 1

// Body is a typed journal entry body.
type Body interface {
	// Name is the journal entry type, e.g. "command".
	Name() string
}

// Type is the schema name a body of the named entry carries in its own
// type member: "cordon.<name>.v1".
func Type(name string) string { return fmt.Sprintf("cordon.%s.v%d", name, Version) }

// Encode returns b as a journal body: its JSON members plus
// "type": Type(b.Name()), in canonical form. A Decision is its grant
// record, which names its own type.
func Encode(b Body) (canon.Value, error) {
	var raw []byte
	if d, ok := b.(Decision); ok {
		raw = d.Record
	} else {
		m, err := json.Marshal(b)
		if err != nil {
			return canon.Value{}, fmt.Errorf("entry %s: %w", b.Name(), err)
		}
		if len(m) < 2 || m[0] != '{' {
			return canon.Value{}, fmt.Errorf("entry %s: body is not an object", b.Name())
		}
		t, _ := json.Marshal(Type(b.Name()))
		raw = append([]byte(`{"type":`), t...)
		if !bytes.Equal(m, []byte("{}")) {
			raw = append(raw, ',')
		}
		raw = append(raw, m[1:]...)
	}
	v, err := canon.Parse(raw)
	if err != nil {
		return canon.Value{}, fmt.Errorf("entry %s: %w", b.Name(), err)
	}
	return v, nil
}

// Text returns s as it can stand in a canonical document: s itself when
// it is valid text (UTF-8 without noncharacters), otherwise Go's
// strconv.QuoteToASCII of it, and whether it was quoted. Writers pass
// every string that came from outside (argv, hosts from the wire, error
// texts) through it and name the quoted members in the body's quoted
// list, so a body always encodes and two strings never share a record
// (as grant.Decision.Record does).
func Text(s string) (string, bool) {
	if utf8.ValidString(s) {
		ok := true
		for _, r := range s {
			if r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE {
				ok = false
				break
			}
		}
		if ok {
			return s, false
		}
	}
	return strconv.QuoteToASCII(s), true
}

// PathText is Text for a path: it also quotes a path holding a control
// character, so that every path it returns is plain text, as a receipt's
// outputs must be.
func PathText(s string) (string, bool) {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return strconv.QuoteToASCII(s), true
		}
	}
	return Text(s)
}

// Decision is a grant decision (grant.Decision.Record): the sandbox's
// exec decision, and any other decision a writer journals. Its record
// carries "type": "cordon.decision.v1".
type Decision struct {
	Record json.RawMessage
}

func (Decision) Name() string { return "decision" }

// Program is the executable a command started.
type Program struct {
	Path string `json:"path"`
	B3   string `json:"b3"`
}

// Image names the OCI image a command ran on as its runtime by its
// digests ("sha256:…"); the manifest's is absent for a docker save
// tarball, which has none.
type Image struct {
	Manifest string `json:"manifest,omitempty"`
	Config   string `json:"config"`
}

// Command is the outcome of one sandboxed command: written by
// session.Exec once the command ended, or with Error when it was refused
// or failed to start (so a decision never dangles). Task, ID and Kind are
// the runner's labels (absent for `cordon exec`); Stdout and Stderr are
// ContentIds of what the runner captured (absent when the streams went to
// a terminal).
type Command struct {
	Task            string            `json:"task,omitempty"`
	ID              string            `json:"id,omitempty"`
	Kind            string            `json:"kind,omitempty"`
	Argv            []string          `json:"argv"`
	Tier            string            `json:"tier,omitempty"`
	Grants          string            `json:"grants"`
	Program         *Program          `json:"program,omitempty"`
	Image           *Image            `json:"image,omitempty"` // the runtime, when an image's
	Exit            *int              `json:"exit,omitempty"`
	Signal          int               `json:"signal,omitempty"`
	TimedOut        bool              `json:"timed_out,omitempty"`
	OOMKills        int64             `json:"oom_kills,omitempty"`
	Outputs         map[string]string `json:"outputs"` // {} when nothing came back
	OutputsError    string            `json:"outputs_error,omitempty"`
	Stdout          string            `json:"stdout,omitempty"`
	Stderr          string            `json:"stderr,omitempty"`
	CPUNS           int64             `json:"cpu_ns,omitempty"`
	WallUS          int64             `json:"wall_us,omitempty"`
	PeakMemoryBytes int64             `json:"peak_memory_bytes,omitempty"`
	OutputsID       string            `json:"outputs_id,omitempty"`    // with outputs_parts: ContentId of the JCS form of the whole outputs map
	OutputsParts    int               `json:"outputs_parts,omitempty"` // the outputs are in this many outputs entries just before this one
	EgressDropped   int64             `json:"egress_dropped,omitempty"`
	Error           string            `json:"error,omitempty"`
	Quoted          []string          `json:"quoted,omitempty"` // members written as Text quotes them: "argv[i]", "error"
}

func (Command) Name() string { return "command" }

// CommandUnfinished follows entries of a command that never got its
// command entry — a decision, egress or outputs entry ends the journal
// when the next writer opens it, because the process that ran the
// command was killed — so they are named, not taken for the next
// command's.
type CommandUnfinished struct {
	After  string `json:"after"` // the type of the entry that ended the journal
	Reason string `json:"reason"`
}

func (CommandUnfinished) Name() string { return "command.unfinished" }

// Outputs is one part of a command's outputs when they are too many for
// its command entry: the parts, numbered from 0, come just before it,
// and together are the map whose ContentId the command entry names.
type Outputs struct {
	Task    string            `json:"task,omitempty"`
	ID      string            `json:"id,omitempty"`
	Part    int               `json:"part"`
	Outputs map[string]string `json:"outputs"`
}

func (Outputs) Name() string { return "outputs" }

// Egress is one egress decision of a command, streamed by the session as
// the proxy decides it.
type Egress struct {
	Task       string   `json:"task,omitempty"`
	ID         string   `json:"id,omitempty"`
	Method     string   `json:"method"`
	Host       string   `json:"host"`
	Port       int      `json:"port"`
	Addr       string   `json:"addr,omitempty"`
	Allow      bool     `json:"allow"`
	Rule       string   `json:"rule"`
	Reason     string   `json:"reason,omitempty"`
	Status     int      `json:"status"`
	Error      string   `json:"error,omitempty"`
	Injected   string   `json:"injected,omitempty"` // the headers the proxy injected (by label: header and secret reference), never their values
	Pushed     []string `json:"pushed,omitempty"`   // an allowed push's commands to the task's repository, each "REF OLD NEW"
	BytesUp    int64    `json:"bytes_up"`
	BytesDown  int64    `json:"bytes_down"`
	StartUS    int64    `json:"start_us"` // µs since the epoch: ns would pass 2^53
	DurationUS int64    `json:"duration_us"`
	Quoted     []string `json:"quoted,omitempty"` // members written as Text quotes them: "host", "method", …
}

func (Egress) Name() string { return "egress" }

// Meter says how the session measured one device class's energy, and
// the figures its receipt record carries: a hardware meter (HwShunt,
// Source names it; a shared counter's TotalUJ and the Attribution of the
// run's share), or the Estimator and why no meter was used (Reason).
type Meter struct {
	Class       string  `json:"class"`
	Provenance  string  `json:"provenance"`
	Source      string  `json:"source"`
	Reason      string  `json:"reason,omitempty"`
	EstimatedUJ uint64  `json:"estimated_uj"`
	MeasuredUJ  *uint64 `json:"measured_uj,omitempty"`
	TotalUJ     *uint64 `json:"total_uj,omitempty"`
	Attribution string  `json:"attribution,omitempty"`
	BusyNS      uint64  `json:"busy_ns"`
}

func (Meter) Name() string { return "meter" }

// Mount is one change a command's fs grants made to its sandbox's file
// system (docs/sandbox.md, "Host paths: fs grants"), written after the
// exec decision and before the program starts: a host path bound at the
// same path ("bind", with its access; Writable when the program can
// write the host path directly, bypassing the staged workspace), /work
// or /tmp made executable ("scratch"), or a deny.fs path hidden
// ("mask"; also a file with a denied hash in a granted bin directory).
// Rule names the grant: "fs[i]", "deny.fs[i]" or "exec.deny[i]". Paths come
// from the grant set, whose paths are canonical text.
type Mount struct {
	Task     string   `json:"task,omitempty"`
	ID       string   `json:"id,omitempty"`
	Kind     string   `json:"kind"`
	Path     string   `json:"path"`
	Access   string   `json:"access,omitempty"`
	Rule     string   `json:"rule"`
	Writable bool     `json:"writable,omitempty"`
	Quoted   []string `json:"quoted,omitempty"` // members written as Text quotes them: "task", "id"
}

func (Mount) Name() string { return "mount" }

// Mint records a child grant set minted under a standing grant's policy
// (docs/SPEC.md §3.6): which policy, which event (its ContentId and its
// id), the child's number under the policy, when, and the child grant
// set's ContentId.
type Mint struct {
	Policy  string   `json:"policy"`
	Event   string   `json:"event"`
	EventID string   `json:"event_id"`
	Seq     int64    `json:"seq"`
	AtMS    int64    `json:"at_ms"`
	Grants  string   `json:"grants"`
	Quoted  []string `json:"quoted,omitempty"` // members written as Text quotes them: "event_id"
}

func (Mint) Name() string { return "mint" }

// RunPrincipals names a run's principals (docs/SPEC.md §3.7): its id,
// the agent's key (generated for the run; it signs the run's
// checkpoints) and the issuer's key id (who may amend the run; absent
// when the run has none, and then every amendment is refused).
type RunPrincipals struct {
	Run      string `json:"run"`
	Agent    string `json:"agent"`
	AgentKey string `json:"agent_key"` // the agent's Ed25519 public key, base64url without padding
	Issuer   string `json:"issuer,omitempty"`
	// Resume marks the principals of a parked run that resumed: a fresh
	// agent key for the same run, journalled right after run.resume
	// (docs/SPEC.md §9.4); checkpoints after it verify under it alone.
	Resume bool `json:"resume,omitempty"`
}

func (RunPrincipals) Name() string { return "run.principals" }

// RunPark records that a run parked (docs/SPEC.md §9.4): why, the
// digests of the workspace tree and of the state file it left, and the
// snapshot (their ContentId) its durable record's suspend segment names.
type RunPark struct {
	Run      string `json:"run"`
	Reason   string `json:"reason"` // mailbox, request or budget
	Tree     string `json:"tree"`
	State    string `json:"state"`
	EnergyUJ int64  `json:"energy_uj"` // the segment's energy, as its execute segment records it
}

func (RunPark) Name() string { return "run.park" }

// RunResume records that a parked run continued from its snapshot: how
// long it was parked and the idle energy that accrued, as its durable
// record's resume segment records them.
type RunResume struct {
	Run            string `json:"run"`
	Snapshot       string `json:"snapshot"`
	ParkedMS       int64  `json:"parked_ms"`
	IdleUJ         int64  `json:"idle_uj"`
	IdleProvenance string `json:"idle_provenance"`
}

func (RunResume) Name() string { return "run.resume" }

// Checkpoint is the agent's signed checkpoint at a turn boundary: the
// checkpoint document itself and the agent's Ed25519 signature over it
// in the checkpoint context (base64url without padding).
type Checkpoint struct {
	Task       string          `json:"task"`
	Checkpoint json.RawMessage `json:"checkpoint"`
	Sig        string          `json:"sig"`
}

func (Checkpoint) Name() string { return "checkpoint" }

// Amend records an accepted amendment: its file's sequence number, the
// ContentId of its payload, its issuer, and the authority and grant set
// before and after it (they differ).
type Amend struct {
	Seq          int64            `json:"seq"`
	Amendment    string           `json:"amendment"`
	Issuer       string           `json:"issuer"`
	Before       string           `json:"before"`
	After        string           `json:"after"`
	GrantsBefore string           `json:"grants_before"`
	GrantsAfter  string           `json:"grants_after"`
	Budgets      map[string]int64 `json:"budgets,omitempty"`
}

func (Amend) Name() string { return "amend" }

// AmendRefused records an amendment file that was refused, and why; the
// run goes on under the authority in force. File is the ContentId of the
// file's bytes.
type AmendRefused struct {
	Seq    int64    `json:"seq"`
	File   string   `json:"file"`
	Reason string   `json:"reason"`
	Quoted []string `json:"quoted,omitempty"` // "reason" when written as Text quotes it
}

func (AmendRefused) Name() string { return "amend.refused" }

// RunUnfinished marks entries of an earlier run that never ended.
type RunUnfinished struct {
	From    int64 `json:"from"`
	Entries int64 `json:"entries"`
}

func (RunUnfinished) Name() string { return "run.unfinished" }

// Memory names the runner's memory store.
type Memory struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
	File   string `json:"file,omitempty"`
	Commit string `json:"commit,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (Memory) Name() string { return "memory" }

// RunStart begins an agent run.
type RunStart struct {
	Manifest string `json:"manifest"`
	Apply    bool   `json:"apply"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Grants   string `json:"grants"`
	Memory   Memory `json:"memory"`
	Env      string `json:"env,omitempty"`   // the environment manifest's address, when the run has one
	Image    *Image `json:"image,omitempty"` // the image runtime's digests, when the run has one
}

func (RunStart) Name() string { return "run.start" }

// RunEnd ends an agent run; Body is the ContentId of the result body.
type RunEnd struct {
	Status string `json:"status"`
	Body   string `json:"body"`
}

func (RunEnd) Name() string { return "run.end" }

// TaskStart begins a task; TaskText is the ContentId of its task text.
type TaskStart struct {
	Task     string `json:"task"`
	Manifest string `json:"manifest"`
	TaskText string `json:"task_text"`
}

func (TaskStart) Name() string { return "task.start" }

// TaskEnd ends a task with its usage; Summary is a ContentId.
type TaskEnd struct {
	Task         string `json:"task"`
	Status       string `json:"status"`
	Turns        int64  `json:"turns"`
	ModelCalls   int64  `json:"model_calls"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Loops        int64  `json:"loops"`
	Summary      string `json:"summary"`
}

func (TaskEnd) Name() string { return "task.end" }

// TaskCancelled is a queued sub-task that never ran.
type TaskCancelled struct {
	Task     string `json:"task"`
	Manifest string `json:"manifest"`
	Reason   string `json:"reason"`
}

func (TaskCancelled) Name() string { return "task.cancelled" }

// TaskInterrupted is a task whose context ended.
type TaskInterrupted struct {
	Task  string `json:"task"`
	Error string `json:"error"`
}

func (TaskInterrupted) Name() string { return "task.interrupted" }

// TaskStopped is a task whose model stopped without finishing.
type TaskStopped struct {
	Task       string `json:"task"`
	StopReason string `json:"stop_reason"`
}

func (TaskStopped) Name() string { return "task.stopped" }

// TaskFinish is the model's finish call; Summary is a ContentId.
type TaskFinish struct {
	Task    string `json:"task"`
	Summary string `json:"summary"`
}

func (TaskFinish) Name() string { return "task.finish" }

// ModelRequest is written before each model call; Last is a digest of
// the last message.
type ModelRequest struct {
	Task        string `json:"task"`
	Turn        int64  `json:"turn"`
	Messages    int    `json:"messages"`
	MaxTokens   int    `json:"max_tokens"`
	MaxAttempts int    `json:"max_attempts"`
	Last        string `json:"last"`
}

func (ModelRequest) Name() string { return "model.request" }

// Usage is a model response's token usage.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Reported     bool  `json:"reported"`
}

// ToolCallSummary names one tool call of a model response.
type ToolCallSummary struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Input string `json:"input"` // ContentId of the call's input
}

// ModelResponse is a model's answer: digests of its text and content,
// and the tool calls it made.
type ModelResponse struct {
	Task          string            `json:"task"`
	Turn          int64             `json:"turn"`
	StopReason    string            `json:"stop_reason"`
	Attempts      int64             `json:"attempts"`
	RequestID     string            `json:"request_id"`
	Model         string            `json:"model"`
	Usage         Usage             `json:"usage"`
	Text          string            `json:"text"`
	Content       string            `json:"content"`
	ToolCallCount int               `json:"tool_call_count"`
	ToolCalls     []ToolCallSummary `json:"tool_calls"`
}

func (ModelResponse) Name() string { return "model.response" }

// ModelError is a failed or unusable model call.
type ModelError struct {
	Task         string `json:"task"`
	Turn         int64  `json:"turn"`
	ChargedCalls *int64 `json:"charged_calls,omitempty"`
	Error        string `json:"error"`
}

func (ModelError) Name() string { return "model.error" }

// Budget is a budget event (exhausted, or over).
type Budget struct {
	Task   string `json:"task"`
	Owner  string `json:"owner"`
	Budget string `json:"budget"`
	Used   int64  `json:"used"`
	Limit  int64  `json:"limit"`
	Event  string `json:"event"`
}

func (Budget) Name() string { return "budget" }

// ToolCall is a tool call as the model asked for it: Input is the
// ContentId of its input, Args a bounded summary.
type ToolCall struct {
	Task  string          `json:"task"`
	ID    string          `json:"id"`
	Tool  string          `json:"tool"`
	Input string          `json:"input"`
	Args  json.RawMessage `json:"args"`
}

func (ToolCall) Name() string { return "tool.call" }

// ToolRefused is a tool call the runner refused.
type ToolRefused struct {
	Task   string `json:"task"`
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

func (ToolRefused) Name() string { return "tool.refused" }

// Effect is a write or a command, applied or planned.
type Effect struct {
	Task   string          `json:"task"`
	ID     string          `json:"id"`
	Kind   string          `json:"kind"`
	Effect json.RawMessage `json:"effect"`
}

func (Effect) Name() string { return "effect" }

// Mailbox is a post to, or a read from, the operator's mailbox; Text is
// a ContentId.
type Mailbox struct {
	Task   string   `json:"task"`
	Action string   `json:"action"`
	Seq    int64    `json:"seq,omitempty"`
	Text   string   `json:"text,omitempty"`
	Seqs   *[]int64 `json:"seqs,omitempty"` // read: the replies read, [] when none
}

func (Mailbox) Name() string { return "mailbox" }

// Spawn queues a sub-task.
type Spawn struct {
	Task     string `json:"task"`
	ID       string `json:"id"`
	Manifest string `json:"manifest"`
	Queued   int    `json:"queued"`
}

func (Spawn) Name() string { return "spawn" }

// Loop is a verify failure sent back to the model for another loop.
type Loop struct {
	Task  string `json:"task"`
	Loop  int64  `json:"loop"`
	Limit int64  `json:"limit"`
}

func (Loop) Name() string { return "loop" }

// Verify is the outcome of a task's verify command.
type Verify struct {
	Task  string   `json:"task"`
	Argv  []string `json:"argv"`
	Pass  bool     `json:"pass"`
	Loop  int64    `json:"loop"`
	Final bool     `json:"final"`
}

func (Verify) Name() string { return "verify" }

// VerifyReport is the test report of a verify run with a report
// requirement: where it was read, its ContentId and counts, and whether
// the verify step passed on it.
type VerifyReport struct {
	Task      string `json:"task"`
	Format    string `json:"format"`
	From      string `json:"from"`
	MinPassed int64  `json:"min_passed"`
	Read      bool   `json:"read"`
	Bytes     int    `json:"bytes"`
	Report    string `json:"report"`
	ExitOK    bool   `json:"exit_ok"`
	Passed    *int64 `json:"passed,omitempty"`
	Failed    *int64 `json:"failed,omitempty"`
	Skipped   *int64 `json:"skipped,omitempty"`
	Pass      bool   `json:"pass"`
	Error     string `json:"error,omitempty"`
}

func (VerifyReport) Name() string { return "verify.report" }

// All is one zero value of every body type, for the SPEC table's test.
func All() []Body {
	return []Body{Decision{}, Command{}, CommandUnfinished{}, Outputs{}, Egress{}, Meter{}, Mount{}, RunUnfinished{}, Memory{},
		RunStart{}, RunEnd{}, TaskStart{}, TaskEnd{}, TaskCancelled{}, TaskInterrupted{}, TaskStopped{},
		TaskFinish{}, ModelRequest{}, ModelResponse{}, ModelError{}, Budget{}, ToolCall{}, ToolRefused{},
		Effect{}, Mailbox{}, Spawn{}, Loop{}, Verify{}, VerifyReport{}, Mint{},
		RunPrincipals{}, Checkpoint{}, Amend{}, AmendRefused{}, RunPark{}, RunResume{}}
}

// PoolClaim records that a run started in a warm pool's slot
// (sandbox/pool) and the slot's idle energy the run is charged with:
// the energy the slot accrued while it was parked, by IdleProvenance
// ("Estimator": IdlePerCoreUW × Cores over ParkedNS, rounded up, never
// zero). It is appended before the run's command entry, so the journal
// root a receipt names covers it.
type PoolClaim struct {
	Slot           string `json:"slot"`
	Env            string `json:"env"`    // the environment address the slot was prepared for
	Policy         string `json:"policy"` // the ContentId of its grants, tier, tenant and limits
	IdleUJ         int64  `json:"idle_uj"`
	IdleProvenance string `json:"idle_provenance"`
	ParkedNS       int64  `json:"parked_ns"`
	IdlePerCoreUW  int64  `json:"idle_per_core_uw,omitempty"`
	Cores          int64  `json:"cores,omitempty"`
}

func (PoolClaim) Name() string { return "pool.claim" }
