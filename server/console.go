package server

// The web console (docs/console.md): server-rendered HTML under
// /console/, signed in with a key, on the same route table and guard
// decisions as the API. What is particular to it lives here:
//
//   - consoleGuard authenticates by the session cookie (never a bearer
//     header; the API's guard never reads the cookie), applies the same
//     allowed() decision as the API, and on every state-changing request
//     (POST) checks the request is same-origin and carries the session's
//     CSRF token.
//   - consoleHeaders sets the CSP and the other headers on every console
//     response.
//   - render writes a page from the embedded templates, masked by the
//     redaction pool like every JSON response.
//
// Everything an agent or tenant wrote reaches a template only as a string
// html/template escapes, after visible() has replaced control characters
// with visible escapes.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cordon-dev/cordon/redact"
	"github.com/cordon-dev/cordon/store"
)

//go:embed console/templates/*.html console/static/*
var consoleFS embed.FS

// Console constants.
const (
	// ConsoleCookie names the session cookie over plain HTTP (Path
	// /console/), and ConsoleCookieTLS over TLS (Path /, Secure, no
	// Domain: the __Host- prefix makes a browser refuse it from any other
	// host, so a sibling host cannot set or shadow it). The API never
	// reads a cookie, so a cookie sent to /v1/ opens nothing there.
	ConsoleCookie    = "cordon_console"
	ConsoleCookieTLS = "__Host-cordon_console"
	// ConsoleHSTS is the Strict-Transport-Security of every console
	// response served over TLS.
	ConsoleHSTS = "max-age=31536000"
	// ConsoleSessionTTL is how long a sign-in lasts.
	ConsoleSessionTTL = 12 * time.Hour
	// ConsoleCSP is the Content-Security-Policy of every console response.
	ConsoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

// consoleTemplates is one template set per page: layout.html and the
// shared partials (_*.html) with the page's file. Every other file in
// console/templates is a page, named by its file name. Parsed on first
// use (nothing is built at package initialisation).
var consoleTemplates = sync.OnceValue(func() map[string]*template.Template {
	funcs := template.FuncMap{"visible": visible, "age": ageOf}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(consoleFS, "console/templates/layout.html", "console/templates/_*.html"))
	names, err := fs.Glob(consoleFS, "console/templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" || strings.HasPrefix(base, "_") {
			continue
		}
		out[base] = template.Must(template.Must(layout.Clone()).ParseFS(consoleFS, n))
	}
	return out
})

// consoleTable is the console's routes, appended to the API's in table().
// Their guards are the API's; consoleGuard applies them by cookie.
func (s *Server) consoleTable() []Route {
	return []Route{
		{"GET", "/console/login", GuardPublic, s.consoleLoginPage},
		{"POST", "/console/login", GuardPublic, s.consoleLogin},
		{"POST", "/console/logout", GuardTenantOrAdmin, s.consoleLogout},
		{"POST", "/console/logout-all", GuardTenantOrAdmin, s.consoleLogoutAll},
		{"GET", "/console/static/{file}", GuardPublic, s.consoleStatic},
		{"GET", "/console/runs", GuardTenant, s.consoleRuns},
		{"GET", "/console/runs/{run}", GuardTenant, s.consoleRunPage},
		{"GET", "/console/runs/{run}/events", GuardTenant, s.consoleRunEvents},
		{"GET", "/console/runs/{run}/journal", GuardTenant, s.consoleJournal},
		{"GET", "/console/runs/{run}/evidence", GuardTenant, s.consoleEvidence},
		{"GET", "/console/approvals", GuardUser, s.consoleApprovals},
		{"POST", "/console/runs/{run}/approve", GuardApprover, s.consoleApprove},
		{"POST", "/console/runs/{run}/reject", GuardApprover, s.consoleReject},
		{"POST", "/console/runs/{run}/review/accept", GuardApprover, s.consoleAccept},
		{"POST", "/console/runs/{run}/review/decline", GuardApprover, s.consoleDecline},
	}
}

// consoleAdminRefusal is the operator's answer on a tenant's page.
const consoleAdminRefusal = "the operator's admin key reads no tenant's runs, journals, evidence, approvals or mailboxes (as on the API: it holds no tenant); see the audit log (/console/audit) and the admin page (/console/admin), or sign in with a tenant user's key"

// isConsole reports whether a route pattern is the console's.
func isConsole(pattern string) bool { return strings.HasPrefix(pattern, "/console/") }

