package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/store"
)

// TestServeRefusedChangesNothing: a second server on a SQLite database
// another process serves is refused before it changes the database: in
// particular before it migrates the schema under the running server (a
// newer binary started on a live database by mistake). Red team,
// docs/security/redteam-hot-cache.md, finding 2.
func TestServeRefusedChangesNothing(t *testing.T) {
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "held.db")
	a, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// The database as an older version left it: its newest migration
	// not applied.
	if _, err := a.DB().ExecContext(ctx, `DROP TABLE console_sessions`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DB().ExecContext(ctx, `DELETE FROM goose_db_version WHERE version_id = 9`); err != nil {
		t.Fatal(err)
	}
	if err := a.CacheHotReads(); err != nil { // a's process serves it
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"serve", "--state", t.TempDir(), "--database", db, "--listen", "127.0.0.1:0"},
		strings.NewReader(""), io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "another cordon process holds this database") {
		t.Fatalf("a second server on a held database: exit %d\n%s", code, stderr.String())
	}
	var n int
	if err := a.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'console_sessions'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("the refused server migrated the held database first")
	}
}
