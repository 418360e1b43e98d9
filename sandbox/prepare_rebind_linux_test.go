package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestPreparedRebindsReplacedName: a granted name that is not the
// program but is exec'd by it (sh -c NAME), reinstalled on the host
// (renamed over) while the slot is parked, runs in the warm run as in a
// cold one: its Prepare-time bind was dropped, and the launch binds the
// new file again.
func TestPreparedRebindsReplacedName(t *testing.T) {
	requireRoot(t, "writes a uniquely named program to /usr/local/bin")
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	name := "cordon-rb-" + hex.EncodeToString(rb[:])
	path := "/usr/local/bin/" + name
	b, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	install := func() {
		t.Helper()
		if err := os.WriteFile(path+".new", b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	install()
	t.Cleanup(func() { os.Remove(path); os.Remove(path + ".new") })
	js := strings.Replace(testGrants, `{"name":"env"}`, `{"name":"env"},{"name":"`+name+`"}`, 1)
	argv := []string{"sh", "-c", name + "; echo $?"}
	warm, _ := rtWarm(t, js, argv, func(*Prepared) { install() })
	if warm.err != nil {
		t.Fatalf("warm run: %v (stderr %s)", warm.err, warm.stderr)
	}
	cold := sandboxed(t, argv, withGrants(t, js))
	cold.mustExit(t, 0)
	if cold.stdout != "0\n" || warm.stdout != cold.stdout {
		t.Errorf("a name reinstalled while parked: warm printed %q (stderr %q), cold %q", warm.stdout, warm.stderr, cold.stdout)
	}
}
