package grant

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// benchSet builds a grant set with n rules of every kind. Rule i of each
// kind is distinct, so lookups must find the right one among n.
func benchSet(b *testing.B, n int) *Set {
	b.Helper()
	var fs, eg, kv, svc, ex []any
	for i := range n {
		fs = append(fs, map[string]any{"path": fmt.Sprintf("/data/team%d/project%d", i%97, i), "access": "rw"})
		switch i % 3 {
		case 0:
			eg = append(eg, map[string]any{"host": fmt.Sprintf("api%d.example.com", i), "proto": "tcp", "ports": []int{443, 443}})
		case 1:
			eg = append(eg, map[string]any{"host": fmt.Sprintf("*.svc%d.example.org", i), "proto": "tcp", "ports": []int{443, 443}})
		default:
			eg = append(eg, map[string]any{"cidr": fmt.Sprintf("10.%d.%d.0/24", i/256%256, i%256), "proto": "tcp", "ports": []int{5432, 5432}})
		}
		kv = append(kv, map[string]any{"namespace": "cache", "prefix": []string{fmt.Sprintf("tenant%d", i), "runs"}, "ops": []string{"get"}})
		svc = append(svc, map[string]any{"name": fmt.Sprintf("svc%d", i), "methods": []string{"call"}})
		ex = append(ex, map[string]any{"name": fmt.Sprintf("tool%d", i), "b3": canon.Sum([]byte(fmt.Sprint(i))).String()})
	}
	doc := map[string]any{
		"type": Type, "code": "untrusted", "tenancy": "single", "confidential": false,
		"fs": fs, "egress": eg, "kv": kv, "services": svc, "exec": map[string]any{"allow": ex},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	s, err := Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkDecide measures one decision per kind against sets of 10 to
// 10,000 rules per kind; the lookups are indexed, so the time must stay
// flat (docs/PERFORMANCE.md).
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		s := benchSet(b, n)
		e := New(s)
		last := n - 1
		lastWith := func(r int) int { // the last rule i with i%3 == r
			i := last
			for i%3 != r {
				i--
			}
			return i
		}
		lastCIDR := lastWith(2)
		queries := []struct {
			name string
			q    Query
		}{
			{"fs", Query{Kind: KindFS, Op: "write", Path: fmt.Sprintf("/data/team%d/project%d/src/main.go", last%97, last)}},
			{"egress-host", Query{Kind: KindEgress, Host: fmt.Sprintf("api%d.example.com", lastWith(0)), Proto: "tcp", Port: 443}},
			{"egress-wildcard", Query{Kind: KindEgress, Host: fmt.Sprintf("a.b.svc%d.example.org", lastWith(1)), Proto: "tcp", Port: 443}},
			{"egress-cidr", Query{Kind: KindEgress, Host: fmt.Sprintf("10.%d.%d.7", lastCIDR/256%256, lastCIDR%256), Proto: "tcp", Port: 5432}},
			{"kv", Query{Kind: KindKV, Namespace: "cache", Key: []string{fmt.Sprintf("tenant%d", last), "runs", "42"}, Op: "get"}},
			{"service", Query{Kind: KindService, Name: fmt.Sprintf("svc%d", last), Method: "call"}},
			{"exec", Query{Kind: KindExec, Path: fmt.Sprintf("/usr/bin/tool%d", last), B3: canon.Sum([]byte(fmt.Sprint(last))).String(), Argv: []string{fmt.Sprintf("tool%d", last)}}},
			{"miss", Query{Kind: KindFS, Op: "read", Path: "/data/team1/nowhere/at/all"}},
		}
		for _, qc := range queries {
			if d := e.Decide(qc.q); d.Allow != (qc.name != "miss") {
				b.Fatalf("n=%d %s: Decide = %v (%s)", n, qc.name, d.Allow, d.Reason)
			}
			b.Run(fmt.Sprintf("%s/rules=%d", qc.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					e.Decide(qc.q)
				}
			})
		}
	}
}
