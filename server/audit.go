package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cordon-dev/cordon/evidence/audit"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/store"
)

// The audit log (docs/SPEC.md §10): every change the API or a worker
// makes is recorded, by store.Audited, in the transaction that makes it.
// Record bodies have member names the server fixes
// ({event, at, tenant, actor, subject}); tenant-written text appears
// only as values, so a tenant cannot choose a member name that the
// export's secret-name rule would mask.

// auditMasterContext derives the audit log's salt master from the
// audit key: the operator's, never from a request.
const auditMasterContext = "cordon audit v1 salt master"

// useAuditKey gives the store the salt master the audit key derives.
func useAuditKey(st *store.Store, k *sign.PrivateKey) error {
	var master [32]byte
	blake3.DeriveKey(auditMasterContext, k.MarshalPrivate(), master[:])
	return st.SetAuditKey(master[:], k.Public().ID().String())
}

// actor describes who made a request, by ids only.
func actor(r *http.Request) map[string]any {
	p := principalFrom(r.Context())
	switch {
	case p == nil:
		return map[string]any{"kind": "anonymous"}
	case p.admin:
		return map[string]any{"kind": "operator"}
	case p.p.UserID == "":
		return map[string]any{"kind": "tenant-key", "key": p.p.KeyID}
	}
	return map[string]any{"kind": "user", "user": p.p.UserID, "key": p.p.KeyID}
}

// event builds an audit event. Its strings are masked before they are
// recorded (shapes always; the operator's values when the pool works),
// so the log holds no credential a tenant pasted, and a tenant that
// appends a token-shaped string to its text loses only that string from
// its export, not the text around it.
func (s *Server) event(tenant, name string, who map[string]any, subject map[string]any) *store.AuditEvent {
	body := map[string]any{"event": name, "at": time.Now().UTC().Format(time.RFC3339Nano), "actor": who, "tenant": tenant}
	if subject != nil {
		body["subject"] = subject
	}
	p := s.Pool()
	if p.Err() != nil {
		p, _ = redact.NewPool(redact.Config{}) // shapes only: the export refuses while the pool fails
	}
	m, err := maskJSON(p, body, false)
	if err != nil {
		return &store.AuditEvent{Tenant: tenant, Body: body}
	}
	return &store.AuditEvent{Tenant: tenant, Body: m.(map[string]any)}
}

// audited makes change and records the request's event with it, in one
// transaction.
func (s *Server) audited(r *http.Request, tenant, name string, subject func() map[string]any, change func(ctx context.Context) error) error {
	return s.store.Audited(r.Context(), func(ctx context.Context) (*store.AuditEvent, error) {
		if err := change(ctx); err != nil {
			return nil, err
		}
		return s.event(tenant, name, actor(r), subject()), nil
	})
}

// auditAuthFailure records a request whose credential did not
// authenticate. The credential itself is never recorded.
func (s *Server) auditAuthFailure(r *http.Request, why string) {
	ev := s.event("", "auth.failure", map[string]any{"kind": "anonymous", "remote": r.RemoteAddr},
		map[string]any{"method": r.Method, "path": r.URL.Path, "reason": why})
	if err := s.store.Audit(context.WithoutCancel(r.Context()), ev); err != nil {
		s.log.ErrorContext(r.Context(), "recording a failed authentication", "err", err.Error())
	}
}

// The worker's transitions, each recorded with its change.

func (s *Server) workerActor() map[string]any {
	return map[string]any{"kind": "worker", "worker": s.cfg.WorkerID}
}

func (s *Server) startAudited(ctx context.Context, id string, job int64) (attempt int, ok bool, err error) {
	err = s.store.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
		if attempt, ok, err = s.store.Start(ctx, id, s.cfg.WorkerID, job); err != nil || !ok {
			return nil, err
		}
		run, err := s.store.RunByID(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.event(run.TenantID, "run.start", s.workerActor(), map[string]any{"run": id, "attempt": attempt}), nil
	})
	return attempt, ok && err == nil, err
}

