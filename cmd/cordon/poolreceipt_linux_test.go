package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// TestExecPoolReceiptIdle: a warm claim's idle charge is a pool-idle
// record of its receipt, equal to the journal's pool.claim entry and
// summed into the total; 'cordon verify receipt --journal' checks the
// two against each other, and a receipt re-signed with another charge,
// or without the record, fails.
func TestExecPoolReceiptIdle(t *testing.T) {
	state := t.TempDir()
	startPool(t, state)
	dir := t.TempDir()
	keyFile, pubFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "pub.pem")
	if code := run([]string{"keygen", "--out", keyFile}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatal("keygen")
	}
	var pub bytes.Buffer
	if code := run([]string{"pubkey", keyFile}, nil, &pub, io.Discard); code != 0 {
		t.Fatal("pubkey")
	}
	if err := os.WriteFile(pubFile, pub.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	jf, rf := filepath.Join(dir, "j.jsonl"), filepath.Join(dir, "r.jcr")
	var errb bytes.Buffer
	if code := run([]string{"exec", "--pool", "--state", state, "--journal", jf, "--receipt", rf, "--key", keyFile, "--", "true"}, nil, io.Discard, &errb); code != 0 {
		t.Fatalf("exec --pool --receipt: exit %d: %s", code, errb.String())
	}
	entries, err := loadJournal(nil, jf)
	if err != nil {
		t.Fatal(err)
	}
	var claimUJ int64
	for _, e := range entries {
		if e.Type == "pool.claim" {
			v, _ := e.Body().Get("idle_uj")
			claimUJ = v.Int()
		}
	}
	b, err := os.ReadFile(rf)
	if err != nil {
		t.Fatal(err)
	}
	k, err := sign.LoadPrivate(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := receipt.Verify(b, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	var idle *receipt.Device
	var sum uint64
	for i, d := range c.Devices {
		sum += d.EstimatedUJ
		if d.Class == receipt.PoolIdleClass {
			idle = &c.Devices[i]
		}
	}
	if idle == nil || claimUJ <= 0 || idle.EstimatedUJ != uint64(claimUJ) || idle.Provenance != receipt.Estimator || idle.BusyNS != 0 {
		t.Fatalf("receipt devices %+v, journal claim %d µJ: want a pool-idle Estimator record of the claim", c.Devices, claimUJ)
	}
	if c.Total.EstimatedUJ != sum || c.Total.MeasuredUJ != nil {
		t.Errorf("total %+v, records sum to %d", c.Total, sum)
	}
	verify := func(file string) (int, string) {
		var out, errb bytes.Buffer
		code := run([]string{"verify", "receipt", "--pubkey", pubFile, "--journal", jf, file}, nil, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := verify(rf); code != 0 {
		t.Fatalf("verify receipt --journal: exit %d: %s", code, out)
	}
	// Re-signed by the steward's own key with another charge, or none:
	// the signature holds, the journal does not agree.
	for name, edit := range map[string]func(c *receipt.Core){
		"cheaper": func(c *receipt.Core) {
			for i := range c.Devices {
				if c.Devices[i].Class == receipt.PoolIdleClass {
					c.Devices[i].EstimatedUJ = 1
				}
			}
		},
		"dropped": func(c *receipt.Core) {
			var keep []receipt.Device
			for _, d := range c.Devices {
				if d.Class != receipt.PoolIdleClass {
					keep = append(keep, d)
				}
			}
			c.Devices = keep
		},
	} {
		forged, _, err := receipt.Verify(b, k.Public())
		if err != nil {
			t.Fatal(err)
		}
		edit(forged)
		forged.Finish()
		env, _, err := receipt.Seal(k, forged)
		if err != nil {
			t.Fatal(err)
		}
		ff := filepath.Join(dir, name+".jcr")
		if err := os.WriteFile(ff, env, 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out := verify(ff); code == 0 || !strings.Contains(out, "pool idle record does not match") {
			t.Errorf("%s receipt: verify exit %d: %s; want a pool idle mismatch", name, code, out)
		}
	}
}
