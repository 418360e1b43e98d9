package grant

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
)

// Type is the value of a grant set's "type" member.
const Type = "cordon.grants.v1"

// ErrInvalid is wrapped by every error that refuses a grant set or a query.
var ErrInvalid = errors.New("invalid grant set")

// Access is a set of file operations.
type Access uint8

const (
	Read Access = 1 << iota
	Write
	Exec
)

var accessNames = map[string]Access{"ro": Read, "rw": Read | Write, "rx": Read | Exec, "rwx": Read | Write | Exec}

func (a Access) String() string {
	for name, v := range accessNames {
		if v == a {
			return name
		}
	}
	return fmt.Sprintf("Access(%d)", uint8(a))
}

// Device grants dispatch to a device class.
type Device struct {
	Class string // "cpu", "gpu", …
	Mode  string // "brokered" or "direct"; direct also allows brokered
}

// FSRule grants access to a path and everything beneath it.
type FSRule struct {
	Path   string
	Access Access
}

// Endpoint names network destinations: a host pattern or a CIDR.
type Endpoint struct {
	Host HostPattern  // set when CIDR is not valid
	CIDR netip.Prefix // valid for address grants
}

func (e Endpoint) String() string {
	if e.CIDR.IsValid() {
		return e.CIDR.String()
	}
	return e.Host.String()
}

// EgressRule grants connections to an endpoint over a protocol and a port
// range.
type EgressRule struct {
	Endpoint
	Proto          string // "tcp" or "udp"
	PortLo, PortHi uint16 // 1 ≤ PortLo ≤ PortHi ≤ 65535
}

// KVRule grants operations on keys that start with Prefix (by segments) in
// a namespace.
type KVRule struct {
	Namespace string
	Prefix    []string
	Ops       []string // subset of get, put, delete, list
}

// ServiceRule grants calls of methods of a named host service.
type ServiceRule struct {
	Name    string
	Methods []string
}

// ExecRule allows executables by name (a basename), by the ContentId of
// their bytes, or both; Args, when set, is a token prefix the arguments
// (argv[1:]) must start with.
type ExecRule struct {
	Name    string   // "" when not constrained by name
	B3      canon.ID // zero when not pinned
	HasB3   bool
	Args    []string // nil when arguments are not constrained
	HasArgs bool
}

// Limits are integer resource bounds; nil means not granted, never
// unlimited.
type Limits struct {
	WallMS, CPUMS, MemoryBytes, PIDs, FileSizeBytes, EnergyUJ, MaxRuns *int64
}

// limitFields lists the limits in their JSON names, for iteration.
func (l *Limits) fields() []struct {
	name string
	v    **int64
} {
	return []struct {
		name string
		v    **int64
	}{
		{"wall_ms", &l.WallMS}, {"cpu_ms", &l.CPUMS}, {"memory_bytes", &l.MemoryBytes}, {"pids", &l.PIDs},
		{"file_size_bytes", &l.FileSizeBytes}, {"energy_uj", &l.EnergyUJ}, {"max_runs", &l.MaxRuns},
	}
}

// Set is a parsed, validated grant set. Build one with Parse; a Set is
// never modified after that.
type Set struct {
	Trusted      bool // code: "trusted"; false for "untrusted"
	MultiTenant  bool // tenancy: "multi"; false for "single"
	Confidential bool
	// IsolatedKernel (optional "isolated_kernel", default false): the
	// program's system calls must be served by a kernel other than the
	// host's — a user-space kernel or a microVM's (tier S4).
	IsolatedKernel bool

	Devices  []Device
	FS       []FSRule
	Egress   []EgressRule
	KV       []KVRule
	Services []ServiceRule
	Exec     []ExecRule
	ExecDeny []canon.ID
	Env      []string
	Limits   Limits
	DenyFS   []string   // paths denied with everything beneath them
	DenyNet  []Endpoint // endpoints denied on every port and protocol

	id  canon.ID
	jcs []byte
}

// ID returns the grant set's ContentId: BLAKE3 of its JCS form.
func (s *Set) ID() canon.ID { return s.id }

// JCS returns the canonical bytes of the grant set.
func (s *Set) JCS() []byte { return append([]byte(nil), s.jcs...) }

// Parse parses and validates a grant set (docs/SPEC.md §3). It refuses
// anything canon.Parse refuses, unknown members at any level, unknown
// values, and non-canonical paths, hosts, CIDRs and names.
func Parse(data []byte) (*Set, error) {
	v, err := canon.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return FromValue(v)
}

