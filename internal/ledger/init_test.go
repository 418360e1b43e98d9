package ledger

import (
	"debug/elf"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Every cordon process pays every linked package's initialisation twice
// on a cold start: cordon itself, and sandbox init, the same binary
// started again (docs/PERFORMANCE.md, "Where a run's time goes"). These
// tests keep cordon's own packages' initialisation cheap: a pattern or a
// table that only some verbs use is built on first use (sync.OnceValue),
// not at package initialisation.

// regexpCompiles are the calls that compile a regular expression.
var regexpCompiles = map[string]bool{"MustCompile": true, "MustCompilePOSIX": true, "Compile": true, "CompilePOSIX": true}

// initRegexpAllowed lists, by file, the package-level patterns still
// compiled at initialisation, each with its reason.
var initRegexpAllowed = map[string]string{}

// TestNoRegexpAtPackageInit fails when a non-test Go file of this module
// (cmd/ included) compiles a regular expression at package
// initialisation: in a package-level variable's initialiser or in an init
// function, outside a function literal (sync.OnceValue(func() …) runs on
// first use). A helper called from an initialiser is not seen here; the
// allocation bound below catches what it costs.
func TestNoRegexpAtPackageInit(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if name == "testdata" || (rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, at := range initRegexps(fset, f) {
			if _, ok := initRegexpAllowed[rel]; ok {
				continue
			}
			found = append(found, rel+":"+at)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("found only %d Go files; the walk is broken", files)
	}
	for _, at := range found {
		t.Errorf("%s: a regular expression compiled at package initialisation; compile it on first use (sync.OnceValue)", at)
	}
}

// initRegexps returns the lines of f where a regular expression is
// compiled at package initialisation, as "line: regexp.Name".
func initRegexps(fset *token.FileSet, f *ast.File) []string {
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "regexp" {
			local = "regexp"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" || local == "_" {
		return nil
	}
	var found []string
	visit := func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false // runs when called, not at initialisation
		}
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && (id.Name == local || local == ".") && regexpCompiles[sel.Sel.Name] {
			found = append(found, strconv.Itoa(fset.Position(sel.Pos()).Line)+": regexp."+sel.Sel.Name)
		}
		return true
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			if d.Tok == token.VAR {
				ast.Inspect(d, visit)
			}
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" && d.Body != nil {
				ast.Inspect(d.Body, visit)
			}
		}
	}
	return found
}

// TestInitRegexpsSeen checks initRegexps on the forms it must report and
// the ones it must not.
func TestInitRegexpsSeen(t *testing.T) {
	const src = `package p

import re "regexp"
import "sync"

var a = re.MustCompile("a")
var (
	b, c = 1, re.MustCompilePOSIX("c")
	d    = sync.OnceValue(func() *re.Regexp { return re.MustCompile("d") })
)

func init() {
	_, _ = re.Compile("e")
	f := func() { re.MustCompile("f") }
	_ = f
}

func g() { re.MustCompile("g") }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(initRegexps(fset, f), "; ")
	if want := "6: regexp.MustCompile; 8: regexp.MustCompilePOSIX; 13: regexp.Compile"; got != want {
		t.Errorf("initRegexps = %q, want %q", got, want)
	}
}

// initBytes is the most a package of this module may allocate during its
// initialisation, as the runtime's inittrace counts it.
const initBytes = 8 << 10

// initBytesAllowed are packages above initBytes, each with its own bound,
// so that they cannot grow unseen either.
var initBytesAllowed = map[string]int{}

// initLine is one line of GODEBUG=inittrace=1's report.
var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, [0-9.]+ ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

// staticCordon builds cordon as the README's "Using it" does (CGO_ENABLED=0),
// once for the tests that need the binary; TestMain removes it.
var staticCordon = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "ledger-cordon-")
	if err != nil {
		return "", err
	}
	builtDirs = append(builtDirs, dir)
	bin := filepath.Join(dir, "cordon")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/cordon")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build ./cmd/cordon: %v\n%s", err, out)
	}
	return bin, nil
})

var builtDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range builtDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// TestCordonIsStatic fails when cordon, built with CGO_ENABLED=0, is not
// a static executable: a dynamically linked Go binary (one that links
// libc's dlopen, as github.com/ebitengine/purego does) pays about 0.8 ms
// more at every start, twice in a cold `cordon exec`
// (docs/PERFORMANCE.md). NVML, which needs dlopen, is read by a separate
// helper, cmd/cordon-nvml (energy.NewNVML).
func TestCordonIsStatic(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/cordon").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/ebitengine/purego") || dep == "github.com/cordon-dev/cordon/energy/nvmldl" {
			t.Errorf("cmd/cordon depends on %s, which links libc's dlopen: only cmd/cordon-nvml may", dep)
		}
	}
	bin, err := staticCordon()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: dynamically linked", bin, p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
		t.Errorf("%s imports shared libraries %v (%v)", bin, libs, err)
	}
}

// TestInitAllocations builds cordon, runs `cordon version` with the
// runtime's init trace, and fails when a package of this module (or
// cordon's main) allocates more than initBytes while it initialises.
func TestInitAllocations(t *testing.T) {
	bin, err := staticCordon()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cordon version: %v\n%s", err, stderr.String())
	}
	ours := 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pkg := m[1]
		if pkg != "main" && pkg != "github.com/cordon-dev/cordon" && !strings.HasPrefix(pkg, "github.com/cordon-dev/cordon/") {
			continue
		}
		ours++
		n, _ := strconv.Atoi(m[2])
		limit, ok := initBytesAllowed[pkg]
		if !ok {
			limit = initBytes
		}
		if n > limit {
			t.Errorf("%s allocates %d bytes (%s allocs) at package initialisation, above %d: build its patterns and tables on first use (sync.OnceValue)", pkg, n, m[3], limit)
		}
	}
	if ours < 10 {
		t.Fatalf("the init trace named only %d of cordon's packages; the trace or its parse is broken:\n%s", ours, stderr.String())
	}
}
