package server

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/agent/mailbox"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/store"
	"github.com/cordon-dev/cordon/tier/selection"
)

// table is every route: method, path pattern, guard, handler. It is the
// only place routes are registered (New), so the live router and
// Routes() are one list; docs/security/authz-surface.json must match it.
func (s *Server) table() []Route {
	return append([]Route{
		{"GET", "/healthz", GuardPublic, s.healthz},
		{"GET", "/readyz", GuardPublic, s.readyz},
		{"GET", "/openapi.json", GuardPublic, s.openapi},
		{"GET", "/v1/steward.pub", GuardPublic, s.stewardPub},
		{"GET", "/metrics", GuardAdmin, s.metricsHandler},

		{"POST", "/v1/tenants", GuardAdmin, s.createTenant},
		{"GET", "/v1/tenants", GuardAdmin, s.listTenants},
		{"PUT", "/v1/tenants/{tenant}/ceiling", GuardExplicitAdmin, s.setCeiling},
		{"POST", "/v1/tenants/{tenant}/users", GuardAdmin, s.createUser},
		{"POST", "/v1/tenants/{tenant}/keys", GuardAdmin, s.createKey},
		{"GET", "/v1/tenants/{tenant}/keys", GuardAdmin, s.listKeys},
		{"DELETE", "/v1/tenants/{tenant}/keys/{key}", GuardAdmin, s.revokeKey},
		{"POST", "/v1/tenants/{tenant}/keys/{key}/rotate", GuardAdmin, s.rotateKey},

		{"PUT", "/v1/tenants/{tenant}/secrets/{secret}", GuardAdmin, s.putSecret},
		{"DELETE", "/v1/tenants/{tenant}/secrets/{secret}", GuardAdmin, s.deleteSecret},
		{"GET", "/v1/tenants/{tenant}/secrets", GuardAdmin, s.listSecrets},

		{"GET", "/v1/whoami", GuardTenant, s.whoami},
		{"GET", "/v1/projects", GuardTenant, s.listProjects},
		{"GET", "/v1/projects/{project}", GuardTenant, s.getProject},
		{"PUT", "/v1/projects/{project}", GuardUser, s.putProject},
		{"POST", "/v1/projects/{project}/plan", GuardTenant, s.plan},
		{"POST", "/v1/projects/{project}/runs", GuardUser, s.submit},
		{"GET", "/v1/runs", GuardTenant, s.listRuns},
		{"GET", "/v1/runs/{run}", GuardTenant, s.getRun},
		{"GET", "/v1/runs/{run}/journal", GuardTenant, s.runJournal},
		{"GET", "/v1/runs/{run}/evidence", GuardTenant, s.runEvidence},
		{"POST", "/v1/runs/{run}/approve", GuardApprover, s.approve},
		{"POST", "/v1/runs/{run}/reject", GuardApprover, s.reject},
		{"POST", "/v1/runs/{run}/cancel", GuardUser, s.cancel},
		{"GET", "/v1/runs/{run}/review", GuardTenant, s.getReview},
		{"POST", "/v1/runs/{run}/review/accept", GuardApprover, s.acceptReview},
		{"POST", "/v1/runs/{run}/review/decline", GuardApprover, s.declineReview},
		{"GET", "/v1/risk-policy", GuardAdmin, s.getRiskPolicy},
		{"PUT", "/v1/risk-policy", GuardExplicitAdmin, s.putRiskPolicy},
		{"GET", "/v1/runs/{run}/mailbox", GuardTenant, s.mailboxList},
		{"POST", "/v1/runs/{run}/mailbox", GuardUser, s.mailboxPost},

		{"GET", "/v1/audit.pub", GuardPublic, s.auditPub},
		{"GET", "/v1/audit/export", GuardTenantOrAdmin, s.auditExport},
	}, append(s.consoleTable(), s.consolePagesTable()...)...)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.store.Ping(r.Context()); err != nil {
		s.fail(w, r, &apiError{Code: 503, Msg: "the database does not answer", Err: err})
		return
	}
	writeJSON(w, 200, map[string]string{"status": "ready", "database": string(s.store.Engine())})
}