// consoleHeaders sets the headers every console response carries, and
// under TLS Strict-Transport-Security.
func consoleHeaders(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", ConsoleHSTS)
	}
	h.Set("Content-Security-Policy", ConsoleCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// consoleSession is the signed-in session a console request carries.
type consoleSession struct {
	hash string // the token's SHA-256, hex: the store's key
	csrf string // the session's CSRF token
}

type consoleCtxKey struct{}

// consoleSessionFrom returns the request's console session (nil on a
// public route).
func consoleSessionFrom(ctx context.Context) *consoleSession {
	cs, _ := ctx.Value(consoleCtxKey{}).(*consoleSession)
	return cs
}

// csrfFor derives a session's CSRF token from its token: nothing more is
// stored, and it cannot be computed without the cookie.
func csrfFor(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("cordon console csrf v1"))
	return hex.EncodeToString(m.Sum(nil))
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// adminFP is the fingerprint of the admin key a session of the operator
// records: a session outlives no change of the admin key.
func (s *Server) adminFP() string {
	h := sha256.Sum256(append([]byte("cordon console admin v1\x00"), s.adminHash[:]...))
	return hex.EncodeToString(h[:])
}

// consoleAuthenticate resolves the session cookie to its principal.
// It returns errNoCredential when there is no cookie, and
// store.ErrUnauthorized when the session is unknown, expired, ended,
// or its key (or the admin key it was opened with) is no longer valid.
func (s *Server) consoleAuthenticate(r *http.Request) (*principal, *consoleSession, error) {
	c, err := sessionCookieOf(r)
	if err != nil {
		return nil, nil, err
	}
	if len(c.Value) != 64 || strings.Trim(c.Value, "0123456789abcdef") != "" {
		return nil, nil, store.ErrUnauthorized
	}
	h := tokenHash(c.Value)
	cs, err := s.store.ConsoleSessionByHash(r.Context(), h)
	if err != nil {
		return nil, nil, err
	}
	sess := &consoleSession{hash: h, csrf: csrfFor(c.Value)}
	if cs.Admin {
		if subtle.ConstantTimeCompare([]byte(cs.AdminFP), []byte(s.adminFP())) != 1 {
			return nil, nil, store.ErrUnauthorized
		}
		return &principal{admin: true}, sess, nil
	}
	return &principal{p: cs.Principal}, sess, nil
}

// consoleCookieName is the session cookie's name on r's transport.
func consoleCookieName(r *http.Request) string {
	if r.TLS != nil {
		return ConsoleCookieTLS
	}
	return ConsoleCookie
}

// sessionCookieOf is the request's one session cookie (of the name its
// transport uses: under TLS a plain cordon_console, which any sibling
// host may set, is never read). No cookie is errNoCredential; more than
// one (cookie tossing: another host's, sent first for a longer path) is
// store.ErrUnauthorized, so the request is treated as signed out and the
// cookie cleared: the server never guesses which is the user's.
func sessionCookieOf(r *http.Request) (*http.Cookie, error) {
	var found *http.Cookie
	for _, c := range r.CookiesNamed(consoleCookieName(r)) {
		if found != nil {
			return nil, store.ErrUnauthorized
		}
		found = c
	}
	if found == nil || found.Value == "" {
		return nil, errNoCredential
	}
	return found, nil
}

// sameOrigin reports whether a state-changing request comes from the
// console's own pages: Sec-Fetch-Site, when the browser sends it, must be
// same-origin, and Origin, when sent, must name this host. A request with
// neither is refused: every browser the console supports sends at least
// one on a POST.
func sameOrigin(r *http.Request) bool {
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	if site == "" && origin == "" {
		return false
	}
	if site != "" && site != "same-origin" {
		return false
	}
	// A page served with Referrer-Policy: no-referrer (every console
	// page) makes the browser send "Origin: null" on its form posts; the
	// browser's own Sec-Fetch-Site (a header no page can set) then
	// decides. "null" without it is refused below.
	if origin != "" && (origin != "null" || site != "same-origin") {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || u.Host != r.Host {
			return false
		}
	}
	return true
}

// checkCSRF is the console's CSRF decision for a POST: "" when it may
// pass, else why not. Public POSTs (the sign-in) have no session and are
// checked for origin only.
func checkCSRF(r *http.Request, sess *consoleSession) string {
	if !sameOrigin(r) {
		return "this request did not come from the console's own pages (Origin / Sec-Fetch-Site); reload the page and try again"
	}
	if sess == nil {
		return ""
	}
	got := r.PostFormValue("csrf")
	if subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
		return "the form's CSRF token is missing or wrong; reload the page and try again"
	}
	return ""
}

