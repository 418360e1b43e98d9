package session

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/tier"
)

// s4Grants requires S4: the isolated_kernel fact.
const s4Grants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"isolated_kernel":true,
"exec":{"allow":[{"name":"sh"},{"name":"cat"}]}}`

// TestExecAtS4: a grant set that requires S4 runs under gVisor through
// the session, with the same journal and receipt as S2; a host without
// S4 refuses it and journals the refusal. Without runsc it is skipped,
// except under CI (CORDON_CI=1), where it fails.
func TestExecAtS4(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: runsc builds the gVisor sandbox as root (uid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("runsc"); err != nil {
		if os.Getenv("CORDON_CI") == "1" {
			t.Fatalf("S4 needs gVisor's runsc, which CI installs: %v", err)
		}
		t.Skipf("runsc is not installed (%v): skipped outside CI", err)
	}
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.ws, "in.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gs := parseGrants(t, s4Grants)
	s, err := Open(t.Context(), Config{Grants: gs, StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p := s.Plan(); p.Required != tier.S4 || p.Err != nil {
		t.Fatalf("plan %+v", p)
	}
	out, err := s.Exec(t.Context(), Command{Argv: []string{"sh", "-c", "cat in.txt > out.txt"},
		Inputs: []string{"in.txt"}, Outputs: []string{"out.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.Tier != tier.S4 || out.Result.ExitCode != 0 {
		t.Fatalf("result %+v", out.Result)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "out.txt")); string(b) != "hello\n" {
		t.Fatalf("out.txt %q", b)
	}
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal(k, SealInput{Unit: canon.Sum([]byte("unit"))})
	if err != nil {
		t.Fatal(err)
	}
	es := f.entries(t)
	if got := strings.Join(types(es), ","); !strings.HasPrefix(got, "decision,command") {
		t.Fatalf("entries %s", got)
	}
	if sealed.Core.Tier != "S4" || sealed.Core.Outputs["out.txt"] == "" {
		t.Fatalf("core %+v", sealed.Core)
	}
	rc, _, err := receipt.Verify(sealed.Receipt, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attest.Verify(sealed.Attestation, k.Public(), attest.Options{Receipt: rc}); err != nil {
		t.Fatal(err)
	}

	// A host that offers S2 and S3 but not S4 refuses, and says so.
	f2 := newFixture(t)
	s2, err := Open(t.Context(), Config{Grants: gs, StateDir: f2.state, Workspace: f2.ws, Recorder: f2.rec, Meters: Meters{},
		Sandbox: noS4{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Exec(t.Context(), Command{Argv: []string{"cat"}}); !errors.Is(err, ErrNoTier) || !strings.Contains(err.Error(), "requires S4") {
		t.Fatalf("exec on a host without S4: %v", err)
	}
	if got := strings.Join(types(f2.entries(t)), ","); got != "command" {
		t.Fatalf("the refusal was not journalled: %s", got)
	}
}

// noS4 is the host's sandbox with S4 withheld.
type noS4 struct{ HostSandbox }

func (noS4) Offers() []tier.Tier { return []tier.Tier{tier.S2, tier.S3} }
func (noS4) Probe(t tier.Tier) error {
	if t == tier.S4 {
		return errors.New("no runsc here (test)")
	}
	return HostSandbox{}.Probe(t)
}
