package server

// The console's mailbox, audit and admin pages (docs/console.md). Each
// calls the same function as its API route (mailboxRead/mailboxReply,
// auditExportFor, newTenant/newKey/revokeTenantKey): the console adds
// pages and forms, never rules of its own.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/cordon-dev/cordon/evidence/audit"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/store"
)

// consolePagesTable is the mailbox, audit and admin routes, appended to
// consoleTable's in table(). The guards are the API routes' (the mailbox
// is read by a tenant's users, as GET /v1/runs/{run}/mailbox is by a
// tenant's keys: a console session is always a user's or the admin's).
func (s *Server) consolePagesTable() []Route {
	return []Route{
		{"GET", "/console/runs/{run}/mailbox", GuardTenant, s.consoleMailbox},
		{"POST", "/console/runs/{run}/mailbox", GuardUser, s.consoleMailboxReply},
		{"GET", "/console/audit", GuardTenantOrAdmin, s.consoleAudit},
		{"GET", "/console/audit/export", GuardTenantOrAdmin, s.consoleAuditExport},
		{"GET", "/console/admin", GuardAdmin, s.consoleAdmin},
		{"POST", "/console/admin/tenants", GuardAdmin, s.consoleCreateTenant},
		{"POST", "/console/admin/tenants/{tenant}/keys", GuardAdmin, s.consoleCreateKey},
		{"POST", "/console/admin/tenants/{tenant}/keys/{key}/revoke", GuardAdmin, s.consoleRevokeKey},
	}
}

// --- mailbox ---

type mailboxMsg struct {
	Seq  int64
	Time string
	From string // "agent" or "operator"
	Text string // visible()
}

type mailboxPage struct {
	Run      string
	Messages []mailboxMsg
	Open     bool   // the run is not terminal: a reply can be posted
	Posted   bool   // the reply just posted
	Message  string // why a reply was refused
}

func (s *Server) consoleMailbox(w http.ResponseWriter, r *http.Request) {
	s.renderMailbox(w, r, 200, mailboxPage{Posted: r.URL.Query().Get("posted") == "1"})
}

func (s *Server) renderMailbox(w http.ResponseWriter, r *http.Request, code int, pg mailboxPage) {
	id := r.PathValue("run")
	agent, op, ae := s.mailboxRead(r)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	run, err := s.store.Run(r.Context(), tenantOf(r).TenantID, id)
	if err != nil {
		s.consoleFail(w, r, storeError(err, "run"))
		return
	}
	pg.Run, pg.Open = run.ID, !store.Terminal(run.State)
	for _, m := range append(agent, op...) {
		pg.Messages = append(pg.Messages, mailboxMsg{Seq: m.Seq, Time: m.Time, From: m.From, Text: visible(m.Text)})
	}
	// Both logs in time order; a sender's own order breaks ties.
	sort.SliceStable(pg.Messages, func(i, j int) bool { return pg.Messages[i].Time < pg.Messages[j].Time })
	s.render(w, r, code, "mailbox.html", "Mailbox", "runs", pg)
}

// consoleMailboxReply posts the form's reply through the API's path and
// shows the mailbox again (a redirect: reloading does not post twice).
func (s *Server) consoleMailboxReply(w http.ResponseWriter, r *http.Request) {
	text := r.PostFormValue("text")
	// A browser's textarea sends CRLF line ends; the mailbox's text takes
	// newlines only.
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if _, ae := s.mailboxReply(r, text); ae != nil {
		if ae.Code >= 500 || ae.Code == 404 {
			s.consoleFail(w, r, ae)
			return
		}
		s.renderMailbox(w, r, ae.Code, mailboxPage{Message: visible(ae.Msg)})
		return
	}
	http.Redirect(w, r, "/console/runs/"+url.PathEscape(r.PathValue("run"))+"/mailbox?posted=1", http.StatusSeeOther)
}

// --- audit ---

type auditRow struct {
	Seq     uint64
	At      string
	Event   string
	Tenant  string
	Actor   string
	Subject string
}

type auditPage struct {
	Chain    string // "verified: …" or the failure
	Verified bool
	Count    int
	Rows     []auditRow
	Action   string // the filter's values
	ActorQ   string
	Shown    int
}

