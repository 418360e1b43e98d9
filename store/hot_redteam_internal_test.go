package store

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

type nameRow string

func (n nameRow) Scan(dest ...any) error { *dest[0].(*string) = string(n); return nil }

// TestHotSameFile: the lock is refused when the file SQLite reports it
// opened is not the file locked (whatever the alias), and accepted when
// it is, by another name (a hard link).
func TestHotSameFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	os.WriteFile(a, nil, 0o600)
	os.WriteFile(b, nil, 0o600)
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &Store{}
	if err := s.sameFile(nameRow(b), f); err == nil {
		t.Fatal("another file than the one locked was accepted")
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Link(a, link); err != nil {
		t.Fatal(err)
	}
	if err := s.sameFile(nameRow(link), f); err != nil {
		t.Fatalf("the locked file by another name: %v", err)
	}
}

// TestHotBoundedAllocated: the bound on the snapshots' bytes counts what
// the cache holds allocated, not only their lengths: a snapshot just
// over a size class (32 KiB + 1 takes 40 KiB) would let the cache hold
// a quarter more than hotMaxRunBytes. Red team, finding 3.
func TestHotBoundedAllocated(t *testing.T) {
	h := &hotReads{keys: map[string]hotKey{}, runs: map[string]hotRun{}}
	now := time.Now()
	snap := make([]byte, 32<<10+1)
	for i := range 2 * hotMaxRunBytes / len(snap) {
		h.putRun(&Run{ID: fmt.Sprintf("run_%d", i), Config: snap}, 0, 0, now)
		held := 0
		for _, e := range h.runs {
			held += cap(e.r.Config)
		}
		if held > hotMaxRunBytes {
			t.Fatalf("after %d runs the cache holds %d bytes of snapshots, over its bound %d (it counts %d)", i+1, held, hotMaxRunBytes, h.runBytes)
		}
	}
}

// TestHotNoWriteOutsideFunctions: TestHotEveryWriteTells sees a write
// only in the function whose body holds its SQL; a statement that
// changes runs, keys or users may not be written anywhere else: not in
// a package-level constant of this package (its users could not be
// told apart), and not in any other package of the module (which could
// write through Store.DB past the cache).
func TestHotNoWriteOutsideFunctions(t *testing.T) {
	write := regexp.MustCompile(`(?is)\b(UPDATE\s+(OR\s+\w+\s+)?"?(runs|keys|users)\b|DELETE\s+FROM\s+"?(runs|keys|users)\b|(INSERT|REPLACE)\s+(OR\s+\w+\s+)?INTO\s+"?(runs|keys|users)\b)`)
	scanned := 0
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || (strings.HasPrefix(n, ".") && n != "..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, 0)
		if err != nil {
			return err
		}
		scanned++
		inStore := filepath.Dir(p) == filepath.Join("..", "store")
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && inStore && fn.Body != nil {
				continue // TestHotEveryWriteTells checks these
			}
			ast.Inspect(d, func(n ast.Node) bool {
				if x, ok := n.(*ast.BasicLit); ok && x.Kind == token.STRING && write.MatchString(x.Value) {
					t.Errorf("%s: SQL that changes runs, keys or users outside the store's functions: %.80s", p, x.Value)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d files; the walk is broken", scanned)
	}
}

// TestSQLiteURINamesTheFile: the URI SQLite is given names the file the
// path names, whatever SQLite's URI syntax would make of the path.
func TestSQLiteURINamesTheFile(t *testing.T) {
	for in, want := range map[string]string{
		"/s/control.db":     "file:/s/control.db",
		"/s/c%6Fntrol.db":   "file:/s/c%256Fntrol.db",
		"/s/control.db?x=1": "file:/s/control.db%3fx=1",
		"/s/control.db#x":   "file:/s/control.db%23x",
		"//host/s/c.db":     "file:/host/s/c.db",
		":memory:":          "file:./:memory:",
		"rel/c.db":          "file:./rel/c.db",
	} {
		if got := sqliteURI(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
