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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/internal/nofollow"
	"github.com/cordon-dev/cordon/redact"
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

// Bounds on what one entry shows, and on the run page's timeline.
const (
	maxSummary = 2000
	maxDetail  = 64 << 10
	// maxLiveJournal bounds the live journal read from a workspace.
	maxLiveJournal = 64 << 20
	// consoleTimelineEntries and consoleTimelineBytes bound the run
	// page's timeline: the last entries, at most this many, and at most
	// this many bytes of their text once HTML-escaped; the rest is in
	// the journal download. consoleTimelineRaw bounds the raw journal
	// lines held while the journal is scanned for its last entries.
	consoleTimelineEntries = 2000
	consoleTimelineBytes   = 1 << 20
	consoleTimelineRaw     = 8 << 20
)

// clip cuts s to at most n bytes (and a note of what was cut), on a rune
// boundary and never inside a redaction mark: s is masked before it is
// clipped, so no secret straddles the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	const mark = "[redacted:"
	// the last mark that starts before the cut (its prefix may itself
	// cross the cut): if it ends after the cut, cut before it
	if i := strings.LastIndex(s[:min(len(s), cut+len(mark)-1)], mark); i >= 0 && i < cut && !strings.Contains(s[i:cut], "]") {
		cut = i
	}
	return s[:cut] + fmt.Sprintf(" … (%d more bytes)", len(s)-cut)
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }

