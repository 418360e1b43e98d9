package runner

// Verification that means something: a verify command's exit status is
// easy to fake from the code under test, so a manifest may require a test
// report (verify_report) from the verify run itself. The real-sandbox
// tests here fail, never skip, on a host without the sandbox.

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/tier"
)

// The project under test: calc.py (buggy; the model's output), its
// tests, and two harnesses that run the tests and report in TAP (to
// stdout) and JUnit (to report.xml).
const (
	calcBuggy  = "def add(a, b):\n    return a - b\n"
	calcFixed  = "def add(a, b):\n    return a + b\n"
	calcAttack = "import os\nos._exit(0)\n" // the hostile model's "fix": exit 0 before any test runs
	testCalc   = `import unittest
from calc import add

class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_zero(self):
        self.assertEqual(add(-1, 1), 0)
`
	harness = `import unittest
import test_calc

def flat(s):
    for x in s:
        if isinstance(x, unittest.TestSuite):
            yield from flat(x)
        else:
            yield x

results = []
for t in flat(unittest.defaultTestLoader.loadTestsFromModule(test_calc)):
    r = unittest.TestResult()
    t.run(r)
    results.append((t.id(), "skip" if r.skipped else "ok" if r.wasSuccessful() else "fail"))
`
	tapHarness = harness + `
print("TAP version 13")
print("1..%d" % len(results))
for i, (name, outcome) in enumerate(results, 1):
    print({"ok": "ok %d - %s", "skip": "ok %d - %s # SKIP", "fail": "not ok %d - %s"}[outcome] % (i, name))
`
	junitHarness = harness + `
from xml.sax.saxutils import quoteattr
with open("report.xml", "w") as f:
    f.write("<testsuite>")
    for name, outcome in results:
        inner = {"ok": "", "skip": "<skipped/>", "fail": "<failure/>"}[outcome]
        f.write("<testcase name=%s>%s</testcase>" % (quoteattr(name), inner))
    f.write("</testsuite>")
`
	// A passing JUnit report of five tests, planted before the run.
	forgedJUnit = `<testsuite><testcase name="a"/><testcase name="b"/><testcase name="c"/><testcase name="d"/><testcase name="e"/></testsuite>`
)

func calcFiles() map[string]string {
	return map[string]string{"calc.py": calcBuggy, "test_calc.py": testCalc, "tap_harness.py": tapHarness, "junit_harness.py": junitHarness}
}

// calcManifest lets the model rewrite calc.py and run python3; verify
// and report are set by the caller (report nil: none).
func calcManifest(verify []string, report map[string]any) func(map[string]any) {
	return func(m map[string]any) {
		m["inputs"] = []string{"calc.py", "test_calc.py", "tap_harness.py", "junit_harness.py"}
		m["outputs"] = []string{"calc.py"}
		m["verify"] = verify
		if report != nil {
			m["verify_report"] = report
		}
		budgets(m)["max_loops"] = 0
	}
}

func writeCalc(content string) provider.Block {
	return call("write", fmt.Sprintf(`{"path":"calc.py","content":%q}`, content))
}