func (s *Server) stewardPub(w http.ResponseWriter, r *http.Request) {
	pub := s.cfg.Key.Public()
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(pub.MarshalPublic())
}

// --- operator routes ---

type tenantRequest struct {
	Name    string          `json:"name"`
	Ceiling json.RawMessage `json:"ceiling"`
}

type tenantView struct {
	*store.Tenant
	Ceiling json.RawMessage `json:"ceiling"`
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	var req tenantRequest
	if err := decodeStrict(b, &req); err != nil {
		s.fail(w, r, &apiError{Code: 400, Msg: "tenant: " + err.Error()})
		return
	}
	t, ae := s.newTenant(r, req.Name, req.Ceiling)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 201, tenantView{t, t.Ceiling})
}

// newTenant creates a tenant with a ceiling, audited: the API's and the
// console's one path.
func (s *Server) newTenant(r *http.Request, name string, ceiling []byte) (*store.Tenant, *apiError) {
	if !validName(name) {
		return nil, &apiError{Code: 400, Msg: fmt.Sprintf("tenant name %q: use 1 to 64 of a-z, 0-9, '-' and '_'", name)}
	}
	if _, err := grant.Parse(ceiling); err != nil {
		return nil, &apiError{Code: 400, Msg: "ceiling: " + err.Error(), Hint: "the ceiling is a grant set (docs/sandbox.md)"}
	}
	var t *store.Tenant
	err := s.audited(r, "", "tenant.create", func() map[string]any {
		return map[string]any{"tenant": t.ID, "name": t.Name, "ceiling": canon.Sum(ceiling).String()}
	}, func(ctx context.Context) (err error) {
		t, err = s.store.CreateTenant(ctx, name, ceiling)
		return err
	})
	if err != nil {
		return nil, storeError(err, "tenant")
	}
	return t, nil
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := s.store.Tenants(r.Context())
	if err != nil {
		s.fail(w, r, storeError(err, "tenant"))
		return
	}
	out := []tenantView{}
	for _, t := range ts {
		out = append(out, tenantView{t, t.Ceiling})
	}
	writeJSON(w, 200, out)
}

// setCeiling replaces a tenant's ceiling. It is explicit-admin because
// widening it widens what the tenant's projects may run; projects the new
// ceiling does not cover can no longer be run (the check is repeated at
// submission, approval and execution).
func (s *Server) setCeiling(w http.ResponseWriter, r *http.Request) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	if _, err := grant.Parse(b); err != nil {
		s.fail(w, r, &apiError{Code: 400, Msg: "ceiling: " + err.Error()})
		return
	}
	tid := r.PathValue("tenant")
	if err := s.audited(r, tid, "tenant.ceiling", func() map[string]any {
		return map[string]any{"tenant": tid, "ceiling": canon.Sum(b).String()}
	}, func(ctx context.Context) error { return s.store.SetCeiling(ctx, tid, b) }); err != nil {
		s.fail(w, r, storeError(err, "tenant"))
		return
	}
	writeJSON(w, 200, map[string]string{"tenant": r.PathValue("tenant"), "status": "ceiling replaced"})
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	var req struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}
	if err := decodeStrict(b, &req); err != nil {
		s.fail(w, r, &apiError{Code: 400, Msg: "user: " + err.Error()})
		return
	}
	if !validName(req.Name) || (req.Role != store.RoleMember && req.Role != store.RoleApprover) {
		s.fail(w, r, &apiError{Code: 400, Msg: fmt.Sprintf("user: name %q, role %q: a name of a-z, 0-9, '-', '_' and a role of member or approver", req.Name, req.Role)})
		return
	}
	if _, err := s.store.Tenant(r.Context(), r.PathValue("tenant")); err != nil {
		s.fail(w, r, storeError(err, "tenant"))
		return
	}
	var u *store.User
	err := s.audited(r, r.PathValue("tenant"), "user.create", func() map[string]any {
		return map[string]any{"user": u.ID, "name": u.Name, "role": u.Role}
	}, func(ctx context.Context) (err error) {
		u, err = s.store.CreateUser(ctx, r.PathValue("tenant"), req.Name, req.Role)
		return err
	})
	if err != nil {
		s.fail(w, r, storeError(err, "user"))
		return
	}
	writeJSON(w, 201, u)
}

