package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCompletionSyntax: each completion script parses in its shell
// (bash -n, zsh -n, fish -n). A zsh or fish that is not installed is
// skipped, except under CI (CORDON_CI=1), where .ci/run installs both and
// a missing one fails.
func TestCompletionSyntax(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{"completion", shell}, nil, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			path, err := exec.LookPath(shell)
			if err != nil {
				if shell == "bash" || os.Getenv("CORDON_CI") == "1" {
					t.Fatalf("%s is not installed", shell)
				}
				t.Skipf("%s is not installed", shell)
			}
			file := filepath.Join(t.TempDir(), "cordon."+shell)
			if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := exec.Command(path, "-n", file).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, b)
			}
		})
	}
}

// TestCompletionBash: sourced in bash, the function completes verbs,
// sub-verbs and flags.
func TestCompletionBash(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"completion", "bash"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	file := filepath.Join(t.TempDir(), "cordon.bash")
	if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, want string }{
		{"cordon ver", "verify version"},
		{"cordon canon j", "jcs"},
		{"cordon canon jcs --r", "--rfc8785-numbers"},
		{"cordon tier --o", "--offers"},
		{"cordon verify run --", "--help --json --pubkey"},
	} {
		script := `source "$1"; COMP_WORDS=($2); [ "${2: -1}" = " " ] && COMP_WORDS+=(""); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _cordon; echo "${COMPREPLY[*]}"`
		b, err := exec.Command("bash", "-c", script, "bash", file, tc.line).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, b)
		}
		if got := string(bytes.TrimSpace(b)); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.line, got, tc.want)
		}
	}
}
