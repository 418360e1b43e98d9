package runrecord

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/testreport"
	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant/amend"
	"github.com/cordon-dev/cordon/internal/nofollow"
	"github.com/cordon-dev/cordon/internal/printable"
)

// Check is one verification step and its outcome.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Report is what Verify found, step by step.
type Report struct {
	Checks []Check
	Result *Result // nil if result.json could not be read
	// Signed reports that the signature, receipt and attestation were
	// checked against a trusted key (Options.Pubkey), not only against the
	// key stored in the workspace.
	Trusted bool
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return true
		}
	}
	return false
}

func (r *Report) add(name string, err error, detail string) bool {
	c := Check{Name: name, OK: err == nil, Detail: detail}
	if err != nil {
		c.Detail = err.Error()
	}
	// Details quote the files being verified, which may be hostile: no
	// terminal escapes, no line breaks that could fake another check.
	c.Detail = printable.String(c.Detail)
	r.Checks = append(r.Checks, c)
	return err == nil
}

// Verify checks a workspace's run record offline: result.json is
// well formed and canonical; manifest.json is the manifest it commits to;
// the body is the one it commits to; the journal verifies, ends exactly at
// the committed head, and that head is the run.end entry naming the body;
// and, when the result is signed, the signature, receipt and attestation
// verify under pub and bind the same journal and manifest. With pub nil a
// signed result is checked against the public key stored beside it, which
// shows consistency, not who signed: the report says so. With pub set, an
// unsigned result fails.
func Verify(workspace string, pub *sign.PublicKey) *Report {
	rep := &Report{}
	state := filepath.Join(workspace, StateDir)
	var b []byte
	fi, err := os.Lstat(state)
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%s is %s, not a directory (a link to another workspace's record is not followed)", state, nofollow.Describe(fi.Mode()))
	}
	if err == nil {
		b, err = nofollow.Read(filepath.Join(state, ResultFile), MaxResultBytes)
	}
	var res *Result
	if err == nil {
		res, err = ParseResult(b)
	}
	if !rep.add("result", err, ResultFile+" is canonical and well formed") {
		return rep
	}
	rep.Result = res
	c := res.Commitments

	mb, err := nofollow.Read(filepath.Join(state, ManifestFile), 1<<24)
	var m *manifest.Manifest
	if err == nil {
		m, err = manifest.Parse(mb)
	}
	if err == nil && m.ID().String() != c.Manifest {
		err = fmt.Errorf("%s is manifest %s; the result commits to %s", ManifestFile, m.ID(), c.Manifest)
	}
	rep.add("manifest", err, "manifest "+c.Manifest)

	if got := res.Body.ID().String(); got != c.Body {
		rep.add("body", fmt.Errorf("the body's ContentId is %s; the result commits to %s: the body was edited", got, c.Body), "")
	} else {
		rep.add("body", nil, "body "+c.Body+", status "+res.Body.Status)
	}

	var entries []journal.Entry
	f, err := nofollow.Open(filepath.Join(state, JournalFile))
	if err == nil {
		var h journal.Head
		entries, h, err = journal.Scan(f)
		f.Close()
		if err == nil {
			switch {
			case h.Count != c.Journal.Count:
				err = fmt.Errorf("the journal has %d entries; the result commits to %d (entries were added or removed)", h.Count, c.Journal.Count)
			case h.ID.String() != c.Journal.Head:
				err = fmt.Errorf("the journal's head is %s; the result commits to %s", h.ID, c.Journal.Head)
			}
		}
	}
	if err == nil {
		err = checkEnd(entries[len(entries)-1], c)
	}
	if err == nil {
		err = checkSince(entries, c)
	}
	checkpoints := 0
	if err == nil {
		// Each checkpoint of this run verifies under the agent key its
		// run.principals entry names, at the position it records
		// (docs/SPEC.md §3.7).
		if checkpoints, err = amend.VerifyJournal(entries[c.Since:]); err != nil {
			err = fmt.Errorf("checkpoints: %w", err)
		}
	}
	rep.add("journal", err, fmt.Sprintf("%d entries, head %s; this run's are %d to %d, from run.start of this manifest to run.end of this body; %d checkpoints signed by the run's agent key",
		c.Journal.Count, c.Journal.Head, c.Since, c.Journal.Count-1, checkpoints))
	if err == nil {
		if detail, serr := segmentChain(state, entries[c.Since:]); detail != "" || serr != nil {
			rep.add("segments", serr, detail)
		}
	}

	if res.Signature == nil {
		// An unsigned run removes these; beside an unsigned result they
		// mean a signature was stripped.
		stripped := ""
		for _, f := range []string{ReceiptFile, AttestationFile, PubkeyFile} {
			if _, err := os.Lstat(filepath.Join(state, f)); err == nil {
				stripped = fmt.Sprintf("%s is beside it: was the signature removed?", f)
				break
			}
		}
		switch {
		case pub != nil && stripped != "":
			rep.add("signature", fmt.Errorf("the result is not signed, and a trusted key was given; %s", stripped), "")
		case pub != nil:
			rep.add("signature", errors.New("the result is not signed, and a trusted key was given"), "")
		case stripped != "":
			rep.add("signature", fmt.Errorf("the result is unsigned but %s", stripped), "")
		}
		return rep
	}
	key := pub
	if key == nil {
		pb, err := nofollow.Read(filepath.Join(state, PubkeyFile), 1<<16)
		if err == nil {
			var k sign.PublicKey
			if k, err = sign.ParsePublic(pb); err == nil {
				key = &k
			}
		}
		if !rep.add("key", err, "the workspace's "+PubkeyFile+" (not a trusted key: pass --pubkey to check who signed)") {
			return rep
		}
	} else {
		rep.Trusted = true
	}
	rep.add("signature", res.CheckSignature(*key), "commitments signed by key "+key.ID().String())

	rb, err := nofollow.Read(filepath.Join(state, ReceiptFile), 1<<20)
	var rc *receipt.Core
	if err == nil {
		rc, _, err = receipt.Verify(rb, *key)
	}
	if err == nil {
		switch {
		case rc.Unit != c.Manifest:
			err = fmt.Errorf("the receipt's unit is %s, not the manifest %s", rc.Unit, c.Manifest)
		case rc.JournalRoot != c.Journal.Head:
			err = fmt.Errorf("the receipt's journal root is %s, not the journal head %s", rc.JournalRoot, c.Journal.Head)
		case m != nil && rc.Grants != m.Grants.ID().String():
			err = fmt.Errorf("the receipt's grants are %s, not the manifest's %s", rc.Grants, m.Grants.ID())
		}
	}
	rep.add("receipt", err, "receipt bound to the manifest and the journal head")
	if rc == nil {
		return rep
	}
	ab, err := nofollow.Read(filepath.Join(state, AttestationFile), 1<<20)
	if err == nil {
		if entries == nil {
			entries = []journal.Entry{}
		}
		_, err = attest.Verify(ab, *key, attest.Options{Receipt: rc, Journal: entries})
	}
	rep.add("attestation", err, "attestation bound to the receipt and the journal")
	return rep
}

