package main

import (
	"os"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMkRecord is the testscript command 'mkrecord OUT KEY.pem': write a
// durable run record (execute, park, resume, execute, close) to OUT and
// its head, signed with KEY.pem, to OUT.head.
func cmdMkRecord(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkrecord OUT KEY.pem")
	}
	k, err := sign.LoadPrivate(ts.MkAbs(args[1]))
	ts.Check(err)
	id := func(s string) canon.ID { return canon.Sum([]byte(s)) }
	base := durable.Segment{Manifest: id("manifest"), Grants: id("grants"), Env: id("env")}
	r := durable.New()
	for _, s := range []durable.Segment{
		{Kind: durable.Execute, EnergyUJ: 1500},
		{Kind: durable.Suspend, Snapshot: id("snapshot")},
		{Kind: durable.Resume, Snapshot: id("snapshot"), IdleUJ: 420, IdleProvenance: "Estimator", ParkedMS: 60000},
		{Kind: durable.Execute, EnergyUJ: 900},
		{Kind: durable.Close},
	} {
		s.Manifest, s.Grants, s.Env = base.Manifest, base.Grants, base.Env
		_, err := r.Append(s)
		ts.Check(err)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), r.Wire(), 0o644))
	ts.Check(os.WriteFile(ts.MkAbs(args[0]+".head"), r.Head().Seal(k), 0o644))
}
