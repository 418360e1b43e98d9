package manifest

import (
	"fmt"
	"slices"

	"github.com/cordon-dev/cordon/grant"
)

// WideningError names the first part of a child manifest that its parent
// does not cover.
type WideningError struct {
	Member string // the child's member, e.g. "outputs[1]", "budgets.wall_ms", "grants"
	Reason string
	Err    error // the underlying error (a *grant.WideningError for "grants"), or nil
}

func (e *WideningError) Error() string { return e.Member + ": " + e.Reason }

// Unwrap returns ErrWidening and, when set, the underlying error.
func (e *WideningError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrWidening, e.Err}
	}
	return []error{ErrWidening}
}

func widen(member, format string, args ...any) error {
	return &WideningError{Member: member, Reason: fmt.Sprintf(format, args...)}
}

// Covers returns nil when child only narrows parent (docs/SPEC.md §5.3), so
// a run under parent may spawn a sub-task under child. Otherwise it returns
// a *WideningError, which wraps ErrWidening, naming the first widening in
// the order: model, inputs, outputs, commands, grants, budgets, verify.
//
// The task and the replay script may differ. MaxPendingTasks must be
// strictly smaller in the child, so a manifest never covers itself and a
// chain of spawns ends.
//
// A sub-task is verified at least as strictly as its parent: when the
// parent has a verify command, the child's is the same argv, token for
// token (a child without one is refused); when the parent also has a
// report requirement, the child's has the same format and file and a
// min_passed at least the parent's. "Plus more" is exactly that: a child
// may add a report requirement its parent lacks (read from standard
// output: a report file is a path the verify run clears and writes, so
// a child may name only its parent's), raise min_passed, or add a verify
// command when its parent has none; it may not change the command, its
// arguments, the report's format or where it is read.
//
// Both must come from Parse.
func Covers(parent, child *Manifest) error {
	if child.Provider != parent.Provider {
		return widen("model.provider", "%q differs from the parent's %q", child.Provider, parent.Provider)
	}
	if child.Model != parent.Model {
		return widen("model.name", "%q differs from the parent's %q", child.Model, parent.Model)
	}
	if child.BaseURL != parent.BaseURL {
		return widen("model.base_url", "%q differs from the parent's %q", child.BaseURL, parent.BaseURL)
	}
	for i, c := range child.Inputs {
		if !anyUnder(parent.Inputs, c) {
			return widen(fmt.Sprintf("inputs[%d]", i), "%q is not a parent input or beneath one", c)
		}
	}
	for i, c := range child.Outputs {
		if !contains(parent.Outputs, c) {
			return widen(fmt.Sprintf("outputs[%d]", i), "%q is not a parent output", c)
		}
	}
	for i, c := range child.Commands {
		if !contains(parent.Commands, c) {
			return widen(fmt.Sprintf("commands[%d]", i), "%q is not a parent command", c)
		}
	}
	if err := grant.Covers(parent.Grants, child.Grants); err != nil {
		return &WideningError{Member: "grants", Reason: err.Error(), Err: err}
	}
	pb, cb := parent.Budgets.fields(), child.Budgets.fields()
	for i := range cb {
		if *cb[i].v > *pb[i].v {
			return widen("budgets."+cb[i].name, "%d exceeds the parent's %d", *cb[i].v, *pb[i].v)
		}
	}
	if child.Budgets.MaxPendingTasks >= parent.Budgets.MaxPendingTasks {
		return widen("budgets.max_pending_tasks", "%d is not below the parent's %d", child.Budgets.MaxPendingTasks, parent.Budgets.MaxPendingTasks)
	}
	return verifyCovers(parent, child)
}

// verifyCovers checks that child is verified at least as strictly as
// parent (see Covers).
func verifyCovers(parent, child *Manifest) error {
	// A report file is one more workspace path the verify run clears and
	// writes: a child may name one only where its parent does, or it
	// could delete or replace any file that is not an input or output.
	if c := child.VerifyReport; c != nil && c.File != "" && (parent.VerifyReport == nil || parent.VerifyReport.File != c.File) {
		return widen("verify_report.file", "%q is not the parent's report file: a sub-task's verify run may clear and write only the report file its parent's does (read a report the parent does not require from standard output)", c.File)
	}
	if parent.Verify == nil {
		return nil
	}
	if child.Verify == nil {
		return widen("verify", "missing; the parent's is %q and a sub-task must keep it", parent.Verify)
	}
	if !slices.Equal(child.Verify, parent.Verify) {
		return widen("verify", "%q differs from the parent's %q: a sub-task may not pick its own verify command", child.Verify, parent.Verify)
	}
	p, c := parent.VerifyReport, child.VerifyReport
	switch {
	case p == nil:
		return nil // the child may add a report requirement
	case c == nil:
		return widen("verify_report", "missing; the parent requires a %s report with at least %d passing tests", p.Format, p.MinPassed)
	case c.Format != p.Format:
		return widen("verify_report.format", "%q differs from the parent's %q", c.Format, p.Format)
	case c.File != p.File:
		return widen("verify_report.file", "the report is read from %s, the parent's from %s", c.From(), p.From())
	case c.MinPassed < p.MinPassed:
		return widen("verify_report.min_passed", "%d is below the parent's %d", c.MinPassed, p.MinPassed)
	}
	return nil
}

func anyUnder(roots []string, p string) bool {
	for _, r := range roots {
		if under(r, p) {
			return true
		}
	}
	return false
}
