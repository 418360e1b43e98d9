package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-dev/cordon/store"
)

// TestHotLockAliasedPath: a path that SQLite's URI syntax would read as
// another file (a %-escape, a '?' or a '#') names only itself: a second
// store given such a path for a database another store caches is either
// refused or opens the file the path literally names, never the first
// store's database under a lock on some other file (red team, docs/
// security/redteam-hot-cache.md, finding 1).
func TestHotLockAliasedPath(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a, err := store.Open(ctx, filepath.Join(dir, "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CacheHotReads(); err != nil {
		t.Fatal(err)
	}
	ten, err := a.CreateTenant(ctx, "acme", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, alias := range []string{"c%6Fntrol.db", "control.db?mode=rw", "control.db#x"} {
		p := filepath.Join(dir, alias)
		// The literal file exists (empty), as an operator's typo or a
		// hostile --database would leave it.
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, open := range []func() (*store.Store, error){
			func() (*store.Store, error) {
				b, err := store.Open(ctx, p)
				if err != nil {
					return nil, err
				}
				if err := b.CacheHotReads(); err != nil {
					b.Close()
					return nil, err
				}
				return b, nil
			},
			func() (*store.Store, error) { return store.OpenCached(ctx, p) },
		} {
			b, err := open()
			if err != nil {
				if !errors.Is(err, store.ErrDatabaseHeld) {
					t.Fatalf("%s: %v", alias, err)
				}
				continue
			}
			_, terr := b.Tenant(ctx, ten.ID)
			b.Close()
			if terr == nil {
				t.Fatalf("%s: a second store caches the first's database, under a lock on another file", alias)
			}
		}
	}
}
