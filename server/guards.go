package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/cordon-dev/cordon/store"
)

// Guard names, and the tier each implies (docs/security/authz-surface.json).
// A guard establishes identity and the least role a route needs; the
// authorization surface bounds what that identity may do.
const (
	// GuardPublic lets anyone in: no credential is read.
	GuardPublic = "public"
	// GuardTenant needs any unrevoked key of a tenant: a bare tenant
	// key or a user's key. Everything it reaches is that tenant's.
	GuardTenant = "tenant"
	// GuardUser needs a user's key (member or approver).
	GuardUser = "user"
	// GuardApprover needs the key of a user with the approver role.
	GuardApprover = "approver"
	// GuardAdmin needs the operator's admin key.
	GuardAdmin = "admin"
	// GuardTenantOrAdmin needs a tenant's key (whose reach is its own
	// tenant) or the operator's admin key (whose reach is every tenant):
	// the audit export, which each scopes to what it may see.
	GuardTenantOrAdmin = "tenant-or-admin"
	// GuardExplicitAdmin needs the admin key and the header
	// ExplicitHeader: an operator action that widens what tenants may
	// run is never one request away from a leaked admin key in a script.
	GuardExplicitAdmin = "explicit-admin"
)

// ExplicitHeader must be "1" on a request to an explicit-admin route.
const ExplicitHeader = "Cordon-Explicit-Admin"

// Tiers are ordered only in name: TierOf says which tier a guard implies,
// and Elevated which tiers are the operator's.
var guardTier = map[string]string{
	GuardPublic: "public", GuardTenant: "tenant", GuardUser: "user", GuardApprover: "approver",
	GuardAdmin: "admin", GuardExplicitAdmin: "explicit-admin", GuardTenantOrAdmin: "tenant",
}

// TierOf returns the tier a guard implies, "" for an unknown guard.
func TierOf(guard string) string { return guardTier[guard] }

// Elevated reports whether a tier is the operator's.
func Elevated(tier string) bool { return tier == "admin" || tier == "explicit-admin" }

// principal is the identity a guard established.
type principal struct {
	admin bool
	p     *store.Principal // nil for the admin and the public
}

type ctxKey struct{}

func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(ctxKey{}).(*principal)
	return p
}

// bearer is the request's bearer token, "" when none.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

var errNoCredential = errors.New("no credential")

// authenticate resolves the bearer token to the admin or a tenant's
// principal. The admin key is compared in constant time, by hash.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	tok := bearer(r)
	if tok == "" {
		return nil, errNoCredential
	}
	h := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(h[:], s.adminHash[:]) == 1 {
		return &principal{admin: true}, nil
	}
	if !strings.HasPrefix(tok, store.KeyPrefix) {
		return nil, store.ErrUnauthorized
	}
	p, err := s.store.Authenticate(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	return &principal{p: p}, nil
}

// guard wraps a handler in the named guard.
func (s *Server) guard(name string, h http.HandlerFunc) http.HandlerFunc {
	if TierOf(name) == "" {
		panic("server: unknown guard " + name) // a programming error in the route table
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if name == GuardPublic {
			h(w, r)
			return
		}
		p, err := s.authenticate(r)
		switch {
		case errors.Is(err, errNoCredential):
			s.fail(w, r, &apiError{Code: 401, Msg: "this route needs a key (Authorization: Bearer …)"})
			return
		case errors.Is(err, store.ErrUnauthorized):
			s.auditAuthFailure(r, "unknown or revoked key")
			s.fail(w, r, &apiError{Code: 401, Msg: "unknown or revoked key"})
			return
		case err != nil:
			s.fail(w, r, &apiError{Code: 503, Msg: "cannot check the key now", Err: err})
			return
		}
		if msg := allowed(name, p, r); msg != "" {
			s.fail(w, r, &apiError{Code: 403, Msg: msg})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)))
	}
}

// allowed is the guard's decision: "" when p may pass, else why not.
func allowed(guard string, p *principal, r *http.Request) string {
	switch guard {
	case GuardAdmin:
		if !p.admin {
			return "this route needs the operator's admin key"
		}
	case GuardExplicitAdmin:
		if !p.admin {
			return "this route needs the operator's admin key"
		}
		if r.Header.Get(ExplicitHeader) != "1" {
			return "this route needs the admin key and the header " + ExplicitHeader + ": 1"
		}
	case GuardTenantOrAdmin:
		if !p.admin && p.p == nil {
			return "this route needs a tenant's key or the admin key"
		}
	case GuardTenant:
		if p.admin || p.p == nil {
			return "this route needs a tenant's key; the admin key holds no tenant"
		}
	case GuardUser:
		if p.admin || p.p == nil || p.p.UserID == "" {
			return "this route needs a user's key; a bare tenant key names no user"
		}
	case GuardApprover:
		if p.admin || p.p == nil || p.p.Role != store.RoleApprover {
			return "this route needs the key of a user with the approver role"
		}
	default:
		return "unknown guard" // fail closed
	}
	return ""
}