// consoleGuard wraps a console handler in the named guard: the session
// cookie, the same allowed() decision as the API's guard, and on a POST
// the CSRF check. It never reads an Authorization header.
func (s *Server) consoleGuard(name string, h http.HandlerFunc) http.HandlerFunc {
	if TierOf(name) == "" {
		panic("server: unknown guard " + name)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w, r)
		if name == GuardPublic {
			if r.Method == http.MethodPost {
				if msg := checkCSRF(r, nil); msg != "" {
					s.consoleFail(w, r, &apiError{Code: 403, Msg: msg})
					return
				}
			}
			h(w, r)
			return
		}
		p, sess, err := s.consoleAuthenticate(r)
		switch {
		case errors.Is(err, errNoCredential), errors.Is(err, store.ErrUnauthorized):
			if errors.Is(err, store.ErrUnauthorized) {
				http.SetCookie(w, s.clearCookie(r))
			}
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/events") {
				http.Redirect(w, r, "/console/login", http.StatusSeeOther)
				return
			}
			s.consoleFail(w, r, &apiError{Code: 401, Msg: "sign in to the console first (your session ended or expired)"})
			return
		case err != nil:
			s.consoleFail(w, r, &apiError{Code: 503, Msg: "cannot check the session now", Err: err})
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), ctxKey{}, p), consoleCtxKey{}, sess)
		r = r.WithContext(ctx)
		if msg := allowed(name, p, r); msg != "" {
			if p.admin {
				// as on the API: the admin key holds no tenant and reads
				// no tenant's runs, mailboxes or approvals
				msg = consoleAdminRefusal
			}
			s.consoleFail(w, r, &apiError{Code: 403, Msg: strings.Replace(msg, "this route needs", "this page needs", 1)})
			return
		}
		if r.Method == http.MethodPost {
			if msg := checkCSRF(r, sess); msg != "" {
				s.consoleFail(w, r, &apiError{Code: 403, Msg: msg})
				return
			}
		}
		h(w, r)
	}
}

// consoleNotFound answers a /console/ path no route serves.
func (s *Server) consoleNotFound(w http.ResponseWriter, r *http.Request) {
	consoleHeaders(w, r)
	if r.URL.Path == "/console/" && r.Method == http.MethodGet {
		http.Redirect(w, r, "/console/runs", http.StatusSeeOther) // which sends to sign in, if need be
		return
	}
	s.consoleFail(w, r, &apiError{Code: 404, Msg: "no such console page"})
}

// consolePage is what every page's template gets.
type consolePage struct {
	Title string
	Nav   string // the nav link to mark current
	Who   string // the signed-in identity ("" on the sign-in page)
	Admin bool
	User  bool // a tenant's user (may see approvals)
	CSRF  string
	Error string
	Code  int
	Page  any // the page's own data
}

// render writes the page name (a file in console/templates) with its
// data, status code (0: 200), title and the nav link to mark ("runs",
// "approvals", "audit", "admin"). The HTML is masked by the redaction
// pool as every JSON response is (a pool that fails withholds the page).
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name, title, nav string, data any) {
	s.renderPage(w, r, code, name, consolePage{Title: title, Nav: nav, Page: data}, false)
}

