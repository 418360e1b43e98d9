package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/redact"
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
	// Every stored value is masked wherever text leaves (redact.go), so
	// it must be text the mask pool can hold: long enough not to mask
	// ordinary words, and valid UTF-8.
	if len(b) < redact.MinSecret || len(b) > broker.MaxSecret || !utf8.Valid(b) {
		s.fail(w, r, &apiError{Code: 400, Msg: fmt.Sprintf("a secret's value is the request body, %d to %d bytes of UTF-8 text (so that it can be masked wherever text leaves); got %d bytes", redact.MinSecret, broker.MaxSecret, len(b))})
		return
	}
	tenant, name := r.PathValue("tenant"), r.PathValue("secret")
	// The value is masked from before it is stored: no output between
	// the write and the pool's refresh can show it.
	if err := s.addBrokerSecret(string(b)); err != nil {
		s.fail(w, r, &apiError{Code: 500, Msg: "internal error", Err: err})
		return
	}
	// The write is recorded (by name) in the transaction that commits
	// its record; the file store is written inside it, so a failed write
	// records nothing, and a failed record rolls back nothing on disk but
	// answers an error (the operator writes it again).
	if err := s.audited(r, tenant, "secret.write", func() map[string]any {
		return map[string]any{"name": name}
	}, func(context.Context) error { return st.Put(tenant, name, b) }); err != nil {
		s.fail(w, r, secretError(err))
		return
	}
	if err := s.refreshBrokerSecrets(); err != nil {
		// The new value stays in the pool (added above); the log says why
		// the pool was not rebuilt.
		s.log.ErrorContext(r.Context(), "refreshing the mask pool from the credential broker", "err", err.Error())
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
	if err := s.audited(r, tenant, "secret.delete", func() map[string]any {
		return map[string]any{"name": name}
	}, func(context.Context) error { return st.Delete(tenant, name) }); err != nil {
		s.fail(w, r, secretError(err))
		return
	}
	// A deleted value may still sit in older evidence; it leaves the pool
	// only when the pool is rebuilt, and stays if that fails.
	if err := s.refreshBrokerSecrets(); err != nil {
		s.log.ErrorContext(r.Context(), "refreshing the mask pool from the credential broker", "err", err.Error())
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

// brokerSource names the credential broker's values among the mask
// pool's sources (redact.go).
const brokerSource = "broker"

// refreshBrokerSecrets rebuilds the broker's part of the mask pool from
// every stored secret (none is tenant-writable: only the admin routes
// write them). A secret that cannot be decrypted is an error, and the
// pool keeps what it had.
func (s *Server) refreshBrokerSecrets() error {
	vals, err := s.SecretValues()
	if err != nil {
		return err
	}
	strs := make([]string, 0, len(vals))
	for _, v := range vals {
		strs = append(strs, string(v.Bytes()))
		v.Destroy()
	}
	return s.SetSecretSource(brokerSource, strs, len(strs))
}

// addBrokerSecret adds one value to the broker's part of the pool.
func (s *Server) addBrokerSecret(v string) error { return s.addSecretValue(brokerSource, v) }