// TestVerifyReportDefeatsExitZero is the attack of issue 12: the model
// replaces the code under test with one that exits 0 as soon as it is
// imported. With only the exit status judged the run is "verified" (the
// old behaviour, kept for manifests without a report, and recorded as
// exit status only); with a report requirement it is not, whether the
// report comes from stdout or from a file, and an honest fix still is.
func TestVerifyReportDefeatsExitZero(t *testing.T) {
	tap := map[string]any{"format": "tap", "min_passed": 2}
	junit := map[string]any{"format": "junit", "min_passed": 2, "file": "report.xml"}
	for _, tc := range []struct {
		name   string
		verify []string
		report map[string]any
		calc   string
		status string
		check  func(t *testing.T, v *Verification)
	}{
		{"exit status only: the attack passes", []string{"python3", "-m", "unittest"}, nil, calcAttack, StatusVerified, func(t *testing.T, v *Verification) {
			if v.Mode != runrecord.VerifyExitStatusOnly || !v.Pass || v.Counts != nil || !strings.Contains(v.String(), "exit status only") {
				t.Errorf("verification %+v: %s", v, v)
			}
		}},
		{"tap report: the attack fails", []string{"python3", "tap_harness.py"}, tap, calcAttack, StatusVerifyFailed, func(t *testing.T, v *Verification) {
			if v.Mode != runrecord.VerifyReport || v.Pass || v.Counts != nil || !strings.Contains(v.Error, "no plan") {
				t.Errorf("verification %+v", v)
			}
		}},
		{"tap report: an honest fix passes", []string{"python3", "tap_harness.py"}, tap, calcFixed, StatusVerified, func(t *testing.T, v *Verification) {
			if !v.Pass || v.Counts == nil || v.Counts.Passed != 2 || v.Counts.Failed != 0 || v.From != "stdout" {
				t.Errorf("verification %+v", v)
			}
		}},
		{"tap report: the bug fails", []string{"python3", "tap_harness.py"}, tap, calcBuggy, StatusVerifyFailed, func(t *testing.T, v *Verification) {
			// The harness exits 0 either way: only the report shows the failures.
			if v.Pass || v.Counts == nil || v.Counts.Failed != 2 || !strings.Contains(v.Error, "2 failed") {
				t.Errorf("verification %+v", v)
			}
		}},
		{"junit file: the attack fails", []string{"python3", "junit_harness.py"}, junit, calcAttack, StatusVerifyFailed, func(t *testing.T, v *Verification) {
			if v.Pass || !strings.Contains(v.Error, "wrote no report at report.xml") {
				t.Errorf("verification %+v", v)
			}
		}},
		{"junit file: an honest fix passes", []string{"python3", "junit_harness.py"}, junit, calcFixed, StatusVerified, func(t *testing.T, v *Verification) {
			if !v.Pass || v.Counts == nil || v.Counts.Passed != 2 || v.From != "report.xml" {
				t.Errorf("verification %+v", v)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t, calcFiles())
			s := &script{resps: []*provider.Response{calls(writeCalc(tc.calc)), finish("fixed")}}
			out := realRun(t, ws, calcManifest(tc.verify, tc.report), s)
			if out.Status != tc.status {
				t.Fatalf("status %s, want %s; verification %+v", out.Status, tc.status, out.Body.Verification)
			}
			v := out.Body.Verification
			if v == nil || !reflect.DeepEqual(out.Body.Tasks[0].Verification, v) {
				t.Fatalf("verification %+v, task's %+v", v, out.Body.Tasks[0].Verification)
			}
			tc.check(t, v)
			es := entries(t, ws)
			reps := ofType(es, "verify.report")
			switch {
			case tc.report == nil && len(reps) != 0:
				t.Errorf("verify.report entries without a report requirement: %v", reps)
			case tc.report != nil && (len(reps) != 1 || !strings.Contains(reps[0], fmt.Sprintf(`"pass":%v`, v.Pass))):
				t.Errorf("verify.report entries %v", reps)
			}
			rep := mustVerify(t, ws)
			if rv := rep.Result.Body.Verification; !reflect.DeepEqual(rv, v) {
				t.Errorf("the signed body's verification %+v, want %+v", rv, v)
			}
		})
	}
}

// TestForgedReportFileDoesNotCount: a passing report planted in the
// workspace before the run, one the model tries to write, and one a
// command the model runs writes are all refused or removed: only what the
// verify run wrote counts.
func TestForgedReportFileDoesNotCount(t *testing.T) {
	files := calcFiles()
	files["report.xml"] = forgedJUnit
	files["forge.py"] = fmt.Sprintf("open('report.xml', 'w').write(%q)\n", forgedJUnit)
	ws := newWorkspace(t, files)
	s := &script{resps: []*provider.Response{
		calls(call("write", fmt.Sprintf(`{"path":"report.xml","content":%q}`, forgedJUnit))),
		calls(call("run", `{"argv":["python3","forge.py"]}`)),
		calls(writeCalc(calcAttack)),
		finish("done"),
	}}
	edit := calcManifest([]string{"python3", "junit_harness.py"}, map[string]any{"format": "junit", "min_passed": 2, "file": "report.xml"})
	out := realRun(t, ws, func(m map[string]any) {
		edit(m)
		m["inputs"] = append(m["inputs"].([]string), "forge.py")
	}, s)
	if out.Status != StatusVerifyFailed {
		t.Fatalf("status %s; verification %+v", out.Status, out.Body.Verification)
	}
	res := toolResults(s)
	if !strings.Contains(res[0].Text, "report.xml is not a declared output") {
		t.Errorf("the model wrote the report: %q", res[0].Text)
	}
	if v := out.Body.Verification; v == nil || v.Pass || !strings.Contains(v.Error, "wrote no report at report.xml") {
		t.Errorf("verification %+v", v)
	}
	if _, err := os.Lstat(filepath.Join(ws, "report.xml")); err == nil {
		t.Error("the planted report is still in the workspace")
	}
	mustVerify(t, ws)
}