type keyView struct {
	*store.Key
	Secret string `json:"secret,omitempty"`
	Note   string `json:"note,omitempty"`
}

const shownOnce = "the secret is shown once and stored only hashed; keep it now"

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	var req struct {
		User string `json:"user"`
	}
	if len(b) > 0 {
		if err := decodeStrict(b, &req); err != nil {
			s.fail(w, r, &apiError{Code: 400, Msg: "key: " + err.Error()})
			return
		}
	}
	k, secret, ae := s.newKey(r, r.PathValue("tenant"), req.User)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	revealToCaller(r) // the new key, shown once to the operator who made it
	writeJSON(w, 201, keyView{k, secret, shownOnce})
}

// newKey creates a key of a tenant (for one of its users when user is
// not ""), audited: the API's and the console's one path. The secret is
// returned once; the store keeps only its hash.
func (s *Server) newKey(r *http.Request, tenant, user string) (*store.Key, string, *apiError) {
	var k *store.Key
	var secret string
	err := s.audited(r, tenant, "key.create", func() map[string]any {
		return map[string]any{"key": k.ID, "user": k.UserID}
	}, func(ctx context.Context) (err error) {
		k, secret, err = s.store.CreateKey(ctx, tenant, user)
		return err
	})
	if err != nil {
		return nil, "", storeError(err, "tenant or user")
	}
	return k, secret, nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.store.Keys(r.Context(), r.PathValue("tenant"))
	if err != nil {
		s.fail(w, r, storeError(err, "tenant"))
		return
	}
	writeJSON(w, 200, ks)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	if ae := s.revokeTenantKey(r, r.PathValue("tenant"), r.PathValue("key")); ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 200, map[string]string{"key": r.PathValue("key"), "status": "revoked"})
}

// revokeTenantKey revokes a tenant's key, audited: the API's and the
// console's one path.
func (s *Server) revokeTenantKey(r *http.Request, tenant, key string) *apiError {
	if err := s.audited(r, tenant, "key.revoke", func() map[string]any {
		return map[string]any{"key": key}
	}, func(ctx context.Context) error {
		return s.store.RevokeKey(ctx, tenant, key)
	}); err != nil {
		return storeError(err, "unrevoked key")
	}
	return nil
}

func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) {
	var k *store.Key
	var secret string
	err := s.audited(r, r.PathValue("tenant"), "key.rotate", func() map[string]any {
		return map[string]any{"key": r.PathValue("key"), "new_key": k.ID}
	}, func(ctx context.Context) (err error) {
		k, secret, err = s.store.RotateKey(ctx, r.PathValue("tenant"), r.PathValue("key"))
		return err
	})
	if err != nil {
		s.fail(w, r, storeError(err, "unrevoked key"))
		return
	}
	revealToCaller(r) // the new key, shown once to the operator who made it
	writeJSON(w, 201, keyView{k, secret, shownOnce + "; the old key is revoked"})
}

// --- tenant routes: every lookup is scoped to the caller's tenant ---

func tenantOf(r *http.Request) *store.Principal { return principalFrom(r.Context()).p }

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := tenantOf(r)
	writeJSON(w, 200, map[string]string{"tenant": p.TenantID, "key": p.KeyID, "user": p.UserID, "name": p.UserName, "role": p.Role})
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	ps, err := s.store.Projects(r.Context(), tenantOf(r).TenantID)
	if err != nil {
		s.fail(w, r, storeError(err, "project"))
		return
	}
	writeJSON(w, 200, ps)
}

