package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/risk"
	"github.com/cordon-dev/cordon/store"
)

// pendingItem is one run in the approvals queue.
type pendingItem struct {
	Run       consoleRunRow
	Plan      consolePlan
	Review    bool   // a finished run's change awaiting review (else: pending approval)
	RiskTier  string // the change's risk tier
	Needed    int    // distinct approvers its tier needs
	Accepts   int
	Files     []string // the changed files, from the classification
	Diff      []diffFile
	DiffNote  string
	CanDecide bool
	Own       bool // the viewer submitted it
}

// diffFile is one changed file's diff, line by line.
type diffFile struct {
	Path  string
	Lines []diffLine
	Note  string
}

type diffLine struct {
	Op   string // "+", "-" or " "
	Text string
}

type approvalsPage struct {
	Items    []pendingItem
	Approver bool
}

// Bounds on a diff the queue shows (red team F5): a file larger than
// maxDiffBytes is not diffed; a file's diff shows at most maxDiffLines
// lines and maxDiffShown bytes of text; the queue's diffs together at
// most maxQueueDiff bytes (the runs past it show their changed files
// only). Each is said on the page when it applies.
const (
	maxDiffLines = 2000
	maxDiffBytes = 1 << 20
	maxDiffShown = 256 << 10
	maxQueueDiff = 2 << 20
)

// consoleApprovals is the queue of the tenant's runs waiting for a
// decision: pending approval, or finished with their change under
// review. Decision forms are shown only to an approver who may decide
// (mayDecide); the POSTs are decided by the API's functions regardless.
func (s *Server) consoleApprovals(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	runs, err := s.store.Runs(r.Context(), p.p.TenantID, consoleRunLimit)
	if err != nil {
		s.consoleFail(w, r, storeError(err, "run"))
		return
	}
	names, ae := s.projectNames(r, runs)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	page := approvalsPage{Approver: p.p.Role == store.RoleApprover, Items: []pendingItem{}}
	diffLeft := maxQueueDiff
	for _, lr := range runs {
		if lr.State != store.StatePending && lr.State != store.StateFinished {
			continue
		}
		var rv *store.Review
		if lr.State == store.StateFinished {
			rv, err = s.store.Review(r.Context(), p.p.TenantID, lr.ID)
			if err != nil || rv.State != store.ReviewOpen {
				continue // no change, or decided
			}
		}
		run, err := s.store.Run(r.Context(), p.p.TenantID, lr.ID) // with its snapshot
		if err != nil {
			continue
		}
		it := pendingItem{
			Run: consoleRunRow{ID: run.ID, State: run.State, Tier: visible(run.Tier), Tenant: run.TenantID, Project: visible(names[run.ProjectID]),
				Task: visible(run.Task), Submitter: run.SubmittedBy, Created: run.CreatedAt},
			Plan:      consolePlanOf(run.Config),
			Own:       run.SubmittedBy == p.p.UserID,
			CanDecide: mayDecide(p, run),
		}
		if rv != nil {
			it.Review, it.RiskTier, it.Needed = true, visible(rv.Tier), rv.Needed
			for _, d := range rv.Decisions {
				if d.Decision == store.DecisionAccept {
					it.Accepts++
				}
				if d.User == p.p.UserID {
					it.CanDecide = false // decided already
				}
			}
			var c risk.Classification
			if json.Unmarshal(rv.Classification, &c) == nil {
				it.Files = visibleAll(c.Files)
			}
			if diffLeft <= 0 {
				it.DiffNote = fmt.Sprintf("Not shown: the queue shows at most %d KiB of diffs in all; this run's changed files are listed above, and its page and outputs hold the rest.", maxQueueDiff>>10)
			} else {
				it.Diff, it.DiffNote = s.runDiff(run)
				for _, f := range it.Diff {
					for _, l := range f.Lines {
						diffLeft -= len(l.Text)
					}
				}
			}
		}
		page.Items = append(page.Items, it)
	}
	s.render(w, r, 200, "approvals.html", "Approvals", "approvals", page)
}

