package grant

import (
	"encoding/json"
	"math/rand/v2"
	"path"
	"slices"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// The generators below draw grant sets and requests from small universes
// full of near misses ("/data" and "/data2", "example.com" and
// "evil-example.com", "t1" and "t10"), so that random pairs often overlap.

var (
	genPaths   = []string{"/", "/data", "/data2", "/data/x", "/data/x/y", "/database", "/usr", "/usr/bin", "/work", "/work/.git", "/work/src"}
	genHosts   = []string{"example.com", "a.example.com", "b.a.example.com", "evil-example.com", "example.org", "xn--exmple-cua.com"}
	genWild    = []string{"*.example.com", "*.a.example.com", "*.example.org"}
	genCIDRs   = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "192.168.0.0/16", "fd00::/8", "fd00:1::/32", "0.0.0.0/0"}
	genAddrs   = []string{"10.1.2.3", "10.2.0.1", "192.168.1.1", "fd00:1::5", "8.8.8.8", "::1", "0.0.0.0", "::"}
	genPorts   = [][2]int{{1, 65535}, {443, 443}, {80, 443}, {8000, 9000}, {444, 444}}
	genQPorts  = []int{22, 80, 443, 444, 8080, 8443, 65535}
	genNS      = []string{"cache", "store"}
	genPrefix  = [][]string{{}, {"t1"}, {"t1", "x"}, {"t10"}, {"t1", "x", "y"}}
	genOps     = []string{"get", "put", "delete", "list"}
	genSvcs    = []string{"broker", "vault"}
	genMethods = []string{"submit", "status", "cancel"}
	genNames   = []string{"git", "python3", "sh"}
	genHashes  = []string{canon.Sum([]byte("git")).String(), canon.Sum([]byte("python3")).String(), canon.Sum([]byte("evil")).String()}
	genArgs    = [][]string{{}, {"log"}, {"log", "--oneline"}, {"-c"}}
	genEnv     = []string{"LANG", "HOME", "PATH"}
	genLimits  = []string{"wall_ms", "cpu_ms", "memory_bytes", "pids", "file_size_bytes", "energy_uj", "max_runs"}
	genAccess  = []string{"ro", "rw", "rx", "rwx"}
	genClasses = []string{"cpu", "gpu"}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// genSetDoc draws a random grant set document.
func genSetDoc(r *rand.Rand) map[string]any {
	d := map[string]any{
		"type":         Type,
		"code":         pick(r, []string{"trusted", "untrusted"}),
		"tenancy":      pick(r, []string{"single", "multi"}),
		"confidential": r.IntN(4) == 0,
	}
	n := func() int { return r.IntN(4) }
	var devs []any
	for range n() {
		devs = append(devs, map[string]any{"class": pick(r, genClasses), "mode": pick(r, []string{"brokered", "direct"})})
	}
	var fs []any
	for range n() {
		fs = append(fs, map[string]any{"path": pick(r, genPaths), "access": pick(r, genAccess)})
	}
	var eg []any
	for range n() {
		e := map[string]any{"proto": pick(r, []string{"tcp", "udp"})}
		p := pick(r, genPorts)
		e["ports"] = []int{p[0], p[1]}
		switch r.IntN(3) {
		case 0:
			e["host"] = pick(r, genHosts)
		case 1:
			e["host"] = pick(r, genWild)
		default:
			e["cidr"] = pick(r, genCIDRs)
		}
		eg = append(eg, e)
	}
	var kv []any
	for range n() {
		kv = append(kv, map[string]any{"namespace": pick(r, genNS), "prefix": pick(r, genPrefix), "ops": someOf(r, genOps)})
	}
	var svcs []any
	for range n() {
		svcs = append(svcs, map[string]any{"name": pick(r, genSvcs), "methods": someOf(r, genMethods)})
	}
	set := func(k string, v []any) {
		if v != nil {
			d[k] = v
		}
	}
	set("devices", devs)
	set("fs", fs)
	set("egress", eg)
	set("kv", kv)
	set("services", svcs)
	if r.IntN(3) > 0 {
		var allow []any
		for range n() {
			a := map[string]any{}
			switch r.IntN(3) {
			case 0:
				a["name"] = pick(r, genNames)
			case 1:
				a["b3"] = pick(r, genHashes)
			default:
				a["name"] = pick(r, genNames)
				a["b3"] = pick(r, genHashes)
			}
			if r.IntN(2) == 0 {
				a["args"] = pick(r, genArgs)
			}
			allow = append(allow, a)
		}
		x := map[string]any{"allow": append([]any{}, allow...)}
		if r.IntN(2) == 0 {
			x["deny"] = someOf(r, genHashes)
		}
		d["exec"] = x
	}
	if r.IntN(2) == 0 {
		d["env"] = someOf(r, genEnv)
	}
	if r.IntN(2) == 0 {
		l := map[string]any{}
		for _, name := range genLimits {
			if r.IntN(2) == 0 {
				l[name] = r.IntN(1000)
			}
		}
		d["limits"] = l
	}
	if r.IntN(2) == 0 {
		deny := map[string]any{}
		if r.IntN(2) == 0 {
			deny["fs"] = someOf(r, genPaths[1:])
		}
		if r.IntN(2) == 0 {
			var net []any
			for range n() {
				switch r.IntN(3) {
				case 0:
					net = append(net, map[string]any{"host": pick(r, genHosts)})
				case 1:
					net = append(net, map[string]any{"host": pick(r, genWild)})
				default:
					net = append(net, map[string]any{"cidr": pick(r, genCIDRs)})
				}
			}
			if net != nil {
				deny["egress"] = net
			}
		}
		d["deny"] = deny
	}
	return d
}

func someOf[T any](r *rand.Rand, xs []T) []T {
	out := []T{}
	for _, x := range xs {
		if r.IntN(2) == 0 {
			out = append(out, x)
		}
	}
	return out
}

func mustSet(t testing.TB, d map[string]any) *Set {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(%s): %v", b, err)
	}
	return s
}