type projectView struct {
	*store.Project
	Config json.RawMessage `json:"config"`
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	p, err := s.store.Project(r.Context(), tenantOf(r).TenantID, r.PathValue("project"))
	if err != nil {
		s.fail(w, r, storeError(err, "project"))
		return
	}
	writeJSON(w, 200, projectView{p, p.Config})
}

// ceilingCheck parses a stored ceiling and checks a project against it.
func (s *Server) ceilingCheck(cfg []byte) func([]byte) error {
	return func(ceiling []byte) error {
		c, err := grant.Parse(ceiling)
		if err != nil {
			return fmt.Errorf("the tenant's ceiling does not parse: %w", err)
		}
		tasks, err := parseProject(cfg, c, s.cfg.MaxWall)
		if err == nil {
			err = s.brokerFor(tasks)
		}
		return err
	}
}

var errProject = errors.New("project refused")

func (s *Server) putProject(w http.ResponseWriter, r *http.Request) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	name := r.PathValue("project")
	if !validName(name) {
		s.fail(w, r, &apiError{Code: 400, Msg: fmt.Sprintf("project name %q: use 1 to 64 of a-z, 0-9, '-' and '_'", name)})
		return
	}
	check := s.ceilingCheck(b)
	var p *store.Project
	err := s.audited(r, tenantOf(r).TenantID, "project.put", func() map[string]any {
		return map[string]any{"project": p.ID, "name": name, "config": canon.Sum(b).String()}
	}, func(ctx context.Context) (err error) {
		p, err = s.store.PutProject(ctx, tenantOf(r).TenantID, name, tenantOf(r).UserID, b, func(c []byte) error {
			if err := check(c); err != nil {
				return fmt.Errorf("%w: %w", errProject, err)
			}
			return nil
		})
		return err
	})
	if errors.Is(err, errProject) {
		s.fail(w, r, &apiError{Code: 400, Msg: err.Error(), Hint: "a project is declarative: tasks, each an agent manifest and its files, with grants the tenant's ceiling covers"})
		return
	}
	if err != nil {
		s.fail(w, r, storeError(err, "project"))
		return
	}
	writeJSON(w, 200, p)
}

// resolveTask checks the project against the tenant's current ceiling and
// returns the task's snapshot: what a run of it executes.
func (s *Server) resolveTask(r *http.Request, project, taskName string) (*store.Project, []byte, *task, *apiError) {
	tid := tenantOf(r).TenantID
	p, err := s.store.Project(r.Context(), tid, project)
	if err != nil {
		return nil, nil, nil, storeError(err, "project")
	}
	t, err := s.store.Tenant(r.Context(), tid)
	if err != nil {
		return nil, nil, nil, storeError(err, "tenant")
	}
	ceiling, err := grant.Parse(t.Ceiling)
	if err != nil {
		return nil, nil, nil, &apiError{Code: 500, Msg: "the tenant's ceiling does not parse", Err: err}
	}
	tasks, err := parseProject(p.Config, ceiling, s.cfg.MaxWall)
	if err != nil {
		return nil, nil, nil, &apiError{Code: 409, Msg: "the project no longer passes its checks: " + err.Error(), Hint: "the ceiling may have been tightened; update the project"}
	}
	tk, ok := tasks[taskName]
	if !ok {
		return nil, nil, nil, &apiError{Code: 400, Msg: fmt.Sprintf("task %q: the project has no such task", taskName)}
	}
	var pc ProjectConfig
	decodeStrict(p.Config, &pc) // parsed above
	snap, err := json.Marshal(pc.Tasks[taskName])
	if err != nil {
		return nil, nil, nil, &apiError{Code: 500, Msg: "internal error", Err: err}
	}
	return p, snap, tk, nil
}

