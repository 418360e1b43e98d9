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

// MaxConsoleSessions is how many live console sessions one key (or the
// admin key) holds: a sign-in past it ends the oldest.
const MaxConsoleSessions = 16

// StartConsoleSession records a session under hash, the SHA-256 (hex) of
// its token: for the key keyID, or, when keyID is "", for the operator
// whose admin key has the fingerprint adminFP. It first purges every
// session row that has expired or ended (of any key), and after the
// insert ends (deletes) the key's oldest live sessions past
// MaxConsoleSessions.
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
	now := s.now().UnixNano()
	if _, err := s.exec(ctx, `DELETE FROM console_sessions WHERE expires_at <= ? OR revoked_at IS NOT NULL`, now); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `INSERT INTO console_sessions (hash, key_id, admin_fp, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		hash, kid, fp, now, expires.UnixNano()); err != nil {
		return err
	}
	col, who := "key_id", keyID
	if keyID == "" {
		col, who = "admin_fp", adminFP
	}
	_, err := s.exec(ctx, `DELETE FROM console_sessions WHERE `+col+` = ? AND hash NOT IN
		(SELECT hash FROM console_sessions WHERE `+col+` = ? ORDER BY created_at DESC, hash LIMIT ?)`, who, who, MaxConsoleSessions)
	return err
}

// EndConsoleSessionsOf ends every live session of the key (or the admin
// key) the session under hash was opened with, that one included, and
// returns how many it ended; an unknown hash ends none.
func (s *Store) EndConsoleSessionsOf(ctx context.Context, hash string) (int64, error) {
	return s.exec(ctx, `UPDATE console_sessions SET revoked_at = ? WHERE revoked_at IS NULL AND (
		key_id = (SELECT key_id FROM console_sessions WHERE hash = ?) OR
		admin_fp = (SELECT admin_fp FROM console_sessions WHERE hash = ? AND key_id IS NULL))`, s.now().UnixNano(), hash, hash)
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
