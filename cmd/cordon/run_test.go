package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// TestAuditKeySources: --key, then $CORDON_AUDIT_PRIVATE_KEY (PEM text),
// then $CORDON_KEY; a bad value is an error, never an unsigned run.
func TestAuditKeySources(t *testing.T) {
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	file := filepath.Join(t.TempDir(), "k.pem")
	if err := sign.WritePrivate(file, k1); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CORDON_KEY", "")
	t.Setenv(auditKeyEnv, string(k2.MarshalPrivate()))
	if k, err := auditKey(file); err != nil || k.Public().ID() != k1.Public().ID() {
		t.Fatalf("--key: %v", err)
	}
	if k, err := auditKey(""); err != nil || k == nil || k.Public().ID() != k2.Public().ID() {
		t.Fatalf("$%s: %v", auditKeyEnv, err)
	}
	t.Setenv(auditKeyEnv, "not a key")
	if _, err := auditKey(""); err == nil || !strings.Contains(err.Error(), auditKeyEnv) {
		t.Fatalf("a bad $%s: %v", auditKeyEnv, err)
	}
	t.Setenv(auditKeyEnv, "")
	if _, err := auditKey(""); err == nil {
		t.Fatalf("an empty $%s was taken for no key", auditKeyEnv)
	}
	os.Unsetenv(auditKeyEnv)
	if k, err := auditKey(""); err != nil || k != nil {
		t.Fatalf("no key: %v %v", k, err)
	}
}