type planView struct {
	Project  string   `json:"project"`
	Task     string   `json:"task"`
	Manifest string   `json:"manifest"` // its ContentId
	Grants   string   `json:"grants"`   // the grant set's ContentId
	Tier     string   `json:"tier"`     // the tier the grant set requires
	Commands []string `json:"commands"`
	WallMS   int64    `json:"wall_ms"`
	Executes bool     `json:"executes"` // always false: a plan runs nothing
}

// runTask reads a run request (plan or submit) and resolves its task in
// the path's project: the one way a caller names what to run.
func (s *Server) runTask(r *http.Request) (*RunRequest, *store.Project, []byte, *task, *apiError) {
	b, ae := readBody(r)
	if ae != nil {
		return nil, nil, nil, nil, ae
	}
	req, err := parseRunRequest(b)
	if err != nil {
		return nil, nil, nil, nil, &apiError{Code: 400, Msg: err.Error()}
	}
	p, snap, t, ae := s.resolveTask(r, r.PathValue("project"), req.Task)
	return req, p, snap, t, ae
}

// plan returns what a run of the task would execute, and executes nothing.
func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	req, _, _, t, ae := s.runTask(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 200, planView{Project: r.PathValue("project"), Task: req.Task, Manifest: t.Manifest.ID().String(),
		Grants: t.Manifest.Grants.ID().String(), Tier: selection.Required(t.Manifest.Grants).String(), Commands: t.Manifest.Commands,
		WallMS: min(t.Manifest.Budgets.WallMS, s.cfg.MaxWall.Milliseconds())})
}

// submit creates a run, pending approval: the only state a run is ever
// created in. Nothing executes here.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	req, p, snap, _, ae := s.runTask(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	// The cap is counted and the run inserted in one transaction that
	// holds the tenant (concurrent submissions cannot pass it together),
	// the audit record of the submission with them.
	var run *store.Run
	err := s.audited(r, p.TenantID, "run.submit", func() map[string]any {
		return map[string]any{"run": run.ID, "project": p.ID, "task": req.Task, "snapshot": canon.Sum(snap).String()}
	}, func(ctx context.Context) (err error) {
		run, err = s.store.CreateRunCapped(ctx, p.TenantID, p.ID, req.Task, snap, tenantOf(r).UserID, tenantOf(r).KeyID, p.UpdatedBy, s.cfg.MaxPending)
		return err
	})
	if errors.Is(err, store.ErrPendingCap) {
		s.fail(w, r, &apiError{Code: 429, Msg: fmt.Sprintf("the tenant has as many runs pending approval or queued as the operator's maximum (--max-pending %d): approve, reject or cancel some first", s.cfg.MaxPending), Err: err})
		return
	}
	if err != nil {
		s.fail(w, r, storeError(err, "run"))
		return
	}
	s.metrics.run("submitted")
	writeJSON(w, 201, s.view(run))
}

// runView is a run as the API shows it: always with its containment
// (the sandbox; there is no unsandboxed mode).
type runView struct {
	*store.Run
	Execution string `json:"execution"`
	// Snapshot is the task the run executes (its manifest and files), as
	// taken at submission: what an approver approves is what runs, even if
	// the project changes meanwhile. Shown for one run, not in lists.
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
}

func (s *Server) view(r *store.Run) runView { return runView{Run: r, Execution: "sandbox"} }

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.fail(w, r, &apiError{Code: 400, Msg: "limit: a number from 1 to 1000"})
			return
		}
		limit = n
	}
	runs, err := s.store.Runs(r.Context(), tenantOf(r).TenantID, limit)
	if err != nil {
		s.fail(w, r, storeError(err, "run"))
		return
	}
	out := []runView{}
	for _, run := range runs {
		out = append(out, s.view(run))
	}
	writeJSON(w, 200, out)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.store.Run(r.Context(), tenantOf(r).TenantID, r.PathValue("run"))
	if err != nil {
		s.fail(w, r, storeError(err, "run"))
		return
	}
	writeRunWithSnapshot(w, s.view(run), run.Config)
}