// runDiff is a finished run's change as a line diff of each declared
// output against the task's snapshot, read from the run's workspace on
// this host (as the review read it). Elsewhere, a note says so.
func (s *Server) runDiff(run *store.Run) ([]diffFile, string) {
	ws := filepath.Join(s.runDir(run.ID), "ws")
	if _, err := os.Lstat(ws); err != nil {
		return nil, "The diff is shown on the host that ran the run; its changed files are listed above."
	}
	var tc TaskConfig
	if err := json.Unmarshal(run.Config, &tc); err != nil {
		return nil, "the run's snapshot does not parse"
	}
	m, err := manifest.Parse(tc.Manifest)
	if err != nil {
		return nil, "the run's manifest does not parse"
	}
	change, err := runChange(ws, m, tc.Files)
	if err != nil {
		return nil, visible("the change cannot be read: " + err.Error())
	}
	out := []diffFile{}
	for _, f := range change {
		out = append(out, lineDiff(s.Pool(), f))
	}
	return out, ""
}

// lineDiff is a plain diff of one file: the lines before the first and
// after the last difference are context, the rest removed and added.
// Binary content is not shown.
// Each line is masked by the pool before it is clipped (a secret never
// straddles the cut); the page masks it again.
func lineDiff(pool *redact.Pool, f risk.File) diffFile {
	df := diffFile{Path: visible(f.Path)}
	switch {
	case f.Old == nil:
		df.Note = "created"
	case f.New == nil:
		df.Note = "deleted"
	}
	if len(f.Old)+len(f.New) > maxDiffBytes {
		df.Note += " (too large to show)"
		return df
	}
	if bytes.IndexByte(f.Old, 0) >= 0 || bytes.IndexByte(f.New, 0) >= 0 {
		df.Note += " (binary)"
		return df
	}
	split := func(b []byte) []string {
		if len(b) == 0 {
			return nil
		}
		return strings.SplitAfter(string(b), "\n")
	}
	a, b := split(f.Old), split(f.New)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	shown, cut := 0, ""
	add := func(op, text string) {
		if cut != "" {
			return
		}
		if len(df.Lines) >= maxDiffLines {
			cut = fmt.Sprintf(" (cut at %d lines)", maxDiffLines)
			return
		}
		t, err := pool.String(strings.TrimSuffix(text, "\n"))
		if err != nil {
			t = "(withheld: the redaction pool is empty)"
		}
		if shown+len(t) > maxDiffShown {
			t = clip(t, max(0, maxDiffShown-shown))
			cut = fmt.Sprintf(" (cut at %d KiB)", maxDiffShown>>10)
		}
		shown += len(t)
		df.Lines = append(df.Lines, diffLine{Op: op, Text: visible(t)})
	}
	for _, l := range a[max(0, pre-3):pre] {
		add(" ", l)
	}
	for _, l := range a[pre : len(a)-suf] {
		add("-", l)
	}
	for _, l := range b[pre : len(b)-suf] {
		add("+", l)
	}
	for _, l := range a[len(a)-suf : min(len(a), len(a)-suf+3)] {
		add(" ", l)
	}
	df.Note += cut
	return df
}

// The decisions: each calls the API's function for it, as the request's
// principal, and returns to the page the form was on.

func (s *Server) consoleApprove(w http.ResponseWriter, r *http.Request) {
	if _, ae := s.approveRun(r, r.PathValue("run"), r.PostFormValue("reason")); ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	http.Redirect(w, r, "/console/runs/"+r.PathValue("run"), http.StatusSeeOther)
}

func (s *Server) consoleReject(w http.ResponseWriter, r *http.Request) {
	if _, ae := s.rejectRun(r, r.PathValue("run"), r.PostFormValue("reason")); ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	http.Redirect(w, r, "/console/runs/"+r.PathValue("run"), http.StatusSeeOther)
}

func (s *Server) consoleAccept(w http.ResponseWriter, r *http.Request) {
	s.consoleDecide(w, r, store.DecisionAccept)
}

func (s *Server) consoleDecline(w http.ResponseWriter, r *http.Request) {
	s.consoleDecide(w, r, store.DecisionDecline)
}

func (s *Server) consoleDecide(w http.ResponseWriter, r *http.Request, decision string) {
	if _, ae := s.decideRunReview(r, r.PathValue("run"), decision, r.PostFormValue("reason")); ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	http.Redirect(w, r, "/console/approvals", http.StatusSeeOther)
}
