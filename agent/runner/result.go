package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/session"
)

// Types of the result document and its body.
const (
	ResultType = "cordon.run-result.v1"
	BodyType   = "cordon.run-body.v1"
)

const maxResultBytes = 16 << 20

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

// jcs is the canonical form of v.
func jcs(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("runner: marshal: " + err.Error()) // unreachable: plain structs
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic("runner: JCS: " + err.Error()) // unreachable: json.Marshal output
	}
	return c
}

func (b *Body) id() canon.ID { return canon.Sum(jcs(b)) }

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

func (c Commitments) head() journal.Head {
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
	if !bytes.Equal(jcs(res), b) {
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
	if !bytes.Equal(payload, jcs(res.Commitments)) {
		return errors.New("signature: it signs other commitments than the result's")
	}
	return nil
}

// seal writes the result, the manifest and, with a key, the signature,
// a receipt, an attestation and the public key. The result is written
// last, by rename, so a reader never sees it ahead of what it commits to.
func (r *run) seal(end journal.Entry) error {
	m := r.cfg.Manifest
	head := r.jw.Head()
	res := Result{
		Type: ResultType,
		Commitments: Commitments{
			Manifest: m.ID().String(),
			Journal:  JournalHead{Count: head.Count, Head: head.ID.String()},
			Body:     r.body.id().String(),
			Since:    r.since,
		},
		Body: r.body,
	}
	files := []struct {
		name string
		data []byte
	}{{ManifestFile, m.JCS()}}
	if k := r.cfg.Key; k != nil {
		res.Signature = sign.Seal(k, sign.PayloadRunResult, jcs(res.Commitments))
		exit := int64(0)
		if r.body.Status != StatusFinished && r.body.Status != StatusVerified {
			exit = 1
		}
		// The manifest is the unit of work, run.end the journal root.
		sealed, err := r.sess.Seal(k, session.SealInput{Unit: m.ID(), Exit: exit, Outputs: maps.Clone(r.outputs), JournalRoot: end.ID()})
		if err != nil {
			return fmt.Errorf("runner: receipt: %w", err)
		}
		files = append(files,
			struct {
				name string
				data []byte
			}{ReceiptFile, sealed.Receipt},
			struct {
				name string
				data []byte
			}{AttestationFile, sealed.Attestation},
			struct {
				name string
				data []byte
			}{PubkeyFile, k.Public().MarshalPublic()})
	} else {
		// Stale evidence of an earlier signed run must not sit beside an
		// unsigned result as if it belonged to it.
		for _, f := range []string{ReceiptFile, AttestationFile, PubkeyFile} {
			if err := os.Remove(filepath.Join(r.state, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("runner: %w", err)
			}
		}
	}
	files = append(files, struct {
		name string
		data []byte
	}{ResultFile, jcs(res)})
	for _, f := range files {
		if err := replaceFile(filepath.Join(r.state, f.name), f.data); err != nil {
			return fmt.Errorf("runner: %w", err)
		}
	}
	return nil
}

// replaceFile writes data to name through a temporary file and a rename.
func replaceFile(name string, data []byte) error {
	if fi, err := os.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s; remove it", name, fi.Mode().Type())
	}
	tmp := name + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