// writeRunWithSnapshot writes a run's view with its snapshot spliced in
// as the last member. The snapshot is the compact JSON the server
// marshalled at submission; json.Marshal of it as a RawMessage would
// scan and copy it again on every read, which was a tenth of a read's
// CPU (docs/server.md, "Figures").
func writeRunWithSnapshot(w http.ResponseWriter, v runView, snap []byte) {
	b, err := json.Marshal(v)
	if err != nil || len(snap) == 0 || len(b) < 2 || b[len(b)-1] != '}' {
		v.Snapshot = snap
		writeJSON(w, 200, v)
		return
	}
	out := make([]byte, 0, len(b)+len(snap)+16)
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"snapshot":`...)
	out = append(out, snap...)
	out = append(out, '}', '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(200)
	w.Write(out)
}

// approve is the sole execution trigger: it queues the run.
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	run, ae := s.approveRun(r, r.PathValue("run"), "")
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 200, s.view(run))
}

// approveRun approves a run as the request's principal and queues it:
// the one approval path, the API's and the console's. reason, when not
// "", is recorded in the audit record (the console's form asks for one).
// Gate independence is the store's (store.Approve's conditional update).
func (s *Server) approveRun(r *http.Request, id, reason string) (*store.Run, *apiError) {
	p := tenantOf(r)
	if ae := checkReason(reason); ae != nil {
		return nil, ae
	}
	run, err := s.store.Run(r.Context(), p.TenantID, id)
	if err != nil {
		return nil, storeError(err, "run")
	}
	// The project must still pass against the current ceiling.
	t, err := s.store.Tenant(r.Context(), p.TenantID)
	if err != nil {
		return nil, storeError(err, "tenant")
	}
	if err := checkSnapshot(run.Config, t.Ceiling, s.cfg.MaxWall); err != nil {
		return nil, &apiError{Code: 409, Msg: "the run's task no longer passes its checks: " + err.Error()}
	}
	if err := s.audited(r, p.TenantID, "run.approve", func() map[string]any { return withReason(map[string]any{"run": id}, reason) },
		func(ctx context.Context) error { return s.store.Approve(ctx, p.TenantID, id, p.UserID) }); err != nil {
		return nil, storeError(err, "run")
	}
	if err := s.queue.enqueue(r.Context(), id); err != nil {
		// The run is queued in the store; the queue's sweep (and recovery
		// at the next start) enqueues it again, so it is not lost.
		return nil, &apiError{Code: 503, Msg: "approved, but the queue did not take it now; it is queued again within 30 seconds", Err: err}
	}
	s.metrics.run("approved")
	run, err = s.store.Run(r.Context(), p.TenantID, id)
	if err != nil {
		return nil, storeError(err, "run")
	}
	return run, nil
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request) {
	run, ae := s.rejectRun(r, r.PathValue("run"), "")
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 200, s.view(run))
}

// rejectRun rejects a run as the request's principal: the API's and the
// console's one path.
func (s *Server) rejectRun(r *http.Request, id, reason string) (*store.Run, *apiError) {
	p := tenantOf(r)
	if ae := checkReason(reason); ae != nil {
		return nil, ae
	}
	if err := s.audited(r, p.TenantID, "run.reject", func() map[string]any { return withReason(map[string]any{"run": id}, reason) },
		func(ctx context.Context) error { return s.store.Reject(ctx, p.TenantID, id, p.UserID) }); err != nil {
		return nil, storeError(err, "run")
	}
	s.metrics.run("rejected")
	run, err := s.store.Run(r.Context(), p.TenantID, id)
	if err != nil {
		return nil, storeError(err, "run")
	}
	return run, nil
}

// checkReason checks a decision's reason: at most maxReason bytes, no
// control characters but newlines.
func checkReason(reason string) *apiError {
	if len(reason) > maxReason || strings.ContainsFunc(reason, isControl) {
		return &apiError{Code: 400, Msg: fmt.Sprintf("reason: at most %d bytes, no control characters", maxReason)}
	}
	return nil
}

func withReason(m map[string]any, reason string) map[string]any {
	if reason != "" {
		m["reason"] = reason
	}
	return m
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	p := tenantOf(r)
	var state string
	err := s.audited(r, p.TenantID, "run.cancel", func() map[string]any {
		return map[string]any{"run": r.PathValue("run"), "state": state}
	}, func(ctx context.Context) (err error) {
		state, err = s.store.Cancel(ctx, p.TenantID, r.PathValue("run"), p.UserID)
		return err
	})
	if err != nil {
		s.fail(w, r, storeError(err, "run"))
		return
	}
	run, _ := s.store.Run(r.Context(), p.TenantID, r.PathValue("run"))
	code := 200
	if state == store.StateRunning {
		code = 202 // the executor stops it and records the outcome
	}
	writeJSON(w, code, s.view(run))
}

// runDir is where a run's workspace lives; the id is checked to be one
// of the store's, never a path.
func (s *Server) runDir(id string) string { return filepath.Join(s.cfg.StateDir, "runs", id) }

func (s *Server) runJournal(w http.ResponseWriter, r *http.Request) {
	s.serveEvidence(w, r, "journal", "application/x-ndjson", "")
}

// runEvidence serves the run's record (.cordon) as a gzipped tar: extract
// it and run `cordon verify run --pubkey steward.pub RUN`.
func (s *Server) runEvidence(w http.ResponseWriter, r *http.Request) {
	s.serveEvidence(w, r, "record", "application/gzip", ".tar.gz")
}

// serveEvidence serves what the executing worker stored in the database.
func (s *Server) serveEvidence(w http.ResponseWriter, r *http.Request, which, ctype, ext string) {
	run, err := s.store.Run(r.Context(), tenantOf(r).TenantID, r.PathValue("run"))
	if err != nil {
		s.fail(w, r, storeError(err, "run"))
		return
	}
	b, ae := s.storedEvidence(r.Context(), run, which)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("X-Content-Type-Options", "nosniff") // a journal is the agent's text: never sniffed as HTML
	if ext != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="`+run.ID+ext+`"`)
	}
	w.Write(b)
}

