package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"

	"github.com/cordon-dev/cordon/evidence/audit"
	"github.com/cordon-dev/cordon/evidence/canon"
)

// The audit log (docs/SPEC.md §10, package evidence/audit): every change
// the control plane makes is recorded by Audited in the transaction that
// makes it, so a change that is not committed leaves no record and a
// committed one always has its record. Appends lock the one head row
// (FOR UPDATE on PostgreSQL; SQLite's immediate transaction holds the
// write lock), so concurrent appends form one linear chain.

var (
	// ErrAuditKey is returned when the store has no audit key, or a
	// different one from the key the chain was written with.
	ErrAuditKey = errors.New("store: audit key")
	// ErrAuditBroken is returned when a stored record does not rebuild
	// its stored chain link: the database was edited.
	ErrAuditBroken = errors.New("store: the audit log does not rebuild its stored chain")
)

// recordSecretContext derives a record's salt secret from the operator's
// audit key, the record's number and its stored nonce.
const recordSecretContext = "cordon audit v1 record secret"

// AuditEvent is one event to record. Tenant scopes it ("" for the
// operator's own events: tenants, failed authentication); Body's member
// names are chosen by the server, never by a tenant (a tenant-chosen
// name such as "token" would mask its value in exports).
type AuditEvent struct {
	Tenant string
	Body   map[string]any
}

// SetAuditKey gives the store the operator's audit key: master (32 bytes,
// never from a request) derives every record's salt secret; keyID names
// the key, and a chain written under another key is refused.
func (s *Store) SetAuditKey(master []byte, keyID string) error {
	if len(master) != 32 || keyID == "" {
		return fmt.Errorf("%w: a 32-byte key and its id are needed", ErrAuditKey)
	}
	s.auditMaster, s.auditKeyID = append([]byte(nil), master...), keyID
	return nil
}

// recordSecret is record seq's salt secret.
func (s *Store) recordSecret(seq uint64, nonce []byte) []byte {
	h, err := blake3.NewKeyed(s.auditMaster)
	if err != nil {
		panic(err) // SetAuditKey checks the size
	}
	h.Write([]byte(recordSecretContext))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	h.Write(n[:])
	h.Write(nonce)
	out := make([]byte, audit.SecretSize)
	h.Digest().Read(out)
	return out
}

type txKey struct{}

// dbtx is what a store method writes (and reads its own writes) through:
// the audited transaction in ctx, else the database.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func txFrom(ctx context.Context) *sql.Tx {
	tx, _ := ctx.Value(txKey{}).(*sql.Tx)
	return tx
}

// w is the writer for ctx: its audited transaction, or the database.
func (s *Store) w(ctx context.Context) dbtx {
	if tx := txFrom(ctx); tx != nil {
		return tx
	}
	return s.db
}

// r is the reader for ctx: its audited transaction (which must see its
// own writes, and on SQLite holds the one writer connection), or the
// read pool.
func (s *Store) r(ctx context.Context) dbtx {
	if tx := txFrom(ctx); tx != nil {
		return tx
	}
	return s.rdb
}

// begin starts a transaction, or joins the audited one in ctx: own says
// whether the caller commits it.
func (s *Store) begin(ctx context.Context) (tx *sql.Tx, own bool, err error) {
	if tx := txFrom(ctx); tx != nil {
		return tx, false, nil
	}
	tx, err = s.db.BeginTx(ctx, nil)
	return tx, true, err
}

