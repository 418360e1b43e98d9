package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/cordon-dev/cordon/broker"
)

// The credential broker's admin routes (docs/governance.md): the operator
// writes, rotates and deletes a tenant's secrets; a value goes in and
// never comes out (the list names secrets and when each was written).
// Tenants only name secrets by reference in their projects, and a run
// resolves them at execution (delivery.go).

// brokerFor refuses a project that names secrets when this server has no
// credential broker: it could never run.
func (s *Server) brokerFor(tasks map[string]*task) error {
	if s.cfg.Broker != nil && s.cfg.Broker.Store != nil {
		return nil
	}
	for name, t := range tasks {
		if t.Secrets {
			return fmt.Errorf("project: tasks.%s: %w", name, errNoBroker)
		}
	}
	return nil
}

// secretStore returns the broker's store, or the error to answer with.
func (s *Server) secretStore(r *http.Request) (*broker.Store, *apiError) {
	if s.cfg.Broker == nil || s.cfg.Broker.Store == nil {
		return nil, &apiError{Code: 503, Msg: "this server has no credential broker", Hint: "start cordon serve with --master-key-file (an age identity, as age-keygen writes it)"}
	}
	if _, err := s.store.Tenant(r.Context(), r.PathValue("tenant")); err != nil {
		return nil, storeError(err, "tenant")
	}
	return s.cfg.Broker.Store, nil
}

func secretError(err error) *apiError {
	switch {
	case errors.Is(err, broker.ErrRef):
		return &apiError{Code: 400, Msg: err.Error(), Hint: "a secret name is 1 to 128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, broker.ErrNotFound):
		return &apiError{Code: 404, Msg: "no such secret"}
	}
	return &apiError{Code: 500, Msg: "internal error", Err: err}
}

// putSecret writes or rotates a secret: the body is the value, as is
// (1 to broker.MaxSecret bytes). The answer never holds it.
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	st, ae := s.secretStore(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	defer clear(b)
	if len(b) == 0 || len(b) > broker.MaxSecret {
		s.fail(w, r, &apiError{Code: 400, Msg: fmt.Sprintf("a secret's value is the request body, 1 to %d bytes; got %d", broker.MaxSecret, len(b))})
		return
	}
	tenant, name := r.PathValue("tenant"), r.PathValue("secret")
	if err := st.Put(tenant, name, b); err != nil {
		s.fail(w, r, secretError(err))
		return
	}
	writeJSON(w, 200, map[string]string{"tenant": tenant, "secret": name, "status": "written"})
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	st, ae := s.secretStore(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	tenant, name := r.PathValue("tenant"), r.PathValue("secret")
	if err := st.Delete(tenant, name); err != nil {
		s.fail(w, r, secretError(err))
		return
	}
	writeJSON(w, 200, map[string]string{"tenant": tenant, "secret": name, "status": "deleted"})
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	st, ae := s.secretStore(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	infos, err := st.List(r.PathValue("tenant"))
	if err != nil {
		s.fail(w, r, secretError(err))
		return
	}
	writeJSON(w, 200, infos)
}

// SecretValues is the pool of every tenant's stored secret values, for
// redaction (package redact): every value was written through the admin
// routes above, so none is tenant-writable input. The caller must
// Destroy each one. With no broker it returns none.
func (s *Server) SecretValues() ([]*broker.Secret, error) {
	if s.cfg.Broker == nil || s.cfg.Broker.Store == nil {
		return nil, nil
	}
	return s.cfg.Broker.Store.Values()
}