// consoleAudit shows the principal's audit log: the export the API would
// give them, verified here with the same verifier `cordon verify audit`
// uses against the server's audit key, then the records they may read,
// filtered by action and actor.
func (s *Server) consoleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pg := auditPage{Action: strings.TrimSpace(q.Get("action")), ActorQ: strings.TrimSpace(q.Get("actor"))}
	export, ae := s.auditExportFor(r)
	if ae != nil {
		// The log does not rebuild in the database (or the pool fails):
		// the page says so in place of the records.
		pg.Chain = "not verified: " + ae.Msg
		s.render(w, r, 200, "audit.html", "Audit", "audit", pg)
		return
	}
	recs, err := audit.Verify(export, s.auditKey().Public())
	if err != nil {
		pg.Chain = "not verified: " + err.Error()
		s.render(w, r, 200, "audit.html", "Audit", "audit", pg)
		return
	}
	pg.Verified, pg.Count = true, len(recs)
	pg.Chain = "verified: " + strconv.Itoa(len(recs)) + " records, the head signed by the audit key " + s.auditKey().Public().ID().String()
	for _, rec := range recs {
		row, ok := auditRowOf(rec)
		if !ok {
			continue // another tenant's record: every leaf masked
		}
		if pg.Action != "" && !strings.Contains(row.Event, pg.Action) || pg.ActorQ != "" && !strings.Contains(row.Actor, pg.ActorQ) {
			continue
		}
		pg.Rows = append(pg.Rows, row)
	}
	pg.Shown = len(pg.Rows)
	// Newest first.
	for i, j := 0, len(pg.Rows)-1; i < j; i, j = i+1, j-1 {
		pg.Rows[i], pg.Rows[j] = pg.Rows[j], pg.Rows[i]
	}
	s.render(w, r, 200, "audit.html", "Audit", "audit", pg)
}

// auditRowOf reads a verified record's revealed leaves; ok is false for
// a record whose event is masked (out of the reader's scope).
func auditRowOf(rec audit.Exported) (auditRow, bool) {
	str := func(path ...any) string {
		p, _ := json.Marshal(path)
		v, ok := rec.Revealed[string(p)]
		if !ok {
			return ""
		}
		if v.Kind() == canon.KindString {
			return visible(v.Str())
		}
		return visible(string(v.AppendJCS(nil)))
	}
	ev := str("event")
	if ev == "" {
		return auditRow{}, false
	}
	row := auditRow{Seq: rec.Seq, At: str("at"), Event: ev, Tenant: str("tenant")}
	actor := str("actor", "kind")
	for _, k := range []string{"user", "key", "worker", "remote"} {
		if v := str("actor", k); v != "" {
			actor += " " + k + "=" + v
		}
	}
	row.Actor = actor
	// The subject's revealed leaves, as path=value, in path order.
	var subj []string
	prefix := `["subject",`
	for p := range rec.Revealed {
		if strings.HasPrefix(p, prefix) {
			subj = append(subj, p)
		}
	}
	sort.Strings(subj)
	var b strings.Builder
	for i, p := range subj {
		if i > 0 {
			b.WriteString(" · ")
		}
		var path []any
		json.Unmarshal([]byte(p), &path)
		var names []string
		for _, el := range path[1:] {
			b, _ := json.Marshal(el)
			names = append(names, strings.Trim(string(b), `"`))
		}
		v := rec.Revealed[p]
		val := string(v.AppendJCS(nil))
		if v.Kind() == canon.KindString {
			val = v.Str()
		}
		b.WriteString(strings.Join(names, ".") + "=" + visible(val))
	}
	row.Subject = b.String()
	return row, true
}

