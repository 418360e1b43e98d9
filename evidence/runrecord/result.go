// Package runrecord is the record of an agent run (docs/SPEC.md §6.5): the
// result document that commits to the manifest, the journal head and the
// result body, and Verify, which checks a workspace's record offline. It
// is pure: it links no sandbox, egress proxy, model provider or network
// code (internal/ledger checks its import graph), so verifying a run
// needs only the evidence packages.
package runrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// StateDir is the workspace's reserved state directory.
const StateDir = ".cordon"

// Files of the state directory that make up the record.
const (
	JournalFile     = "journal.jsonl"
	ResultFile      = "result.json"
	ManifestFile    = "manifest.json"
	ReceiptFile     = "receipt.jcr"
	AttestationFile = "attestation.json"
	PubkeyFile      = "steward.pub"
)

// Statuses of a run or task.
const (
	StatusFinished        = "finished"         // the model called finish (no verify, or a dry run)
	StatusVerified        = "verified"         // finished, and the verify command passed
	StatusVerifyFailed    = "verify_failed"    // the verify command still failed after max_loops
	StatusBudgetExhausted = "budget_exhausted" // a budget ran out first
	StatusModelError      = "model_error"      // the provider failed or answered unusably
	StatusModelStopped    = "model_stopped"    // the model stopped without finishing
	StatusCancelled       = "cancelled"        // the run was interrupted, or a sub-task's parent did not finish
)

// Types of the result document and its body.
const (
	ResultType = "cordon.run-result.v1"
	BodyType   = "cordon.run-body.v1"
)

// MaxResultBytes bounds result.json.
const MaxResultBytes = 16 << 20

var statuses = map[string]bool{StatusFinished: true, StatusVerified: true, StatusVerifyFailed: true,
	StatusBudgetExhausted: true, StatusModelError: true, StatusModelStopped: true, StatusCancelled: true}

// Body is what a run did: the result body that result.json commits to.
type Body struct {
	Type         string        `json:"type"`
	Status       string        `json:"status"`
	Apply        bool          `json:"apply"`
	Provider     string        `json:"provider"`
	Model        string        `json:"model"`
	Start        string        `json:"start"`
	End          string        `json:"end"`
	Turns        int64         `json:"turns"`
	ModelCalls   int64         `json:"model_calls"`
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	Loops        int64         `json:"loops"`
	Refused      int64         `json:"refused"`
	Memory       string        `json:"memory"`
	Summary      string        `json:"summary"`
	Writes       []WriteEffect `json:"writes"`
	Runs         []RunEffect   `json:"runs"`
	Tasks        []TaskResult  `json:"tasks"`
	Verification *Verification `json:"verification,omitempty"` // the root task's last verify run, if one ran
}

// WriteEffect is one write, applied or planned.
type WriteEffect struct {
	Path    string `json:"path"`
	Content string `json:"content"` // ContentId of the bytes
	Bytes   int64  `json:"bytes"`
	Applied bool   `json:"applied"`
}

// RunEffect is one command, run or planned.
type RunEffect struct {
	Argv    []string          `json:"argv"`
	Applied bool              `json:"applied"`
	Verify  bool              `json:"verify,omitempty"`
	Exit    int               `json:"exit,omitempty"`
	Outputs map[string]string `json:"outputs,omitempty"`
}