// encodeJSON is v as JSON for a person to read: indented, with < > &
// as themselves (the page escapes them; JSON's \u003c would hide a
// secret from a mask applied to the text).
func encodeJSON(v any, indent bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// describe renders an entry readably: a summary line of its kind's main
// members and, for commands and model turns, their text. The body is
// masked by the pool before anything is encoded or composed, the
// composed text again before it is clipped, and everything is
// visible()'d; the page escapes it as well.
func describe(pool *redact.Pool, index int64, kind string, raw map[string]any) (timelineEntry, error) {
	mb, err := maskJSON(pool, raw, false) // red team F2: before any encoding
	if err != nil {
		return timelineEntry{}, err
	}
	body, _ := mb.(map[string]any)
	str := func(k string) string {
		switch v := body[k].(type) {
		case string:
			return v
		case nil:
			return ""
		case []any:
			parts := make([]string, len(v))
			for i, e := range v {
				if s, ok := e.(string); ok {
					parts[i] = s
				} else {
					parts[i] = encodeJSON(e, false)
				}
			}
			return strings.Join(parts, " ")
		default:
			return encodeJSON(v, false)
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
			det = str("text")
			if det != "" {
				det += "\n"
			}
			det += encodeJSON(calls, true)
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
	// the composed text again (a credential's shape may span members),
	// then clipped: the mask comes before the cut (red team F3)
	if kind, err = pool.String(kind); err == nil {
		if sum, err = pool.String(sum); err == nil {
			det, err = pool.String(det)
		}
	}
	if err != nil {
		return timelineEntry{}, err
	}
	return timelineEntry{Index: index, Kind: visible(kind), Summary: visible(clip(sum, maxSummary)), Detail: visible(clip(det, maxDetail))}, nil
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

// outputs resolves a command entry's stdout or stderr ContentId to the
// captured bytes it addresses, when they are on this host; nil: none.
type outputs func(id string) (string, bool)

// entryOf describes the n-th journal line, masked. A command's streams
// are shown as their text where outs has bytes that hash to the entry's
// ContentId, and said to be elsewhere otherwise.
func entryOf(pool *redact.Pool, n int64, line []byte, outs outputs) (timelineEntry, error) {
	var e struct {
		Index int64          `json:"index"`
		Type  string         `json:"type"`
		Body  map[string]any `json:"body"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		sum, err := pool.String(string(line))
		if err != nil {
			return timelineEntry{}, err
		}
		return timelineEntry{Index: n, Kind: "unreadable", Summary: visible(clip(sum, maxSummary))}, nil
	}
	if e.Type == "command" {
		for _, k := range []string{"stdout", "stderr"} {
			id, ok := e.Body[k].(string)
			if !ok {
				continue
			}
			if text, ok := resolve(outs, id); ok {
				e.Body[k] = text
			} else {
				e.Body[k] = "(not on this host: " + id + " in the run's evidence)"
			}
		}
	}
	return describe(pool, n, e.Type, e.Body)
}

func resolve(outs outputs, id string) (string, bool) {
	if outs == nil {
		return "", false
	}
	return outs(id)
}

// maxKeptOutput bounds a kept stream the console reads: the runner keeps
// at most 64 KiB of each (session.Command.Capture).
const maxKeptOutput = 64 << 10

// runOutputs reads the captured streams a run kept in its workspace on
// this host (runner.OutputDir), each only if it hashes to the ContentId
// asked for: a file changed or cut short is not shown as the output.
func (s *Server) runOutputs(runID string) outputs {
	dir := filepath.Join(s.runDir(runID), "ws", runner.StateDir, runner.OutputDir)
	return func(id string) (string, bool) {
		want, err := canon.ParseID(id)
		if err != nil || want.String() != id {
			return "", false
		}
		f, err := nofollow.Open(filepath.Join(dir, strings.TrimPrefix(id, "b3:")))
		if err != nil {
			return "", false
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxKeptOutput+1))
		if err != nil || len(b) > maxKeptOutput || canon.Sum(b) != want {
			return "", false
		}
		return string(b), true
	}
}

// journalLines calls f with each complete line of a journal (a live
// journal's last line may be half written: it is left) that is not
// blank, numbered from 0; it returns the bytes it consumed (up to the end
// of the last complete line) and the count of lines. f returning false
// stops it.
func journalLines(r io.Reader, n0 int64, f func(n int64, line []byte) bool) (consumed, n int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n = n0
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return consumed, n, nil // a torn last line is not yet written
			}
			return consumed, n, err
		}
		consumed += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ok := f(n, line[:len(line)-1])
		n++
		if !ok {
			return consumed, n, nil
		}
	}
}

// parseTimeline describes the journal's entries from the index after on.
func parseTimeline(pool *redact.Pool, j []byte, after int64, outs outputs) ([]timelineEntry, error) {
	var out []timelineEntry
	var ferr error
	_, _, err := journalLines(bytes.NewReader(j), 0, func(n int64, line []byte) bool {
		if n < after {
			return true
		}
		e, err := entryOf(pool, n, line, outs)
		if err != nil {
			ferr = err
			return false
		}
		out = append(out, e)
		return true
	})
	if ferr != nil {
		return nil, ferr
	}
	return out, err
}

// escapedLen is about how many bytes s takes once html/template has
// escaped it (< > & ' " + become entities of four or five bytes).
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<', '>', '&', '\'', '"', '+':
			n += 4
		}
	}
	return n
}

// pageTimeline is the run page's timeline (red team F5): the journal is
// scanned line by line (never parsed whole), its last
// consoleTimelineEntries lines kept (at most consoleTimelineRaw bytes of
// them), described, and of those the last that fit consoleTimelineBytes
// of escaped text shown. It returns them, the journal's count of entries
// and how many are not shown.
func pageTimeline(pool *redact.Pool, r io.Reader, outs outputs) (shown []timelineEntry, total, omitted int64, err error) {
	type held struct {
		n    int64
		line []byte
	}
	var ring []held
	raw := 0
	_, total, err = journalLines(r, 0, func(n int64, line []byte) bool {
		ring = append(ring, held{n, bytes.Clone(line)})
		raw += len(line)
		for len(ring) > 1 && (len(ring) > consoleTimelineEntries || raw > consoleTimelineRaw) {
			raw -= len(ring[0].line)
			ring[0].line = nil
			ring = ring[1:]
		}
		return true
	})
	if err != nil {
		return nil, 0, 0, err
	}
	size := 0
	start := len(ring)
	entries := make([]timelineEntry, len(ring))
	for i := len(ring) - 1; i >= 0; i-- {
		e, err := entryOf(pool, ring[i].n, ring[i].line, outs)
		if err != nil {
			return nil, 0, 0, err
		}
		l := escapedLen(e.Kind) + escapedLen(e.Summary) + escapedLen(e.Detail) + 100
		if size+l > consoleTimelineBytes && i < len(ring)-1 {
			break
		}
		size += l
		entries[i] = e
		start = i
	}
	shown = entries[start:]
	return shown, total, total - int64(len(shown)), nil
}

// openJournal opens a run's journal: the stored one once the run has
// ended, else the live one in its workspace on this host (nil when there
// is none here).
func (s *Server) openJournal(ctx context.Context, run *store.Run) (io.Reader, func(), error) {
	if store.Terminal(run.State) {
		b, err := s.store.Evidence(ctx, run.TenantID, run.ID, "journal")
		if errors.Is(err, store.ErrNotFound) {
			return nil, func() {}, nil
		}
		return bytes.NewReader(b), func() {}, err
	}
	f, err := nofollow.Open(s.liveJournalPath(run.ID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, func() {}, err
	}
	return io.LimitReader(f, maxLiveJournal), func() { f.Close() }, nil
}

func (s *Server) liveJournalPath(id string) string {
	return filepath.Join(s.runDir(id), "ws", runner.StateDir, runner.JournalFile)
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
	Omitted    int64 // the journal's entries the page does not show
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
	jr, done, err := s.openJournal(r.Context(), run)
	var total int64
	if err == nil && jr != nil {
		pg.Timeline, total, pg.Omitted, err = pageTimeline(s.Pool(), jr, s.runOutputs(run.ID))
	}
	done()
	if err != nil {
		if s.Pool().Err() != nil {
			s.withheldPage(w)
			return
		}
		pg.JournalErr = "the journal could not be read now"
	}
	if !pg.Ended {
		pg.Events = fmt.Sprintf("/console/runs/%s/events?after=%d", run.ID, total)
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

// consoleEventPoll is how often the event stream looks for news (backing
// off to consoleEventIdle while nothing changes), consoleEventMax how
// long one stream lasts (the browser reconnects, resuming from the last
// entry it has), and consoleSessionCheck how often an idle stream
// re-checks its session (it is also checked before anything new is
// sent).
var (
	consoleEventPoll    = 250 * time.Millisecond
	consoleEventIdle    = time.Second
	consoleEventMax     = 4 * time.Minute
	consoleSessionCheck = time.Second
)

// Caps on open event streams (red team F4): per session and in all.
const (
	consoleStreamsPerSession = 4
	consoleStreamsTotal      = 64
)

// streamLimit counts the open event streams.
type streamLimit struct {
	mu    sync.Mutex
	per   map[string]int // guarded by mu: by session hash
	total int            // guarded by mu
}

// acquire takes a stream slot for the session, or says why not.
func (l *streamLimit) acquire(session string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.per[session] >= consoleStreamsPerSession:
		return fmt.Sprintf("this session already has %d live views open (the most one session may): close other tabs of this console, or reload later", consoleStreamsPerSession)
	case l.total >= consoleStreamsTotal:
		return fmt.Sprintf("the server already serves %d live views (the most it serves at once): reload the page later", consoleStreamsTotal)
	}
	if l.per == nil {
		l.per = map[string]int{}
	}
	l.per[session]++
	l.total++
	return ""
}

func (l *streamLimit) release(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.per[session]--; l.per[session] <= 0 {
		delete(l.per, session)
	}
	l.total--
}

// sessionLive reports whether the console session is still live: not
// ended, expired, or its key revoked (store.ErrUnauthorized otherwise).
func (s *Server) sessionLive(ctx context.Context, sess *consoleSession) error {
	cs, err := s.store.ConsoleSessionByHash(ctx, sess.hash)
	if err != nil {
		return err
	}
	if cs.Admin && cs.AdminFP != s.adminFP() {
		return store.ErrUnauthorized
	}
	return nil
}

// liveTail reads a live journal incrementally: each call reads from the
// end of the last complete line it consumed, never the whole file again.
type liveTail struct {
	path string
	outs outputs // the run's kept command output
	off  int64   // bytes of complete lines consumed
	n    int64   // entries consumed
}

// next returns the entries written since the last call whose index is
// at least after, masked.
func (t *liveTail) next(pool *redact.Pool, after int64) ([]timelineEntry, error) {
	if t.off >= maxLiveJournal {
		return nil, nil
	}
	f, err := nofollow.Open(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, err
	}
	var out []timelineEntry
	var ferr error
	used, n, err := journalLines(io.LimitReader(f, maxLiveJournal-t.off), t.n, func(n int64, line []byte) bool {
		if n < after {
			return true
		}
		e, err := entryOf(pool, n, line, t.outs)
		if err != nil {
			ferr = err
			return false
		}
		out = append(out, e)
		return true
	})
	if ferr != nil {
		return nil, ferr
	}
	t.off += used
	t.n = n
	return out, err
}

// consoleRunEvents streams a run's new journal entries and state changes
// as server-sent events until it has ended and every entry was sent, the
// client goes, the stream's time is up, or its session ends (sign-out,
// expiry, the key revoked: checked before anything new is sent and at
// least every consoleSessionCheck). ?after=N (or Last-Event-ID) is how
// many entries the client has. A session holds at most
// consoleStreamsPerSession streams and the server consoleStreamsTotal
// (429 beyond). The live journal is read incrementally from where the
// last read stopped.
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
	sess := consoleSessionFrom(r.Context())
	if msg := s.streams.acquire(sess.hash); msg != "" {
		s.consoleFail(w, r, &apiError{Code: 429, Msg: msg})
		return
	}
	defer s.streams.release(sess.hash)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	bw := bufio.NewWriter(w)
	state := ""
	deadline := time.Now().Add(consoleEventMax)
	checked := time.Now()
	tail := &liveTail{path: s.liveJournalPath(run.ID), outs: s.runOutputs(run.ID)}
	wait := consoleEventPoll
	for {
		var news []timelineEntry
		var err error
		if store.Terminal(run.State) {
			// the stored journal, read once: the stream ends with it
			var j []byte
			if j, err = s.store.Evidence(r.Context(), run.TenantID, run.ID, "journal"); errors.Is(err, store.ErrNotFound) {
				j, err = nil, nil
			}
			if err == nil {
				news, err = parseTimeline(s.Pool(), j, sent, s.runOutputs(run.ID))
			}
		} else {
			news, err = tail.next(s.Pool(), sent)
		}
		if err != nil && s.Pool().Err() != nil { // the pool fails loud: nothing more is sent
			fmt.Fprint(bw, "event: end\ndata: withheld: the redaction pool is empty\n\n")
			bw.Flush()
			return
		}
		changed := run.State != state || len(news) > 0
		if changed || time.Since(checked) >= consoleSessionCheck {
			if s.sessionLive(r.Context(), sess) != nil {
				fmt.Fprint(bw, "event: end\ndata: signed out\n\n")
				bw.Flush()
				rc.Flush()
				return
			}
			checked = time.Now()
		}
		if run.State != state {
			state = run.State
			fmt.Fprintf(bw, "event: status\ndata: %s\n\n", visible(state))
		}
		for _, e := range news {
			// masked before it is encoded (entryOf), and after
			b, _ := json.Marshal(e)
			m, err := s.Pool().String(string(b))
			if err != nil {
				fmt.Fprint(bw, "event: end\ndata: withheld: the redaction pool is empty\n\n")
				bw.Flush()
				return
			}
			fmt.Fprintf(bw, "id: %d\nevent: entry\ndata: %s\n\n", e.Index+1, m)
			sent = e.Index + 1
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
		if changed {
			wait = consoleEventPoll
		} else {
			wait = min(wait*2, consoleEventIdle)
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(wait):
		}
		if run, err = s.store.Run(r.Context(), run.TenantID, run.ID); err != nil {
			return
		}
	}
}
