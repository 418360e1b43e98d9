package server_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-dev/cordon/store"
)

// TestSecretDelivery: a run receives one secret by name in its
// environment (the grant set lists the variable) and has another
// injected by the egress proxy as a header for exactly one granted host,
// which the sandbox never sees; the journal names the injection by
// reference, never the value.
func TestSecretDelivery(t *testing.T) {
	requireRoot(t, "its commands run under the project's memory and CPU limits, which a rootless run enforces only in a delegated cgroup v2 subtree")
	const envVal, injVal = "env-value-7c21", "inj-value-5e90"
	var mu sync.Mutex
	var seen []string
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer web.Close()
	port := web.Listener.Addr().(*net.TCPAddr).Port
	grants := fmt.Sprintf(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"sh"},{"name":"curl"}]},"env":["API_TOKEN"],
"egress":[{"cidr":"127.0.0.1/32","proto":"tcp","ports":[%d,%d]}],
"limits":{"wall_ms":60000,"memory_bytes":536870912,"pids":64}}`, port, port)
	e := newEnv(t, envOpts{real: true})
	ten, keys := e.tenantWith("deliver", grants)
	e.must(200, "PUT", "/v1/tenants/"+ten+"/secrets/envtok", adminKey, envVal)
	e.must(200, "PUT", "/v1/tenants/"+ten+"/secrets/api", adminKey, injVal)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	script := `export -p > env.txt
curl -sf -H "Authorization: chosen-by-the-sandbox" ` + url + `/injected
curl -sf ` + url + `/env/$API_TOKEN
`
	p := gitProject(grants, script, "")
	p = strings.Replace(p, `"outputs":[]`, `"outputs":["env.txt"]`, 1)
	var pc map[string]map[string]map[string]any
	json.Unmarshal([]byte(p), &pc)
	pc["tasks"]["t"]["secrets"] = []map[string]string{
		{"ref": "envtok", "env": "API_TOKEN"},
		{"ref": "api", "header": "Authorization", "prefix": "Bearer ", "url": url},
	}
	b, _ := json.Marshal(pc)
	e.must(200, "PUT", "/v1/projects/p", keys["member"], string(b))
	id, got := e.runProject(keys)
	logb, _ := os.ReadFile(filepath.Join(e.dir, "runs", id, "log"))
	if got.State != store.StateFinished {
		t.Fatalf("run %+v\nlog:\n%s", got, logb)
	}
	mu.Lock()
	want := []string{"/injected Bearer " + injVal, "/env/" + envVal + " Bearer " + injVal}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the server saw\n%s\nwant\n%s\nlog:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"), logb)
	}
	mu.Unlock()
	envTxt, err := os.ReadFile(filepath.Join(e.dir, "runs", id, "ws", "env.txt"))
	if err != nil || !strings.Contains(string(envTxt), envVal) || strings.Contains(string(envTxt), injVal) {
		t.Errorf("the sandbox's environment (%v): %s", err, envTxt)
	}
	j := string(e.must(200, "GET", "/v1/runs/"+id+"/journal", keys["member"], "").body)
	if strings.Count(j, `"injected":"Authorization from secret \"api\""`) != 2 {
		t.Errorf("the journal does not record both injections:\n%.3000s", j)
	}
	if strings.Contains(j, injVal) || strings.Contains(string(logb), injVal) || strings.Contains(string(logb), envVal) {
		t.Errorf("the journal or the log holds a value")
	}
	// The resolution is in the audit log, by reference, never by value.
	body, recs := e.export(adminKey)
	resolved := 0
	for _, r := range recs {
		if revealed(r, `["event"]`) == "credential.resolve" && revealed(r, `["subject","run"]`) == id {
			resolved++
		}
	}
	if resolved != 1 || !strings.Contains(string(body), `"envtok"`) || strings.Contains(string(body), injVal) || strings.Contains(string(body), envVal) {
		t.Errorf("audit: %d credential.resolve records for the run; export:\n%.2000s", resolved, body)
	}
}