// TestReportFromStdout: with a fake sandbox, a go-test-json report on
// standard output is read and counted; one over the report limit, or
// with a failure, does not pass even though the command exits 0; a
// report path that holds a directory fails the verify step at once.
func TestReportFromStdout(t *testing.T) {
	ev := func(action, test string) string {
		return fmt.Sprintf(`{"Action":%q,"Package":"p","Test":%q}`+"\n", action, test)
	}
	good := ev("run", "TestA") + ev("pass", "TestA") + ev("run", "TestB") + ev("pass", "TestB") + ev("run", "TestC") + ev("skip", "TestC")
	for _, tc := range []struct {
		name, stdout, status, want string
		minPassed                  int
	}{
		{"counted", good, StatusVerified, "2 passed, 0 failed, 1 skipped", 2},
		{"too few", good, StatusVerifyFailed, "at least 3 are required", 3},
		{"a failure", good + ev("run", "TestD") + ev("fail", "TestD"), StatusVerifyFailed, "1 failed tests", 1},
		{"malformed", good + "PASS\n", StatusVerifyFailed, "not a test2json event", 1},
		{"over the limit", good + strings.Repeat(" ", 8<<20), StatusVerifyFailed, "more than the report limit", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t, defaultFiles())
			sb := &fakeSandbox{offers: []tier.Tier{tier.S2}, stdout: tc.stdout}
			s := &script{resps: []*provider.Response{finish("x")}}
			m := baseManifest(t, func(m map[string]any) {
				m["verify"] = []string{"python3", "-m", "unittest"}
				m["verify_report"] = map[string]any{"format": "go-test-json", "min_passed": tc.minPassed}
				budgets(m)["max_loops"] = 0
			})
			out, err := runScript(t, ws, m, s, runOpts{apply: true, sb: sb})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tc.status || !strings.Contains(out.Body.Verification.String(), tc.want) {
				t.Fatalf("status %s, verification %s", out.Status, out.Body.Verification)
			}
			mustVerify(t, ws)
		})
	}
	t.Run("directory at the report path", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		os.MkdirAll(filepath.Join(ws, "report.xml"), 0o755)
		sb := &fakeSandbox{offers: []tier.Tier{tier.S2}}
		s := &script{resps: []*provider.Response{finish("x")}}
		m := baseManifest(t, func(m map[string]any) {
			m["verify"] = []string{"python3", "-m", "unittest"}
			m["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "file": "report.xml"}
			budgets(m)["max_loops"] = 3
		})
		out, err := runScript(t, ws, m, s, runOpts{apply: true, sb: sb})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != StatusVerifyFailed || len(sb.specs) != 0 || !strings.Contains(out.Body.Verification.Error, "report.xml holds a directory") {
			t.Fatalf("status %s, %d runs, verification %+v", out.Status, len(sb.specs), out.Body.Verification)
		}
	})
}

// TestSpawnKeepsVerify: a sub-task may not pick its own verify command
// or drop or weaken its parent's report requirement; the same, or a
// stricter min_passed, is accepted.
func TestSpawnKeepsVerify(t *testing.T) {
	parent := func(m map[string]any) {
		m["verify"] = []string{"python3", "-m", "unittest"}
		m["verify_report"] = map[string]any{"format": "tap", "min_passed": 2}
	}
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		want string // "" for queued
	}{
		{"same", func(m map[string]any) {
			m["verify"] = []string{"python3", "-m", "unittest"}
			m["verify_report"] = map[string]any{"format": "tap", "min_passed": 2}
		}, ""},
		{"stricter", func(m map[string]any) {
			m["verify"] = []string{"python3", "-m", "unittest"}
			m["verify_report"] = map[string]any{"format": "tap", "min_passed": 5}
		}, ""},
		{"none", func(m map[string]any) {}, "verify: missing"},
		{"its own", func(m map[string]any) {
			m["verify"] = []string{"python3", "-c", "pass"}
			m["verify_report"] = map[string]any{"format": "tap", "min_passed": 2}
		}, "a sub-task may not pick its own verify command"},
		{"a report file of its own", func(m map[string]any) {
			// It would clear and replace secret.txt, neither an input nor an output.
			m["verify"] = []string{"python3", "-m", "unittest"}
			m["verify_report"] = map[string]any{"format": "tap", "min_passed": 2, "file": "secret.txt"}
		}, "verify_report.file: \"secret.txt\" is not the parent's report file"},
		{"report dropped", func(m map[string]any) { m["verify"] = []string{"python3", "-m", "unittest"} }, "verify_report: missing"},
		{"weaker", func(m map[string]any) {
			m["verify"] = []string{"python3", "-m", "unittest"}
			m["verify_report"] = map[string]any{"format": "tap", "min_passed": 1}
		}, "verify_report.min_passed: 1 is below the parent's 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t, defaultFiles())
			s := &script{resps: []*provider.Response{calls(call("spawn", childManifest(tc.edit)))}}
			runScript(t, ws, baseManifest(t, func(m map[string]any) { parent(m); budgets(m)["max_turns"] = 5 }), s, runOpts{})
			spawned := ofType(entries(t, ws), "spawn")
			refused := refusals(t, ws)
			switch {
			case tc.want == "" && (len(spawned) != 1 || len(refused) != 0):
				t.Fatalf("spawn not queued: %v", refused)
			case tc.want != "" && (len(spawned) != 0 || len(refused) != 1 || !strings.Contains(refused[0], tc.want)):
				t.Fatalf("refusals %v, want %q", refused, tc.want)
			}
		})
	}
}
