package grant

import (
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// refAllow is a naive reference enforcer: linear scans and plain string
// tests, written separately from the Enforcer's tries and indexes. The
// Enforcer must agree with it on every request (TestEnforcerMatchesReference,
// FuzzDecide). It shares only the canonicality checks.
func refAllow(s *Set, q Query) bool {
	if onlyFields(q) != nil {
		return false
	}
	under := func(root, p string) bool {
		return root == "/" || p == root || strings.HasPrefix(p, root+"/")
	}
	switch q.Kind {
	case KindDevice:
		if checkIdent("c", q.Class) != nil || (q.Mode != "brokered" && q.Mode != "direct") {
			return false
		}
		for _, d := range s.Devices {
			if d.Class == q.Class && (d.Mode == q.Mode || d.Mode == "direct") {
				return true
			}
		}
	case KindFS:
		bit := map[string]Access{"read": Read, "write": Write, "exec": Exec}[q.Op]
		if bit == 0 || CheckPath(q.Path) != nil {
			return false
		}
		for _, d := range s.DenyFS {
			if under(d, q.Path) {
				return false
			}
		}
		for _, r := range s.FS {
			if under(r.Path, q.Path) && r.Access&bit != 0 {
				return true
			}
		}
	case KindEgress:
		if (q.Proto != "tcp" && q.Proto != "udp") || q.Port < 1 || q.Port > 65535 {
			return false
		}
		portOK := func(r EgressRule) bool {
			return r.Proto == q.Proto && int(r.PortLo) <= q.Port && q.Port <= int(r.PortHi)
		}
		if a, err := netip.ParseAddr(q.Host); err == nil && a.String() == q.Host && a.Zone() == "" && !a.Is4In6() {
			if a.IsUnspecified() {
				return false
			}
			for _, d := range s.DenyNet {
				if d.CIDR.IsValid() && d.CIDR.Contains(a) {
					return false
				}
			}
			for _, r := range s.Egress {
				if r.CIDR.IsValid() && r.CIDR.Contains(a) && portOK(r) {
					return true
				}
			}
			return false
		}
		if CheckHost(q.Host) != nil {
			return false
		}
		hostIs := func(p HostPattern) bool {
			if p.Wildcard {
				return strings.HasSuffix(q.Host, "."+p.Name)
			}
			return q.Host == p.Name
		}
		for _, d := range s.DenyNet {
			if !d.CIDR.IsValid() && hostIs(d.Host) {
				return false
			}
		}
		for _, r := range s.Egress {
			if !r.CIDR.IsValid() && hostIs(r.Host) && portOK(r) {
				return true
			}
		}
	case KindKV:
		if checkIdent("n", q.Namespace) != nil || !slices.Contains([]string{"get", "put", "delete", "list"}, q.Op) {
			return false
		}
		for _, k := range q.Key {
			if checkSegment(k) != nil {
				return false
			}
		}
		for _, r := range s.KV {
			if r.Namespace == q.Namespace && len(q.Key) >= len(r.Prefix) && slices.Equal(q.Key[:len(r.Prefix)], r.Prefix) && slices.Contains(r.Ops, q.Op) {
				return true
			}
		}
	case KindService:
		if checkIdent("s", q.Name) != nil || checkIdent("m", q.Method) != nil {
			return false
		}
		for _, r := range s.Services {
			if r.Name == q.Name && slices.Contains(r.Methods, q.Method) {
				return true
			}
		}
	case KindExec:
		id, err := canon.ParseID(q.B3)
		if err != nil || CheckPath(q.Path) != nil || len(q.Argv) == 0 {
			return false
		}
		for _, a := range q.Argv {
			if checkArg(a) != nil {
				return false
			}
		}
		if path.Base(q.Argv[0]) != path.Base(q.Path) {
			return false
		}
		if slices.Contains(s.ExecDeny, id) {
			return false
		}
		hashMode := false
		for _, r := range s.Exec {
			hashMode = hashMode || r.HasB3
		}
		base := path.Base(q.Path)
		for _, r := range s.Exec {
			if hashMode {
				if !r.HasB3 || r.B3 != id || (r.Name != "" && r.Name != base) {
					continue
				}
			} else if r.Name != base {
				continue
			}
			if !r.HasArgs || (len(q.Argv)-1 >= len(r.Args) && slices.Equal(q.Argv[1:1+len(r.Args)], r.Args)) {
				return true
			}
		}
	case KindEnv:
		return checkEnvName(q.Name) == nil && slices.Contains(s.Env, q.Name)
	}
	return false
}
