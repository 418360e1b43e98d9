package server

import (
	_ "embed"
	"net/http"
)

// openapiDoc is the OpenAPI 3.1 document of every route;
// TestOpenAPIMatchesRouter checks it against the live router.
//
//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	// A document built into the binary, holding no tenant's data: its
	// secret-named paths are not secrets.
	unmasked(r)
	w.Header().Set("Content-Type", "application/json")
	w.Write(openapiDoc)
}