// narrow returns a copy of the document d changed by one random edit. Most
// edits narrow; some widen on purpose, so that Covers has both to judge.
func narrow(r *rand.Rand, d map[string]any) map[string]any {
	b, _ := json.Marshal(d)
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	listEdit := func(key string, edit func(m map[string]any)) {
		l, _ := c[key].([]any)
		if len(l) == 0 {
			return
		}
		i := r.IntN(len(l))
		if r.IntN(3) == 0 {
			c[key] = slices.Delete(l, i, i+1)
			return
		}
		edit(l[i].(map[string]any))
	}
	switch r.IntN(14) {
	case 0:
		listEdit("fs", func(m map[string]any) {
			p := m["path"].(string)
			if p == "/" {
				p = ""
			}
			m["path"] = p + "/" + pick(r, []string{"x", "y", "src"})
		})
	case 1:
		listEdit("fs", func(m map[string]any) { m["access"] = pick(r, genAccess) })
	case 2:
		listEdit("egress", func(m map[string]any) {
			p := pick(r, genPorts)
			m["ports"] = []int{p[0], p[1]}
		})
	case 3:
		listEdit("egress", func(m map[string]any) {
			if _, ok := m["cidr"]; ok {
				m["cidr"] = pick(r, genCIDRs)
			} else {
				m["host"] = pick(r, append(slices.Clone(genHosts), genWild...))
			}
		})
	case 4:
		listEdit("kv", func(m map[string]any) {
			m["prefix"] = pick(r, genPrefix)
			m["ops"] = someOf(r, genOps)
		})
	case 5:
		listEdit("services", func(m map[string]any) { m["methods"] = someOf(r, genMethods) })
	case 6:
		if x, ok := c["exec"].(map[string]any); ok {
			allow := x["allow"].([]any)
			if len(allow) > 0 {
				i := r.IntN(len(allow))
				a := allow[i].(map[string]any)
				switch r.IntN(4) {
				case 0:
					x["allow"] = slices.Delete(allow, i, i+1)
				case 1:
					a["b3"] = pick(r, genHashes)
				case 2:
					a["args"] = pick(r, genArgs)
				default:
					delete(a, "b3")
					a["name"] = pick(r, genNames)
				}
			}
			if r.IntN(3) == 0 {
				x["deny"] = someOf(r, genHashes)
			}
		}
	case 7:
		c["env"] = someOf(r, genEnv)
	case 8:
		if l, ok := c["limits"].(map[string]any); ok {
			for k := range l {
				l[k] = r.IntN(1000)
			}
		}
	case 9:
		c["code"] = pick(r, []string{"trusted", "untrusted"})
		c["tenancy"] = pick(r, []string{"single", "multi"})
		c["confidential"] = r.IntN(2) == 0
	case 10:
		deny, _ := c["deny"].(map[string]any)
		if deny == nil {
			deny = map[string]any{}
		}
		deny["fs"] = someOf(r, genPaths[1:])
		c["deny"] = deny
	case 11:
		listEdit("devices", func(m map[string]any) { m["mode"] = pick(r, []string{"brokered", "direct"}) })
	case 12:
		delete(c, "deny")
	default:
		return genSetDoc(r)
	}
	return c
}