func (s *Server) finishAudited(ctx context.Context, id string, attempt int, o store.Outcome) (recorded bool, err error) {
	err = s.store.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
		if recorded, err = s.store.Finish(ctx, id, attempt, o); err != nil || !recorded {
			return nil, err
		}
		run, err := s.store.RunByID(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.event(run.TenantID, "run.finish", s.workerActor(), map[string]any{"run": id, "attempt": attempt,
			"state": o.State, "reason": o.Reason, "status": o.Status, "tier": o.Tier}), nil
	})
	return recorded && err == nil, err
}

func (s *Server) interruptedAudited(ctx context.Context, id, reason string) (done bool, err error) {
	err = s.store.Audited(ctx, func(ctx context.Context) (*store.AuditEvent, error) {
		if done, err = s.store.Interrupted(ctx, id, reason); err != nil || !done {
			return nil, err
		}
		run, err := s.store.RunByID(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.event(run.TenantID, "run.interrupted", s.workerActor(), map[string]any{"run": id, "reason": reason}), nil
	})
	return done && err == nil, err
}

// auditKey is the key that signs the audit log's head.
func (s *Server) auditKey() *sign.PrivateKey {
	if s.cfg.AuditKey != nil {
		return s.cfg.AuditKey
	}
	return s.cfg.Key
}

// auditPub serves the public key that signs the audit head.
func (s *Server) auditPub(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(s.auditKey().Public().MarshalPublic())
}

// auditExport streams the audit log as JSONL, ending with the signed
// head. A tenant key's export reveals its own tenant's records (secret-
// named members and strings holding a secret masked to their
// commitments) and masks every leaf of the others'; the operator's
// reveals every record under the same masking. A pool that fails loud
// refuses the export (500) before anything is sent.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	export, ae := s.auditExportFor(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", `attachment; filename="audit.jsonl"`)
	w.Write(export)
}

// auditExportFor builds the request's principal's audit export: the one
// path of the API's export and the console's (its page and its download).
func (s *Server) auditExportFor(r *http.Request) ([]byte, *apiError) {
	p := principalFrom(r.Context())
	pool := s.Pool()
	if err := pool.Err(); err != nil {
		return nil, &apiError{Code: 500, Msg: "the audit export was withheld: " + err.Error(), Hint: "fix the server's --secrets configuration"}
	}
	tenant := ""
	if !p.admin {
		tenant = p.p.TenantID
	}
	reveal := func(path audit.Path, v canon.Value) bool {
		for _, el := range path {
			if name, ok := el.(string); ok && redact.SecretName(name) {
				return false
			}
		}
		if v.Kind() == canon.KindString {
			m, err := pool.String(v.Str())
			return err == nil && m == v.Str()
		}
		return true
	}
	// The whole export is built before anything is sent: a chain that
	// does not rebuild is a 500, never half an export.
	var buf bytes.Buffer
	head, err := s.store.AuditLog(r.Context(), func(rec store.AuditRecord) error {
		buf.Write(rec.Record.Export(p.admin || rec.Tenant == tenant, reveal))
		buf.WriteByte('\n')
		return nil
	})
	if errors.Is(err, store.ErrAuditBroken) || errors.Is(err, store.ErrAuditKey) {
		return nil, &apiError{Code: 500, Msg: "the audit log does not verify in the database; no head is signed over it", Err: err}
	}
	if err != nil {
		return nil, storeError(err, "audit log")
	}
	s.log.InfoContext(r.Context(), "audit export", "tenant", tenant, "records", head.Count)
	buf.Write(head.Seal(s.auditKey()))
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// auditResolution records that a run resolves secrets, by reference.
func (s *Server) auditResolution(ctx context.Context, run *store.Run, refs []string) error {
	return s.store.Audit(ctx, s.event(run.TenantID, "credential.resolve", s.workerActor(),
		map[string]any{"run": run.ID, "refs": anys(refs)}))
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, v := range ss {
		out[i] = v
	}
	return out
}
