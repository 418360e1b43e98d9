package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// TestStewardKeySources: --key, else $CORDON_KEY (PEM text), else
// $CORDON_KEY_FILE (a path); both variables set is an error naming both.
func TestStewardKeySources(t *testing.T) {
	dir := t.TempDir()
	k1, _ := sign.Generate()
	k2, _ := sign.Generate()
	k3, _ := sign.Generate()
	f1, f3 := filepath.Join(dir, "k1.pem"), filepath.Join(dir, "k3.pem")
	for f, k := range map[string]*sign.PrivateKey{f1: k1, f3: k3} {
		if err := sign.WritePrivate(f, k); err != nil {
			t.Fatal(err)
		}
	}
	is := func(k, want *sign.PrivateKey) bool { return k != nil && k.Public().ID() == want.Public().ID() }

	t.Setenv(keyEnv, "")
	t.Setenv(keyFileEnv, "")
	if k, err := stewardKey(""); k != nil || err != nil {
		t.Fatalf("none set: %v %v", k, err)
	}
	t.Setenv(keyFileEnv, f3)
	if k, err := stewardKey(""); err != nil || !is(k, k3) {
		t.Fatalf("$%s: %v", keyFileEnv, err)
	}
	if k, err := stewardKey(f1); err != nil || !is(k, k1) {
		t.Fatalf("--key over $%s: %v", keyFileEnv, err)
	}
	t.Setenv(keyEnv, string(k2.MarshalPrivate()))
	_, err := stewardKey("")
	if err == nil || !strings.Contains(err.Error(), "$CORDON_KEY and $CORDON_KEY_FILE") {
		t.Fatalf("both set: %v", err)
	}
	var he *hintError
	if !errors.As(err, &he) || !strings.Contains(he.hint, "unset one") {
		t.Errorf("both set: no hint: %v", err)
	}
	if k, err := stewardKey(f1); err != nil || !is(k, k1) {
		t.Fatalf("--key over both: %v", err)
	}
	t.Setenv(keyFileEnv, "")
	if k, err := stewardKey(""); err != nil || !is(k, k2) {
		t.Fatalf("$%s: %v", keyEnv, err)
	}
	t.Setenv(keyEnv, "")
	t.Setenv(keyFileEnv, filepath.Join(dir, "missing.pem"))
	if _, err := stewardKey(""); err == nil || !strings.HasPrefix(err.Error(), "$CORDON_KEY_FILE: ") {
		t.Fatalf("missing file: %v", err)
	}
}
