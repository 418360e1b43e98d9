package sandbox

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rawSyscalls are the functions of syscall and golang.org/x/sys/unix that
// take untyped uintptr arguments: a reviewer must find every call.
var rawSyscalls = []string{"Syscall", "Syscall6", "RawSyscall", "RawSyscall6", "SyscallNoError", "RawSyscallNoError"}

// TestUnsafeConfined fails when a Go file under sandbox/ whose name has
// no "unsafe" component (landlock_unsafe_linux.go has one) imports unsafe
// or makes a raw system call, so that a reviewer finds every such line
// in files named for it (STYLE.md: unsafe in *_unsafe.go files).
func TestUnsafeConfined(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		if slices.Contains(strings.Split(strings.TrimSuffix(d.Name(), ".go"), "_"), "unsafe") {
			return nil
		}
		raw := map[string]bool{} // local names of syscall and x/sys/unix
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			switch p {
			case "unsafe":
				t.Errorf("sandbox/%s imports unsafe: move that code into a file named *_unsafe*.go", path)
			case "syscall", "golang.org/x/sys/unix":
				raw[name] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && raw[x.Name] && slices.Contains(rawSyscalls, sel.Sel.Name) {
				t.Errorf("sandbox/%s: %s.%s: move the call into a file named *_unsafe*.go", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d files: is the walk in sandbox/?", checked)
	}
}
