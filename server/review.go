package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/risk"
	"github.com/cordon-dev/cordon/store"
)

// riskPolicySetting names the operator's risk policy among the store's
// settings: one policy for every host that executes runs.
const riskPolicySetting = "risk_policy"

// MaxOutputReview caps one declared output's size for review: a larger
// output cannot be reviewed, so its run fails rather than be accepted
// unread.
const MaxOutputReview = 8 << 20

// MaxChangeReview caps the bytes of all of a run's changed outputs read
// for review, together: over it, the run fails.
const MaxChangeReview = 64 << 20

// classifyTimeout bounds classifying one run's change: a change that
// cannot be tiered within it fails its run (a variable for tests).
var classifyTimeout = 30 * time.Second

// riskPolicy is the policy in force: the operator's, or risk.Default.
func (s *Server) riskPolicy(ctx context.Context) (*risk.Policy, error) {
	b, err := s.store.Setting(ctx, riskPolicySetting)
	if errors.Is(err, store.ErrNotFound) {
		return risk.Default(), nil
	}
	if err != nil {
		return nil, err
	}
	return risk.Parse(b)
}

// review classifies a finished run's change under the policy in force
// and attaches the review to its outcome. A change that cannot be read
// or classified fails the run: a result is never accepted unread.
func (s *Server) review(ctx context.Context, out store.Outcome) store.Outcome {
	if out.State != store.StateFinished || out.Change == nil {
		return out
	}
	p, err := s.riskPolicy(ctx)
	if err != nil {
		return store.Outcome{State: store.StateFailed, Reason: "the operator's risk policy could not be read, so the run's change cannot be reviewed", Tier: out.Tier, Status: out.Status}
	}
	cctx, cancel := context.WithTimeout(ctx, classifyTimeout)
	defer cancel()
	c, err := p.ClassifyContext(cctx, out.Change)
	if err != nil {
		return store.Outcome{State: store.StateFailed, Reason: "the run's change cannot be reviewed: " + err.Error(), Tier: out.Tier, Status: out.Status}
	}
	b, err := canonJSON(c)
	if err != nil {
		return store.Outcome{State: store.StateFailed, Reason: "the run's change cannot be reviewed: " + err.Error(), Tier: out.Tier, Status: out.Status}
	}
	out.Review = &store.NewReview{Tier: c.Tier, Needed: c.Approvals, Classification: b}
	return out
}

// canonJSON is v's JSON in JCS form.
func canonJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return canon.JCS(b)
}

// runChange reads a finished run's change: each declared output whose
// content in the workspace differs from the task's snapshot (created,
// changed or deleted). An output that is not a regular file, that is
// reached through a symbolic link in any component of its path, or that
// is over MaxOutputReview, is an error.
func runChange(ws string, m *manifest.Manifest, inputs map[string]string) ([]risk.File, error) {
	change := []risk.File{}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	total := int64(0)
	for _, p := range m.Outputs {
		rel := path.Clean(filepath.ToSlash(p))
		var old []byte
		if c, ok := inputs[p]; ok {
			old = []byte(c)
		}
		cur, err := readOutput(root, p, rel, &total)
		if err != nil {
			return nil, err
		}
		if (old == nil) == (cur == nil) && bytes.Equal(old, cur) {
			continue
		}
		change = append(change, risk.File{Path: rel, Old: old, New: cur})
	}
	return change, nil
}

// readOutput reads the declared output p (rel, slash-separated, in root)
// for review: nil when it does not exist. Every component of its path is
// Lstat'ed under the root, and a symbolic link anywhere — even one to a
// directory inside the workspace, which os.Root would follow — is an
// error, as is a parent that is not a directory. The file is then opened
// and must be the regular file Lstat saw, and it is read only up to the
// limits (MaxOutputReview; MaxChangeReview with *total, the bytes read
// before it).
func readOutput(root *os.Root, p, rel string, total *int64) ([]byte, error) {
	parts := strings.Split(rel, "/")
	var st fs.FileInfo
	for i := range parts {
		at := strings.Join(parts[:i+1], "/")
		var err error
		st, err = root.Lstat(filepath.FromSlash(at))
		last := i == len(parts)-1
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("output %q: %w", p, err)
		case !last && st.Mode()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("output %q is beneath a symbolic link, %q: a review reads no output through a link", p, at)
		case !last && !st.IsDir():
			return nil, fmt.Errorf("output %q is beneath %q, a %s, not a directory", p, at, st.Mode().Type())
		}
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("output %q is a %s, not a regular file", p, st.Mode().Type())
	case st.Size() > MaxOutputReview:
		return nil, fmt.Errorf("output %q is %d bytes, over the %d a review reads", p, st.Size(), MaxOutputReview)
	}
	if *total += st.Size(); *total > MaxChangeReview {
		return nil, fmt.Errorf("the outputs are over the %d bytes a review reads, together", MaxChangeReview)
	}
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, fmt.Errorf("output %q: %w", p, err)
	}
	defer f.Close()
	if fst, err := f.Stat(); err != nil || !os.SameFile(st, fst) {
		return nil, fmt.Errorf("output %q changed while the review read it", p)
	}
	cur, err := io.ReadAll(io.LimitReader(f, st.Size()+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("output %q: %w", p, err)
	case int64(len(cur)) != st.Size():
		return nil, fmt.Errorf("output %q changed while the review read it", p)
	}
	return cur, nil
}

