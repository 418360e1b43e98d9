package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
)

// base returns a valid full manifest as a tree the tests can edit.
func base() map[string]any {
	return map[string]any{
		"type": Type,
		"task": "Fix the failing test in pkg/a.",
		"model": map[string]any{
			"provider": "openai",
			"name":     "gpt-x",
			"base_url": "http://127.0.0.1:8080/v1",
		},
		"inputs":   []any{"pkg", "go.mod"},
		"outputs":  []any{"pkg/a/a.go", "pkg/a/a_test.go"},
		"commands": []any{"go", "gofmt"},
		"grants": map[string]any{
			"type": "cordon.grants.v1", "code": "untrusted", "tenancy": "single", "confidential": false,
			"exec":   map[string]any{"allow": []any{map[string]any{"name": "go"}, map[string]any{"name": "gofmt"}}},
			"limits": map[string]any{"wall_ms": 60000},
		},
		"verify": []any{"go", "test", "./..."},
		"budgets": map[string]any{
			"max_turns": 20, "max_model_calls": 40, "max_input_tokens": 200000, "max_output_tokens": 20000,
			"wall_ms": 600000, "max_loops": 2, "max_pending_tasks": 3,
		},
	}
}

// minimal returns the smallest valid manifest.
func minimal() map[string]any {
	return map[string]any{
		"type":     Type,
		"task":     "t",
		"model":    map[string]any{"provider": "replay", "name": "m", "replay": "replay.json"},
		"inputs":   []any{},
		"outputs":  []any{},
		"commands": []any{},
		"grants":   map[string]any{"type": "cordon.grants.v1", "code": "untrusted", "tenancy": "single", "confidential": false},
		"budgets": map[string]any{
			"max_turns": 1, "max_model_calls": 1, "max_input_tokens": 1, "max_output_tokens": 1,
			"wall_ms": 1, "max_loops": 0, "max_pending_tasks": 0,
		},
	}
}