// TaskResult is how one task (the root, or a sub-task) ended.
type TaskResult struct {
	ID           string `json:"id"`
	Manifest     string `json:"manifest"`
	Status       string `json:"status"`
	Summary      string `json:"summary,omitempty"`
	Turns        int64  `json:"turns"`
	ModelCalls   int64  `json:"model_calls"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Loops        int64  `json:"loops"`
	// Verification is how the task's last verify run was judged.
	Verification *Verification `json:"verification,omitempty"`
}

// JCS is the canonical form of v, a document of this package.
func JCS(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("runrecord: marshal: " + err.Error()) // unreachable: plain structs
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic("runrecord: JCS: " + err.Error()) // unreachable: json.Marshal output
	}
	return c
}

// ID is the body's ContentId, the one a result commits to.
func (b *Body) ID() canon.ID { return canon.Sum(JCS(b)) }

// Commitments bind a result: what was asked (the manifest), what happened
// (the journal), what came of it (the body). They are what is signed.
type Commitments struct {
	Manifest string      `json:"manifest"`
	Journal  JournalHead `json:"journal"`
	Body     string      `json:"body"`
	// Since is the index of this run's run.start entry: the entries from
	// there to the head are this run's. Earlier entries belong to earlier
	// runs and are covered by the chain, not vouched for by this run.
	Since int64 `json:"since"`
}

// JournalHead is a journal's entry count and last entry id.
type JournalHead struct {
	Count int64  `json:"count"`
	Head  string `json:"head"`
}

// Head is the journal head the commitments name.
func (c Commitments) Head() journal.Head {
	id, _ := canon.ParseID(c.Journal.Head)
	return journal.Head{Count: c.Journal.Count, ID: id}
}

// Result is .cordon/result.json: JCS bytes of this object.
type Result struct {
	Type        string          `json:"type"`
	Commitments Commitments     `json:"commitments"`
	Body        Body            `json:"body"`
	Signature   json.RawMessage `json:"signature,omitempty"` // a signed envelope over the commitments' JCS form
}

// ParseResult reads a result document strictly: it must be its own JCS
// form, with exactly the members above, and its commitments well formed.
// It checks nothing against other files (Verify does).
func ParseResult(b []byte) (*Result, error) {
	if err := canon.CheckJCS(b); err != nil {
		return nil, fmt.Errorf("not in canonical (JCS) form: %w", err)
	}
	var res Result
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&res); err != nil {
		return nil, err
	}
	// encoding/json matches member names case-insensitively and leaves
	// absent members zero: only a document that is exactly the canonical
	// form of what was decoded has one reading.
	if !bytes.Equal(JCS(res), b) {
		return nil, errors.New("members are missing, misspelled, null or not in their written form")
	}
	if res.Type != ResultType {
		return nil, fmt.Errorf("type %q, want %q", res.Type, ResultType)
	}
	if res.Body.Type != BodyType {
		return nil, fmt.Errorf("body type %q, want %q", res.Body.Type, BodyType)
	}
	if !statuses[res.Body.Status] {
		return nil, fmt.Errorf("body status %q is not a run status", res.Body.Status)
	}
	for _, t := range res.Body.Tasks {
		if !statuses[t.Status] {
			return nil, fmt.Errorf("task %q status %q is not a run status", t.ID, t.Status)
		}
		if err := t.Verification.check(); err != nil {
			return nil, fmt.Errorf("task %q: %w", t.ID, err)
		}
	}
	if err := res.Body.Verification.check(); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	c := res.Commitments
	for name, s := range map[string]string{"manifest": c.Manifest, "journal head": c.Journal.Head, "body": c.Body} {
		if _, err := canon.ParseID(s); err != nil {
			return nil, fmt.Errorf("commitments: %s: %w", name, err)
		}
	}
	if c.Journal.Count < 1 || c.Since < 0 || c.Since >= c.Journal.Count {
		return nil, fmt.Errorf("commitments: journal count %d, since %d", c.Journal.Count, c.Since)
	}
	return &res, nil
}

// CheckSignature verifies the signature over the commitments under pub.
func (res *Result) CheckSignature(pub sign.PublicKey) error {
	if res.Signature == nil {
		return errors.New("the result is not signed")
	}
	payload, err := sign.Open(res.Signature, pub, sign.PayloadRunResult)
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	if !bytes.Equal(payload, JCS(res.Commitments)) {
		return errors.New("signature: it signs other commitments than the result's")
	}
	return nil
}