// renderPage renders pg with the page's template. reveal skips the
// pool's masking: only for a credential issued to its caller (a new key,
// shown once to the operator who made it), which the pool's key shape
// would mask; every other page passes false (render does).
func (s *Server) renderPage(w http.ResponseWriter, r *http.Request, code int, name string, pg consolePage, reveal bool) {
	consoleHeaders(w, r)
	t, ok := consoleTemplates()[name]
	if !ok {
		panic("server: no console template " + name) // a programming error
	}
	if p := principalFrom(r.Context()); p != nil {
		pg.Admin = p.admin
		switch {
		case p.admin:
			pg.Who = "operator (admin key)"
		case p.p != nil:
			pg.User = p.p.UserID != ""
			pg.Who = fmt.Sprintf("%s (%s) · tenant %s", visible(p.p.UserName), p.p.Role, p.p.TenantID)
		}
	}
	if sess := consoleSessionFrom(r.Context()); sess != nil {
		pg.CSRF = sess.csrf
	}
	if code == 0 {
		code = 200
	}
	pg.Code = code
	pool := s.Pool()
	if !reveal {
		// Every string is masked before it is escaped (a secret holding
		// '&' or '<' would not be found in the escaped page), and the page
		// again after (the shapes, across the template's own text).
		v := reflect.ValueOf(&pg).Elem()
		if err := maskStrings(pool, v); err != nil {
			s.withheldPage(w)
			return
		}
		pg = v.Interface().(consolePage)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", pg); err != nil {
		s.log.ErrorContext(r.Context(), "console template", "page", name, "err", err.Error())
		http.Error(w, "internal error", 500)
		return
	}
	out := buf.String()
	if !reveal {
		m, err := pool.String(out)
		if err != nil {
			s.withheldPage(w)
			return
		}
		out = m
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write([]byte(out))
}

func (s *Server) withheldPage(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(500)
	w.Write([]byte("the page was withheld: the operator configured secrets to mask, but none resolved (redaction pool empty); fix the server's --secrets configuration\n"))
}

// maskStrings masks, in place, every string v holds (v must be
// settable): in structs' exported fields, pointers, slices, arrays,
// interfaces and maps of strings. A value it cannot reach into (an
// unexported field, a time) holds nothing a run wrote.
func maskStrings(p *redact.Pool, v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			m, err := p.String(v.String())
			if err != nil {
				return err
			}
			v.SetString(m)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			return maskStrings(p, v.Elem())
		}
	case reflect.Interface:
		if !v.IsNil() && v.CanSet() {
			c := reflect.New(v.Elem().Type()).Elem()
			c.Set(v.Elem())
			if err := maskStrings(p, c); err != nil {
				return err
			}
			v.Set(c)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				if err := maskStrings(p, v.Field(i)); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := maskStrings(p, v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.String && v.Type().Key().Kind() == reflect.String {
			for _, k := range v.MapKeys() {
				m, err := p.String(v.MapIndex(k).String())
				if err != nil {
					return err
				}
				v.SetMapIndex(k, reflect.ValueOf(m).Convert(v.Type().Elem()))
			}
		}
	}
	return nil
}

// consoleFail renders an error page: the API's safe message, the detail
// only to the log.
func (s *Server) consoleFail(w http.ResponseWriter, r *http.Request, e *apiError) {
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", e.Code, "reason", e.Msg}
	if e.Err != nil {
		attrs = append(attrs, "err", e.Err.Error())
	}
	s.log.InfoContext(r.Context(), "console request refused", attrs...)
	msg := e.Msg
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	s.renderPage(w, r, e.Code, "error.html", consolePage{Title: "Error", Error: visible(msg)}, false)
}

// visible makes text safe to show as text: it must still go through
// html/template (which escapes markup); visible replaces what escaping
// leaves dangerous on a terminal or invisible on a page, each shown as a
// visible escape:
//
//   - every C0 and C1 control character except newline and tab, DEL, and
//     invalid UTF-8 (\x1b, \x7f, \xff);
//   - every invisible character a browser renders as nothing while a
//     model (or a terminal) reads it: Unicode category Cf (format
//     characters: the bidirectional controls and marks, zero-width space,
//     joiner and non-joiner, word joiner, BOM, soft hyphen, the tag
//     characters U+E0001 and U+E0020–E007F, ...), Variation_Selector
//     (U+180B–180D, U+180F, U+FE00–FE0F, U+E0100–E01EF) and
//     Other_Default_Ignorable_Code_Point (the Hangul fillers U+115F,
//     U+1160, U+3164, U+FFA0, U+034F, the unassigned rest of the tag
//     block, ...): together the Unicode default-ignorable set, from Go's
//     unicode tables. A BMP one is shown as \u200b, one above it as
//     \U000e0049.
//
// An emoji built with a zero-width joiner is therefore shown as its parts
// and the escape: the price of no hidden text.
func visible(s string) string {
	clean := true
	for _, c := range s {
		if c == utf8.RuneError || isControl(c) && c != '\t' || invisible(c) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case c == '\t' || c == '\n':
			b.WriteRune(c)
		case c < 0x80 && isControl(c), c == '\r':
			fmt.Fprintf(&b, `\x%02x`, c)
		case c > 0xffff && invisible(c):
			fmt.Fprintf(&b, `\U%08x`, c)
		case isControl(c), invisible(c):
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// invisible reports the characters visible() escapes besides the
// controls: format characters (Cf, which holds the bidirectional
// controls), variation selectors and the other default-ignorable code
// points.
func invisible(c rune) bool {
	return c >= 0x80 && (unicode.Is(unicode.Cf, c) || unicode.Is(unicode.Variation_Selector, c) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, c))
}

// ageOf is a duration since t, coarsely.
func ageOf(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// --- sign-in ---

type loginPage struct{ Message string }

func (s *Server) consoleLoginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, 200, "login.html", "Sign in", "", loginPage{})
}

// sessionCookie is the session cookie: HttpOnly, SameSite=Strict; over
// plain HTTP cordon_console scoped to /console/; over TLS
// __Host-cordon_console, Secure, Path=/ (the prefix requires both).
func (s *Server) sessionCookie(r *http.Request, token string) *http.Cookie {
	c := &http.Cookie{Name: ConsoleCookie, Value: token, Path: "/console/", MaxAge: int(ConsoleSessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if r.TLS != nil {
		c.Name, c.Path, c.Secure = ConsoleCookieTLS, "/", true
	}
	return c
}

func (s *Server) clearCookie(r *http.Request) *http.Cookie {
	c := s.sessionCookie(r, "")
	c.MaxAge = -1
	return c
}

// consoleLogin signs in with a user's key or the admin key. A failed
// sign-in is audited as the API's failed authentications are.
func (s *Server) consoleLogin(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSpace(r.PostFormValue("key"))
	refuse := func(code int, msg string) {
		s.render(w, r, code, "login.html", "Sign in", "", loginPage{Message: msg})
	}
	if key == "" {
		refuse(400, "enter a key: a user's key (cdn_…) or the operator's admin key")
		return
	}
	var keyID, fp string
	h := sha256.Sum256([]byte(key))
	switch {
	case subtle.ConstantTimeCompare(h[:], s.adminHash[:]) == 1:
		fp = s.adminFP()
	case strings.HasPrefix(key, store.KeyPrefix):
		p, err := s.store.Authenticate(r.Context(), key)
		if errors.Is(err, store.ErrUnauthorized) {
			s.auditAuthFailure(r, "console sign-in: unknown or revoked key")
			refuse(401, "unknown or revoked key")
			return
		}
		if err != nil {
			s.consoleFail(w, r, &apiError{Code: 503, Msg: "cannot check the key now", Err: err})
			return
		}
		if p.UserID == "" {
			s.auditAuthFailure(r, "console sign-in: a bare tenant key")
			refuse(403, "a bare tenant key names no user: sign in with a user's key")
			return
		}
		keyID = p.KeyID
	default:
		s.auditAuthFailure(r, "console sign-in: unknown or revoked key")
		refuse(401, "unknown or revoked key")
		return
	}
	var raw [32]byte
	rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	if err := s.store.StartConsoleSession(r.Context(), tokenHash(token), keyID, fp, time.Now().Add(ConsoleSessionTTL)); err != nil {
		s.consoleFail(w, r, &apiError{Code: 503, Msg: "cannot start a session now", Err: err})
		return
	}
	http.SetCookie(w, s.sessionCookie(r, token))
	if keyID == "" {
		http.Redirect(w, r, "/console/audit", http.StatusSeeOther) // the operator reads no runs
		return
	}
	http.Redirect(w, r, "/console/runs", http.StatusSeeOther)
}

// consoleLogout ends the session and returns to the sign-in page.
func (s *Server) consoleLogout(w http.ResponseWriter, r *http.Request) {
	sess := consoleSessionFrom(r.Context())
	if err := s.store.EndConsoleSession(r.Context(), sess.hash); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.consoleFail(w, r, &apiError{Code: 503, Msg: "cannot end the session now", Err: err})
		return
	}
	http.SetCookie(w, s.clearCookie(r))
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// consoleLogoutAll ends every session of the caller's key (or of the
// admin key), this one included: "sign out everywhere", for a lost
// laptop's cookie without revoking the key.
func (s *Server) consoleLogoutAll(w http.ResponseWriter, r *http.Request) {
	sess := consoleSessionFrom(r.Context())
	if _, err := s.store.EndConsoleSessionsOf(r.Context(), sess.hash); err != nil {
		s.consoleFail(w, r, &apiError{Code: 503, Msg: "cannot end the sessions now", Err: err})
		return
	}
	http.SetCookie(w, s.clearCookie(r))
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// consoleStatic serves the embedded stylesheet and script.
func (s *Server) consoleStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	var ctype string
	switch path.Ext(name) {
	case ".css":
		ctype = "text/css; charset=utf-8"
	case ".js":
		ctype = "text/javascript; charset=utf-8"
	}
	b, err := consoleFS.ReadFile("console/static/" + name)
	if ctype == "" || err != nil || strings.ContainsAny(name, "/\\") {
		s.consoleFail(w, r, &apiError{Code: 404, Msg: "no such file"})
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Write(b)
}
