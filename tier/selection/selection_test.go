package selection

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
)

func set(t *testing.T, doc map[string]any) *grant.Set {
	t.Helper()
	doc["type"] = grant.Type
	for k, v := range map[string]any{"code": "untrusted", "tenancy": "single", "confidential": false} {
		if _, ok := doc[k]; !ok {
			doc[k] = v
		}
	}
	b, _ := json.Marshal(doc)
	s, err := grant.Parse(b)
	if err != nil {
		t.Fatalf("Parse(%s): %v", b, err)
	}
	return s
}

func TestRequiredTable(t *testing.T) {
	cpu := []any{map[string]any{"class": "cpu", "mode": "brokered"}}
	for _, tc := range []struct {
		name string
		doc  map[string]any
		want tier.Tier
	}{
		{"cpu-only trusted in process", map[string]any{"code": "trusted", "devices": cpu}, tier.S0},
		{"cpu-only trusted process", map[string]any{"code": "trusted", "devices": cpu, "exec": map[string]any{"allow": []any{map[string]any{"name": "make"}}}}, tier.S1},
		{"trusted with env", map[string]any{"code": "trusted", "env": []string{"LANG"}}, tier.S1},
		{"trusted with limits", map[string]any{"code": "trusted", "limits": map[string]any{"wall_ms": 1}}, tier.S1},
		{"trusted with egress", map[string]any{"code": "trusted", "egress": []any{map[string]any{"host": "example.com", "proto": "tcp", "ports": []int{443, 443}}}}, tier.S1},
		{"untrusted", map[string]any{"devices": cpu}, tier.S2},
		{"gpu brokered, trusted", map[string]any{"code": "trusted", "devices": []any{map[string]any{"class": "gpu", "mode": "brokered"}}}, tier.S2},
		{"multi-tenant", map[string]any{"tenancy": "multi"}, tier.S3},
		{"isolated kernel", map[string]any{"isolated_kernel": true}, tier.S4},
		{"isolated kernel, trusted", map[string]any{"code": "trusted", "isolated_kernel": true}, tier.S4},
		{"isolated kernel false", map[string]any{"isolated_kernel": false}, tier.S2},
		{"isolated kernel beats multi-tenant", map[string]any{"tenancy": "multi", "isolated_kernel": true}, tier.S4},
		{"direct beats isolated kernel", map[string]any{"isolated_kernel": true, "devices": []any{map[string]any{"class": "gpu", "mode": "direct"}}}, tier.S5},
		{"gpu direct", map[string]any{"devices": []any{map[string]any{"class": "gpu", "mode": "direct"}}}, tier.S5},
		{"cpu direct", map[string]any{"code": "trusted", "devices": []any{map[string]any{"class": "cpu", "mode": "direct"}}}, tier.S5},
		{"confidential", map[string]any{"confidential": true}, tier.S6},
		{"confidential beats direct", map[string]any{"confidential": true, "devices": []any{map[string]any{"class": "gpu", "mode": "direct"}}}, tier.S6},
	} {
		if got := Required(set(t, tc.doc)); got != tc.want {
			t.Errorf("%s: Required = %s, want %s (%v)", tc.name, got, tc.want, Requirements(set(t, tc.doc)))
		}
	}
}

// TestRequiredMonotone: granting more never lowers the required tier.
func TestRequiredMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	additions := []func(d map[string]any){
		func(d map[string]any) { d["code"] = "untrusted" },
		func(d map[string]any) { d["tenancy"] = "multi" },
		func(d map[string]any) { d["confidential"] = true },
		func(d map[string]any) { d["isolated_kernel"] = true },
		func(d map[string]any) { d["env"] = []string{"LANG"} },
		func(d map[string]any) { d["limits"] = map[string]any{"pids": 4} },
		func(d map[string]any) {
			d["exec"] = map[string]any{"allow": []any{map[string]any{"name": "sh"}}}
		},
		func(d map[string]any) {
			d["egress"] = []any{map[string]any{"host": "example.com", "proto": "tcp", "ports": []int{443, 443}}}
		},
		func(d map[string]any) {
			devs, _ := d["devices"].([]any)
			d["devices"] = append(devs, map[string]any{"class": []string{"cpu", "gpu"}[r.IntN(2)], "mode": []string{"brokered", "direct"}[r.IntN(2)]})
		},
		func(d map[string]any) { d["fs"] = []any{map[string]any{"path": "/work", "access": "rw"}} },
	}
	for range 2000 {
		d := map[string]any{"code": "trusted", "tenancy": "single", "confidential": false}
		for range r.IntN(4) {
			additions[r.IntN(len(additions))](d)
		}
		before := Required(set(t, d))
		additions[r.IntN(len(additions))](d)
		if after := Required(set(t, d)); after < before {
			t.Fatalf("granting more lowered the tier from %s to %s: %v", before, after, d)
		}
	}
}

// TestSelectExact: a host runs exactly the required tier or refuses, for
// every combination of offered tiers.
func TestSelectExact(t *testing.T) {
	sets := map[tier.Tier]*grant.Set{
		tier.S0: set(t, map[string]any{"code": "trusted"}),
		tier.S1: set(t, map[string]any{"code": "trusted", "env": []string{"A"}}),
		tier.S2: set(t, map[string]any{}),
		tier.S3: set(t, map[string]any{"tenancy": "multi"}),
		tier.S4: set(t, map[string]any{"isolated_kernel": true}),
		tier.S5: set(t, map[string]any{"devices": []any{map[string]any{"class": "gpu", "mode": "direct"}}}),
		tier.S6: set(t, map[string]any{"confidential": true}),
	}
	for mask := range 1 << len(tier.All) {
		var h Host
		for i, tr := range tier.All {
			if mask&(1<<i) != 0 {
				h.Offers = append(h.Offers, tr)
			}
		}
		for req, s := range sets {
			got, err := h.Select(s)
			offered := mask&(1<<int(req)) != 0
			switch {
			case offered && (err != nil || got != req):
				t.Errorf("offers %s, requires %s: Select = %s, %v", tier.FormatList(h.Offers), req, got, err)
			case !offered && !errors.Is(err, ErrNotOffered):
				t.Errorf("offers %s, requires %s: Select = %s, %v; want ErrNotOffered", tier.FormatList(h.Offers), req, got, err)
			}
		}
	}
}

// TestRequirementsNameWritableHostPaths: a writable host path raises no
// tier but shows in the decision; /work and /tmp (the sandbox's own
// scratch) and read-only paths do not.
func TestRequirementsNameWritableHostPaths(t *testing.T) {
	s, err := grant.Parse([]byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"fs":[{"path":"/work","access":"rwx"},{"path":"/srv/cache","access":"rw"},{"path":"/usr/lib/go","access":"rx"},{"path":"/srv/out","access":"rwx"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range Requirements(s) {
		if r.Tier == tier.S0 {
			got = append(got, r.Why)
		}
	}
	want := []string{
		"fs[1]: rw /srv/cache is a writable host path: writes bypass the staged workspace (refused at S3 and S4)",
		"fs[3]: rwx /srv/out is a writable host path: writes bypass the staged workspace (refused at S3 and S4)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("S0 requirements %q, want %q", got, want)
	}
	if r := Required(s); r != tier.S2 {
		t.Errorf("Required = %s, want S2", r)
	}
}
