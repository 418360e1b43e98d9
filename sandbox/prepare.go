package sandbox

import (
	"io"
	"time"
)

// Launch is what a prepared sandbox runs (Prepare, Prepared.Start): the
// part of a Spec that a warm pool's slot learns only when it is claimed.
// Its members mean what the Spec's members of the same names mean; the
// grant set, tier, tenant, runtime and limits are the prepared spec's and
// cannot change.
type Launch struct {
	Argv            []string
	Env             map[string]string
	Workspace       string
	Inputs, Outputs []string
	OutputsOptional bool
	Stdin           io.Reader
	Stdout, Stderr  io.Writer
	Decided         DecisionFunc
	Mounted         MountFunc
	// Wall, if positive, shortens the prepared spec's wall-clock limit
	// for this run; it may not lengthen it. The limit runs from Start.
	Wall time.Duration
}

// preparedFields reports the first member of s that a spec given to
// Prepare must leave empty (they are the Launch's), or "".
func (s *Spec) preparedFields() string {
	switch {
	case len(s.Argv) > 0:
		return "Argv"
	case len(s.Env) > 0:
		return "Env"
	case s.Workspace != "" || len(s.Inputs) > 0 || len(s.Outputs) > 0:
		return "Workspace, Inputs or Outputs"
	case s.Stdin != nil || s.Stdout != nil || s.Stderr != nil:
		return "Stdin, Stdout or Stderr"
	case s.Decided != nil || s.Mounted != nil:
		return "Decided or Mounted"
	case s.Control != nil:
		return "Control (a pooled run cannot be frozen)"
	}
	return ""
}
