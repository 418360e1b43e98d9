package main

import (
	"bytes"
	"os"

	"github.com/cordon-dev/cordon/evidence/audit"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMkAudit is the testscript command 'mkaudit OUT KEY.pem TENANT': an
// audit log of four records (tenants acme and globex, one with a token)
// exported for TENANT ("all" for the operator) to OUT, with secret-named
// members masked and the head signed with KEY.pem.
func cmdMkAudit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: mkaudit OUT KEY.pem TENANT")
	}
	k, err := sign.LoadPrivate(ts.MkAbs(args[1]))
	ts.Check(err)
	var recs []*audit.Record
	for i, body := range []string{
		`{"event":"key.create","tenant":"acme","actor":"admin","detail":{"key_id":"k1","token":"cdn_supersecretvalue_0001"}}`,
		`{"event":"run.submit","tenant":"globex","actor":"bob","detail":{"run":"r1"}}`,
		`{"event":"run.approve","tenant":"acme","actor":"carol","detail":{"run":"r2"}}`,
		`{"event":"auth.fail","tenant":"acme","actor":"","detail":{"reason":"bad key"}}`,
	} {
		v, err := canon.Parse([]byte(body))
		ts.Check(err)
		var prev canon.ID
		if i > 0 {
			prev = recs[i-1].ID()
		}
		r, err := audit.New(uint64(i), prev, bytes.Repeat([]byte{byte(i + 1)}, audit.SecretSize), v)
		ts.Check(err)
		recs = append(recs, r)
	}
	var b bytes.Buffer
	for _, r := range recs {
		t, _ := r.Body.Get("tenant")
		b.Write(r.Export(args[2] == "all" || t.Str() == args[2], func(p audit.Path, v canon.Value) bool {
			return !(len(p) > 0 && p[len(p)-1] == "token")
		}))
		b.WriteByte('\n')
	}
	b.Write(audit.Head{Count: uint64(len(recs)), Head: recs[len(recs)-1].ID()}.Seal(k))
	b.WriteByte('\n')
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b.Bytes(), 0o644))
}
