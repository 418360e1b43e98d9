package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ConsoleSession is a web console sign-in (docs/console.md): either the
// operator's (Admin, with the fingerprint of the admin key it was opened
// with) or a tenant key's (Principal).
type ConsoleSession struct {
	Admin     bool
	AdminFP   string
	Principal *Principal // nil for the operator
	ExpiresAt time.Time
}

// StartConsoleSession records a session under hash, the SHA-256 (hex) of
// its token: for the key keyID, or, when keyID is "", for the operator
// whose admin key has the fingerprint adminFP.
func (s *Store) StartConsoleSession(ctx context.Context, hash, keyID, adminFP string, expires time.Time) error {
	if len(hash) != 64 || (keyID == "") == (adminFP == "") {
		return errors.New("store: a console session needs its token's hash and exactly one of a key or the admin fingerprint")
	}
	var kid, fp any
	if keyID != "" {
		kid = keyID
	} else {
		fp = adminFP
	}
	_, err := s.exec(ctx, `INSERT INTO console_sessions (hash, key_id, admin_fp, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		hash, kid, fp, s.now().UnixNano(), expires.UnixNano())
	return err
}

// ConsoleSessionByHash returns the live session under hash: unexpired,
// unrevoked, and, for a key's session, its key unrevoked. Anything else
// is ErrUnauthorized.
func (s *Store) ConsoleSessionByHash(ctx context.Context, hash string) (*ConsoleSession, error) {
	var kid, fp, tid, uid, name, role sql.NullString
	var expires int64
	err := s.readRow(ctx, `SELECT cs.key_id, cs.admin_fp, cs.expires_at, k.tenant_id, k.user_id, u.name, u.role
		FROM console_sessions cs LEFT JOIN keys k ON k.id = cs.key_id LEFT JOIN users u ON u.id = k.user_id
		WHERE cs.hash = ? AND cs.revoked_at IS NULL AND cs.expires_at > ?
		AND (cs.key_id IS NULL OR k.revoked_at IS NULL)`, hash, s.now().UnixNano()).Scan(&kid, &fp, &expires, &tid, &uid, &name, &role)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, err
	}
	cs := &ConsoleSession{ExpiresAt: time.Unix(0, expires).UTC()}
	switch {
	case kid.Valid && tid.Valid:
		cs.Principal = &Principal{TenantID: tid.String, KeyID: kid.String, UserID: uid.String, UserName: name.String, Role: role.String}
	case !kid.Valid && fp.Valid && fp.String != "":
		cs.Admin, cs.AdminFP = true, fp.String
	default:
		return nil, fmt.Errorf("store: console session with neither a key nor the admin: %w", ErrUnauthorized)
	}
	return cs, nil
}

// EndConsoleSession revokes the session under hash; a session already
// ended (or unknown) is ErrNotFound.
func (s *Store) EndConsoleSession(ctx context.Context, hash string) error {
	n, err := s.exec(ctx, `UPDATE console_sessions SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL`, s.now().UnixNano(), hash)
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
