package manifest

import (
	"fmt"

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
// the order: model, inputs, outputs, commands, grants, budgets.
//
// The task, the replay script and the verify command may differ (Parse has
// already required verify's argv[0] to be among the child's commands).
// MaxPendingTasks must be strictly smaller in the child, so a manifest
// never covers itself and a chain of spawns ends.
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
