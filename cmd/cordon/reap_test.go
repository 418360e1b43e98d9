package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cordon-dev/cordon/sandbox/cgroup"
	"github.com/cordon-dev/cordon/sandbox/reaper"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdRuns is the testscript command "runs STATE N [busy|idle]".
func cmdRuns(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: runs STATE N [busy|idle]")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	want := ""
	if len(args) == 3 {
		want = args[2]
	}
	var rs []reaper.Run
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rs = nil
		ents, _ := os.ReadDir(filepath.Join(args[0], reaper.RecordsDir))
		for _, e := range ents {
			var r reaper.Run
			if b, err := os.ReadFile(filepath.Join(args[0], reaper.RecordsDir, e.Name())); err == nil && json.Unmarshal(b, &r) == nil {
				rs = append(rs, r)
			}
		}
		ok := len(rs) == n
		for _, r := range rs {
			for _, d := range r.Cgroups {
				idle, err := cgroup.Idle(d)
				ok = ok && err == nil && (want == "" || idle == (want == "idle"))
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: want %d %s runs after 30s, have %+v", args[0], n, want, rs)
		}
	}
}
