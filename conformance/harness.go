package conformance

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/cordon-dev/cordon/environment"
	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/fleet"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/amend"
	"github.com/cordon-dev/cordon/grant/standing"
	"github.com/cordon-dev/cordon/sandbox/pool/books"
	"github.com/cordon-dev/cordon/tier/selection"
)

// An Op runs one vector's operation on its input. It returns the output
// bytes and, where the operation defines one, the ContentId; or an error,
// whose kind the harness compares with the vector's expectation.
type Op func(in []byte) (out []byte, id canon.ID, err error)

// Class is a conformance class this implementation advertises.
type Class struct {
	Name  string
	Title string
	Ops   map[string]Op
}

// Classes returns the classes this implementation advertises, in order.
// A skipped vector in one of them is a failure.
func Classes() []Class {
	return []Class{c1(), c2(), c3(), c4(), c5(), c6(), c7(), c8(), c9(), c10(), c20(), c21(), cneg()}
}

// kinds maps error kind names, as vectors spell them, to the errors that
// satisfy them. CONFORMANCE.md lists the same names.
var kinds = map[string]error{
	"syntax":         canon.ErrSyntax,
	"bom":            canon.ErrBOM,
	"invalid-utf8":   canon.ErrInvalidUTF8,
	"lone-surrogate": canon.ErrLoneSurrogate,
	"noncharacter":   canon.ErrNoncharacter,
	"duplicate-key":  canon.ErrDuplicateKey,
	"float":          canon.ErrFloat,
	"negative-zero":  canon.ErrNegativeZero,
	"integer-range":  canon.ErrIntegerRange,
	"too-deep":       canon.ErrTooDeep,
	"too-large":      canon.ErrTooLarge,
	"id-prefix":      canon.ErrIDPrefix,
	"id-length":      canon.ErrIDLength,
	"id-encoding":    canon.ErrIDEncoding,
	"cbor-malformed": canon.ErrCBORMalformed,
	"cbor-type":      canon.ErrCBORType,
	"not-canonical":  canon.ErrNotCanonical,
	// Grants and tiers (SPEC §3, docs/tiers.md).
	"grant-invalid":    grant.ErrInvalid,
	"widening":         grant.ErrWidening,
	"tier-not-offered": selection.ErrNotOffered,
	// Evidence (SPEC §4).
	"bad-signature":       sign.ErrBadSignature,
	"receipt-invalid":     receipt.ErrInvalid,
	"coupling":            receipt.ErrCoupling,
	"sum":                 receipt.ErrSum,
	"coverage":            receipt.ErrCoverage,
	"attestation-invalid": attest.ErrInvalid,
	"binding":             attest.ErrBinding,
	"tee-missing":         attest.ErrTEE,
	"journal-mismatch":    attest.ErrJournal,
	"journal-broken":      journal.ErrBroken,
	"journal-truncated":   journal.ErrTruncated,
	"replay-diverged":     errReplayDiverged,
	"replay-truncated":    errReplayTruncated,
	"grant-mutated":       errGrantMutated,
	"denied":              errDenied,
	// Environment manifests (SPEC §7).
	"env-invalid": environment.ErrInvalid,
	"env-refused": environment.ErrRefused,
	// Durable run records (SPEC §9).
	"record-broken":  durable.ErrBroken,
	"record-refused": durable.ErrRefused,
	// Standing grants (SPEC §3.6).
	"mint-invalid":   standing.ErrInvalid,
	"mint-signer":    standing.ErrSigner,
	"mint-unmatched": standing.ErrUnmatched,
	"mint-expired":   standing.ErrExpired,
	"mint-rate":      standing.ErrRate,
	"mint-exhausted": standing.ErrExhausted,
	// Checkpoints and amendments (SPEC §3.7).
	"amend-invalid": amend.ErrInvalid,
	"amend-signer":  amend.ErrSigner,
	"amend-run":     amend.ErrRun,
	"amend-replay":  amend.ErrReplay,
	"amend-base":    amend.ErrBase,
	"amend-budget":  amend.ErrBudget,
	"amend-noop":    amend.ErrNoop,
	// Warm pools (SPEC §12).
	"pool-mismatch":  books.ErrMismatch,
	"pool-gone":      books.ErrGone,
	"pool-zero-idle": books.ErrZeroIdle,
	"pool-invalid":   books.ErrInvalid,
	// Fleet records (SPEC §8).
	"fleet-invalid": fleet.ErrInvalid,
	"not-included":  fleet.ErrNotIncluded,
}