// consoleAuditExport is the API's export, byte for byte, for the
// session's principal.
func (s *Server) consoleAuditExport(w http.ResponseWriter, r *http.Request) {
	export, ae := s.auditExportFor(r)
	if ae != nil {
		s.consoleFail(w, r, ae)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="audit.jsonl"`)
	w.Write(export)
}

// --- admin ---

type adminTenant struct {
	ID, Name string
	Selected bool
}

type adminKey struct {
	ID, User, Hint, Created string
	Revoked                 string // "" while valid
}

type adminProject struct {
	Name, Updated, UpdatedBy string
}

type adminPage struct {
	Tenants  []adminTenant
	Tenant   *store.Tenant // the selected tenant, or nil
	Ceiling  string        // its ceiling, indented
	Keys     []adminKey
	Projects []adminProject
	NewKey   string // a key just created: shown on this response only
	NewKeyID string
	Message  string // why a form was refused
	Created  string // a tenant just created
}

func (s *Server) consoleAdmin(w http.ResponseWriter, r *http.Request) {
	s.renderAdmin(w, r, 200, r.URL.Query().Get("tenant"), adminPage{Created: r.URL.Query().Get("created")})
}

// renderAdmin renders the admin page with tenant selected ("" none).
func (s *Server) renderAdmin(w http.ResponseWriter, r *http.Request, code int, tenant string, pg adminPage) {
	ctx := r.Context()
	ts, err := s.store.Tenants(ctx)
	if err != nil {
		s.consoleFail(w, r, storeError(err, "tenant"))
		return
	}
	for _, t := range ts {
		pg.Tenants = append(pg.Tenants, adminTenant{ID: t.ID, Name: t.Name, Selected: t.ID == tenant})
		if t.ID == tenant {
			pg.Tenant = t
		}
	}
	if tenant != "" && pg.Tenant == nil {
		s.consoleFail(w, r, &apiError{Code: 404, Msg: "no such tenant"})
		return
	}
	if pg.Tenant != nil {
		var ind bytes.Buffer
		if json.Indent(&ind, pg.Tenant.Ceiling, "", "  ") == nil {
			pg.Ceiling = visible(ind.String())
		} else {
			pg.Ceiling = visible(string(pg.Tenant.Ceiling))
		}
		ks, err := s.store.Keys(ctx, tenant)
		if err != nil {
			s.consoleFail(w, r, storeError(err, "tenant"))
			return
		}
		for _, k := range ks {
			ak := adminKey{ID: k.ID, User: k.UserID, Hint: k.Hint, Created: k.CreatedAt.UTC().Format("2006-01-02 15:04:05Z")}
			if k.RevokedAt != nil {
				ak.Revoked = k.RevokedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			pg.Keys = append(pg.Keys, ak)
		}
		ps, err := s.store.Projects(ctx, tenant)
		if err != nil {
			s.consoleFail(w, r, storeError(err, "project"))
			return
		}
		for _, p := range ps {
			pg.Projects = append(pg.Projects, adminProject{Name: visible(p.Name), Updated: p.UpdatedAt.UTC().Format("2006-01-02 15:04:05Z"), UpdatedBy: p.UpdatedBy})
		}
	}
	s.render(w, r, code, "admin.html", "Admin", "admin", pg)
}

func (s *Server) consoleCreateTenant(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	ceiling := []byte(strings.TrimSpace(r.PostFormValue("ceiling")))
	t, ae := s.newTenant(r, name, ceiling)
	if ae != nil {
		if ae.Code >= 500 {
			s.consoleFail(w, r, ae)
			return
		}
		s.renderAdmin(w, r, ae.Code, "", adminPage{Message: visible(ae.Msg)})
		return
	}
	http.Redirect(w, r, "/console/admin?tenant="+url.QueryEscape(t.ID)+"&created=1", http.StatusSeeOther)
}

// consoleCreateKey makes a key and shows it on this response only: the
// page it renders is not a redirect target, and GET /console/admin never
// shows a secret (the store has only its hash).
func (s *Server) consoleCreateKey(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	k, secret, ae := s.newKey(r, tenant, strings.TrimSpace(r.PostFormValue("user")))
	if ae != nil {
		if ae.Code >= 500 {
			s.consoleFail(w, r, ae)
			return
		}
		s.renderAdmin(w, r, ae.Code, "", adminPage{Message: visible(ae.Msg)})
		return
	}
	t, err := s.store.Tenant(r.Context(), tenant)
	if err != nil {
		s.consoleFail(w, r, storeError(err, "tenant"))
		return
	}
	// The one response that carries a credential, unmasked: the redaction
	// pool would mask it (it has a key's shape), and it is the operator's
	// own, made by this request. The page holds nothing else a tenant
	// wrote (no key or project lists), so nothing else escapes the pool.
	s.renderPage(w, r, 201, "admin.html", consolePage{Title: "Admin", Nav: "admin", Page: adminPage{Tenant: t, NewKey: secret, NewKeyID: k.ID}}, true)
}

func (s *Server) consoleRevokeKey(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	if ae := s.revokeTenantKey(r, tenant, r.PathValue("key")); ae != nil {
		if ae.Code >= 500 {
			s.consoleFail(w, r, ae)
			return
		}
		s.renderAdmin(w, r, ae.Code, "", adminPage{Message: visible(ae.Msg)})
		return
	}
	http.Redirect(w, r, "/console/admin?tenant="+url.QueryEscape(tenant), http.StatusSeeOther)
}