// storedEvidence is a run's stored journal or record: the API's and the
// console's downloads.
func (s *Server) storedEvidence(ctx context.Context, run *store.Run, which string) ([]byte, *apiError) {
	if !store.Terminal(run.State) {
		return nil, &apiError{Code: 409, Msg: "the run has not ended (state " + run.State + "); its evidence is stored when it does"}
	}
	b, err := s.store.Evidence(ctx, run.TenantID, run.ID, which)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apiError{Code: 409, Msg: "the run left no evidence (state " + run.State + ")"}
	}
	if err != nil {
		return nil, storeError(err, "run")
	}
	return b, nil
}

// writeTar writes dir as a gzipped tar under prefix: regular files and
// directories only (links are not followed and not written).
func writeTar(w io.Writer, dir, prefix string) error {
	gz, _ := gzipWriters.Get().(*gzip.Writer)
	gz.Reset(w)
	defer gzipWriters.Put(gz)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := filepath.ToSlash(filepath.Join(prefix, rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: info.ModTime().Truncate(time.Second)})
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: info.Size(), ModTime: info.ModTime().Truncate(time.Second)}); err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, info.Size())
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// gzipWriters reuses the evidence tar's compressors: a new gzip.Writer
// allocates and clears most of a megabyte, which with the compression
// was about a millisecond of CPU per run (docs/server.md, "Figures").
// BestSpeed: the record is small, mostly JSON and signatures.
var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return gz
}}

// checkSnapshot checks a run's task snapshot against a ceiling.
func checkSnapshot(snap, ceiling []byte, maxWall time.Duration) error {
	c, err := grant.Parse(ceiling)
	if err != nil {
		return fmt.Errorf("the tenant's ceiling does not parse: %w", err)
	}
	var tc TaskConfig
	if err := decodeStrict(snap, &tc); err != nil {
		return err
	}
	_, err = parseTask(tc, c, maxWall)
	return err
}

