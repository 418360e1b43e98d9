package ledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// call is a package-level function of the standard library, named by
// import path and name.
type call struct{ pkg, name string }

// libraryCalls returns, for each non-test Go file of the library (every
// package outside cmd/ that is not a main package; testdata is skipped),
// the places it calls or names one of calls, as "path:line: pkg.Name".
// Imports are resolved by path, so a renamed import is still found;
// comments and strings are not code and are not reported.
func libraryCalls(t *testing.T, calls []call) []string {
	t.Helper()
	want := map[call]bool{}
	for _, c := range calls {
		want[c] = true
	}
	var found []string
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel == "cmd" || name == "testdata" || (rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"))) {
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
		if f.Name.Name == "main" {
			return nil // a program, like cmd/, may use its own process's context and environment
		}
		files++
		local := map[string]string{} // local name -> import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			local[name] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if p, ok := local[id.Name]; ok && want[call{p, sel.Sel.Name}] {
				found = append(found, fset.Position(sel.Pos()).String()[len(root)+1:]+": "+p+"."+sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("found only %d library files; the walk is broken", files)
	}
	return found
}

// TestNoBackgroundContext fails when library code makes its own root
// context: a library takes its caller's ctx, so that cancelling a run
// (a signal, a server shutting down) reaches everything the run started.
// Only cmd/ makes root contexts.
func TestNoBackgroundContext(t *testing.T) {
	for _, at := range libraryCalls(t, []call{{"context", "Background"}, {"context", "TODO"}}) {
		t.Errorf("%s: library code takes its caller's context", at)
	}
}

// envReads are the calls that read the process's environment.
var envReads = []call{
	{"os", "Getenv"}, {"os", "LookupEnv"}, {"os", "Environ"}, {"os", "ExpandEnv"},
	{"syscall", "Getenv"}, {"syscall", "Environ"},
}

// envAllowed lists, by file, the library code that may read the
// environment, each with its reason. It is empty: a library takes what it
// needs as a parameter (agent/provider takes a KeySource, and cmd/cordon
// supplies one that reads the variable), and the sandbox and the memory
// store build their children's environments from explicit lists, never
// from the host's.
var envAllowed = map[string]string{}

// TestNoEnvironmentReads fails when library code reads the process's
// environment: only cmd/ does, so that what a library does depends on
// its arguments, not on the host it runs on.
func TestNoEnvironmentReads(t *testing.T) {
	for _, at := range libraryCalls(t, envReads) {
		file := at[:strings.Index(at, ":")]
		if _, ok := envAllowed[file]; ok {
			continue
		}
		t.Errorf("%s: library code reads no environment; take the value as a parameter (or add the file to envAllowed with a reason)", at)
	}
}