// reviewView is a run's review as the API shows it, with the statement
// the server signs over it.
type reviewView struct {
	*store.Review
	// Pushed lists what the run pushed to its repository's review ref,
	// each "REF OLD NEW", read from the journal's egress entries (the
	// statement signs it too); absent when nothing was pushed.
	Pushed []string `json:"pushed,omitempty"`
	// Statement is a DSSE envelope (payload type sign.PayloadReview),
	// signed with the server's key (GET /v1/steward.pub), over the
	// review and the digests of the run's stored evidence.
	Statement string `json:"statement"`
}

// reviewStatement is what the server signs about a run's review.
type reviewStatement struct {
	Type     string        `json:"_type"`
	Run      string        `json:"run"`
	Project  string        `json:"project"`
	Task     string        `json:"task"`
	Journal  string        `json:"journal_sha256"` // of the stored journal, "" when none
	Record   string        `json:"record_sha256"`  // of the stored record archive
	Review   *store.Review `json:"review"`
	Snapshot string        `json:"snapshot"`         // ContentId of the task snapshot executed
	Pushed   []string      `json:"pushed,omitempty"` // the run's pushes to its review ref, from the journal
}

// journalPushes returns the commands of every push the journal's egress
// entries record ("pushed"), in order. A line that is not an entry is
// skipped: the journal's digest, signed beside them, covers it.
func journalPushes(journal []byte) []string {
	var out []string
	for line := range bytes.SplitSeq(journal, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"pushed"`)) {
			continue
		}
		var e struct {
			Type string `json:"type"`
			Body struct {
				Pushed []string `json:"pushed"`
			} `json:"body"`
		}
		if json.Unmarshal(line, &e) == nil && e.Type == "egress" {
			out = append(out, e.Body.Pushed...)
		}
	}
	return out
}

// ReviewStatementType is the statement's _type.
const ReviewStatementType = "https://cordon.dev/review/v1"

func (s *Server) reviewView(ctx context.Context, run *store.Run, rv *store.Review) (*reviewView, error) {
	st := reviewStatement{Type: ReviewStatementType, Run: run.ID, Project: run.ProjectID, Task: run.Task, Review: rv}
	for which, dst := range map[string]*string{"journal": &st.Journal, "record": &st.Record} {
		b, err := s.store.Evidence(ctx, run.TenantID, run.ID, which)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if b != nil {
			sum := sha256.Sum256(b)
			*dst = hex.EncodeToString(sum[:])
			if which == "journal" {
				st.Pushed = journalPushes(b)
			}
		}
	}
	st.Snapshot = canon.Sum(run.Config).String()
	payload, err := canonJSON(st)
	if err != nil {
		return nil, err
	}
	return &reviewView{Review: rv, Pushed: st.Pushed, Statement: string(sign.Seal(s.cfg.Key, sign.PayloadReview, payload))}, nil
}

func (s *Server) getReview(w http.ResponseWriter, r *http.Request) {
	p := tenantOf(r)
	run, err := s.store.Run(r.Context(), p.TenantID, r.PathValue("run"))
	if err != nil {
		s.fail(w, r, storeError(err, "run"))
		return
	}
	rv, err := s.store.Review(r.Context(), p.TenantID, run.ID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.fail(w, r, &apiError{Code: 404, Msg: "the run has no change to review: it has not finished, or its executor reported no change"})
			return
		}
		s.fail(w, r, storeError(err, "review"))
		return
	}
	v, err := s.reviewView(r.Context(), run, rv)
	if err != nil {
		s.fail(w, r, &apiError{Code: 500, Msg: "internal error", Err: err})
		return
	}
	writeJSON(w, 200, v)
}

// decisionBody is the body of an accept or decline.
type decisionBody struct {
	Reason string `json:"reason"`
}

const maxReason = 2000

func (s *Server) acceptReview(w http.ResponseWriter, r *http.Request) {
	s.decideReview(w, r, store.DecisionAccept)
}

func (s *Server) declineReview(w http.ResponseWriter, r *http.Request) {
	s.decideReview(w, r, store.DecisionDecline)
}

func (s *Server) decideReview(w http.ResponseWriter, r *http.Request, decision string) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	var body decisionBody
	if len(bytes.TrimSpace(b)) > 0 {
		if err := decodeStrict(b, &body); err != nil {
			s.fail(w, r, &apiError{Code: 400, Msg: "body: " + err.Error(), Hint: `send {"reason": "…"} or nothing`})
			return
		}
	}
	v, ae := s.decideRunReview(r, r.PathValue("run"), decision, body.Reason)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 200, v)
}

// decideRunReview records the request's principal's decision on a run's
// change: the one path of the API's and the console's accept and
// decline.
func (s *Server) decideRunReview(r *http.Request, id, decision, reason string) (*reviewView, *apiError) {
	p := tenantOf(r)
	if ae := checkReason(reason); ae != nil {
		return nil, ae
	}
	if decision == store.DecisionDecline && strings.TrimSpace(reason) == "" {
		return nil, &apiError{Code: 400, Msg: "a decline needs a reason", Hint: `send {"reason": "…"}`}
	}
	var rv *store.Review
	err := s.audited(r, p.TenantID, "run.review."+decision, func() map[string]any {
		return map[string]any{"run": rv.RunID, "reason": reason, "tier": rv.Tier, "needed": int64(rv.Needed), "state": rv.State}
	}, func(ctx context.Context) (err error) {
		rv, err = s.store.DecideReview(ctx, p.TenantID, id, p.UserID, decision, reason)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, &apiError{Code: 404, Msg: "no such run with a change to review"}
	case errors.Is(err, store.ErrDecided):
		return nil, &apiError{Code: 409, Msg: "you have already decided on this run's change; another approver must"}
	case errors.Is(err, store.ErrNoReview):
		return nil, &apiError{Code: 409, Msg: err.Error()[len("store: "):]}
	case errors.Is(err, store.ErrSelfApproval):
		return nil, &apiError{Code: 403, Msg: "the submitter of a run cannot accept or decline its change; another approver must", Err: err}
	case err != nil:
		return nil, storeError(err, "run")
	}
	s.metrics.run("review_" + decision)
	run, err := s.store.Run(r.Context(), p.TenantID, rv.RunID)
	if err != nil {
		return nil, storeError(err, "run")
	}
	v, err := s.reviewView(r.Context(), run, rv)
	if err != nil {
		return nil, &apiError{Code: 500, Msg: "internal error", Err: err}
	}
	return v, nil
}

func isControl(r rune) bool { return r < 0x20 && r != '\n' || r == 0x7f || (r >= 0x80 && r < 0xa0) }

func (s *Server) getRiskPolicy(w http.ResponseWriter, r *http.Request) {
	b, err := s.store.Setting(r.Context(), riskPolicySetting)
	if errors.Is(err, store.ErrNotFound) {
		b, _ = canonJSON(risk.Default())
		w.Header().Set("Cordon-Risk-Policy", "default")
	} else if err != nil {
		s.fail(w, r, &apiError{Code: 500, Msg: "internal error", Err: err})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(append(bytes.TrimSpace(b), '\n'))
}

func (s *Server) putRiskPolicy(w http.ResponseWriter, r *http.Request) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	p, err := risk.Parse(b)
	if err != nil {
		s.fail(w, r, &apiError{Code: 400, Msg: err.Error()})
		return
	}
	if err := s.audited(r, "", "risk.policy", func() map[string]any {
		return map[string]any{"policy": p.ID().String()}
	}, func(ctx context.Context) error {
		return s.store.PutSetting(ctx, riskPolicySetting, b)
	}); err != nil {
		s.fail(w, r, &apiError{Code: 500, Msg: "internal error", Err: err})
		return
	}
	writeJSON(w, 200, map[string]string{"policy": p.ID().String()})
}