func encode(t testing.TB, d map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sub(d map[string]any, name string) map[string]any { return d[name].(map[string]any) }

func mustParse(t testing.TB, d map[string]any) *Manifest {
	t.Helper()
	m, err := Parse(encode(t, d))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

func TestParseValid(t *testing.T) {
	m := mustParse(t, base())
	if m.Provider != "openai" || m.Model != "gpt-x" || m.BaseURL != "http://127.0.0.1:8080/v1" || m.Replay != "" {
		t.Errorf("model = %q %q %q %q", m.Provider, m.Model, m.BaseURL, m.Replay)
	}
	if len(m.Inputs) != 2 || len(m.Outputs) != 2 || len(m.Commands) != 2 || len(m.Verify) != 3 {
		t.Errorf("lists = %v %v %v %v", m.Inputs, m.Outputs, m.Commands, m.Verify)
	}
	want := Budgets{20, 40, 200000, 20000, 600000, 2, 3}
	if m.Budgets != want {
		t.Errorf("budgets = %+v, want %+v", m.Budgets, want)
	}
	if m.Grants == nil || len(m.Grants.Exec) != 2 {
		t.Errorf("grants = %+v", m.Grants)
	}
	id, err := canon.Sum(m.JCS()), canon.CheckJCS(m.JCS())
	if err != nil || id != m.ID() {
		t.Errorf("JCS/ID mismatch: %v", err)
	}

	if m.VerifyReport != nil {
		t.Errorf("verify_report = %+v without the member", m.VerifyReport)
	}
	for _, tc := range []struct {
		report map[string]any
		want   VerifyReport
		from   string
	}{
		{map[string]any{"format": "go-test-json", "min_passed": 3}, VerifyReport{Format: "go-test-json", MinPassed: 3}, "stdout"},
		{map[string]any{"format": "junit", "min_passed": 1, "file": "reports/junit.xml"}, VerifyReport{Format: "junit", File: "reports/junit.xml", MinPassed: 1}, "reports/junit.xml"},
		{map[string]any{"format": "tap", "min_passed": int64(MaxBudget)}, VerifyReport{Format: "tap", MinPassed: MaxBudget}, "stdout"},
	} {
		d := base()
		d["verify_report"] = tc.report
		m := mustParse(t, d)
		if m.VerifyReport == nil || *m.VerifyReport != tc.want || m.VerifyReport.From() != tc.from {
			t.Errorf("verify_report %v = %+v", tc.report, m.VerifyReport)
		}
	}

	mm := mustParse(t, minimal())
	if mm.Verify != nil || mm.BaseURL != "" || mm.Replay != "replay.json" || mm.Budgets.MaxPendingTasks != 0 {
		t.Errorf("minimal = %+v", mm)
	}
}

// TestParseCanonicalID checks that two spellings of one document have the
// ID of its JCS form.
func TestParseCanonicalID(t *testing.T) {
	a, err := Parse(encode(t, base()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte("  {\n" + `"budgets":{"max_pending_tasks":3,"max_loops":2,"wall_ms":600000,"max_output_tokens":20000,"max_input_tokens":200000,"max_model_calls":40,"max_turns":20},` +
		`"verify":["go","test","./..."],"grants":{"limits":{"wall_ms":60000},"exec":{"allow":[{"name":"go"},{"name":"gofmt"}]},"confidential":false,"tenancy":"single","code":"untrusted","type":"cordon.grants.v1"},` +
		`"commands":["go","gofmt"],"outputs":["pkg/a/a.go","pkg/a/a_test.go"],"inputs":["pkg","go.mod"],` +
		`"model":{"base_url":"http://127.0.0.1:8080/v1","name":"gpt-x","provider":"openai"},"task":"Fix the failing test in pkg\/a.","type":"cordon.manifest.v1"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() != b.ID() {
		t.Errorf("IDs differ: %v, %v", a.ID(), b.ID())
	}
	jcs, err := canon.JCS(encode(t, base()))
	if err != nil {
		t.Fatal(err)
	}
	if canon.Sum(jcs) != b.ID() || string(jcs) != string(b.JCS()) {
		t.Errorf("ID is not of the JCS form")
	}
	// The order of list entries is meaningful: a reordered list is another manifest.
	d := base()
	d["inputs"] = []any{"go.mod", "pkg"}
	if mustParse(t, d).ID() == a.ID() {
		t.Errorf("reordered inputs kept the ID")
	}
}

func TestParseRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(d map[string]any)
		want string // substring of the error, usually the JSON path
	}{
		// Missing required members.
		{"missing type", func(d map[string]any) { delete(d, "type") }, "type: required"},
		{"missing task", func(d map[string]any) { delete(d, "task") }, "task: required"},
		{"missing model", func(d map[string]any) { delete(d, "model") }, "model: required"},
		{"missing model.provider", func(d map[string]any) { delete(sub(d, "model"), "provider") }, "model.provider: required"},
		{"missing model.name", func(d map[string]any) { delete(sub(d, "model"), "name") }, "model.name: required"},
		{"missing inputs", func(d map[string]any) { delete(d, "inputs") }, "inputs: required"},
		{"missing outputs", func(d map[string]any) { delete(d, "outputs") }, "outputs: required"},
		{"missing commands", func(d map[string]any) { delete(d, "commands") }, "commands: required"},
		{"missing grants", func(d map[string]any) { delete(d, "grants") }, "grants: required"},
		{"missing budgets", func(d map[string]any) { delete(d, "budgets") }, "budgets: required"},
		{"missing grants.code", func(d map[string]any) { delete(sub(d, "grants"), "code") }, "grants: invalid grant set: code: required"},

		// Unknown members at every level, and case-folded names.
		{"unknown top", func(d map[string]any) { d["extra"] = 1 }, "extra: unknown member"},
		{"case-folded top", func(d map[string]any) { d["Task"] = "x" }, "Task: unknown member"},
		{"unknown model", func(d map[string]any) { sub(d, "model")["temperature"] = 0 }, "model.temperature: unknown member"},
		{"unknown budgets", func(d map[string]any) { sub(d, "budgets")["max_cost"] = 1 }, "budgets.max_cost: unknown member"},
		{"unknown grants", func(d map[string]any) { sub(d, "grants")["extra"] = 1 }, "grants: invalid grant set: extra: unknown member"},
		{"unknown grants.exec", func(d map[string]any) { sub(sub(d, "grants"), "exec")["extra"] = 1 }, "exec.extra: unknown member"},

		// Wrong types and values.
		{"type wrong", func(d map[string]any) { d["type"] = "cordon.manifest.v2" }, "type: want"},
		{"type int", func(d map[string]any) { d["type"] = 1 }, "type: want string"},
		{"task int", func(d map[string]any) { d["task"] = 1 }, "task: want string"},
		{"task empty", func(d map[string]any) { d["task"] = "" }, "task: empty"},
		{"task too long", func(d map[string]any) { d["task"] = strings.Repeat("x", MaxTaskBytes+1) }, "task: task of"},
		{"task NUL", func(d map[string]any) { d["task"] = "a\x00b" }, "task: task contains NUL"},
		{"model array", func(d map[string]any) { d["model"] = []any{} }, "model: want object"},
		{"provider unknown", func(d map[string]any) { sub(d, "model")["provider"] = "acme" }, "model.provider: want one of"},
		{"provider case", func(d map[string]any) { sub(d, "model")["provider"] = "OpenAI" }, "model.provider: want one of"},
		{"model name empty", func(d map[string]any) { sub(d, "model")["name"] = "" }, "model.name:"},
		{"model name space", func(d map[string]any) { sub(d, "model")["name"] = "a b" }, "model.name:"},
		{"base_url ftp", func(d map[string]any) { sub(d, "model")["base_url"] = "ftp://h/v1" }, "model.base_url:"},
		{"base_url relative", func(d map[string]any) { sub(d, "model")["base_url"] = "/v1" }, "model.base_url:"},
		{"base_url userinfo", func(d map[string]any) { sub(d, "model")["base_url"] = "https://u:p@h/v1" }, "user info"},
		{"base_url query", func(d map[string]any) { sub(d, "model")["base_url"] = "https://h/v1?k=1" }, "query"},
		{"base_url empty query", func(d map[string]any) { sub(d, "model")["base_url"] = "https://h/v1?" }, "query"},
		{"base_url fragment", func(d map[string]any) { sub(d, "model")["base_url"] = "https://h/v1#f" }, "fragment"},
		{"base_url no host", func(d map[string]any) { sub(d, "model")["base_url"] = "https:///v1" }, "host"},
		{"base_url empty", func(d map[string]any) { sub(d, "model")["base_url"] = "" }, "model.base_url:"},
		{"base_url for replay", func(d map[string]any) {
			d["model"] = map[string]any{"provider": "replay", "name": "m", "replay": "r.json", "base_url": "https://h"}
		}, "model.base_url: the replay provider"},
		{"replay missing", func(d map[string]any) { d["model"] = map[string]any{"provider": "replay", "name": "m"} }, "model.replay: required"},
		{"replay for openai", func(d map[string]any) { sub(d, "model")["replay"] = "r.json" }, "model.replay: only the replay"},
		{"replay in state dir", func(d map[string]any) {
			d["model"] = map[string]any{"provider": "replay", "name": "m", "replay": ".cordon/r.json"}
		}, "model.replay: path"},
		{"inputs string", func(d map[string]any) { d["inputs"] = "pkg" }, "inputs: want array"},
		{"inputs int element", func(d map[string]any) { d["inputs"] = []any{1} }, "inputs[0]: want string"},
		{"inputs duplicate", func(d map[string]any) { d["inputs"] = []any{"a", "b", "a"} }, "inputs[2]: duplicate"},
		{"outputs duplicate", func(d map[string]any) { d["outputs"] = []any{"a", "a"} }, "outputs[1]: duplicate"},
		{"outputs nested", func(d map[string]any) { d["outputs"] = []any{"a/b", "a"} }, "outputs[0]: \"a/b\" lies beneath"},
		{"commands duplicate", func(d map[string]any) { d["commands"] = []any{"go", "go"} }, "commands[1]: duplicate"},
		{"too many inputs", func(d map[string]any) {
			var l []any
			for i := 0; i <= MaxEntries; i++ {
				l = append(l, strings.Repeat("a", i+1))
			}
			d["inputs"] = l
		}, "inputs: 1025 entries"},

		// Commands.
		{"command with slash", func(d map[string]any) { d["commands"] = []any{"bin/go"} }, "commands[0]: command"},
		{"command absolute", func(d map[string]any) { d["commands"] = []any{"/usr/bin/go"} }, "commands[0]: command"},
		{"command dot", func(d map[string]any) { d["commands"] = []any{"."} }, "commands[0]: command"},
		{"command dotdot", func(d map[string]any) { d["commands"] = []any{".."} }, "commands[0]: command"},
		{"command empty", func(d map[string]any) { d["commands"] = []any{""} }, "commands[0]: command"},
		{"command space", func(d map[string]any) { d["commands"] = []any{"go test"} }, "commands[0]: command"},
		{"command too long", func(d map[string]any) { d["commands"] = []any{strings.Repeat("g", 65)} }, "commands[0]: command"},
		{"command not granted", func(d map[string]any) { d["commands"] = []any{"go", "gofmt", "make"} }, "commands[2]: command \"make\" has no exec.allow rule"},
		{"command granted by hash only", func(d map[string]any) {
			sub(d, "grants")["exec"] = map[string]any{"allow": []any{map[string]any{"name": "go"}, map[string]any{"b3": canon.Sum([]byte("gofmt")).String()}}}
		}, "commands[1]: command \"gofmt\" has no exec.allow rule"},
		{"grants bad", func(d map[string]any) { sub(d, "grants")["code"] = "maybe" }, "grants: invalid grant set: code"},
		{"grants array", func(d map[string]any) { d["grants"] = []any{} }, "grants: invalid grant set: want an object"},

		// Verify.
		{"verify not in commands", func(d map[string]any) { d["verify"] = []any{"make", "test"} }, "verify[0]: \"make\" is not among commands"},
		{"verify empty", func(d map[string]any) { d["verify"] = []any{} }, "verify: an empty argv"},
		{"verify string", func(d map[string]any) { d["verify"] = "go test" }, "verify: want array"},
		{"verify NUL", func(d map[string]any) { d["verify"] = []any{"go", "a\x00"} }, "verify[1]: argument contains NUL"},
		{"verify through a shell", func(d map[string]any) { d["verify"] = []any{"go", "test", "./...", "&&", "rm"} }, "verify[3]: \"&&\" holds a shell metacharacter"},
		{"verify glob", func(d map[string]any) { d["verify"] = []any{"go", "test", "./*"} }, "verify[2]: \"./*\" holds a shell metacharacter"},
		{"verify newline", func(d map[string]any) { d["verify"] = []any{"go", "a\nb"} }, "verify[1]: holds a control or format character"},
		{"verify bidi", func(d map[string]any) { d["verify"] = []any{"go", "a\u202eb"} }, "verify[1]: holds a control or format character"},
		{"verify long token", func(d map[string]any) { d["verify"] = []any{"go", strings.Repeat("a", 4097)} }, "verify[1]: longer than 4096 bytes"},
		{"verify too long", func(d map[string]any) {
			l := []any{"go"}
			for range MaxVerifyArgs {
				l = append(l, "x")
			}
			d["verify"] = l
		}, "verify: 257 tokens"},

		// Verify report.
		{"report without verify", func(d map[string]any) {
			delete(d, "verify")
			d["verify_report"] = map[string]any{"format": "tap", "min_passed": 1}
		}, "verify_report: a report requirement without a verify command"},
		{"report unknown format", func(d map[string]any) { d["verify_report"] = map[string]any{"format": "xunit", "min_passed": 1} }, "verify_report.format: want one of"},
		{"report format missing", func(d map[string]any) { d["verify_report"] = map[string]any{"min_passed": 1} }, "verify_report.format: required member is missing"},
		{"report min_passed missing", func(d map[string]any) { d["verify_report"] = map[string]any{"format": "junit"} }, "verify_report.min_passed: required member is missing"},
		{"report min_passed zero", func(d map[string]any) { d["verify_report"] = map[string]any{"format": "junit", "min_passed": 0} }, "verify_report.min_passed: want 1 ≤ n"},
		{"report min_passed huge", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": int64(MaxBudget) + 1}
		}, "verify_report.min_passed: want 1 ≤ n"},
		{"report unknown member", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "from": "stdout"}
		}, "verify_report.from: unknown member"},
		{"report not an object", func(d map[string]any) { d["verify_report"] = "junit" }, "verify_report: want object"},
		{"report file is an output", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "file": "pkg/a/a_test.go"}
		}, "verify_report.file: \"pkg/a/a_test.go\" is or contains output"},
		{"report file contains an output", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "file": "pkg/a"}
		}, "is or contains output"},
		{"report file beneath an input", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "file": "pkg/report.xml"}
		}, "lies beneath input \"pkg\""},
		{"report file is an input", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "file": "go.mod"}
		}, "lies beneath input \"go.mod\""},
		{"report file in the state dir", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "file": ".cordon/report.xml"}
		}, "verify_report.file: path \".cordon/report.xml\" is in the reserved state directory"},
		{"report file not canonical", func(d map[string]any) {
			d["verify_report"] = map[string]any{"format": "junit", "min_passed": 1, "file": "out/../report.xml"}
		}, "verify_report.file: path"},

		// Budgets.
		{"budgets array", func(d map[string]any) { d["budgets"] = []any{} }, "budgets: want object"},
		{"budget string", func(d map[string]any) { sub(d, "budgets")["max_turns"] = "20" }, "budgets.max_turns: want integer"},
		{"budget too large", func(d map[string]any) { sub(d, "budgets")["wall_ms"] = int64(MaxBudget) + 1 }, "budgets.wall_ms: want 1 ≤ n"},
		{"budget max accepted boundary", func(d map[string]any) {
			sub(d, "budgets")["wall_ms"] = int64(MaxBudget)
			sub(d, "budgets")["max_loops"] = -1
		}, "budgets.max_loops: want 0 ≤ n"},
		{"pending negative", func(d map[string]any) { sub(d, "budgets")["max_pending_tasks"] = -1 }, "budgets.max_pending_tasks: want 0 ≤ n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := base()
			tc.edit(d)
			m, err := Parse(encode(t, d))
			if err == nil {
				t.Fatalf("Parse accepted %+v", m)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse: %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestParseBudgets checks every budget: absent, zero, negative, too large.
func TestParseBudgets(t *testing.T) {
	for _, f := range (&Budgets{}).fields() {
		for _, tc := range []struct {
			name string
			v    any // nil: absent
			ok   bool
		}{
			{"absent", nil, false},
			{"zero", 0, f.min == 0},
			{"one", 1, true},
			{"negative", -1, false},
			{"max", int64(MaxBudget), true},
			{"too large", int64(MaxBudget) + 1, false},
			{"null", json.RawMessage("null"), false},
		} {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				d := base()
				b := sub(d, "budgets")
				b["max_pending_tasks"] = 3
				if tc.v == nil {
					delete(b, f.name)
				} else {
					b[f.name] = tc.v
				}
				_, err := Parse(encode(t, d))
				if (err == nil) != tc.ok {
					t.Errorf("Parse(budgets.%s = %v) = %v, want ok %v", f.name, tc.v, err, tc.ok)
				}
				if err != nil && !strings.Contains(err.Error(), "budgets."+f.name) {
					t.Errorf("error %v does not name budgets.%s", err, f.name)
				}
			})
		}
	}
}

func TestParseNotJSON(t *testing.T) {
	for _, doc := range []string{
		``,
		`null`,
		`[]`,
		`{"type":"cordon.manifest.v1","type":"cordon.manifest.v1"}`, // duplicate member, refused by canon
		`{"task":1.5}`,
		"\xef\xbb\xbf{}",
	} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", doc, err)
		}
	}
	// A duplicate member anywhere is refused by canon.Parse.
	good := string(encode(t, base()))
	dup := strings.Replace(good, `"max_loops":2`, `"max_loops":2,"max_loops":1`, 1)
	if _, err := Parse([]byte(dup)); !errors.Is(err, canon.ErrDuplicateKey) || !errors.Is(err, ErrInvalid) {
		t.Errorf("Parse(duplicate budget) = %v, want ErrDuplicateKey and ErrInvalid", err)
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		p  string
		ok bool
	}{
		{"a", true},
		{"a/b", true},
		{"a.txt", true},
		{"..a", true},
		{"a..", true},
		{".github/workflows/ci.yml", true},
		{"a/.cordon", true}, // only the workspace's own state directory is reserved
		{".cordonx", true},
		{"x.cordon", true},
		{"café", true},
		{strings.Repeat("a", MaxPathBytes), true},
		{"", false},
		{".", false},
		{"..", false},
		{"../a", false},
		{"a/..", false},
		{"a/../b", false},
		{"/etc/passwd", false},
		{"/", false},
		{"a//b", false},
		{"./a", false},
		{"a/./b", false},
		{"a/", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\x7fb", false},
		{"a\u0085b", false},
		{"a\ufffeb", false},
		{"a\\b", false},
		{"..\\a", false},
		{"\xff", false},
		{"cafe\u0301", false}, // NFD
		{".cordon", false},
		{".cordon/x", false},
		{".cordon/x/y", false},
		{".CORDON", false},
		{".Cordon/state", false},
		{".cordon.", false},
		{".cordon /x", false},
		{strings.Repeat("a", MaxPathBytes+1), false},
	} {
		err := CheckPath(tc.p)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPath(%q) = %v, want ok %v", tc.p, err, tc.ok)
		}
	}
}

// TestParsePaths checks that every path-bearing member applies CheckPath.
func TestParsePaths(t *testing.T) {
	for _, bad := range []string{".cordon", ".cordon/x", "a/../b", "/etc/passwd", "", "a//b", "./a", "a\x00b"} {
		for _, member := range []string{"inputs", "outputs"} {
			d := base()
			d[member] = []any{bad}
			_, err := Parse(encode(t, d))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), member+"[0]") {
				t.Errorf("Parse(%s = [%q]) = %v, want an error at %s[0]", member, bad, err, member)
			}
		}
		d := minimal()
		sub(d, "model")["replay"] = bad
		if _, err := Parse(encode(t, d)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "model.replay") {
			t.Errorf("Parse(model.replay = %q) = %v, want an error at model.replay", bad, err)
		}
	}
	// An output may also be an input: the model may read and rewrite a file.
	d := base()
	d["inputs"] = []any{"pkg/a/a.go"}
	mustParse(t, d)
}

func TestCovers(t *testing.T) {
	// child starts as a narrowing of base().
	narrow := func() map[string]any {
		d := base()
		d["task"] = "a different task"
		d["inputs"] = []any{"pkg/a"}
		d["outputs"] = []any{"pkg/a/a.go"}
		d["commands"] = []any{"go"}
		g := sub(d, "grants")
		g["exec"] = map[string]any{"allow": []any{map[string]any{"name": "go", "args": []any{"test"}}}}
		g["limits"] = map[string]any{"wall_ms": 1000}
		d["budgets"] = map[string]any{
			"max_turns": 5, "max_model_calls": 5, "max_input_tokens": 5, "max_output_tokens": 5,
			"wall_ms": 5, "max_loops": 0, "max_pending_tasks": 0,
		}
		return d
	}
	parent := mustParse(t, base())
	if err := Covers(parent, mustParse(t, narrow())); err != nil {
		t.Errorf("Covers(parent, narrowing) = %v, want nil", err)
	}
	// Equal except one pending task fewer is covered.
	eq := base()
	sub(eq, "budgets")["max_pending_tasks"] = 2
	if err := Covers(parent, mustParse(t, eq)); err != nil {
		t.Errorf("Covers(parent, equal but pending-1) = %v, want nil", err)
	}
	// A manifest never covers itself.
	if err := Covers(parent, parent); !errors.Is(err, ErrWidening) || !strings.Contains(err.Error(), "budgets.max_pending_tasks") {
		t.Errorf("Covers(m, m) = %v, want a widening at budgets.max_pending_tasks", err)
	}

	for _, tc := range []struct {
		name   string
		edit   func(d map[string]any)
		member string
	}{
		{"provider", func(d map[string]any) { sub(d, "model")["provider"] = "anthropic" }, "model.provider"},
		{"model", func(d map[string]any) { sub(d, "model")["name"] = "gpt-y" }, "model.name"},
		{"base_url", func(d map[string]any) { sub(d, "model")["base_url"] = "https://evil.example/v1" }, "model.base_url"},
		{"base_url dropped", func(d map[string]any) { delete(sub(d, "model"), "base_url") }, "model.base_url"},
		{"input outside", func(d map[string]any) { d["inputs"] = []any{"pkg/a", "secrets"} }, "inputs[1]"},
		{"input sibling prefix", func(d map[string]any) { d["inputs"] = []any{"pkg2"} }, "inputs[0]"},
		{"input parent dir", func(d map[string]any) { d["inputs"] = []any{"go.mod/x", "pkg/a", "other"} }, "inputs[2]"},
		{"output new", func(d map[string]any) { d["outputs"] = []any{"pkg/a/b.go"} }, "outputs[0]"},
		{"output beneath parent output", func(d map[string]any) { d["outputs"] = []any{"pkg/a/a.go/x"} }, "outputs[0]"},
		{"output that is only an input", func(d map[string]any) { d["outputs"] = []any{"go.mod"} }, "outputs[0]"},
		{"command new", func(d map[string]any) {
			d["commands"] = []any{"go", "make"}
			sub(d, "grants")["exec"] = map[string]any{"allow": []any{map[string]any{"name": "go"}, map[string]any{"name": "make"}}}
		}, "commands[1]"},
		{"grants exec", func(d map[string]any) {
			sub(d, "grants")["exec"] = map[string]any{"allow": []any{map[string]any{"name": "go"}, map[string]any{"name": "sh"}}}
		}, "grants"},
		{"grants limit", func(d map[string]any) { sub(d, "grants")["limits"] = map[string]any{"wall_ms": 60001} }, "grants"},
		{"grants trusted", func(d map[string]any) { sub(d, "grants")["code"] = "trusted" }, "grants"},
		{"max_turns", func(d map[string]any) { sub(d, "budgets")["max_turns"] = 21 }, "budgets.max_turns"},
		{"max_model_calls", func(d map[string]any) { sub(d, "budgets")["max_model_calls"] = 41 }, "budgets.max_model_calls"},
		{"max_input_tokens", func(d map[string]any) { sub(d, "budgets")["max_input_tokens"] = 200001 }, "budgets.max_input_tokens"},
		{"max_output_tokens", func(d map[string]any) { sub(d, "budgets")["max_output_tokens"] = 20001 }, "budgets.max_output_tokens"},
		{"wall_ms", func(d map[string]any) { sub(d, "budgets")["wall_ms"] = 600001 }, "budgets.wall_ms"},
		{"max_loops", func(d map[string]any) { sub(d, "budgets")["max_loops"] = 3 }, "budgets.max_loops"},
		{"max_pending_tasks equal", func(d map[string]any) { sub(d, "budgets")["max_pending_tasks"] = 3 }, "budgets.max_pending_tasks"},
		{"max_pending_tasks larger", func(d map[string]any) { sub(d, "budgets")["max_pending_tasks"] = 4 }, "budgets.max_pending_tasks"},
		{"verify dropped", func(d map[string]any) { delete(d, "verify") }, "verify"},
		{"verify other command", func(d map[string]any) { d["verify"] = []any{"go", "vet"} }, "verify"},
		{"verify fewer args", func(d map[string]any) { d["verify"] = []any{"go", "test"} }, "verify"},
		{"verify more args", func(d map[string]any) { d["verify"] = []any{"go", "test", "./...", "-run", "TestNothing"} }, "verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := narrow()
			tc.edit(d)
			err := Covers(parent, mustParse(t, d))
			var we *WideningError
			if !errors.Is(err, ErrWidening) || !errors.As(err, &we) {
				t.Fatalf("Covers = %v, want a *WideningError", err)
			}
			if we.Member != tc.member {
				t.Errorf("Covers = %v, want member %q", err, tc.member)
			}
			if tc.member == "grants" && !errors.Is(err, grant.ErrWidening) {
				t.Errorf("Covers = %v does not wrap grant.ErrWidening", err)
			}
		})
	}

	// A parent that may not spawn covers nothing.
	p0 := mustParse(t, minimal())
	if err := Covers(p0, p0); !errors.Is(err, ErrWidening) {
		t.Errorf("Covers(no-spawn parent, itself) = %v, want ErrWidening", err)
	}
}

// TestCoversVerify: a sub-task is verified at least as strictly as its
// parent: the same verify argv, the same report format and source, and
// at least the parent's min_passed; it may add a report requirement or
// raise min_passed, never drop or change one.
func TestCoversVerify(t *testing.T) {
	report := func(format string, min int, file string) map[string]any {
		r := map[string]any{"format": format, "min_passed": min}
		if file != "" {
			r["file"] = file
		}
		return r
	}
	// The child is base() with one pending task fewer and its verify edited.
	child := func(edit func(d map[string]any)) *Manifest {
		d := base()
		sub(d, "budgets")["max_pending_tasks"] = 2
		edit(d)
		return mustParse(t, d)
	}
	parentWith := func(edit func(d map[string]any)) *Manifest {
		d := base()
		edit(d)
		return mustParse(t, d)
	}
	noVerify := parentWith(func(d map[string]any) { delete(d, "verify") })
	plain := parentWith(func(map[string]any) {})
	tap3 := parentWith(func(d map[string]any) { d["verify_report"] = report("tap", 3, "") })
	junit := parentWith(func(d map[string]any) { d["verify_report"] = report("junit", 3, "report.xml") })

	for _, tc := range []struct {
		name   string
		parent *Manifest
		edit   func(d map[string]any)
		member string // "" when covered
	}{
		{"no parent verify, none", noVerify, func(d map[string]any) { delete(d, "verify") }, ""},
		{"no parent verify, child adds one", noVerify, func(map[string]any) {}, ""},
		{"same verify", plain, func(map[string]any) {}, ""},
		{"same verify, report added", plain, func(d map[string]any) { d["verify_report"] = report("tap", 1, "") }, ""},
		{"same report", tap3, func(d map[string]any) { d["verify_report"] = report("tap", 3, "") }, ""},
		{"report stricter", tap3, func(d map[string]any) { d["verify_report"] = report("tap", 10, "") }, ""},
		{"same file report", junit, func(d map[string]any) { d["verify_report"] = report("junit", 3, "report.xml") }, ""},

		{"no parent verify, child adds a report file", noVerify, func(d map[string]any) { d["verify_report"] = report("junit", 1, "report.xml") }, "verify_report.file"},
		{"same verify, report file added", plain, func(d map[string]any) { d["verify_report"] = report("junit", 1, "notes.txt") }, "verify_report.file"},
		{"verify dropped", plain, func(d map[string]any) { delete(d, "verify") }, "verify"},
		{"verify changed", plain, func(d map[string]any) { d["verify"] = []any{"gofmt", "-l", "."} }, "verify"},
		{"verify narrowed to nothing", plain, func(d map[string]any) { d["verify"] = []any{"go", "test", "./...", "-run", "TestNone"} }, "verify"},
		{"verify dropped with the report", tap3, func(d map[string]any) { delete(d, "verify") }, "verify"},
		{"report dropped", tap3, func(map[string]any) {}, "verify_report"},
		{"report format changed", tap3, func(d map[string]any) { d["verify_report"] = report("go-test-json", 3, "") }, "verify_report.format"},
		{"report read elsewhere", tap3, func(d map[string]any) { d["verify_report"] = report("tap", 3, "report.tap") }, "verify_report.file"},
		{"report file to stdout", junit, func(d map[string]any) { d["verify_report"] = report("junit", 3, "") }, "verify_report.file"},
		{"report file renamed", junit, func(d map[string]any) { d["verify_report"] = report("junit", 3, "other.xml") }, "verify_report.file"},
		{"min_passed lowered", tap3, func(d map[string]any) { d["verify_report"] = report("tap", 2, "") }, "verify_report.min_passed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Covers(tc.parent, child(tc.edit))
			if tc.member == "" {
				if err != nil {
					t.Fatalf("Covers = %v, want nil", err)
				}
				return
			}
			var we *WideningError
			if !errors.Is(err, ErrWidening) || !errors.As(err, &we) || we.Member != tc.member {
				t.Fatalf("Covers = %v, want a widening at %s", err, tc.member)
			}
		})
	}
}