// runWorkspace returns a tenant's run and its workspace, which exists
// once the run has started.
func (s *Server) runWorkspace(r *http.Request) (*store.Run, string, *apiError) {
	run, err := s.store.Run(r.Context(), tenantOf(r).TenantID, r.PathValue("run"))
	if err != nil {
		return nil, "", storeError(err, "run")
	}
	ws := filepath.Join(s.runDir(run.ID), "ws")
	if _, err := os.Lstat(ws); err != nil {
		return nil, "", &apiError{Code: 409, Msg: "the run has no workspace yet (state " + run.State + "); its mailbox opens when it runs"}
	}
	return run, ws, nil
}

// mailboxList returns the run's mailbox: the agent's messages and the
// replies of the tenant's users (agent/mailbox).
func (s *Server) mailboxList(w http.ResponseWriter, r *http.Request) {
	agent, op, ae := s.mailboxRead(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 200, map[string]any{"agent": agent, "operator": op})
}

// mailboxRead reads the request's run's mailbox, both senders' logs: the
// API's and the console's one path.
func (s *Server) mailboxRead(r *http.Request) (agent, op []mailbox.Message, ae *apiError) {
	_, ws, ae := s.runWorkspace(r)
	if ae != nil {
		return nil, nil, ae
	}
	agent, err := mailbox.List(ws, mailbox.FromAgent)
	if err != nil {
		return nil, nil, &apiError{Code: 409, Msg: "the run's mailbox cannot be read", Err: err}
	}
	op, err = mailbox.List(ws, mailbox.FromOperator)
	if err != nil {
		return nil, nil, &apiError{Code: 409, Msg: "the run's mailbox cannot be read", Err: err}
	}
	if agent == nil {
		agent = []mailbox.Message{}
	}
	if op == nil {
		op = []mailbox.Message{}
	}
	return agent, op, nil
}

// mailboxPost posts a user's reply to the agent. The text is the
// mailbox's (checked by mailbox.Post); it is input to the model, never
// configuration.
func (s *Server) mailboxPost(w http.ResponseWriter, r *http.Request) {
	b, ae := readBody(r)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeStrict(b, &req); err != nil {
		s.fail(w, r, &apiError{Code: 400, Msg: "mailbox: " + err.Error() + " (a message has only the member \"text\")"})
		return
	}
	m, ae := s.mailboxReply(r, req.Text)
	if ae != nil {
		s.fail(w, r, ae)
		return
	}
	writeJSON(w, 201, m)
}

// mailboxReply posts the request's user's reply to the request's run:
// the API's and the console's one path (the run must be running, the
// text is checked by mailbox.Post, the reply is audited).
func (s *Server) mailboxReply(r *http.Request, text string) (mailbox.Message, *apiError) {
	run, ws, ae := s.runWorkspace(r)
	if ae != nil {
		return mailbox.Message{}, ae
	}
	if store.Terminal(run.State) {
		return mailbox.Message{}, &apiError{Code: 409, Msg: "the run has ended (state " + run.State + "); no one reads its mailbox"}
	}
	var m mailbox.Message
	err := s.audited(r, run.TenantID, "mailbox.reply", func() map[string]any {
		return map[string]any{"run": run.ID, "seq": m.Seq, "text": text}
	}, func(context.Context) (err error) {
		m, err = mailbox.Post(ws, mailbox.FromOperator, text, time.Now())
		return err
	})
	if errors.Is(err, mailbox.ErrInvalid) {
		return mailbox.Message{}, &apiError{Code: 400, Msg: err.Error()}
	}
	if err != nil {
		return mailbox.Message{}, &apiError{Code: 409, Msg: "the message could not be posted", Err: err}
	}
	s.log.InfoContext(r.Context(), "mailbox reply", "run", run.ID, "user", tenantOf(r).UserID, "seq", m.Seq)
	return m, nil
}
