package server

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/internal/nofollow"
	"github.com/cordon-dev/cordon/store"
	"github.com/cordon-dev/cordon/tier/selection"
)

// consoleRun returns the run the path names, of the principal's own
// tenant (the routes are the tenant guard: the operator reads no run).
func (s *Server) consoleRun(r *http.Request) (*store.Run, *apiError) {
	p := principalFrom(r.Context())
	if p == nil || p.admin || p.p == nil {
		return nil, &apiError{Code: 403, Msg: consoleAdminRefusal}
	}
	run, err := s.store.Run(r.Context(), p.p.TenantID, r.PathValue("run"))
	if err != nil {
		return nil, storeError(err, "run")
	}
	return run, nil
}

// planView is what a run executes, from its snapshot; every string is
// visible()'d.
type consolePlan struct {
	Task, Provider, Model, Tier string
	Commands, Inputs, Outputs   []string
	Files                       []string
	Verify                      string
	WallMS, MaxTurns            int64
	Error                       string
}

// consolePlanOf reads a run's snapshot. A snapshot that does not parse
// (a ceiling tightened since, say) is shown as its error.
func consolePlanOf(snap []byte) consolePlan {
	var tc TaskConfig
	if err := json.Unmarshal(snap, &tc); err != nil {
		return consolePlan{Error: visible("the run's task snapshot does not parse: " + err.Error())}
	}
	m, err := manifest.Parse(tc.Manifest)
	if err != nil {
		return consolePlan{Error: visible("the run's manifest does not parse: " + err.Error())}
	}
	pl := consolePlan{Task: visible(m.Task), Provider: visible(m.Provider), Model: visible(m.Model),
		Commands: visibleAll(m.Commands), Inputs: visibleAll(m.Inputs), Outputs: visibleAll(m.Outputs),
		Verify: visible(strings.Join(m.Verify, " ")), WallMS: m.Budgets.WallMS, MaxTurns: m.Budgets.MaxTurns}
	if m.Grants != nil {
		pl.Tier = selection.Required(m.Grants).String()
	}
	for name := range tc.Files {
		pl.Files = append(pl.Files, visible(name))
	}
	sort.Strings(pl.Files)
	return pl
}

func visibleAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, v := range ss {
		out[i] = visible(v)
	}
	return out
}

// timelineEntry is one journal entry as the run's page shows it.
type timelineEntry struct {
	Index   int64  `json:"index"`
	Kind    string `json:"kind"`
	Summary string `json:"summary"`
	Detail  string `json:"detail,omitempty"`
}

// Bounds on what one entry shows.
const (
	maxSummary = 2000
	maxDetail  = 64 << 10
	// maxLiveJournal bounds the live journal read from a workspace.
	maxLiveJournal = 64 << 20
)

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" … (%d more bytes)", len(s)-cut)
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }

