package testreport

import (
	"encoding/json"
	"strings"
)

// goEvent is one test2json event (go doc cmd/test2json), with the fields
// `go test -json` adds for build output. Every field is listed: an
// unknown one is refused.
type goEvent struct {
	Time        string   `json:"Time"`
	Action      string   `json:"Action"`
	Package     string   `json:"Package"`
	Test        string   `json:"Test"`
	Elapsed     *float64 `json:"Elapsed"`
	Output      string   `json:"Output"`
	FailedBuild string   `json:"FailedBuild"`
	ImportPath  string   `json:"ImportPath"`
	Key         string   `json:"Key"`
	Value       string   `json:"Value"`
	Path        string   `json:"Path"`
}

// goActions are the actions test2json and `go test -json` write.
var goActions = map[string]bool{
	"start": true, "run": true, "pause": true, "cont": true, "pass": true, "bench": true, "fail": true,
	"output": true, "skip": true, "attr": true, "artifacts": true, "build-output": true, "build-fail": true,
}

// parseGoTestJSON counts a test2json stream: every non-empty line is one
// event object. A test (Package and Test) is counted when it ends (pass,
// fail, skip) after a run event of its own; an end without a run is
// refused, and a test still running when the stream ends counts as
// failed (except a benchmark: one that logs nothing has no end event).
// A package-level fail and a build-fail count as failures; benchmarks
// are not tests and are never counted.
func parseGoTestJSON(data []byte) (Counts, error) {
	ls, err := lines(data)
	if err != nil {
		return Counts{}, err
	}
	var c Counts
	type key struct{ pkg, test string }
	running := map[key]int64{}
	var order []key // first run of each test, for a stable incomplete count
	for i, l := range ls {
		n := i + 1
		if strings.TrimSpace(l) == "" {
			continue
		}
		var e goEvent
		d := json.NewDecoder(strings.NewReader(l))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return Counts{}, malformed("line %d: not a test2json event: %v", n, err)
		}
		if d.More() || strings.TrimSpace(l)[0] != '{' {
			return Counts{}, malformed("line %d: more than one JSON object", n)
		}
		if !goActions[e.Action] {
			return Counts{}, malformed("line %d: unknown action %q", n, e.Action)
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "run":
			if e.Test == "" {
				return Counts{}, malformed("line %d: a run event names no test", n)
			}
			if _, seen := running[k]; !seen {
				order = append(order, k)
			}
			running[k]++
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					c.Failed++ // the package failed: a build, TestMain or a crash
				}
				continue
			}
			if running[k] == 0 {
				return Counts{}, malformed("line %d: test %q of package %q ends (%s) without having started", n, e.Test, e.Package, e.Action)
			}
			running[k]--
			switch e.Action {
			case "pass":
				c.Passed++
			case "fail":
				c.Failed++
			default:
				c.Skipped++
			}
		case "bench":
			if running[k] > 0 {
				running[k]--
			}
		case "build-fail":
			c.Failed++
		}
	}
	for _, k := range order {
		if !strings.HasPrefix(k.test, "Benchmark") { // a benchmark that logs nothing never ends
			c.Failed += running[k] // started and never ended: the binary died
		}
	}
	return c, nil
}
