package grant

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// Decision is the outcome of one request.
type Decision struct {
	Allow bool
	// Rule names what decided: a rule of the grant set ("fs[2]",
	// "exec.deny[0]", "deny.egress[1]"), "default" when no rule allows the
	// request, or "request" when the request itself is not canonical.
	Rule string
	// Reason says why, in words; it quotes the request.
	Reason string
	Grants canon.ID
	Query  Query
}

// DecisionType is the type of a serialized Decision.
const DecisionType = "cordon.decision.v1"

// Record returns the Decision as a JCS-canonical JSON record, the form the
// journal chains:
//
//	{"grants":"b3:…","outcome":"allow"|"deny","query":{…},"reason":"…","rule":"…","type":"cordon.decision.v1"}
//
// The record is lossless: a request string that is not valid text (invalid
// UTF-8, a noncharacter — such requests are always denied) is written as
// its Go-quoted ASCII form, strconv.QuoteToASCII, and its field is listed
// in "quoted" ("path", "key[2]", "argv[0]"), so two different requests
// never leave the same record.
func (d Decision) Record() []byte {
	q := d.Query
	var quoted []string
	clean := func(field string, s string) string {
		if validText(s) {
			return s
		}
		quoted = append(quoted, field)
		return strconv.QuoteToASCII(s)
	}
	for _, f := range []struct {
		name string
		p    *string
	}{{"kind", &q.Kind}, {"class", &q.Class}, {"mode", &q.Mode}, {"op", &q.Op}, {"path", &q.Path}, {"host", &q.Host},
		{"proto", &q.Proto}, {"namespace", &q.Namespace}, {"name", &q.Name}, {"method", &q.Method}, {"b3", &q.B3}} {
		*f.p = clean(f.name, *f.p)
	}
	q.Key = slices.Clone(q.Key)
	for i := range q.Key {
		q.Key[i] = clean("key["+strconv.Itoa(i)+"]", q.Key[i])
	}
	q.Argv = slices.Clone(q.Argv)
	for i := range q.Argv {
		q.Argv[i] = clean("argv["+strconv.Itoa(i)+"]", q.Argv[i])
	}
	reason := d.Reason
	if !validText(reason) {
		reason = strconv.QuoteToASCII(reason) // unreachable: reasons quote their inputs
	}
	outcome := "deny"
	if d.Allow {
		outcome = "allow"
	}
	b, err := json.Marshal(struct {
		Type    string   `json:"type"`
		Grants  string   `json:"grants"`
		Query   Query    `json:"query"`
		Quoted  []string `json:"quoted,omitempty"`
		Outcome string   `json:"outcome"`
		Rule    string   `json:"rule"`
		Reason  string   `json:"reason"`
	}{DecisionType, d.Grants.String(), q, quoted, outcome, d.Rule, reason})
	if err != nil {
		panic(err) // only strings and ints: cannot fail
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err) // every string is valid text by now: cannot fail
	}
	return c
}

// validText reports whether s can appear in a canonical document as it is.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if isNoncharacter(r) {
			return false
		}
	}
	return true
}

// Enforcer decides requests against one grant set. It is immutable and
// safe for concurrent use.
type Enforcer struct {
	set *Set

	devices  map[string][]int
	fsAllow  *trie
	fsDeny   *trie
	hosts    map[string][]int // exact host → egress rules
	wildcard map[string][]int // wildcard base name → egress rules
	nets     prefixIndex
	denyHost map[string]int
	denyWild map[string]int
	denyNets prefixIndex
	kv       map[string]*trie // namespace → key trie
	services map[string]map[string]int
	execDeny map[canon.ID]int
	execHash map[canon.ID][]int
	execName map[string][]int
	hashMode bool // a hash allowlist is present: names alone allow nothing
	env      map[string]int
	names    map[string][]string // kind → rule names ("fs[3]"), built once
}

// rule returns the name of rule i of a kind, e.g. "fs[3]", without
// allocating.
func (e *Enforcer) rule(kind string, i int) string { return e.names[kind][i] }