// checkEnd checks that the journal's last entry is the run.end of the
// committed body.
func checkEnd(last journal.Entry, c Commitments) error {
	if last.Type != "run.end" {
		return fmt.Errorf("the last entry is %q, not run.end", last.Type)
	}
	var end struct {
		Body string `json:"body"`
	}
	if err := json.Unmarshal(last.Body().AppendJCS(nil), &end); err != nil {
		return fmt.Errorf("run.end: %w", err)
	}
	if end.Body != c.Body {
		return fmt.Errorf("run.end names body %q; the result commits to %s", end.Body, c.Body)
	}
	return nil
}

// checkSince checks that the run's entries begin at a run.start of the
// committed manifest, with no other run started after it.
func checkSince(entries []journal.Entry, c Commitments) error {
	start := entries[c.Since]
	if start.Type != "run.start" {
		return fmt.Errorf("entry %d, where the result says this run starts, is %q, not run.start", c.Since, start.Type)
	}
	var body struct {
		Manifest string `json:"manifest"`
	}
	if err := json.Unmarshal(start.Body().AppendJCS(nil), &body); err != nil {
		return fmt.Errorf("run.start: %w", err)
	}
	if body.Manifest != c.Manifest {
		return fmt.Errorf("run.start at entry %d names manifest %q, not %s", c.Since, body.Manifest, c.Manifest)
	}
	for _, e := range entries[c.Since+1:] {
		if e.Type == "run.start" {
			return fmt.Errorf("entry %d starts another run inside this one", e.Index)
		}
	}
	return nil
}

// Modes of a Verification.
const (
	VerifyExitStatusOnly = "exit-status-only" // the manifest asks for no report: only the exit status was judged
	VerifyReport         = "report"           // the exit status and a test report were judged
)

// Verification is how a task's verify command was judged (docs/SPEC.md
// §6.3.1): its exit status alone, or that and the test report the
// manifest's verify_report requires.
type Verification struct {
	Mode      string             `json:"mode"`                 // VerifyExitStatusOnly or VerifyReport
	Pass      bool               `json:"pass"`                 // the verify step passed
	Format    string             `json:"format,omitempty"`     // mode report: the report's format
	From      string             `json:"from,omitempty"`       // mode report: "stdout" or the report file's path
	MinPassed int64              `json:"min_passed,omitempty"` // mode report: the passing tests required
	Counts    *testreport.Counts `json:"counts,omitempty"`     // mode report: what the report said, when it was read
	Error     string             `json:"error,omitempty"`      // why the report did not pass, or why nothing ran
}

