package server_test

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/server"
)

var update = flag.Bool("update", false, "rewrite server/openapi.json from the live router and the authorization surface")

// TestOpenAPIMatchesRouter checks that server/openapi.json, which the
// server serves at /openapi.json, describes exactly the live router's
// routes, each with its guard.
func TestOpenAPIMatchesRouter(t *testing.T) {
	e := newEnv(t, envOpts{})
	s := loadSurface(t)
	if *update {
		paths := map[string]map[string]any{}
		for _, r := range s.Routes {
			if paths[r.Path] == nil {
				paths[r.Path] = map[string]any{}
			}
			op := map[string]any{
				"summary":     r.Rationale,
				"x-guard":     r.Guard,
				"x-blast":     r.BlastRadius,
				"operationId": strings.ToLower(r.Method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_", "-", "_").Replace(r.Path),
				"responses":   map[string]any{"default": map[string]any{"description": "JSON; errors are {\"error\": …, \"hint\": …}"}},
			}
			switch {
			case r.Guard == "public":
			case strings.HasPrefix(r.Path, "/console/"):
				// the web console: HTML, signed in by its session cookie; a
				// bearer key is never read there (docs/console.md)
				op["security"] = []any{map[string]any{"console": []any{}}}
				op["responses"] = map[string]any{"default": map[string]any{"description": "HTML (the web console); errors are HTML pages"}}
			default:
				op["security"] = []any{map[string]any{"bearer": []any{}}}
			}
			paths[r.Path][strings.ToLower(r.Method)] = op
		}
		doc := map[string]any{
			"openapi": "3.1.0",
			"info":    map[string]any{"title": "cordon control plane", "version": "1", "description": "See docs/server.md; guards and blast radii in docs/security/authz-surface.json."},
			"components": map[string]any{"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"},
				"console": map[string]any{"type": "apiKey", "in": "cookie", "name": server.ConsoleCookie}}},
			"paths": paths,
		}
		b, _ := json.MarshalIndent(doc, "", "  ")
		if err := os.WriteFile("openapi.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := e.must(200, "GET", "/openapi.json", "", "").body
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Guard string `json:"x-guard"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.OpenAPI == "" {
		t.Fatalf("openapi.json: %v", err)
	}
	var documented, served []string
	for p, ops := range doc.Paths {
		for m, op := range ops {
			documented = append(documented, strings.ToUpper(m)+" "+p+" "+op.Guard)
		}
	}
	for _, r := range e.srv.Routes() {
		served = append(served, r.Method+" "+r.Path+" "+r.Guard)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("openapi.json and the router differ (go test ./server -run TestOpenAPI -update rewrites it):\ndocumented %q\nserved     %q", documented, served)
	}
}

// TestMetrics: /metrics (admin) exposes request latencies by route
// pattern, never by raw path, and run events.
func TestMetrics(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(200, "GET", "/v1/runs/"+id, e.keys["member"], "")
	b := string(e.must(200, "GET", "/metrics", adminKey, "").body)
	for _, want := range []string{
		`cordon_runs_total{event="submitted"} 1`,
		`cordon_http_request_duration_seconds_count{route="GET /v1/runs/{run}",code="200"} 1`,
		`# TYPE cordon_http_request_duration_seconds histogram`,
	} {
		if !strings.Contains(b, want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	if strings.Contains(b, id) {
		t.Error("metrics name a run id")
	}
}

// TestNoInitOpeners keeps out of the cordon binary a package known to
// open a file while it initializes: every process of the binary runs
// package initialization, the sandbox's init included, which closes every
// inherited descriptor and would take Go's network poller with it
// (docs/DEPENDENCIES.md, "Decided against").
func TestNoInitOpeners(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/cordon-dev/cordon/cmd/cordon").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, bad := range []string{"google.golang.org/protobuf/internal/detrand"} {
		if slices.Contains(strings.Fields(string(out)), bad) {
			t.Errorf("cmd/cordon links %s, which opens the executable at initialization", bad)
		}
	}
}