// FromValue validates an already parsed document as a grant set.
func FromValue(v canon.Value) (*Set, error) {
	s := &Set{}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	if typ, _ := o.Str("type", true); r.Err() == nil && typ != Type {
		r.Fail("type", "want %q, got %q", Type, typ)
	}
	switch code, _ := o.Str("code", true); code {
	case "trusted":
		s.Trusted = true
	case "untrusted":
	default:
		r.Fail("code", "want \"trusted\" or \"untrusted\", got %q", code)
	}
	switch t, _ := o.Str("tenancy", true); t {
	case "multi":
		s.MultiTenant = true
	case "single":
	default:
		r.Fail("tenancy", "want \"single\" or \"multi\", got %q", t)
	}
	s.Confidential, _ = o.Bool("confidential", true)
	s.IsolatedKernel, _ = o.Bool("isolated_kernel", false)

	devs, _ := o.Array("devices", false)
	for i, e := range devs {
		d := r.Object(e, fmt.Sprintf("devices[%d]", i))
		dev := Device{}
		dev.Class, _ = d.Str("class", true)
		dev.Mode, _ = d.Str("mode", true)
		d.End()
		check(r, d.Path("class"), checkIdent("device class", dev.Class))
		if dev.Mode != "brokered" && dev.Mode != "direct" && r.Err() == nil {
			r.Fail(d.Path("mode"), "want \"brokered\" or \"direct\", got %q", dev.Mode)
		}
		s.Devices = append(s.Devices, dev)
	}

	fs, _ := o.Array("fs", false)
	for i, e := range fs {
		f := r.Object(e, fmt.Sprintf("fs[%d]", i))
		p, _ := f.Str("path", true)
		acc, _ := f.Str("access", true)
		f.End()
		check(r, f.Path("path"), CheckPath(p))
		a, ok := accessNames[acc]
		if !ok && r.Err() == nil {
			r.Fail(f.Path("access"), "want \"ro\", \"rw\", \"rx\" or \"rwx\", got %q", acc)
		}
		s.FS = append(s.FS, FSRule{Path: p, Access: a})
	}

	eg, _ := o.Array("egress", false)
	for i, e := range eg {
		path := fmt.Sprintf("egress[%d]", i)
		g := r.Object(e, path)
		ep := readEndpoint(r, g)
		proto, _ := g.Str("proto", true)
		ports, _ := g.Array("ports", true)
		g.End()
		if proto != "tcp" && proto != "udp" && r.Err() == nil {
			r.Fail(g.Path("proto"), "want \"tcp\" or \"udp\", got %q", proto)
		}
		lo, hi := readPorts(r, g.Path("ports"), ports)
		s.Egress = append(s.Egress, EgressRule{Endpoint: ep, Proto: proto, PortLo: lo, PortHi: hi})
	}

	kv, _ := o.Array("kv", false)
	for i, e := range kv {
		k := r.Object(e, fmt.Sprintf("kv[%d]", i))
		rule := KVRule{}
		rule.Namespace, _ = k.Str("namespace", true)
		rule.Prefix, _ = k.Strings("prefix", true)
		rule.Ops, _ = k.Strings("ops", true)
		k.End()
		check(r, k.Path("namespace"), checkIdent("namespace", rule.Namespace))
		for j, seg := range rule.Prefix {
			check(r, fmt.Sprintf("%s[%d]", k.Path("prefix"), j), checkSegment(seg))
		}
		checkSet(r, k.Path("ops"), rule.Ops, kvOps)
		s.KV = append(s.KV, rule)
	}

	svcs, _ := o.Array("services", false)
	for i, e := range svcs {
		sv := r.Object(e, fmt.Sprintf("services[%d]", i))
		rule := ServiceRule{}
		rule.Name, _ = sv.Str("name", true)
		rule.Methods, _ = sv.Strings("methods", true)
		sv.End()
		check(r, sv.Path("name"), checkIdent("service", rule.Name))
		for j, m := range rule.Methods {
			check(r, fmt.Sprintf("%s[%d]", sv.Path("methods"), j), checkIdent("method", m))
		}
		checkDistinct(r, sv.Path("methods"), rule.Methods)
		s.Services = append(s.Services, rule)
	}

	if x, ok := o.Object("exec", false); ok {
		allow, _ := x.Array("allow", true)
		for i, e := range allow {
			a := r.Object(e, fmt.Sprintf("exec.allow[%d]", i))
			rule := ExecRule{}
			var hasName bool
			rule.Name, hasName = a.Str("name", false)
			if h, ok := a.Str("b3", false); ok {
				id, err := canon.ParseID(h)
				check(r, a.Path("b3"), err)
				rule.B3, rule.HasB3 = id, true
			}
			rule.Args, rule.HasArgs = a.Strings("args", false)
			a.End()
			if hasName {
				check(r, a.Path("name"), checkExecName(rule.Name))
			} else if !rule.HasB3 && r.Err() == nil {
				r.Fail(a.Path(""), "an exec rule needs a name, a b3 or both")
			}
			for j, arg := range rule.Args {
				check(r, fmt.Sprintf("%s[%d]", a.Path("args"), j), checkArg(arg))
			}
			s.Exec = append(s.Exec, rule)
		}
		deny, _ := x.Strings("deny", false)
		for i, h := range deny {
			id, err := canon.ParseID(h)
			check(r, fmt.Sprintf("exec.deny[%d]", i), err)
			s.ExecDeny = append(s.ExecDeny, id)
		}
		x.End()
	}

	s.Env, _ = o.Strings("env", false)
	for i, n := range s.Env {
		check(r, fmt.Sprintf("env[%d]", i), checkEnvName(n))
	}
	checkDistinct(r, "env", s.Env)

	if l, ok := o.Object("limits", false); ok {
		for _, f := range s.Limits.fields() {
			if n, ok := l.Int(f.name, false); ok {
				if n < 0 && r.Err() == nil {
					r.Fail(l.Path(f.name), "negative limit %d", n)
				}
				*f.v = &n
			}
		}
		l.End()
	}

	if d, ok := o.Object("deny", false); ok {
		s.DenyFS, _ = d.Strings("fs", false)
		for i, p := range s.DenyFS {
			check(r, fmt.Sprintf("deny.fs[%d]", i), CheckPath(p))
		}
		net, _ := d.Array("egress", false)
		for i, e := range net {
			g := r.Object(e, fmt.Sprintf("deny.egress[%d]", i))
			ep := readEndpoint(r, g)
			g.End()
			s.DenyNet = append(s.DenyNet, ep)
		}
		d.End()
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s.jcs = v.AppendJCS(nil)
	s.id = canon.Sum(s.jcs)
	return s, nil
}

var kvOps = []string{"get", "put", "delete", "list"}

func check(r *jsonv.Reader, path string, err error) {
	if err != nil {
		r.Fail(path, "%v", err)
	}
}

func checkSet(r *jsonv.Reader, path string, got, allowed []string) {
	for i, g := range got {
		ok := false
		for _, a := range allowed {
			ok = ok || g == a
		}
		if !ok {
			r.Fail(fmt.Sprintf("%s[%d]", path, i), "unknown value %q (want one of %v)", g, allowed)
		}
	}
	checkDistinct(r, path, got)
}

func checkDistinct(r *jsonv.Reader, path string, got []string) {
	seen := map[string]bool{}
	for i, g := range got {
		if seen[g] {
			r.Fail(fmt.Sprintf("%s[%d]", path, i), "duplicate %q", g)
		}
		seen[g] = true
	}
}

func readEndpoint(r *jsonv.Reader, g *jsonv.Obj) Endpoint {
	host, hasHost := g.Str("host", false)
	cidr, hasCIDR := g.Str("cidr", false)
	var ep Endpoint
	switch {
	case hasHost == hasCIDR:
		if r.Err() == nil {
			r.Fail(g.Path(""), "want exactly one of host and cidr")
		}
	case hasHost:
		hp, err := parseHostPattern(host)
		check(r, g.Path("host"), err)
		ep.Host = hp
	default:
		p, err := parsePrefix(cidr)
		check(r, g.Path("cidr"), err)
		ep.CIDR = p
	}
	return ep
}

func readPorts(r *jsonv.Reader, path string, ports []canon.Value) (uint16, uint16) {
	if r.Err() != nil {
		return 0, 0
	}
	if len(ports) != 2 || ports[0].Kind() != canon.KindInt || ports[1].Kind() != canon.KindInt {
		r.Fail(path, "want [first, last], two integers")
		return 0, 0
	}
	lo, hi := ports[0].Int(), ports[1].Int()
	if lo < 1 || hi > 65535 || lo > hi {
		r.Fail(path, "want 1 ≤ first ≤ last ≤ 65535, got [%d, %d]", lo, hi)
		return 0, 0
	}
	return uint16(lo), uint16(hi)
}
