package server_test

import (
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
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
			if r.Guard != "public" {
				op["security"] = []any{map[string]any{"bearer": []any{}}}
			}
			paths[r.Path][strings.ToLower(r.Method)] = op
		}
		doc := map[string]any{
			"openapi":    "3.1.0",
			"info":       map[string]any{"title": "cordon control plane", "version": "1", "description": "See docs/server.md; guards and blast radii in docs/security/authz-surface.json."},
			"components": map[string]any{"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}}},
			"paths":      paths,
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
