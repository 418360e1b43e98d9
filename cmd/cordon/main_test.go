package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/rogpeppe/go-internal/testscript"
)

// testCommands are the commands this test binary runs as, by argv[0]'s
// base name (testscript.Main): cordon, and test helpers.
var testCommands = map[string]func(){"cordon": main}

func TestMain(m *testing.M) {
	testscript.Main(m, testCommands)
}

// TestScripts runs the end-to-end CLI tests in testdata/script/*.txtar.
// Each script runs in a fresh directory holding a copy of the RFC 8785
// reference test data under rfc8785/, of examples/fix-test under
// fix-test/ and of examples/go-fix under go-fix/.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		// [root]: cordon runs as root. [cgroup]: its sandbox runs get a
		// cgroup with limits (as root, or rootless in a delegated cgroup v2
		// subtree; sandbox.CgroupLimits).
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "cgroup":
				return sandbox.CgroupLimits() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(e *testscript.Env) error {
			if err := copyDir(filepath.Join("..", "..", "examples", "fix-test"), filepath.Join(e.WorkDir, "fix-test")); err != nil {
				return err
			}
			if err := copyDir(filepath.Join("..", "..", "examples", "go-fix"), filepath.Join(e.WorkDir, "go-fix")); err != nil {
				return err
			}
			return copyDir(filepath.Join("..", "..", "evidence", "canon", "testdata", "rfc8785"), filepath.Join(e.WorkDir, "rfc8785"))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// serve-http NAME: start an HTTP server on 127.0.0.1 for the
			// rest of the script that answers every request with
			// "hello from loopback", and set $NAME_PORT to its port.
			"serve-http": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: serve-http NAME")
				}
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.WriteString(w, "hello from loopback\n")
				}))
				ts.Defer(srv.Close)
				ts.Setenv(args[0]+"_PORT", strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port))
			},
			// same-entries RUN.jsonl EXEC.jsonl TYPE...: both journals
			// have entries of each TYPE, with the same body type, and
			// every EXEC entry's members are those of a RUN entry of its
			// type, less the runner's labels (task, id, kind, stdout,
			// stderr) — cordon exec and cordon run write one schema.
			"same-entries": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 3 {
					ts.Fatalf("usage: same-entries RUN.jsonl EXEC.jsonl TYPE...")
				}
				read := func(name string) map[string][]map[string]any {
					es, _, err := journal.Scan(strings.NewReader(ts.ReadFile(name)))
					ts.Check(err)
					out := map[string][]map[string]any{}
					for _, e := range es {
						var m map[string]any
						ts.Check(json.Unmarshal(e.Body().AppendJCS(nil), &m))
						out[e.Type] = append(out[e.Type], m)
					}
					return out
				}
				keys := func(m map[string]any, drop ...string) string {
					var ks []string
					for k := range m {
						if !slices.Contains(drop, k) {
							ks = append(ks, k)
						}
					}
					slices.Sort(ks)
					return strings.Join(ks, ",")
				}
				run, ex := read(args[0]), read(args[1])
				labels := []string{"task", "id", "kind", "stdout", "stderr"}
				for _, typ := range args[2:] {
					if len(run[typ]) == 0 || len(ex[typ]) == 0 {
						ts.Fatalf("%s: %d entries in %s, %d in %s", typ, len(run[typ]), args[0], len(ex[typ]), args[1])
					}
					shapes := map[string]bool{}
					for _, m := range run[typ] {
						shapes[keys(m, labels...)] = true
					}
					for _, m := range ex[typ] {
						if m["type"] != run[typ][0]["type"] {
							ts.Fatalf("%s: body type %v in %s, %v in %s", typ, m["type"], args[1], run[typ][0]["type"], args[0])
						}
						if k := keys(m); !shapes[k] {
							ts.Fatalf("%s: %s writes members %s; %s writes %v", typ, args[1], k, args[0], slices.Collect(maps.Keys(shapes)))
						}
					}
				}
			},
			// runs STATE N [busy|idle]: wait (up to 30s) until STATE
			// records N runs, each with its cgroup present in every
			// hierarchy and holding processes (busy) or none (idle).
			"runs": cmdRuns,
			// mkaudit OUT KEY.pem TENANT: an audit export with a signed head.
			"mkaudit": cmdMkAudit,
			// mkrecord OUT KEY.pem: a durable run record and its signed head.
			"mkrecord": cmdMkRecord,
			// oci-layout DIR PATH=CONTENT…: an OCI image layout of one
			// image with those files; $DIR_DIGEST is its manifest digest.
			"oci-layout": cmdOCILayout,
			// status N command args...: run command and require exit status N.
			"status": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: status N command [args...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("status: %v", err)
				}
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("status: %v", err)
				}
				if got != want {
					ts.Fatalf("exit status %d, want %d", got, want)
				}
			},
		},
	})
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