// ErrorKinds returns the error kind names a vector may expect, sorted.
func ErrorKinds() []string {
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Options select what Run checks.
type Options struct {
	// Classes, when not empty, limits the run to these classes; each must
	// be advertised and have vectors.
	Classes []string
}

// Result is the outcome of one class.
type Result struct {
	Class, Title            string
	Advertised              bool
	Passed, Failed, Skipped int
	Failures                []Failure
}

// Failure names a failed vector and says why.
type Failure struct {
	Vector string
	Reason string
}

// Report is the outcome of a run.
type Report struct {
	Results []Result
}

// Totals sums the counts of every class.
func (r *Report) Totals() (passed, failed, skipped int) {
	for _, c := range r.Results {
		passed += c.Passed
		failed += c.Failed
		skipped += c.Skipped
	}
	return
}

// OK reports whether nothing failed.
func (r *Report) OK() bool {
	_, failed, _ := r.Totals()
	return failed == 0
}

// Summary is the last line of a run, exactly as CONFORMANCE.md gives it.
func (r *Report) Summary() string {
	p, f, s := r.Totals()
	return fmt.Sprintf("conformance: %d passed, %d failed, %d skipped", p, f, s)
}

// Line is the one-line result of a class.
func (c *Result) Line() string {
	state := ""
	if !c.Advertised {
		state = " (not advertised)"
	}
	return fmt.Sprintf("%s %s: %d passed, %d failed, %d skipped%s", c.Class, c.Title, c.Passed, c.Failed, c.Skipped, state)
}

// ErrUnknownClass is returned when Options name a class that this
// implementation does not advertise or that has no vectors.
var ErrUnknownClass = errors.New("conformance: unknown class")

// Run loads the vectors in fsys and checks every one against the classes
// this implementation advertises. Vectors of classes it does not advertise
// are skipped; a vector of an advertised class whose operation is not
// implemented fails, and so does an advertised class with no vectors.
func Run(fsys fs.FS, opts Options) (*Report, error) {
	files, err := Load(fsys)
	if err != nil {
		return nil, err
	}
	advertised := map[string]Class{}
	var order []string
	for _, c := range Classes() {
		advertised[c.Name] = c
		order = append(order, c.Name)
	}
	byClass := map[string]File{}
	for _, f := range files {
		byClass[f.Class] = f
		if _, ok := advertised[f.Class]; !ok {
			order = append(order, f.Class)
		}
	}
	selected := order
	if len(opts.Classes) > 0 {
		selected = nil
		for _, name := range opts.Classes {
			if _, ok := advertised[name]; !ok {
				return nil, fmt.Errorf("%w %q: this implementation advertises %s", ErrUnknownClass, name, strings.Join(names(Classes()), ", "))
			}
			if _, ok := byClass[name]; !ok {
				return nil, fmt.Errorf("%w %q: no vectors for it", ErrUnknownClass, name)
			}
			if !slices.Contains(selected, name) {
				selected = append(selected, name)
			}
		}
	}
	rep := &Report{}
	for _, name := range selected {
		f, haveVectors := byClass[name]
		c, isAdvertised := advertised[name]
		res := Result{Class: name, Title: f.Title, Advertised: isAdvertised}
		if isAdvertised {
			res.Title = c.Title
		}
		switch {
		case !isAdvertised:
			res.Skipped = len(f.Vectors)
		case !haveVectors:
			res.Failed = 1
			res.Failures = append(res.Failures, Failure{Vector: name, Reason: "no vectors for an advertised class"})
		default:
			for i := range f.Vectors {
				v := &f.Vectors[i]
				if reason := check(c, v); reason != "" {
					res.Failed++
					res.Failures = append(res.Failures, Failure{Vector: v.ID, Reason: reason})
				} else {
					res.Passed++
				}
			}
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

func names(cs []Class) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// check runs one vector and returns "" when it passes, or the reason.
func check(c Class, v *Vector) string {
	op, ok := c.Ops[v.Op]
	if !ok {
		return fmt.Sprintf("operation %q is not implemented (a skip in an advertised class fails)", v.Op)
	}
	in, err := v.Bytes()
	if err != nil {
		return err.Error()
	}
	out, id, err := op(in)
	if v.Expect.Error != "" {
		if err == nil {
			return fmt.Sprintf("accepted; want error %q", v.Expect.Error)
		}
		if !errors.Is(err, kinds[v.Expect.Error]) {
			return fmt.Sprintf("error %v; want error %q", err, v.Expect.Error)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("refused: %v", err)
	}
	if w := v.Expect.Output; w != nil && !bytes.Equal(out, []byte(*w)) {
		return fmt.Sprintf("output %q; want %q", out, *w)
	}
	if w := v.Expect.OutputHex; w != nil && hex.EncodeToString(out) != *w {
		return fmt.Sprintf("output %x; want %s", out, *w)
	}
	if w := v.Expect.ID; w != "" && id.String() != w {
		return fmt.Sprintf("id %s; want %s", id, w)
	}
	return ""
}