// New compiles a grant set into an Enforcer.
func New(s *Set) *Enforcer {
	e := &Enforcer{
		set: s, devices: map[string][]int{}, fsAllow: newTrie(), fsDeny: newTrie(),
		hosts: map[string][]int{}, wildcard: map[string][]int{}, denyHost: map[string]int{}, denyWild: map[string]int{},
		kv: map[string]*trie{}, services: map[string]map[string]int{},
		execDeny: map[canon.ID]int{}, execHash: map[canon.ID][]int{}, execName: map[string][]int{}, env: map[string]int{},
	}
	for i, d := range s.Devices {
		e.devices[d.Class] = append(e.devices[d.Class], i)
	}
	for i, r := range s.FS {
		e.fsAllow.insert(pathSegments(r.Path), i)
	}
	for i, p := range s.DenyFS {
		e.fsDeny.insert(pathSegments(p), i)
	}
	for i, r := range s.Egress {
		switch {
		case r.CIDR.IsValid():
			e.nets.add(r.CIDR, i)
		case r.Host.Wildcard:
			e.wildcard[r.Host.Name] = append(e.wildcard[r.Host.Name], i)
		default:
			e.hosts[r.Host.Name] = append(e.hosts[r.Host.Name], i)
		}
	}
	for i, d := range s.DenyNet {
		switch {
		case d.CIDR.IsValid():
			e.denyNets.add(d.CIDR, i)
		case d.Host.Wildcard:
			setFirst(e.denyWild, d.Host.Name, i)
		default:
			setFirst(e.denyHost, d.Host.Name, i)
		}
	}
	for i, r := range s.KV {
		t := e.kv[r.Namespace]
		if t == nil {
			t = newTrie()
			e.kv[r.Namespace] = t
		}
		t.insert(r.Prefix, i)
	}
	for i, r := range s.Services {
		m := e.services[r.Name]
		if m == nil {
			m = map[string]int{}
			e.services[r.Name] = m
		}
		for _, meth := range r.Methods {
			setFirst(m, meth, i)
		}
	}
	for i, id := range s.ExecDeny {
		setFirst(e.execDeny, id, i)
	}
	for i, r := range s.Exec {
		if r.HasB3 {
			e.hashMode = true
			e.execHash[r.B3] = append(e.execHash[r.B3], i)
		}
		if r.Name != "" {
			e.execName[r.Name] = append(e.execName[r.Name], i)
		}
	}
	for i, n := range s.Env {
		setFirst(e.env, n, i)
	}
	e.names = map[string][]string{}
	for kind, n := range map[string]int{"devices": len(s.Devices), "fs": len(s.FS), "egress": len(s.Egress), "kv": len(s.KV),
		"services": len(s.Services), "exec.allow": len(s.Exec), "exec.deny": len(s.ExecDeny), "env": len(s.Env),
		"deny.fs": len(s.DenyFS), "deny.egress": len(s.DenyNet)} {
		names := make([]string, n)
		for i := range names {
			names[i] = kind + "[" + strconv.Itoa(i) + "]"
		}
		e.names[kind] = names
	}
	return e
}

func setFirst[K comparable](m map[K]int, k K, i int) {
	if _, ok := m[k]; !ok {
		m[k] = i
	}
}

// Set returns the grant set the Enforcer decides against.
func (e *Enforcer) Set() *Set { return e.set }

// Decide decides q. It never fails: a malformed or non-canonical request is
// a denial whose Rule is "request".
func (e *Enforcer) Decide(q Query) Decision {
	d := e.decide(q)
	d.Grants = e.set.id
	d.Query = q
	return d
}