// genQueries returns requests of every kind over the universes, canonical
// and not.
func genQueries() []Query {
	var qs []Query
	for _, c := range append(slices.Clone(genClasses), "npu", "GPU") {
		for _, m := range []string{"brokered", "direct", "shared"} {
			qs = append(qs, Query{Kind: KindDevice, Class: c, Mode: m})
		}
	}
	for _, p := range append(slices.Clone(genPaths), "/data/x/../..", "/data/", "data", "/data/x/z", "/datax", "/usr/bin/git", "/work/.git/config") {
		for _, op := range []string{"read", "write", "exec"} {
			qs = append(qs, Query{Kind: KindFS, Op: op, Path: p})
		}
	}
	for _, h := range append(append(append(slices.Clone(genHosts), genAddrs...), "c.b.a.example.com", "Example.com", "127.1", "::ffff:10.1.2.3", "example.com."), "x.example.org") {
		for _, p := range genQPorts {
			for _, proto := range []string{"tcp", "udp"} {
				qs = append(qs, Query{Kind: KindEgress, Host: h, Port: p, Proto: proto})
			}
		}
	}
	for _, ns := range genNS {
		for _, k := range append(slices.Clone(genPrefix), []string{"t1", "x", "z"}, []string{"t10", "x"}, []string{"t1", ".."}) {
			for _, op := range genOps {
				qs = append(qs, Query{Kind: KindKV, Namespace: ns, Key: k, Op: op})
			}
		}
	}
	for _, s := range genSvcs {
		for _, m := range genMethods {
			qs = append(qs, Query{Kind: KindService, Name: s, Method: m})
		}
	}
	for _, p := range []string{"/usr/bin/git", "/tmp/git", "/usr/bin/python3", "/work/sh", "/usr/bin/renamed"} {
		for _, h := range genHashes {
			for _, a := range [][]string{{"x"}, {"x", "log"}, {"x", "log", "--oneline"}, {"x", "-c", "log"}} {
				a = append([]string{path.Base(p)}, a[1:]...)
				qs = append(qs, Query{Kind: KindExec, Path: p, B3: h, Argv: a})
				qs = append(qs, Query{Kind: KindExec, Path: p, B3: h, Argv: append([]string{"sh"}, a[1:]...)})
			}
		}
	}
	for _, e := range append(slices.Clone(genEnv), "SECRET") {
		qs = append(qs, Query{Kind: KindEnv, Name: e})
	}
	return qs
}

func describe(s *Set) string { return string(s.JCS()) }