// describe renders an entry readably: a summary line of its kind's main
// members and, for commands and model turns, their text. Everything is
// visible()'d; the page escapes it as well.
func describe(index int64, kind string, body map[string]any) timelineEntry {
	str := func(k string) string {
		switch v := body[k].(type) {
		case string:
			return v
		case nil:
			return ""
		case []any:
			parts := make([]string, len(v))
			for i, e := range v {
				parts[i] = fmt.Sprint(e)
			}
			return strings.Join(parts, " ")
		default:
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	var sum, det string
	switch kind {
	case "command":
		sum = "$ " + str("argv")
		if _, ok := body["exit"]; ok {
			sum += " → exit " + str("exit")
		}
		if e := str("error"); e != "" {
			sum += " — " + e
		}
		for _, k := range []string{"stdout", "stderr"} {
			if v := str(k); v != "" {
				det += "[" + k + "]\n" + v + "\n"
			}
		}
	case "egress":
		verdict := "denied"
		if b, _ := body["allow"].(bool); b {
			verdict = "allowed"
		}
		sum = fmt.Sprintf("%s %s:%s %s (rule %s)", str("method"), str("host"), str("port"), verdict, str("rule"))
		if r := str("reason"); r != "" {
			sum += " — " + r
		}
	case "decision":
		sum = scalars(body)
	case "model.request":
		sum = "turn " + str("turn") + " (task " + str("task") + ")"
	case "model.response":
		sum = "turn " + str("turn") + ": " + str("stop_reason")
		if calls, ok := body["tool_calls"].([]any); ok && len(calls) > 0 {
			var names []string
			for _, c := range calls {
				if m, ok := c.(map[string]any); ok {
					names = append(names, fmt.Sprint(m["name"]))
				}
			}
			sum += "; tools: " + strings.Join(names, ", ")
			b, _ := json.MarshalIndent(calls, "", "  ")
			det = str("text")
			if det != "" {
				det += "\n"
			}
			det += string(b)
		} else {
			det = str("text")
		}
	case "model.error":
		sum = "turn " + str("turn") + ": " + str("error")
	case "verify":
		verdict := "failed"
		if b, _ := body["pass"].(bool); b {
			verdict = "passed"
		}
		sum = "$ " + str("argv") + " → " + verdict
	case "run.end":
		sum = "status " + str("status")
	default:
		sum = scalars(body)
	}
	return timelineEntry{Index: index, Kind: visible(kind), Summary: visible(clip(sum, maxSummary)), Detail: visible(clip(det, maxDetail))}
}

// scalars is an entry's scalar members as k=v, sorted.
func scalars(body map[string]any) string {
	keys := make([]string, 0, len(body))
	for k, v := range body {
		switch v.(type) {
		case string, bool, float64, json.Number:
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, body[k])
	}
	return strings.Join(parts, " ")
}

// parseTimeline reads journal lines (complete ones: a live journal's
// last line may be half written) from the entry index after on.
func parseTimeline(j []byte, after int64) []timelineEntry {
	var out []timelineEntry
	n := int64(0)
	for len(j) > 0 {
		i := bytes.IndexByte(j, '\n')
		if i < 0 {
			break // torn: not yet written
		}
		line := j[:i]
		j = j[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if n < after {
			n++
			continue
		}
		var e struct {
			Index int64          `json:"index"`
			Type  string         `json:"type"`
			Body  map[string]any `json:"body"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			out = append(out, timelineEntry{Index: n, Kind: "unreadable", Summary: visible(clip(string(line), maxSummary))})
		} else {
			out = append(out, describe(n, e.Type, e.Body))
		}
		n++
	}
	return out
}

// runJournal is a run's journal: the stored one once the run has ended,
// else the live one in its workspace on this host (nil when there is
// none here).
func (s *Server) runJournalBytes(ctx context.Context, run *store.Run) ([]byte, error) {
	if store.Terminal(run.State) {
		b, err := s.store.Evidence(ctx, run.TenantID, run.ID, "journal")
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		return b, err
	}
	b, err := nofollow.Read(filepath.Join(s.runDir(run.ID), "ws", runner.StateDir, runner.JournalFile), maxLiveJournal)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// verification is the server's own check of a run's stored evidence.
type verification struct {
	Verified bool
	Summary  string
	Checks   []runrecord.Check
	Receipt  *consoleReceipt
}

type consoleReceipt struct {
	Status, Manifest, Body, JournalHead, Signed string
	JournalCount                                int64
}

// verifyCache holds verifications by the digest of the archive they
// checked (and the key they checked it under): a page view of a run
// already verified costs a read and a hash, and an archive changed in the
// database is verified anew.
type verifyCache struct {
	mu sync.Mutex
	m  map[[32]byte]*verification // guarded by mu
}

const verifyCacheSize = 256

var verifications = &verifyCache{m: map[[32]byte]*verification{}}

// verifyEvidence verifies a finished run's stored record as `cordon
// verify run --pubkey` does, under the server's own public key: the
// archive is extracted to a temporary directory (regular files and
// directories under RUN/.cordon only) and checked by runrecord.Verify.
func (s *Server) verifyEvidence(ctx context.Context, run *store.Run) *verification {
	rec, err := s.store.Evidence(ctx, run.TenantID, run.ID, "record")
	if errors.Is(err, store.ErrNotFound) {
		return &verification{Summary: "no evidence: the run left no record (state " + run.State + ")"}
	}
	if err != nil {
		return &verification{Summary: "the evidence could not be read now"}
	}
	pub := s.cfg.Key.Public()
	key := sha256.Sum256(append([]byte(pub.ID().String()+"\x00"+run.ID+"\x00"), rec...))
	verifications.mu.Lock()
	v, ok := verifications.m[key]
	verifications.mu.Unlock()
	if ok {
		return v
	}
	v = s.verifyArchive(rec, run)
	verifications.mu.Lock()
	if len(verifications.m) >= verifyCacheSize {
		clear(verifications.m)
	}
	verifications.m[key] = v
	verifications.mu.Unlock()
	return v
}

func (s *Server) verifyArchive(rec []byte, run *store.Run) *verification {
	dir, err := os.MkdirTemp("", "cordon-console-verify-")
	if err != nil {
		return &verification{Summary: "the evidence could not be verified now (no temporary directory)"}
	}
	defer os.RemoveAll(dir)
	if err := extractRecord(rec, dir, run.ID); err != nil {
		return &verification{Summary: visible("FAILED: the evidence archive is malformed: " + err.Error())}
	}
	pub := s.cfg.Key.Public()
	rep := runrecord.Verify(filepath.Join(dir, run.ID), &pub)
	v := &verification{Verified: !rep.Failed(), Checks: rep.Checks}
	for i := range v.Checks {
		v.Checks[i].Name, v.Checks[i].Detail = visible(v.Checks[i].Name), visible(v.Checks[i].Detail)
	}
	if v.Verified {
		v.Summary = "verified: every check passed under the server's key " + pub.ID().String()
	} else {
		var bad []string
		for _, c := range rep.Checks {
			if !c.OK {
				bad = append(bad, c.Name+": "+c.Detail)
			}
		}
		v.Summary = visible("FAILED: the evidence does not check out: " + strings.Join(bad, "; "))
	}
	if res := rep.Result; res != nil {
		v.Receipt = &consoleReceipt{Status: visible(res.Body.Status), Manifest: visible(res.Commitments.Manifest), Body: visible(res.Commitments.Body),
			JournalHead: visible(res.Commitments.Journal.Head), JournalCount: res.Commitments.Journal.Count}
		if len(res.Signature) > 0 {
			v.Receipt.Signed = "signed; verified against " + pub.ID().String()
			if !v.Verified {
				v.Receipt.Signed = "signed; see the verification"
			}
		} else {
			v.Receipt.Signed = "unsigned"
		}
	}
	return v
}

// Bounds on an evidence archive the console extracts.
const (
	maxRecordFiles = 4096
	maxRecordBytes = 256 << 20
)

// extractRecord extracts the evidence archive (RUN/.cordon/…, as
// saveEvidence writes it) into dir: directories and regular files only,
// every name under RUN/.cordon, clean and relative; written through an
// os.Root so that nothing lands outside dir.
func extractRecord(archive []byte, dir, runID string) error {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	prefix := runID + "/" + runner.StateDir
	if err := root.MkdirAll(filepath.FromSlash(prefix), 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	total, files := int64(0), 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(h.Name, "/")
		if name != path.Clean(name) || path.IsAbs(name) || (name != prefix && !strings.HasPrefix(name, prefix+"/")) {
			return fmt.Errorf("entry %q is not under %s", h.Name, prefix)
		}
		if files++; files > maxRecordFiles {
			return fmt.Errorf("more than %d entries", maxRecordFiles)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(filepath.FromSlash(name), 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if total += h.Size; h.Size < 0 || total > maxRecordBytes {
				return fmt.Errorf("over %d bytes", maxRecordBytes)
			}
			f, err := root.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.CopyN(f, tr, h.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q is not a file or directory", h.Name)
		}
	}
}

// runPage is the run page's data.
type runPage struct {
	Run        consoleRunRow
	Reason     string
	Plan       consolePlan
	Timeline   []timelineEntry
	Ended      bool
	Events     string
	Verify     *verification
	Evidence   bool
	CanDecide  bool
	Submitter  bool
	ExitCode   string
	JournalErr string
}

// mayDecide reports whether the principal may approve or reject a run
// here: an approver of its tenant who is neither its submitter nor its
// author, while it is pending. It decides only what the page offers; the
// POST is decided by approveRun and the store, as the API's is.
func mayDecide(p *principal, run *store.Run) bool {
	return p != nil && !p.admin && p.p != nil && p.p.Role == store.RoleApprover && p.p.TenantID == run.TenantID &&
		p.p.UserID != run.SubmittedBy && p.p.UserID != run.AuthoredBy
}

func (s *Server) consoleRunPage(w http.ResponseWriter, r *http.Request) {
	run, ae := s.consoleRun(r)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	p := principalFrom(r.Context())
	names, ae := s.projectNames(r, []*store.Run{run})
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	pg := runPage{
		Run: consoleRunRow{ID: run.ID, State: run.State, Tier: visible(run.Tier), Tenant: run.TenantID, Project: visible(names[run.ProjectID]),
			Task: visible(run.Task), Submitter: run.SubmittedBy, Created: run.CreatedAt},
		Reason:    visible(run.Reason),
		Plan:      consolePlanOf(run.Config),
		Ended:     store.Terminal(run.State),
		CanDecide: run.State == store.StatePending && mayDecide(p, run),
		Submitter: p.p != nil && p.p.UserID == run.SubmittedBy,
	}
	if run.ExitCode != nil {
		pg.ExitCode = strconv.Itoa(*run.ExitCode)
	}
	j, err := s.runJournalBytes(r.Context(), run)
	if err != nil {
		pg.JournalErr = "the journal could not be read now"
	}
	pg.Timeline = parseTimeline(j, 0)
	if !pg.Ended {
		pg.Events = fmt.Sprintf("/console/runs/%s/events?after=%d", run.ID, len(pg.Timeline))
	} else {
		v := *s.verifyEvidence(r.Context(), run) // a copy: the cache's is shared, and rendering masks in place
		v.Checks = slices.Clone(v.Checks)
		if v.Receipt != nil {
			rc := *v.Receipt
			v.Receipt = &rc
		}
		pg.Verify = &v
		pg.Evidence = pg.Verify.Receipt != nil
	}
	s.render(w, r, 200, "run.html", "Run "+run.ID, "runs", pg)
}

// consoleJournal and consoleEvidence download a run's stored evidence,
// the same bytes as the API's routes.
func (s *Server) consoleJournal(w http.ResponseWriter, r *http.Request) {
	s.consoleDownload(w, r, "journal", "application/x-ndjson", ".jsonl")
}

func (s *Server) consoleEvidence(w http.ResponseWriter, r *http.Request) {
	s.consoleDownload(w, r, "record", "application/gzip", ".tar.gz")
}

func (s *Server) consoleDownload(w http.ResponseWriter, r *http.Request, which, ctype, ext string) {
	run, ae := s.consoleRun(r)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	b, ae := s.storedEvidence(r.Context(), run, which)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", `attachment; filename="`+run.ID+ext+`"`)
	w.Write(b)
}

// consoleEventPoll is how often the event stream looks for news, and
// consoleEventMax how long one stream lasts (the browser reconnects,
// resuming from the last entry it has).
var (
	consoleEventPoll = 250 * time.Millisecond
	consoleEventMax  = 4 * time.Minute
)

// consoleRunEvents streams a run's new journal entries and state changes
// as server-sent events until it has ended and every entry was sent (or
// the client goes). ?after=N (or Last-Event-ID) is how many entries the
// client has.
func (s *Server) consoleRunEvents(w http.ResponseWriter, r *http.Request) {
	run, ae := s.consoleRun(r)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	sent := int64(0)
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.consoleFail(w, r, &apiError{Code: 400, Msg: "after / Last-Event-ID: a count of entries"})
			return
		}
		sent = max(sent, n)
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	bw := bufio.NewWriter(w)
	state := ""
	deadline := time.Now().Add(consoleEventMax)
	for {
		if run.State != state {
			state = run.State
			fmt.Fprintf(bw, "event: status\ndata: %s\n\n", visible(state))
		}
		j, err := s.runJournalBytes(r.Context(), run)
		if err == nil {
			for _, e := range parseTimeline(j, sent) {
				// masked before it is encoded (JSON escapes a secret's
				// quotes and brackets) and after
				err := maskStrings(s.Pool(), reflect.ValueOf(&e).Elem())
				b, _ := json.Marshal(e)
				var m string
				if err == nil {
					m, err = s.Pool().String(string(b))
				}
				if err != nil { // the pool fails loud: nothing more is sent
					fmt.Fprint(bw, "event: end\ndata: withheld: the redaction pool is empty\n\n")
					bw.Flush()
					return
				}
				fmt.Fprintf(bw, "id: %d\nevent: entry\ndata: %s\n\n", e.Index+1, m)
				sent = e.Index + 1
			}
		}
		if store.Terminal(run.State) && err == nil {
			fmt.Fprint(bw, "event: end\ndata: ended\n\n")
			bw.Flush()
			rc.Flush()
			return
		}
		if bw.Flush() != nil || rc.Flush() != nil {
			return
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(consoleEventPoll):
		}
		if run, err = s.store.RunByID(r.Context(), run.ID); err != nil {
			return
		}
	}
}
