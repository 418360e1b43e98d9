package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/store"
)

// TestRedactRealSandboxStream: a command in the real sandbox prints the
// operator's secret in two writes 300 ms apart; what the runner keeps
// (and journals by its ContentId) is the masked text, not the secret.
func TestRedactRealSandboxStream(t *testing.T) {
	requireRoot(t, "its commands run under the project's memory and CPU limits, which a rootless run enforces only in a delegated cgroup v2 subtree")
	e := newEnv(t, envOpts{real: true, secrets: []string{opSecret}, configured: 1})
	half := len(opSecret) / 2
	script := "printf '%s' '" + opSecret[:half] + "'\nsleep 0.3\nprintf '%s' '" + opSecret[half:] + " tail'\n"
	argv := []string{"sh", "p.sh"}
	man := strings.Replace(manifestFor(argv...), `"exec":{"allow":[{"name":"sh"}]}`, `"exec":{"allow":[{"name":"sh"},{"name":"sleep"}]}`, 1)
	man = strings.Replace(man, `"inputs":[]`, `"inputs":["p.sh"]`, 1)
	f, _ := json.Marshal(map[string]string{"session.jsonl": replayFor(argv...), "p.sh": script})
	e.setup(`{"tasks":{"t":{"manifest":` + man + `,"files":` + string(f) + `}}}`)
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	got := e.wait(id, e.keys["member"], 60*time.Second)
	if got.State != store.StateFinished {
		log, _ := os.ReadFile(filepath.Join(e.dir, "runs", id, "log"))
		t.Fatalf("run %+v\nlog:\n%s", got, log)
	}
	j := e.must(200, "GET", "/v1/runs/"+id+"/journal", e.keys["tenant"], "").body
	masked := canon.Sum([]byte("[redacted:secret] tail")).String()
	raw := canon.Sum([]byte(opSecret + " tail")).String()
	if !bytes.Contains(j, []byte(`"stdout":"`+masked+`"`)) || bytes.Contains(j, []byte(raw)) {
		t.Fatalf("the command entry does not name the masked output (%s):\n%s", masked, j)
	}
}
