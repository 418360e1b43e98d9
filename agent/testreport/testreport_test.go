package testreport

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	type tc struct {
		name, format, in string
		want             Counts
		err              string // a substring of the error; "" for none
	}
	ev := func(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
	run := func(test string) string { return `{"Action":"run","Package":"p","Test":"` + test + `"}` }
	end := func(action, test string) string {
		return `{"Action":"` + action + `","Package":"p","Test":"` + test + `","Elapsed":0}`
	}
	for _, c := range []tc{
		// go-test-json
		{"go pass fail skip", GoTestJSON, ev(`{"Action":"start","Package":"p"}`, run("A"), end("pass", "A"), run("B"), end("fail", "B"),
			run("C"), end("skip", "C"), `{"Action":"fail","Package":"p","Elapsed":0.1}`), Counts{1, 2, 1}, ""},
		{"go subtests and -count=2", GoTestJSON, ev(run("A"), run("A/x"), end("pass", "A/x"), end("pass", "A"), run("A"), run("A/x"), end("pass", "A/x"), end("pass", "A")), Counts{4, 0, 0}, ""},
		{"go no tests (TestMain os.Exit(0))", GoTestJSON, ev(`{"Action":"start","Package":"p"}`, `{"Action":"output","Package":"p","Output":"ok  \tp\t0.001s\n"}`, `{"Action":"pass","Package":"p","Elapsed":0}`), Counts{}, ""},
		{"go empty", GoTestJSON, "", Counts{}, ""},
		{"go crash mid-test", GoTestJSON, ev(run("A"), end("pass", "A"), run("B"), `{"Action":"output","Package":"p","Test":"B","Output":"panic: x\n"}`, `{"Action":"fail","Package":"p"}`), Counts{1, 2, 0}, ""},
		{"go benchmark never ends", GoTestJSON, ev(run("BenchmarkX"), `{"Action":"pass","Package":"p"}`), Counts{}, ""},
		{"go build fail", GoTestJSON, ev(`{"ImportPath":"p [p.test]","Action":"build-output","Output":"x.go:1: bad\n"}`, `{"ImportPath":"p [p.test]","Action":"build-fail"}`,
			`{"Action":"start","Package":"p"}`, `{"Action":"fail","Package":"p","FailedBuild":"p [p.test]"}`), Counts{0, 2, 0}, ""},
		{"go attr and artifacts", GoTestJSON, ev(run("A"), `{"Action":"attr","Package":"p","Test":"A","Key":"k","Value":"v"}`, `{"Action":"artifacts","Package":"p","Test":"A","Path":"/tmp/x"}`, end("pass", "A")), Counts{1, 0, 0}, ""},
		{"go CRLF", GoTestJSON, run("A") + "\r\n" + end("pass", "A") + "\r\n", Counts{1, 0, 0}, ""},
		{"go end without run", GoTestJSON, ev(end("pass", "A")), Counts{}, "line 1: test \"A\" of package \"p\" ends (pass) without having started"},
		{"go second end", GoTestJSON, ev(run("A"), end("pass", "A"), end("pass", "A")), Counts{}, "line 3"},
		{"go unknown action", GoTestJSON, ev(run("A"), `{"Action":"passed","Package":"p","Test":"A"}`), Counts{}, "line 2: unknown action \"passed\""},
		{"go unknown field", GoTestJSON, ev(`{"Action":"pass","Package":"p","Test":"A","Passed":99}`), Counts{}, "line 1: not a test2json event"},
		{"go not JSON", GoTestJSON, ev(run("A"), "PASS"), Counts{}, "line 2: not a test2json event"},
		{"go two objects", GoTestJSON, ev(run("A") + end("pass", "A")), Counts{}, "line 1: more than one JSON object"},
		{"go null", GoTestJSON, ev("null"), Counts{}, "line 1"},
		{"go array", GoTestJSON, ev(`[{"Action":"pass"}]`), Counts{}, "line 1"},
		{"go run without test", GoTestJSON, ev(`{"Action":"run","Package":"p"}`), Counts{}, "names no test"},
		{"go invalid UTF-8", GoTestJSON, ev(`{"Action":"output","Output":"` + "\xff" + `"}`), Counts{}, "not valid UTF-8"},

		// JUnit
		{"junit pytest", JUnit, `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4">` +
			`<testcase classname="t" name="a"/><testcase classname="t" name="b"><failure message="x">trace</failure></testcase>` +
			`<testcase classname="t" name="c"><skipped type="pytest.skip" message="s"/></testcase>` +
			`<testcase classname="t" name="d"><system-out>ok</system-out></testcase></testsuite></testsuites>`, Counts{2, 1, 1}, ""},
		{"junit single suite with error", JUnit, `<testsuite><testcase name="a"><error/></testcase><testcase name="b"/></testsuite>`, Counts{1, 1, 0}, ""},
		{"junit nested suites", JUnit, `<testsuites><testsuite><testsuite><testcase name="a"/></testsuite><testcase name="b"/></testsuite></testsuites>`, Counts{2, 0, 0}, ""},
		{"junit failure and skipped", JUnit, `<testsuite><testcase name="a"><skipped/><failure/></testcase></testsuite>`, Counts{0, 1, 0}, ""},
		{"junit declared failures without failing cases", JUnit, `<testsuites><testsuite failures="2" errors="1"><testcase name="a"/></testsuite></testsuites>`, Counts{1, 3, 0}, ""},
		{"junit declared failures counted once", JUnit, `<testsuites failures="1"><testsuite failures="1"><testcase name="a"><failure/></testcase></testsuite></testsuites>`, Counts{0, 1, 0}, ""},
		{"junit empty", JUnit, `<testsuites/>`, Counts{}, ""},
		{"junit failure outside a case ignored in system-out", JUnit, `<testsuite><system-out><failure/></system-out><testcase name="a"/></testsuite>`, Counts{1, 0, 0}, ""},
		{"junit doctype", JUnit, `<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><testsuites/>`, Counts{}, "directive (DOCTYPE) is not allowed"},
		{"junit unknown entity", JUnit, `<testsuites><testsuite name="&a;"/></testsuites>`, Counts{}, "junit"},
		{"junit wrong root", JUnit, `<html><testcase/></html>`, Counts{}, "the document element is html"},
		{"junit two roots", JUnit, `<testsuite/><testsuite><testcase name="a"/></testsuite>`, Counts{}, "a second document element"},
		{"junit unclosed", JUnit, `<testsuites><testsuite><testcase name="a"/>`, Counts{}, "junit"},
		{"junit mismatched", JUnit, `<testsuites><testsuite></testsuites>`, Counts{}, "junit"},
		{"junit case in case", JUnit, `<testsuite><testcase><testcase/></testcase></testsuite>`, Counts{}, "testcase inside a testcase"},
		{"junit case in properties", JUnit, `<testsuite><properties><testcase/></properties></testsuite>`, Counts{}, "testcase inside properties"},
		{"junit failure outside case", JUnit, `<testsuite><failure/></testsuite>`, Counts{}, "failure outside a testcase"},
		{"junit bad count", JUnit, `<testsuite failures="-1"/>`, Counts{}, "is not a count"},
		{"junit text outside", JUnit, `<testsuite/>trailing`, Counts{}, "text outside"},
		{"junit no root", JUnit, `<?xml version="1.0"?>`, Counts{}, "no testsuites or testsuite element"},
		{"junit not XML", JUnit, `PASS`, Counts{}, "junit"},
		{"junit namespace", JUnit, `<x:testsuite xmlns:x="urn:x"/>`, Counts{}, "namespace"},
		{"junit latin1", JUnit, `<?xml version="1.0" encoding="ISO-8859-1"?><testsuite/>`, Counts{}, "junit"},
		{"junit too deep", JUnit, "<testsuite>" + strings.Repeat("<p>", MaxDepth) + strings.Repeat("</p>", MaxDepth) + "</testsuite>", Counts{}, "nested deeper than 64"},

		// TAP
		{"tap basic", TAP, "TAP version 14\n1..4\nok 1 - a\nnot ok 2 - b\nok 3 - c # SKIP no\nok 4 # TODO later\n", Counts{1, 1, 2}, ""},
		{"tap plan at end, no numbers", TAP, "ok\nok - x\nnot ok\n1..3\n", Counts{2, 1, 0}, ""},
		{"tap not ok skip is a failure", TAP, "1..1\nnot ok 1 # skip\n", Counts{0, 1, 0}, ""},
		{"tap not ok todo", TAP, "1..1\nnot ok 1 # TODO\n", Counts{0, 0, 1}, ""},
		{"tap escaped hash", TAP, "1..1\nok 1 - a \\# SKIP b\n", Counts{1, 0, 0}, ""},
		{"tap yaml and subtests ignored", TAP, "1..1\n    ok 1 - inner\n    1..1\nok 1 - outer\n  ---\n  ok: 99\n  ...\n", Counts{1, 0, 0}, ""},
		{"tap comments and pragmas", TAP, "# hello\npragma +strict\n1..1\nok 1\n# tests 1\n", Counts{1, 0, 0}, ""},
		{"tap skip all", TAP, "1..0 # SKIP no tests here\n", Counts{}, ""},
		{"tap bail out", TAP, "1..3\nok 1\nBail out! db down\n", Counts{1, 1, 0}, ""},
		{"tap no plan", TAP, "ok 1\nok 2\n", Counts{}, "no plan"},
		{"tap empty", TAP, "", Counts{}, "no plan"},
		{"tap plan mismatch", TAP, "1..3\nok 1\nok 2\n", Counts{}, "the plan is 1..3 but there are 2 test lines"},
		{"tap two plans", TAP, "1..1\nok 1\n1..1\n", Counts{}, "a second plan"},
		{"tap test after end plan", TAP, "ok 1\n1..1\nok 2\n", Counts{}, "a test line after the plan at the end"},
		{"tap wrong number", TAP, "1..2\nok 1\nok 3\n", Counts{}, "test number 3, want 2"},
		{"tap number glued", TAP, "1..1\nok 1a\n", Counts{}, "not followed by a space"},
		{"tap bad plan", TAP, "1..x\n", Counts{}, "is not 1..N"},
		{"tap signed plan", TAP, "1..+1\nok\n", Counts{}, "is not 1..N"},
		{"tap bad version", TAP, "TAP version 99\n1..0\n", Counts{}, "version \"99\""},
		{"tap junk line", TAP, "1..1\nok 1\nPASSED everything\n", Counts{}, "line 3: not a TAP line"},
		{"tap okay is not ok", TAP, "1..1\nokay 1\n", Counts{}, "not a TAP line"},

		{"unknown format", "xunit", "", Counts{}, "unknown format"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.format, []byte(c.in))
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("Parse = %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("Parse = %+v, %v; want an error with %q", got, err, c.err)
			case err != nil && !errors.Is(err, ErrMalformed):
				t.Fatalf("%v does not wrap ErrMalformed", err)
			case err == nil && got != c.want:
				t.Fatalf("Parse = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestRealReports reads reports written by the real tools: go test -json
// (a package with passing, failing, skipped and parallel subtests, and a
// TestMain that exits 0 without running anything) and Node's test
// runner's TAP and JUnit reporters.
func TestRealReports(t *testing.T) {
	for _, tc := range []struct {
		file, format string
		want         Counts
	}{
		{"go-test.jsonl", GoTestJSON, Counts{Passed: 4, Failed: 2, Skipped: 1}}, // TestFail and the package
		{"go-testmain-exit0.jsonl", GoTestJSON, Counts{}},
		{"node.tap", TAP, Counts{Passed: 2, Failed: 1, Skipped: 2}}, // a subtest group counts once
		{"node-junit.xml", JUnit, Counts{Passed: 3, Failed: 1, Skipped: 2}},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(tc.format, b)
		if err != nil || got != tc.want {
			t.Errorf("%s: Parse = %+v, %v; want %+v", tc.file, got, err, tc.want)
		}
	}
}

func TestLimits(t *testing.T) {
	for _, f := range Formats {
		big := make([]byte, MaxBytes+1)
		if _, err := Parse(f, big); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "more than the limit") {
			t.Errorf("%s: Parse(%d bytes) = %v", f, len(big), err)
		}
	}
	long := strings.Repeat("#", MaxLineBytes+1) + "\n"
	for _, f := range []string{GoTestJSON, TAP} {
		if _, err := Parse(f, []byte(long)); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "line 1: longer than") {
			t.Errorf("%s: Parse(long line) = %v", f, err)
		}
	}
	// At the limit, a report of many tests is read.
	var b strings.Builder
	b.WriteString("1..100000\n")
	for range 100000 {
		b.WriteString("ok\n")
	}
	if c, err := Parse(TAP, []byte(b.String())); err != nil || c.Passed != 100000 {
		t.Errorf("Parse(100000 tests) = %+v, %v", c, err)
	}
}
