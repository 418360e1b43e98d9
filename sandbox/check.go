package sandbox

import (
	"github.com/cordon-dev/cordon/sandbox/stage"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// check refuses a spec that is incomplete or that the grant set does not
// allow, before anything is probed or started.
func (s *Spec) check() error {
	if !s.deferred && (len(s.Argv) == 0 || s.Argv[0] == "") {
		return refusedf("no program to run")
	}
	if s.Grants == nil {
		return refusedf("no grant set: a run without grants is never started")
	}
	req := selection.Required(s.Grants)
	if req != s.Tier {
		return refusedf("the grant set requires tier %s, and a run executes at exactly its required tier (asked for %s)", req, s.Tier)
	}
	switch s.Tier {
	case tier.S2, tier.S4:
		if s.Tenant != "" {
			return refusedf("tenant %q given for a single-tenant (%s) run", s.Tenant, s.Tier)
		}
	case tier.S3:
		if !validTenant(s.Tenant) {
			return refusedf("an S3 run needs a tenant name matching %s, got %q", tenantForm, s.Tenant)
		}
	default:
		return refusedf("the sandbox provides S2, S3 and S4, not %s", s.Tier)
	}
	if s.Image != nil && s.Tier == tier.S4 {
		return refusedf("an image runtime is not available at S4 (gVisor): run the image at S2 or S3, or at S4 without --image (docs/sandbox.md, \"Image runtime\")")
	}
	l := s.Limits
	for _, v := range []struct {
		name string
		v    int64
	}{
		{"wall", int64(l.Wall)}, {"memory", l.MemoryBytes}, {"pids", l.PIDs}, {"cpu", l.CPUMillis},
		{"nofile", l.NoFile}, {"file size", l.FileSizeBytes}, {"tmp size", l.TmpBytes}, {"work size", l.WorkBytes},
		{"stage file size", l.Stage.MaxFileBytes}, {"stage total", l.Stage.MaxTotalBytes}, {"stage files", int64(l.Stage.MaxFiles)},
	} {
		if v.v <= 0 {
			return refusedf("limit %s must be positive, got %d", v.name, v.v)
		}
	}
	if (len(s.Inputs) > 0 || len(s.Outputs) > 0) && s.Workspace == "" {
		return refusedf("inputs or outputs were declared without a workspace")
	}
	for _, p := range s.Inputs {
		if err := stage.CheckPath(p); err != nil {
			return refusedf("input %q: %v", p, err)
		}
	}
	for _, p := range s.Outputs {
		if err := stage.CheckPath(p); err != nil {
			return refusedf("output %q: %v", p, err)
		}
	}
	if len(s.Grants.Egress) > 0 && s.Egress == nil {
		return refusedf("the grant set has egress rules but the run has no egress proxy: refused rather than run with a route out")
	}
	if s.StateDir == "" {
		return refusedf("no state directory")
	}
	return nil
}

// tenantForm is the form of a tenant name: it becomes a directory name.
const tenantForm = `^[a-z0-9][a-z0-9_-]{0,62}$`

// validTenant reports whether s has tenantForm, checked byte by byte
// (a compiled regular expression cost every process about 0.1 ms at start).
func validTenant(s string) bool {
	lowerDigit := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	if len(s) < 1 || len(s) > 63 || !lowerDigit(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !lowerDigit(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}
