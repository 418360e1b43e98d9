package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHotWriteElsewhereSeenAfterTTL: a write this process did not make
// (the database changed by hand while the server runs) reaches the hot
// reads once their cached row is hotTTL old.
func TestHotWriteElsewhereSeenAfterTTL(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "cordon.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CacheHotReads(); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	ten, _ := s.CreateTenant(ctx, "acme", []byte(`{}`))
	u, _ := s.CreateUser(ctx, ten.ID, "mia", RoleMember)
	_, secret, _ := s.CreateKey(ctx, ten.ID, u.ID)
	p, _ := s.PutProject(ctx, ten.ID, "proj", "", []byte(`{}`), func([]byte) error { return nil })
	r, _ := s.CreateRun(ctx, ten.ID, p.ID, "t", []byte(`{}`), u.ID, "")
	if _, err := s.Run(ctx, ten.ID, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// Written past the store, as by hand.
	if _, err := s.db.ExecContext(ctx, `UPDATE runs SET state = 'failed' WHERE id = ?`, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE keys SET revoked_at = 1 WHERE hash = ?`, HashKey(secret)); err != nil {
		t.Fatal(err)
	}
	// Until then the cached rows answer (the reads are cached at all).
	now = now.Add(hotTTL - time.Nanosecond)
	if got, _ := s.Run(ctx, ten.ID, r.ID); got.State != StatePending {
		t.Fatalf("within %s, not from the cache: %+v", hotTTL, got)
	}
	if _, err := s.Authenticate(ctx, secret); err != nil {
		t.Fatalf("within %s, not from the cache: %v", hotTTL, err)
	}
	now = now.Add(time.Nanosecond)
	if got, _ := s.Run(ctx, ten.ID, r.ID); got.State != StateFailed {
		t.Fatalf("a hand-made write %s later: %+v", hotTTL, got)
	}
	if _, err := s.Authenticate(ctx, secret); err != ErrUnauthorized {
		t.Fatalf("a key revoked by hand, %s later: %v", hotTTL, err)
	}
	// A clock that steps back does not extend an entry's life.
	s.db.ExecContext(ctx, `UPDATE runs SET state = 'cancelled' WHERE id = ?`, r.ID)
	now = now.Add(-time.Hour)
	if got, _ := s.Run(ctx, ten.ID, r.ID); got.State != StateCancelled {
		t.Fatalf("after the clock stepped back: %+v", got)
	}
}

// TestHotBounded: the cache holds at most hotMaxRuns runs and
// hotMaxRunBytes of snapshots, and no snapshot over hotMaxSnapshotLen.
func TestHotBounded(t *testing.T) {
	h := &hotReads{keys: map[string]hotKey{}, runs: map[string]hotRun{}}
	now := time.Now()
	for i := range hotMaxRuns + 10 {
		h.putRun(&Run{ID: "run_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String(), Config: []byte("{}")}, 0, 0, now)
		if len(h.runs) > hotMaxRuns {
			t.Fatalf("%d runs held", len(h.runs))
		}
	}
	big := make([]byte, hotMaxSnapshotLen+1)
	h.putRun(&Run{ID: "run_big", Config: big}, 0, 0, now)
	if _, ok := h.runs["run_big"]; ok {
		t.Fatal("a snapshot over the bound was cached")
	}
	clear(h.runs)
	h.runBytes = 0
	snap := make([]byte, hotMaxSnapshotLen)
	for i := range 2 * hotMaxRunBytes / hotMaxSnapshotLen {
		h.putRun(&Run{ID: time.Duration(i).String(), Config: snap}, 0, 0, now)
		total := 0
		for _, e := range h.runs {
			total += len(e.r.Config)
		}
		if total != h.runBytes || total > hotMaxRunBytes {
			t.Fatalf("snapshots held %d bytes (counted %d), bound %d", total, h.runBytes, hotMaxRunBytes)
		}
	}
	for i := range hotMaxKeys + 10 {
		h.putKey(time.Duration(i).String(), &Principal{}, 0, now)
		if len(h.keys) > hotMaxKeys {
			t.Fatalf("%d keys held", len(h.keys))
		}
	}
}

// TestHotEveryWriteTells: every statement in this package that changes
// a row of runs, keys or users is in a function that tells the hot
// reads' cache (writing): a new write path that does not would let a
// cached row outlive its change.
func TestHotEveryWriteTells(t *testing.T) {
	write := regexp.MustCompile(`(?is)\b(UPDATE\s+(runs|keys|users)\b|DELETE\s+FROM\s+(runs|keys|users)\b|REPLACE\s+INTO\s+(runs|keys|users)\b|INSERT\s+INTO\s+(runs|keys|users)\b.*\bON\s+CONFLICT\b)`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			writes, tells := false, false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.BasicLit:
					if x.Kind == token.STRING && write.MatchString(x.Value) {
						writes = true
					}
				case *ast.SelectorExpr:
					if x.Sel.Name == "writing" {
						tells = true
					}
				}
				return true
			})
			if writes {
				checked++
				if !tells {
					t.Errorf("%s: %s changes runs, keys or users without telling the hot reads' cache", fset.Position(fn.Pos()), fn.Name.Name)
				}
			}
		}
	}
	if checked < 5 {
		t.Fatalf("found %d writing functions; the scan is broken", checked)
	}
}