// Audited runs change in one transaction with the append of the event
// it returns: both are committed, or neither. change uses the ctx it is
// given (the store's methods called with it join the transaction); an
// error, or a nil event (nothing changed), appends nothing. Audited
// does not nest.
func (s *Store) Audited(ctx context.Context, change func(ctx context.Context) (*AuditEvent, error)) error {
	if txFrom(ctx) != nil {
		return errors.New("store: Audited does not nest")
	}
	if s.auditMaster == nil {
		return fmt.Errorf("%w: none is set; nothing is changed unrecorded", ErrAuditKey)
	}
	// SQLite's writes queue first come, first served (stmt.go): the
	// audited transaction holds the one writer connection throughout.
	if err := s.wgate.acquire(ctx); err != nil {
		return err
	}
	defer s.wgate.release()
	// The hot reads' cache learns of the transaction's writes once it
	// has ended (hot.go): after the commit below, or after the rollback
	// deferred next (deferred calls run last first).
	pend := &pending{}
	defer pend.run()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ev, err := change(context.WithValue(context.WithValue(ctx, txKey{}, tx), pendingKey{}, pend))
	if err != nil {
		return err
	}
	if ev != nil {
		if err := s.appendAudit(ctx, tx, ev); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Audit appends an event that changes nothing else (a failed
// authentication).
func (s *Store) Audit(ctx context.Context, ev *AuditEvent) error {
	return s.Audited(ctx, func(context.Context) (*AuditEvent, error) { return ev, nil })
}

// CheckAuditKey fails when the chain was written under another audit
// key than the store's: a process that would append records whose
// salts no exporter can derive refuses to start.
func (s *Store) CheckAuditKey(ctx context.Context) error {
	var keyID string
	if err := s.rdb.QueryRowContext(ctx, `SELECT key_id FROM audit_head WHERE one = 1`).Scan(&keyID); err != nil {
		return err
	}
	if s.auditMaster == nil {
		return fmt.Errorf("%w: none is set", ErrAuditKey)
	}
	if keyID != "" && keyID != s.auditKeyID {
		return fmt.Errorf("%w: the audit log was written under key %s, this process holds %s; give it the server's audit key (--audit-key)", ErrAuditKey, keyID, s.auditKeyID)
	}
	return nil
}

func (s *Store) appendAudit(ctx context.Context, tx *sql.Tx, ev *AuditEvent) error {
	lock := ""
	if s.engine == Postgres {
		lock = " FOR UPDATE"
	}
	var count int64
	var head, keyID string
	if err := tx.QueryRowContext(ctx, `SELECT count, head, key_id FROM audit_head WHERE one = 1`+lock).Scan(&count, &head, &keyID); err != nil {
		return fmt.Errorf("store: audit head: %w", err)
	}
	if keyID != "" && keyID != s.auditKeyID {
		return fmt.Errorf("%w: the audit log was written under key %s, this process holds %s; give it the server's audit key (--audit-key)", ErrAuditKey, keyID, s.auditKeyID)
	}
	raw, err := json.Marshal(ev.Body)
	if err != nil {
		return fmt.Errorf("store: audit body: %w", err)
	}
	body, err := canon.Parse(raw)
	if err != nil {
		return fmt.Errorf("store: audit body: %w", err)
	}
	var prev canon.ID
	if count > 0 {
		if prev, err = canon.ParseID(head); err != nil {
			return fmt.Errorf("%w: the head %q: %w", ErrAuditBroken, head, err)
		}
	}
	nonce := make([]byte, 16)
	rand.Read(nonce)
	seq := uint64(count)
	rec, err := audit.New(seq, prev, s.recordSecret(seq, nonce), body)
	if err != nil {
		return err
	}
	id := rec.ID().String()
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO audit_log (seq, tenant_id, nonce, body, id, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		count, ev.Tenant, nonce, string(body.AppendJCS(nil)), id, s.now().UnixNano()); err != nil {
		return fmt.Errorf("store: audit append: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.q(`UPDATE audit_head SET count = ?, head = ?, key_id = ? WHERE one = 1 AND count = ?`), count+1, id, s.auditKeyID, count)
	if err != nil {
		return fmt.Errorf("store: audit head: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("store: audit head moved during the append (%d rows, %v)", n, err)
	}
	return nil
}

// AuditRecord is a stored record with the tenant it belongs to.
type AuditRecord struct {
	Tenant string
	Record *audit.Record
}

// AuditLog reads the chain up to the stored head and calls fn with each
// record, in order, and returns that head. Each record is rebuilt (its
// salt secret derived from the audit key) and checked against its stored
// link: a record edited in the database fails with ErrAuditBroken, so the
// head a server signs is never laundered over an edited chain.
func (s *Store) AuditLog(ctx context.Context, fn func(AuditRecord) error) (audit.Head, error) {
	if s.auditMaster == nil {
		return audit.Head{}, fmt.Errorf("%w: none is set", ErrAuditKey)
	}
	var count int64
	var head, keyID string
	if err := s.rdb.QueryRowContext(ctx, `SELECT count, head, key_id FROM audit_head WHERE one = 1`).Scan(&count, &head, &keyID); err != nil {
		return audit.Head{}, err
	}
	if keyID != "" && keyID != s.auditKeyID {
		return audit.Head{}, fmt.Errorf("%w: the audit log was written under key %s, this process holds %s", ErrAuditKey, keyID, s.auditKeyID)
	}
	// Records are appended, never changed: every one below the head read
	// above is committed.
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT seq, tenant_id, nonce, body, id FROM audit_log WHERE seq < ? ORDER BY seq`), count)
	if err != nil {
		return audit.Head{}, err
	}
	defer rows.Close()
	var prev canon.ID
	var n int64
	for rows.Next() {
		var seq int64
		var tenant, body, id string
		var nonce []byte
		if err := rows.Scan(&seq, &tenant, &nonce, &body, &id); err != nil {
			return audit.Head{}, err
		}
		if seq != n {
			return audit.Head{}, fmt.Errorf("%w: record %d is missing", ErrAuditBroken, n)
		}
		v, err := canon.Parse([]byte(body))
		if err != nil {
			return audit.Head{}, fmt.Errorf("%w: record %d: %w", ErrAuditBroken, seq, err)
		}
		rec, err := audit.New(uint64(seq), prev, s.recordSecret(uint64(seq), nonce), v)
		if err != nil {
			return audit.Head{}, fmt.Errorf("%w: record %d: %w", ErrAuditBroken, seq, err)
		}
		if got := rec.ID().String(); got != id {
			return audit.Head{}, fmt.Errorf("%w: record %d rebuilds to %s, stored as %s (edited in the database, or another audit key)", ErrAuditBroken, seq, got, id)
		}
		if err := fn(AuditRecord{Tenant: tenant, Record: rec}); err != nil {
			return audit.Head{}, err
		}
		prev = rec.ID()
		n++
	}
	if err := rows.Err(); err != nil {
		return audit.Head{}, err
	}
	if n != count || (count > 0 && prev.String() != head) {
		return audit.Head{}, fmt.Errorf("%w: %d records reach %s; the head says %d, %s", ErrAuditBroken, n, prev, count, head)
	}
	return audit.Head{Count: uint64(count), Head: prev}, nil
}