func allow(rule, format string, args ...any) Decision {
	return Decision{Allow: true, Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

func deny(rule, format string, args ...any) Decision {
	return Decision{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) Decision {
	return deny("request", "request is not canonical: "+format, args...)
}

func (e *Enforcer) decide(q Query) Decision {
	if err := onlyFields(q); err != nil {
		return badRequest("%v", err)
	}
	switch q.Kind {
	case KindDevice:
		return e.decideDevice(q)
	case KindFS:
		return e.decideFS(q)
	case KindEgress:
		return e.decideEgress(q)
	case KindKV:
		return e.decideKV(q)
	case KindService:
		return e.decideService(q)
	case KindExec:
		return e.decideExec(q)
	case KindEnv:
		return e.decideEnv(q)
	}
	return badRequest("unknown kind %q", q.Kind)
}

// onlyFields refuses a query that sets fields of another kind, so that a
// caller cannot smuggle meaning into fields the decision ignores.
func onlyFields(q Query) error {
	want := fieldsOf[q.Kind]
	has := func(name string) bool { return slices.Contains(want, name) }
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"class", q.Class != ""}, {"mode", q.Mode != ""}, {"op", q.Op != ""}, {"path", q.Path != ""},
		{"host", q.Host != ""}, {"proto", q.Proto != ""}, {"port", q.Port != 0}, {"namespace", q.Namespace != ""},
		{"key", q.Key != nil}, {"name", q.Name != ""}, {"method", q.Method != ""}, {"b3", q.B3 != ""}, {"argv", q.Argv != nil},
	} {
		if f.set && !has(f.name) {
			return fmt.Errorf("a %s request has no %q", q.Kind, f.name)
		}
	}
	return nil
}

func (e *Enforcer) decideDevice(q Query) Decision {
	if err := checkIdent("device class", q.Class); err != nil {
		return badRequest("%v", err)
	}
	if q.Mode != "brokered" && q.Mode != "direct" {
		return badRequest("device mode %q (want brokered or direct)", q.Mode)
	}
	for _, i := range e.devices[q.Class] {
		if r := e.set.Devices[i]; r.Mode == q.Mode || r.Mode == "direct" {
			return allow(e.rule("devices", i), "%s %s is granted", q.Mode, q.Class)
		}
	}
	if len(e.devices[q.Class]) > 0 {
		return deny("default", "device class %q is granted only brokered, not direct", q.Class)
	}
	return deny("default", "no device rule grants class %q", q.Class)
}

var fsOps = map[string]Access{"read": Read, "write": Write, "exec": Exec}

func (e *Enforcer) decideFS(q Query) Decision {
	need, ok := fsOps[q.Op]
	if !ok {
		return badRequest("fs op %q (want read, write or exec)", q.Op)
	}
	if err := CheckPath(q.Path); err != nil {
		return badRequest("%v", err)
	}
	if i, ok := e.fsDeny.firstOnPath(q.Path); ok {
		return deny(e.rule("deny.fs", i), "%s is under denied path %s", q.Path, e.set.DenyFS[i])
	}
	best, partial := -1, -1
	e.fsAllow.walkPath(q.Path, func(rules []int) {
		for _, i := range rules {
			if e.set.FS[i].Access&need != 0 {
				best = i // deepest rule that grants the op
			} else {
				partial = i
			}
		}
	})
	if best >= 0 {
		r := e.set.FS[best]
		return allow(e.rule("fs", best), "%s %s is granted by %s (%s)", q.Op, q.Path, r.Path, r.Access)
	}
	if partial >= 0 {
		r := e.set.FS[partial]
		return deny("default", "%s is under %s, which grants %s, not %s", q.Path, r.Path, r.Access, q.Op)
	}
	return deny("default", "no fs rule covers %s", q.Path)
}

func (e *Enforcer) decideEgress(q Query) Decision {
	if q.Proto != "tcp" && q.Proto != "udp" {
		return badRequest("protocol %q (want tcp or udp)", q.Proto)
	}
	if q.Port < 1 || q.Port > 65535 {
		return badRequest("port %d is outside 1..65535", q.Port)
	}
	port := uint16(q.Port)
	match := func(rules []int) int {
		for _, i := range rules {
			r := e.set.Egress[i]
			if r.Proto == q.Proto && r.PortLo <= port && port <= r.PortHi {
				return i
			}
		}
		return -1
	}
	if looksLikeAddr(q.Host) {
		a, err := parseAddr(q.Host)
		if err != nil {
			return badRequest("%v", err)
		}
		if i, ok := e.denyNets.first(a); ok {
			return deny(e.rule("deny.egress", i), "%s is in denied network %s", a, e.set.DenyNet[i])
		}
		best := -1
		e.nets.each(a, func(rules []int) bool {
			best = match(rules)
			return best < 0
		})
		if best >= 0 {
			return allow(e.rule("egress", best), "%s %s:%d is granted by %s", q.Proto, a, port, e.set.Egress[best].CIDR)
		}
		return deny("default", "no egress rule grants %s %s:%d", q.Proto, a, port)
	}
	if err := CheckHost(q.Host); err != nil {
		return badRequest("%v", err)
	}
	if i, ok := e.denyHost[q.Host]; ok {
		return deny(e.rule("deny.egress", i), "%s is denied", q.Host)
	}
	for s := q.Host; ; {
		dot := strings.IndexByte(s, '.')
		if dot < 0 {
			break
		}
		s = s[dot+1:]
		if i, ok := e.denyWild[s]; ok {
			return deny(e.rule("deny.egress", i), "%s is denied by *.%s", q.Host, s)
		}
	}
	if i := match(e.hosts[q.Host]); i >= 0 {
		return allow(e.rule("egress", i), "%s %s:%d is granted", q.Proto, q.Host, port)
	}
	for s := q.Host; ; {
		dot := strings.IndexByte(s, '.')
		if dot < 0 {
			break
		}
		s = s[dot+1:]
		if i := match(e.wildcard[s]); i >= 0 {
			return allow(e.rule("egress", i), "%s %s:%d is granted by *.%s", q.Proto, q.Host, port, s)
		}
	}
	return deny("default", "no egress rule grants %s %s:%d", q.Proto, q.Host, port)
}

func (e *Enforcer) decideKV(q Query) Decision {
	if err := checkIdent("namespace", q.Namespace); err != nil {
		return badRequest("%v", err)
	}
	if !slices.Contains(kvOps, q.Op) {
		return badRequest("kv op %q (want get, put, delete or list)", q.Op)
	}
	for _, s := range q.Key {
		if err := checkSegment(s); err != nil {
			return badRequest("%v", err)
		}
	}
	t := e.kv[q.Namespace]
	if t == nil {
		return deny("default", "no kv rule grants namespace %q", q.Namespace)
	}
	best := -1
	t.walk(q.Key, func(rules []int) {
		for _, i := range rules {
			if slices.Contains(e.set.KV[i].Ops, q.Op) {
				best = i
			}
		}
	})
	if best >= 0 {
		return allow(e.rule("kv", best), "%s %s/%s is granted", q.Op, q.Namespace, strings.Join(q.Key, "/"))
	}
	return deny("default", "no kv rule grants %s on %s/%s", q.Op, q.Namespace, strings.Join(q.Key, "/"))
}

func (e *Enforcer) decideService(q Query) Decision {
	if err := checkIdent("service", q.Name); err != nil {
		return badRequest("%v", err)
	}
	if err := checkIdent("method", q.Method); err != nil {
		return badRequest("%v", err)
	}
	m, ok := e.services[q.Name]
	if !ok {
		return deny("default", "service %q is not granted", q.Name)
	}
	if i, ok := m[q.Method]; ok {
		return allow(e.rule("services", i), "%s.%s is granted", q.Name, q.Method)
	}
	return deny("default", "method %q of service %q is not granted", q.Method, q.Name)
}

func (e *Enforcer) decideExec(q Query) Decision {
	if err := CheckPath(q.Path); err != nil {
		return badRequest("%v", err)
	}
	id, err := canon.ParseID(q.B3)
	if err != nil {
		return badRequest("b3 %q: %v", q.B3, err)
	}
	if len(q.Argv) == 0 {
		return badRequest("argv is empty")
	}
	for _, a := range q.Argv {
		if err := checkArg(a); err != nil {
			return badRequest("%v", err)
		}
	}
	if path.Base(q.Argv[0]) != path.Base(q.Path) {
		// Multi-call binaries (busybox) choose what to run by argv[0].
		return badRequest("argv[0] %q does not name the executable %s", q.Argv[0], path.Base(q.Path))
	}
	if i, ok := e.execDeny[id]; ok {
		return deny(e.rule("exec.deny", i), "%s is denied by content hash, whatever its name or place", q.Path)
	}
	name := path.Base(q.Path)
	args := q.Argv[1:]
	var candidates []int
	if e.hashMode {
		for _, i := range e.execHash[id] {
			if r := e.set.Exec[i]; r.Name == "" || r.Name == name {
				candidates = append(candidates, i)
			}
		}
	} else {
		candidates = e.execName[name]
	}
	for _, i := range candidates {
		r := e.set.Exec[i]
		if !r.HasArgs || hasPrefix(args, r.Args) {
			return allow(e.rule("exec.allow", i), "exec of %s (%s) is granted", q.Path, id)
		}
	}
	switch {
	case len(candidates) > 0:
		return deny("default", "exec of %s: the arguments %q do not start with a granted prefix", name, args)
	case e.hashMode && len(e.execName[name]) > 0:
		return deny("default", "exec of %s: a hash allowlist is present and %s matches no allowed hash", name, id)
	}
	return deny("default", "no exec rule allows %s (%s)", name, id)
}

func hasPrefix(args, prefix []string) bool {
	return len(args) >= len(prefix) && slices.Equal(args[:len(prefix)], prefix)
}

func (e *Enforcer) decideEnv(q Query) Decision {
	if err := checkEnvName(q.Name); err != nil {
		return badRequest("%v", err)
	}
	if i, ok := e.env[q.Name]; ok {
		return allow(e.rule("env", i), "environment variable %s is granted", q.Name)
	}
	return deny("default", "environment variable %s is not granted", q.Name)
}

// pathSegments splits a canonical absolute path into its segments; "/"
// has none.
func pathSegments(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// trie maps segment sequences to the rules that end there.
type trie struct {
	kids  map[string]*trie
	rules []int
}

func newTrie() *trie { return &trie{} }

func (t *trie) insert(segs []string, rule int) {
	n := t
	for _, s := range segs {
		if n.kids == nil {
			n.kids = map[string]*trie{}
		}
		k := n.kids[s]
		if k == nil {
			k = &trie{}
			n.kids[s] = k
		}
		n = k
	}
	n.rules = append(n.rules, rule)
}

// walk calls f with the rules of every node on segs, root first.
func (t *trie) walk(segs []string, f func(rules []int)) {
	n := t
	for i := 0; ; i++ {
		if len(n.rules) > 0 {
			f(n.rules)
		}
		if i == len(segs) {
			return
		}
		if n = n.kids[segs[i]]; n == nil {
			return
		}
	}
}

// walkPath is walk over the segments of a canonical absolute path, without
// splitting it.
func (t *trie) walkPath(p string, f func(rules []int)) {
	n := t
	rest := p[1:]
	for {
		if len(n.rules) > 0 {
			f(n.rules)
		}
		if rest == "" {
			return
		}
		seg := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if n = n.kids[seg]; n == nil {
			return
		}
	}
}

// firstOnPath returns the lowest-numbered rule of the shallowest node on
// the path p.
func (t *trie) firstOnPath(p string) (int, bool) {
	found, rule := false, 0
	t.walkPath(p, func(rules []int) {
		if !found {
			found, rule = true, rules[0]
		}
	})
	return rule, found
}

// prefixIndex finds the prefixes that contain an address without scanning:
// one map per prefix length in use.
type prefixIndex struct {
	byBits map[int]map[netip.Prefix][]int
	bits   []int // lengths in use, longest first
}

func (x *prefixIndex) add(p netip.Prefix, rule int) {
	if x.byBits == nil {
		x.byBits = map[int]map[netip.Prefix][]int{}
	}
	key := p.Bits()
	if !p.Addr().Is4() {
		key += 1000 // keep IPv4 and IPv6 lengths apart
	}
	m := x.byBits[key]
	if m == nil {
		m = map[netip.Prefix][]int{}
		x.byBits[key] = m
		x.bits = append(x.bits, key)
		slices.SortFunc(x.bits, func(a, b int) int { return b - a })
	}
	m[p] = append(m[p], rule)
}

// each calls f with the rules of every prefix containing a, longest first,
// until f returns false.
func (x *prefixIndex) each(a netip.Addr, f func(rules []int) bool) {
	for _, key := range x.bits {
		bits := key
		if key >= 1000 {
			if a.Is4() {
				continue
			}
			bits -= 1000
		} else if !a.Is4() {
			continue
		}
		p, err := a.Prefix(bits)
		if err != nil {
			continue
		}
		if rules, ok := x.byBits[key][p]; ok && !f(rules) {
			return
		}
	}
}

func (x *prefixIndex) first(a netip.Addr) (int, bool) {
	found, rule := false, 0
	x.each(a, func(rules []int) bool {
		found, rule = true, slices.Min(rules)
		return false
	})
	return rule, found
}