// check is ParseResult's check of a recorded Verification.
func (v *Verification) check() error {
	switch {
	case v == nil:
		return nil
	case v.Mode == VerifyExitStatusOnly && (v.Format != "" || v.From != "" || v.MinPassed != 0 || v.Counts != nil):
		return errors.New("an exit-status-only verification with report members")
	case v.Mode == VerifyReport && (!testreport.Known(v.Format) || v.From == "" || v.MinPassed < 1):
		return errors.New("a report verification without its format, source or min_passed")
	case v.Mode != VerifyExitStatusOnly && v.Mode != VerifyReport:
		return fmt.Errorf("verification mode %q", v.Mode)
	case v.Pass && v.Mode == VerifyReport && (v.Counts == nil || v.Counts.Failed != 0 || v.Counts.Passed < v.MinPassed):
		return errors.New("a passing report verification whose counts do not pass")
	}
	return nil
}

// String says, on one printable line, how the verification went.
func (v *Verification) String() string {
	verdict := "failed"
	if v.Pass {
		verdict = "passed"
	}
	var s string
	switch {
	case v.Mode == VerifyExitStatusOnly:
		s = fmt.Sprintf("%s on exit status only: no test report was required, so nothing shows that tests ran", verdict)
	case v.Counts != nil:
		s = fmt.Sprintf("%s: %s report from %s: %d passed, %d failed, %d skipped; at least %d passing and none failing required",
			verdict, v.Format, v.From, v.Counts.Passed, v.Counts.Failed, v.Counts.Skipped, v.MinPassed)
	default:
		s = fmt.Sprintf("%s: %s report from %s (at least %d passing required) was not read", verdict, v.Format, v.From, v.MinPassed)
	}
	if v.Error != "" {
		s += ": " + v.Error
	}
	return printable.String(oneLine(s))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// segmentChain describes a parked and resumed run's segments (docs/SPEC.md
// §9.4) as its journal records them — where each parked, the snapshot
// each resumed from, where it ended — and checks them against the run's
// durable record (WORKSPACE/.cordon/runs/RUN/record): one suspend per
// run.park, the resumes' snapshots in order, closed. A run that never
// parked has no chain ("", nil). Two histories of one run id (a parked
// copy resumed twice, which nothing offline can prevent) show the same
// run id with different chains or heads.
func segmentChain(state string, es []journal.Entry) (string, error) {
	var run string
	var parts, snaps []string
	parks, from := 0, es[0].Index
	for _, e := range es {
		var b struct {
			Run      string `json:"run"`
			Reason   string `json:"reason"`
			Snapshot string `json:"snapshot"`
			ParkedMS int64  `json:"parked_ms"`
		}
		switch e.Type {
		case "run.principals", "run.park", "run.resume":
			if err := json.Unmarshal(e.Body().AppendJCS(nil), &b); err != nil {
				return "", fmt.Errorf("entry %d: %s: %w", e.Index, e.Type, err)
			}
		}
		switch e.Type {
		case "run.principals":
			if run == "" {
				run = b.Run
			}
		case "run.park":
			parks++
			parts = append(parts, fmt.Sprintf("entries %d-%d parked (%s)", from, e.Index, b.Reason))
		case "run.resume":
			from = e.Index
			snaps = append(snaps, b.Snapshot)
			parts = append(parts, fmt.Sprintf("resumed from snapshot %s after %d ms", b.Snapshot, b.ParkedMS))
		}
	}
	if parks == 0 {
		return "", nil
	}
	last := es[len(es)-1]
	parts = append(parts, fmt.Sprintf("entries %d-%d ended (head %s)", from, last.Index, last.ID()))
	detail := fmt.Sprintf("run %s: %d segments: %s; another history of this run (a copy of a parked workspace resumed again) has another chain or head",
		run, parks+1, strings.Join(parts, ", "))
	if amend.CheckRunID(run) != nil {
		return "", fmt.Errorf("the run's id %q is not a run id", run)
	}
	name := filepath.Join(state, "runs", run, "record")
	wire, err := nofollow.Read(name, 64<<20)
	if err != nil {
		return "", fmt.Errorf("the run parked %d times but its durable record cannot be read: %w", parks, err)
	}
	rec, err := durable.Parse(wire)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var recSnaps []string
	for _, sg := range rec.Segments() {
		if sg.Kind == durable.Resume {
			recSnaps = append(recSnaps, sg.Snapshot.String())
		}
	}
	h := rec.Head()
	switch {
	case h.State != durable.Closed:
		return "", fmt.Errorf("%s is %s, but the run ended", name, h.State)
	case h.Parks != parks:
		return "", fmt.Errorf("%s records %d parks; the journal %d", name, h.Parks, parks)
	case strings.Join(recSnaps, ",") != strings.Join(snaps, ","):
		return "", fmt.Errorf("%s resumes from snapshots [%s]; the journal's run.resume entries name [%s]", name, strings.Join(recSnaps, " "), strings.Join(snaps, " "))
	}
	return detail + fmt.Sprintf("; durable record %s agrees (%d segments, head %s)", name, h.Count, h.Head), nil
}
