package grant

import (
	"math/rand/v2"
	"testing"
)

// TestEnforcerMatchesReference compares the Enforcer with the naive
// reference enforcer on random grant sets and every generated request.
func TestEnforcerMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	qs := genQueries()
	sets, allowed := 300, 0
	if testing.Short() {
		sets = 40
	}
	for range sets {
		s := mustSet(t, genSetDoc(r))
		e := New(s)
		for _, q := range qs {
			d := e.Decide(q)
			if want := refAllow(s, q); d.Allow != want {
				t.Fatalf("set %s\nDecide(%+v) = %v (%s: %s), reference says %v", describe(s), q, d.Allow, d.Rule, d.Reason, want)
			}
			if d.Allow {
				allowed++
			}
		}
	}
	if allowed < sets {
		t.Fatalf("only %d allowed decisions over %d sets: the generators are too narrow to test anything", allowed, sets)
	}
}

// TestCoversSound is the attenuation property: whenever Covers(parent,
// child) holds, every request the child allows the parent allows too.
func TestCoversSound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	qs := genQueries()
	pairs, covered, refused := 3000, 0, 0
	if testing.Short() {
		pairs = 300
	}
	for range pairs {
		pd := genSetDoc(r)
		cd := pd
		for range 1 + r.IntN(3) {
			cd = narrow(r, cd)
		}
		p, c := mustSet(t, pd), mustSet(t, cd)
		if err := Covers(p, c); err != nil {
			refused++
			continue
		}
		covered++
		checkCovered(t, p, c, qs)
	}
	if covered < pairs/10 || refused < pairs/10 {
		t.Fatalf("covered %d, refused %d of %d pairs: the generator does not exercise both outcomes", covered, refused, pairs)
	}
}

func checkCovered(t testing.TB, p, c *Set, qs []Query) {
	t.Helper()
	ep, ec := New(p), New(c)
	for _, q := range qs {
		if dc := ec.Decide(q); dc.Allow {
			if dp := ep.Decide(q); !dp.Allow {
				t.Fatalf("Covers(parent, child) = nil, but the child allows what the parent denies:\nparent %s\nchild  %s\nquery %+v\nchild: %s %s\nparent: %s %s",
					describe(p), describe(c), q, dc.Rule, dc.Reason, dp.Rule, dp.Reason)
			}
		}
	}
	// A covered child also keeps every parent deny.
	if err := Covers(p, p); err != nil {
		t.Fatalf("Covers(p, p) = %v; a set must cover itself", err)
	}
}

// FuzzDecide cross-checks the Enforcer with the reference enforcer on sets
// and requests drawn from the fuzzer's seeds.
func FuzzDecide(f *testing.F) {
	for i := range 8 {
		f.Add(uint64(i), uint64(i*31+7))
	}
	qs := genQueries()
	f.Fuzz(func(t *testing.T, a, b uint64) {
		r := rand.New(rand.NewPCG(a, b))
		s := mustSet(t, genSetDoc(r))
		e := New(s)
		for range 64 {
			q := qs[r.IntN(len(qs))]
			if d := e.Decide(q); d.Allow != refAllow(s, q) {
				t.Fatalf("set %s\nDecide(%+v) = %v (%s), reference disagrees", describe(s), q, d.Allow, d.Rule)
			}
		}
	})
}

// FuzzCovers checks the attenuation property on pairs drawn from the
// fuzzer's seeds.
func FuzzCovers(f *testing.F) {
	for i := range 8 {
		f.Add(uint64(i), uint64(i*17+3), uint8(i))
	}
	qs := genQueries()
	f.Fuzz(func(t *testing.T, a, b uint64, edits uint8) {
		r := rand.New(rand.NewPCG(a, b))
		pd := genSetDoc(r)
		cd := pd
		for range 1 + int(edits)%4 {
			cd = narrow(r, cd)
		}
		p, c := mustSet(t, pd), mustSet(t, cd)
		if Covers(p, c) == nil {
			checkCovered(t, p, c, qs)
		}
	})
}
