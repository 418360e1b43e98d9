package receipt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
)

// claims writes a journal with one pool.claim entry per body and returns
// its entries.
func claims(t *testing.T, bodies ...string) []journal.Entry {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.jsonl")
	w, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append("command", mustParse(t, `{"argv":["true"]}`)); err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if _, err := w.Append("pool.claim", mustParse(t, b)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	es, _, err := journal.Scan(f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func mustParse(t *testing.T, s string) canon.Value {
	t.Helper()
	v, err := canon.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func withIdle(uj uint64, prov string, busy uint64) *Core {
	c := &Core{Devices: []Device{{Class: "cpu", Provenance: Estimator, EstimatedUJ: 5000, BusyNS: 7}}}
	if prov != "" {
		c.Devices = append(c.Devices, Device{Class: PoolIdleClass, Provenance: prov, EstimatedUJ: uj, BusyNS: busy})
	}
	c.Finish()
	return c
}

// The pool-idle record must be exactly the journal's claims: each
// disagreement fails.
func TestCheckPoolIdle(t *testing.T) {
	claim := `{"slot":"s1","env":"e","policy":"p","idle_uj":1234,"idle_provenance":"Estimator","parked_ns":5}`
	for _, tc := range []struct {
		name    string
		core    *Core
		entries []journal.Entry
		ok      bool
	}{
		{"no claim, no record", withIdle(0, "", 0), claims(t), true},
		{"claim and matching record", withIdle(1234, Estimator, 0), claims(t, claim), true},
		{"record without a claim", withIdle(1234, Estimator, 0), claims(t), false},
		{"claim without a record", withIdle(0, "", 0), claims(t, claim), false},
		{"a lower charge", withIdle(1, Estimator, 0), claims(t, claim), false},
		{"a higher charge", withIdle(1235, Estimator, 0), claims(t, claim), false},
		{"busy time on idle", withIdle(1234, Estimator, 9), claims(t, claim), false},
		{"another provenance", withIdle(1234, Estimator, 0), claims(t, `{"slot":"s1","env":"e","policy":"p","idle_uj":1234,"idle_provenance":"HwShunt","parked_ns":5}`), false},
		{"a zero claim", withIdle(0, Estimator, 0), claims(t, `{"slot":"s1","env":"e","policy":"p","idle_uj":0,"idle_provenance":"Estimator","parked_ns":5}`), false},
		{"two claims sum", withIdle(2468, Estimator, 0), claims(t, claim, claim), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.core.CheckPoolIdle(tc.entries)
			if tc.ok && err != nil {
				t.Errorf("CheckPoolIdle = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, ErrIdle) {
				t.Errorf("CheckPoolIdle = %v, want ErrIdle", err)
			}
		})
	}
	// The charge is summed into the total like every record, and leaves
	// the total unmeasured.
	c := withIdle(1234, Estimator, 0)
	if c.Total.EstimatedUJ != 5000+1234 || c.Total.MeasuredUJ != nil {
		t.Errorf("total %+v", c.Total)
	}
}
