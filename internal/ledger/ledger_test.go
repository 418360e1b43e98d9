package ledger

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

const root = "../.."

// funcsSeen holds what funcs found in each directory, so that a package
// named by many rows of CLAIMS.md is parsed once per test binary, not once
// per reference (the sources do not change while the tests run).
var funcsSeen = struct {
	sync.Mutex
	m map[funcsKey]map[string]string
}{m: map[funcsKey]map[string]string{}}

type funcsKey struct {
	dir   string
	tests bool
}

// funcs returns the functions declared in the Go files of a package
// directory: "Name" for functions, "Recv.Name" for methods. tests selects
// _test.go files instead of the others.
func funcs(t *testing.T, dir string, tests bool) map[string]string {
	t.Helper()
	funcsSeen.Lock()
	defer funcsSeen.Unlock()
	k := funcsKey{dir, tests}
	if m, ok := funcsSeen.m[k]; ok {
		return m
	}
	m := parseFuncs(t, dir, tests)
	funcsSeen.m[k] = m
	return m
}

func parseFuncs(t *testing.T, dir string, tests bool) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		return out
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") != tests {
			continue
		}
		path := filepath.Join(root, dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			key := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				typ := fd.Recv.List[0].Type
				if st, ok := typ.(*ast.StarExpr); ok {
					typ = st.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					key = id.Name + "." + key
				}
			}
			out[key] = path
		}
	}
	return out
}

var refRE = regexp.MustCompile("`([^`]+)`")

type row struct {
	line               int
	claim              string
	enforcers, attacks []string
}

func readLedger(t *testing.T) []row {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "CLAIMS.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	n := 0
	inLimitations := false
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inLimitations = strings.Contains(strings.ToLower(line), "known limitations")
		}
		if inLimitations || !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| #") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("CLAIMS.md:%d: want 4 cells (#, claim, enforced by, attacked by), got %d", n, len(cells))
		}
		r := row{line: n, claim: strings.TrimSpace(cells[1])}
		for _, m := range refRE.FindAllStringSubmatch(cells[2], -1) {
			r.enforcers = append(r.enforcers, m[1])
		}
		for _, m := range refRE.FindAllStringSubmatch(cells[3], -1) {
			r.attacks = append(r.attacks, m[1])
		}
		rows = append(rows, r)
	}
	return rows
}

// resolve checks one reference: "dir.Func", "dir.Type.Method", a file path,
// or "file.json#vector-id". Tests must be Test/Fuzz functions in _test.go
// files, optionally with a "/subtest" whose name appears in the test file.
func resolve(t *testing.T, ref string, test bool) error {
	if path, id, ok := strings.Cut(ref, "#"); ok {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), fmt.Sprintf("%q", id)) {
			return fmt.Errorf("%s has no vector %q", path, id)
		}
		return nil
	}
	if strings.HasSuffix(ref, ".txtar") || strings.HasSuffix(ref, ".md") || strings.HasSuffix(ref, ".txt") || strings.HasSuffix(ref, ".json") || strings.HasSuffix(ref, ".go") {
		_, err := os.Stat(filepath.Join(root, ref))
		return err
	}
	i := strings.Index(ref, ".")
	if i < 0 {
		return fmt.Errorf("not a dir.Func reference")
	}
	dir, name := ref[:i], ref[i+1:]
	sub := ""
	if j := strings.Index(name, "/"); j >= 0 {
		name, sub = name[:j], name[j+1:]
	}
	fns := funcs(t, dir, test)
	path, ok := fns[name]
	if !ok {
		return fmt.Errorf("no function %s in %s (%s files)", name, dir, map[bool]string{true: "test", false: "non-test"}[test])
	}
	if test && !strings.HasPrefix(name, "Test") && !strings.HasPrefix(name, "Fuzz") {
		return fmt.Errorf("%s is not a Test or Fuzz function", name)
	}
	if sub != "" {
		b, _ := os.ReadFile(path)
		if !strings.Contains(string(b), `"`+strings.ReplaceAll(sub, "_", " ")+`"`) && !strings.Contains(string(b), `"`+sub+`"`) {
			return fmt.Errorf("no subtest %q in %s", sub, path)
		}
	}
	return nil
}

// TestLedger fails when CLAIMS.md names an enforcing function or an
// attacking test that does not exist, or lists a claim without both.
func TestLedger(t *testing.T) {
	rows := readLedger(t)
	if len(rows) < 5 {
		t.Fatalf("CLAIMS.md has %d claims; the table was not found", len(rows))
	}
	for _, r := range rows {
		if len(r.enforcers) == 0 || len(r.attacks) == 0 {
			t.Errorf("CLAIMS.md:%d: %q needs an enforcing function and an attacking test", r.line, r.claim)
		}
		for _, ref := range r.enforcers {
			if err := resolve(t, ref, false); err != nil {
				t.Errorf("CLAIMS.md:%d: enforcer %s: %v", r.line, ref, err)
			}
		}
		for _, ref := range r.attacks {
			if err := resolve(t, ref, true); err != nil {
				t.Errorf("CLAIMS.md:%d: test %s: %v", r.line, ref, err)
			}
		}
	}
}

// TestLedgerCatchesMissing makes sure the checker itself fails on names
// that do not exist, so that TestLedger cannot pass vacuously.
func TestLedgerCatchesMissing(t *testing.T) {
	for _, tc := range []struct {
		ref  string
		test bool
	}{
		{"evidence/canon.NoSuchFunc", false},
		{"evidence/canon.TestNoSuchTest", true},
		{"evidence/canon.ParseID", true},             // exists, but not as a test
		{"evidence/canon.TestParseIDRefuses", false}, // exists, but only as a test
		{"evidence/canon.TestParseRefuses/no such", true},
		{"cmd/cordon/testdata/script/nosuch.txtar", true},
		{"conformance/v1/C1.json#C1-999-nosuch", true},
		{"nodot", false},
	} {
		if err := resolve(t, tc.ref, tc.test); err == nil {
			t.Errorf("resolve(%q, test=%v) found something that does not exist", tc.ref, tc.test)
		}
	}
	if err := resolve(t, "evidence/canon.Value.AppendJCS", false); err != nil {
		t.Errorf("resolve of a method: %v", err)
	}
	if err := resolve(t, "evidence/canon.TestParseRefuses/duplicate_key", true); err != nil {
		t.Errorf("resolve of a subtest: %v", err)
	}
}
