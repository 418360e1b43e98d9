package grant

import (
	"errors"
	"fmt"
	"slices"
)

// ErrWidening is wrapped by every error Covers returns.
var ErrWidening = errors.New("child grant set is not covered by its parent")

// WideningError names the first part of a child grant set that its parent
// does not cover.
type WideningError struct {
	Rule   string // the child's rule, e.g. "fs[1]", "limits.wall_ms", "code"
	Reason string
}

func (e *WideningError) Error() string { return e.Rule + ": " + e.Reason }
func (e *WideningError) Unwrap() error { return ErrWidening }

func widen(rule, format string, args ...any) error {
	return &WideningError{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// Covers returns nil when every request child allows, parent allows too,
// and child keeps every deny of parent and hardens (never softens) the
// facts that decide the isolation tier. Otherwise it returns a
// *WideningError naming the first widening it finds.
//
// Each child rule must be covered by a single parent rule: a child rule
// that only the union of several parent rules would cover is refused,
// which can refuse a harmless narrowing but never accepts a widening.
func Covers(parent, child *Set) error {
	// Facts: harder isolation only.
	if child.Trusted && !parent.Trusted {
		return widen("code", "the parent runs untrusted code; the child may not claim trusted")
	}
	if parent.MultiTenant && !child.MultiTenant {
		return widen("tenancy", "the parent is multi-tenant; the child may not claim single")
	}
	if parent.Confidential && !child.Confidential {
		return widen("confidential", "the parent requires confidential computing; the child may not drop it")
	}
	if parent.IsolatedKernel && !child.IsolatedKernel {
		return widen("isolated_kernel", "the parent requires a kernel other than the host's; the child may not drop it")
	}

	for i, c := range child.Devices {
		if !slices.ContainsFunc(parent.Devices, func(p Device) bool {
			return p.Class == c.Class && (p.Mode == c.Mode || p.Mode == "direct")
		}) {
			return widen(fmt.Sprintf("devices[%d]", i), "%s %s is not granted by the parent", c.Mode, c.Class)
		}
	}
	for i, c := range child.FS {
		if !slices.ContainsFunc(parent.FS, func(p FSRule) bool {
			return underPath(p.Path, c.Path) && c.Access&^p.Access == 0
		}) {
			return widen(fmt.Sprintf("fs[%d]", i), "%s (%s) is not within one parent fs rule", c.Path, c.Access)
		}
	}
	for i, c := range child.Egress {
		if !slices.ContainsFunc(parent.Egress, func(p EgressRule) bool {
			return p.Proto == c.Proto && p.PortLo <= c.PortLo && c.PortHi <= p.PortHi && endpointCovers(p.Endpoint, c.Endpoint)
		}) {
			return widen(fmt.Sprintf("egress[%d]", i), "%s %s ports %d-%d is not within one parent egress rule", c.Proto, c.Endpoint, c.PortLo, c.PortHi)
		}
	}
	for i, c := range child.KV {
		if !slices.ContainsFunc(parent.KV, func(p KVRule) bool {
			return p.Namespace == c.Namespace && hasPrefix(c.Prefix, p.Prefix) && subset(c.Ops, p.Ops)
		}) {
			return widen(fmt.Sprintf("kv[%d]", i), "%s %v %v is not within one parent kv rule", c.Namespace, c.Prefix, c.Ops)
		}
	}
	for i, c := range child.Services {
		if !slices.ContainsFunc(parent.Services, func(p ServiceRule) bool {
			return p.Name == c.Name && subset(c.Methods, p.Methods)
		}) {
			return widen(fmt.Sprintf("services[%d]", i), "service %s methods %v are not within one parent service rule", c.Name, c.Methods)
		}
	}
	parentHashMode := slices.ContainsFunc(parent.Exec, func(r ExecRule) bool { return r.HasB3 })
	childHashMode := slices.ContainsFunc(child.Exec, func(r ExecRule) bool { return r.HasB3 })
	for i, c := range child.Exec {
		if childHashMode && !c.HasB3 {
			continue // allows nothing under the child's own hash allowlist
		}
		if !slices.ContainsFunc(parent.Exec, func(p ExecRule) bool { return execCovers(p, c, parentHashMode) }) {
			return widen(fmt.Sprintf("exec.allow[%d]", i), "%s is not within one parent exec rule (a parent with a hash allowlist covers only pinned rules)", execString(c))
		}
	}
	if !subset(child.Env, parent.Env) {
		return widen("env", "%v includes names the parent does not grant", child.Env)
	}
	pl, cl := parent.Limits.fields(), child.Limits.fields()
	for i := range cl {
		c, p := *cl[i].v, *pl[i].v
		switch {
		case c == nil:
		case p == nil:
			return widen("limits."+cl[i].name, "the parent does not grant it")
		case *c > *p:
			return widen("limits."+cl[i].name, "%d exceeds the parent's %d", *c, *p)
		}
	}

	// Deny sets only grow: each parent deny must be covered by a child deny.
	for i, p := range parent.ExecDeny {
		if !slices.Contains(child.ExecDeny, p) {
			return widen("exec.deny", "drops the parent's exec.deny[%d] %s", i, p)
		}
	}
	for i, p := range parent.DenyFS {
		if !slices.ContainsFunc(child.DenyFS, func(c string) bool { return underPath(c, p) }) {
			return widen("deny.fs", "drops the parent's deny.fs[%d] %s", i, p)
		}
	}
	for i, p := range parent.DenyNet {
		if !slices.ContainsFunc(child.DenyNet, func(c Endpoint) bool { return endpointCovers(c, p) }) {
			return widen("deny.egress", "drops the parent's deny.egress[%d] %s", i, p)
		}
	}
	return nil
}

func endpointCovers(p, c Endpoint) bool {
	if p.CIDR.IsValid() != c.CIDR.IsValid() {
		return false
	}
	if p.CIDR.IsValid() {
		return p.CIDR.Addr().Is4() == c.CIDR.Addr().Is4() && p.CIDR.Bits() <= c.CIDR.Bits() && p.CIDR.Contains(c.CIDR.Addr())
	}
	return p.Host.coversPattern(c.Host)
}

func execCovers(p, c ExecRule, parentHashMode bool) bool {
	if parentHashMode && !p.HasB3 {
		return false // name-only rules allow nothing under a hash allowlist
	}
	if p.HasB3 && (!c.HasB3 || c.B3 != p.B3) {
		return false
	}
	if p.Name != "" && c.Name != p.Name {
		return false
	}
	if p.HasArgs && (!c.HasArgs || !hasPrefix(c.Args, p.Args)) {
		return false
	}
	return true
}

func execString(r ExecRule) string {
	s := r.Name
	if r.HasB3 {
		s += "@" + r.B3.String()
	}
	if r.HasArgs {
		s += fmt.Sprintf(" %q", r.Args)
	}
	return s
}

func subset(c, p []string) bool {
	for _, x := range c {
		if !slices.Contains(p, x) {
			return false
		}
	}
	return true
}
