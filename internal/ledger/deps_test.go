package ledger

import (
	"os/exec"
	"strings"
	"testing"
)

// pure are the packages that must not reach the network, storage drivers,
// processes or the environment (STYLE.md: grant, tier and evidence/... are
// pure). Their whole import graph is checked, not only direct imports.
var pure = []string{
	"github.com/cordon-dev/cordon/evidence/...",
	"github.com/cordon-dev/cordon/conformance",
	"github.com/cordon-dev/cordon/environment",
	"github.com/cordon-dev/cordon/grant",
	"github.com/cordon-dev/cordon/grant/amend",
	"github.com/cordon-dev/cordon/grant/standing",
	"github.com/cordon-dev/cordon/tier",
	"github.com/cordon-dev/cordon/tier/selection",
}

var forbidden = []string{"net", "net/http", "net/rpc", "os/exec", "database/sql", "syscall", "os/signal", "plugin", "unsafe"}

// TestPurePackages fails when a pure package imports, directly or through
// a dependency, a forbidden package. unsafe is allowed only inside the
// BLAKE3 and CBOR libraries, which use it for speed; syscall only in
// internal/flock, the journal's file lock (STYLE.md: raw syscalls live in
// a small internal package of wrappers).
func TestPurePackages(t *testing.T) {
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, pure...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if !strings.HasPrefix(pkg, "github.com/cordon-dev/cordon/") {
			continue
		}
		checked++
		for _, imp := range imports {
			for _, f := range forbidden {
				if imp == f && !(pkg == "github.com/cordon-dev/cordon/internal/flock" && imp == "syscall") {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
	// Third-party dependencies of pure packages: only the vetted ones.
	out, err = exec.Command("go", append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pure...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{"github.com/cordon-dev/cordon/", "github.com/zeebo/blake3", "github.com/fxamacker/cbor/v2", "github.com/x448/float16", "github.com/klauspost/cpuid/v2", "golang.org/x/net/idna", "golang.org/x/text/", "github.com/tailscale/hujson", "github.com/transparency-dev/merkle"}
	for _, dep := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			if strings.HasPrefix(dep, a) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("pure packages depend on %s, which is not in the vetted list (docs/DEPENDENCIES.md)", dep)
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages", checked)
	}
}

// verifiers are the packages that check evidence offline. They name tiers
// but never choose one, so they must not link the grant parser, nor,
// through it, IDNA and Unicode normalization: a verifier's trusted code
// stays small. conformance is not among them: its C2 and C5 vectors parse
// grant sets and select tiers.
var verifiers = []string{
	"github.com/cordon-dev/cordon/evidence/receipt",
	"github.com/cordon-dev/cordon/evidence/attest",
	"github.com/cordon-dev/cordon/tier",
}

// TestVerifiersDoNotLinkGrant fails when a verifier, or the leaf package
// tier, depends on grant, golang.org/x/net/idna or golang.org/x/text.
func TestVerifiersDoNotLinkGrant(t *testing.T) {
	for _, pkg := range verifiers {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 || deps[len(deps)-1] != pkg {
			t.Fatalf("go list -deps %s: unexpected output\n%s", pkg, out)
		}
		for _, dep := range deps {
			if dep == "github.com/cordon-dev/cordon/grant" || dep == "golang.org/x/net/idna" || strings.HasPrefix(dep, "golang.org/x/text/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
