// Package store is the control plane's persistence (docs/server.md):
// tenants with their grant ceiling, users with roles, tenant and user
// keys (stored as SHA-256 hashes, never in the clear), declarative
// projects, and runs with their approval state machine. One
// implementation over database/sql serves both engines: embedded SQLite
// (modernc.org/sqlite, pure Go) and PostgreSQL (jackc/pgx/v5). The
// schema is migrated by goose from the embedded migrations directory.
//
// Every state change is one conditional UPDATE, so two callers racing
// for the same run (two approvers, a cancel and a worker, two workers)
// cannot both win: exactly one sees its row change.
package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// Errors callers tell apart with errors.Is.
var (
	ErrNotFound     = errors.New("store: not found")
	ErrExists       = errors.New("store: already exists")
	ErrState        = errors.New("store: the run is not in a state that allows this")
	ErrSelfApproval = errors.New("store: the submitter of a run cannot approve or reject it")
	// ErrAuthorApproval: the author of a run's snapshot (who last wrote
	// the project) cannot approve it.
	ErrAuthorApproval = errors.New("store: the author of a run's task configuration cannot approve it")
	ErrUnauthorized   = errors.New("store: unknown or revoked key")
)

// Run states (docs/server.md).
const (
	StatePending   = "pending_approval"
	StateQueued    = "queued"
	StateRunning   = "running"
	StateFinished  = "finished"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StateRejected  = "rejected"
)

// Roles of a tenant's users.
const (
	RoleMember   = "member"
	RoleApprover = "approver"
)

// KeyPrefix starts every key cordon issues, so that secret scanners and
// people recognise one.
const KeyPrefix = "cdn_"

// Engine is the database engine behind a Store.
type Engine string

const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
)

// readConns is the size of SQLite's read pool.
const readConns = 8

// Store is the control plane's database.
type Store struct {
	dsn    string
	db     *sql.DB // writes (and PostgreSQL's reads)
	rdb    *sql.DB // reads: on SQLite a pool of its own, which WAL lets run beside the one writer
	engine Engine
	now    func() time.Time
	// The operator's audit key (SetAuditKey, audit.go).
	auditMaster []byte
	auditKeyID  string
	stmts       stmtCache  // the hot reads' prepared statements (stmt.go)
	rgate       fifoGate   // the hot reads' first-come, first-served admission (stmt.go)
	wgate       fifoGate   // SQLite's writes' (nil on PostgreSQL, which has many writers)
	hot         *hotReads  // the hot reads' cache (hot.go); nil unless CacheHotReads
	spare       []*os.File // descriptors of the database file a refused CacheHotReads opened: closed by Close, after SQLite's
}

// Open opens the database the DSN names: "postgres://…" or
// "postgresql://…" is PostgreSQL; anything else is a SQLite file path.
// It migrates the schema to the latest version.
func Open(ctx context.Context, dsn string) (*Store, error) {
	s := &Store{now: time.Now, dsn: dsn}
	var err error
	var dialect goose.Dialect
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		s.engine, dialect = Postgres, goose.DialectPostgres
		s.db, err = sql.Open("pgx", dsn)
	} else {
		if dsn == "" {
			return nil, errors.New("store: no database given")
		}
		s.engine, dialect = SQLite, goose.DialectSQLite3
		// WAL lets readers run beside the writer; immediate transactions
		// take the write lock up front so that two writers queue on the
		// busy timeout instead of failing with SQLITE_BUSY mid-transaction.
		s.db, err = sql.Open("sqlite", sqliteURI(dsn)+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_txlock=immediate")
	}
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if s.engine == SQLite {
		// One connection: SQLite has one writer, and queueing writers in
		// database/sql is fairer and faster than SQLITE_BUSY retries
		// (River's SQLite driver recommends the same).
		s.db.SetMaxOpenConns(1)
		if s.rdb, err = sql.Open("sqlite", sqliteURI(dsn)+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=query_only(1)"); err != nil {
			s.db.Close()
			return nil, fmt.Errorf("store: open: %w", err)
		}
		s.rdb.SetMaxOpenConns(readConns)
		s.rgate = make(fifoGate, readConns)
		s.wgate = make(fifoGate, 1)
		// As many kept idle as may be open: database/sql keeps only 2 by
		// default, so under load each read beyond them opened a new SQLite
		// connection (reading the schema again) and prepared its
		// statement anew (docs/server.md, "Figures").
		s.rdb.SetMaxIdleConns(readConns)
	} else {
		// Bounded, so that a burst of requests queues here rather than
		// exhausting the server's max_connections (the queue has its own pool).
		s.db.SetMaxOpenConns(32)
		s.rgate = make(fifoGate, 24) // leaves writes 8 of the 32
		s.db.SetMaxIdleConns(32)     // not 2: a burst would connect anew per request
		s.db.SetConnMaxIdleTime(5 * time.Minute)
		s.rdb = s.db
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("store: %s: %w", s.engine, err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		s.db.Close()
		return nil, err
	}
	p, err := goose.NewProvider(dialect, s.db, sub)
	if err != nil {
		s.db.Close()
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	return s, nil
}

// sqliteURI is the SQLite URI of the file path p, naming exactly the
// file p names: SQLite decodes a URI's %-escapes and ends its path at
// '?' or '#', so "c%6Fntrol.db" would open control.db while the lock
// (hot.go) is taken on the file c%6Fntrol.db; those three are escaped.
// A path beginning "//" would be read as an authority: Clean makes it
// "/", as the kernel reads it. A relative path is given its "./", so
// that ":memory:" is a file of that name too, not a database in memory.
func sqliteURI(p string) string {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		p = "./" + p
	}
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// DB is the underlying database (the queue shares it on SQLite).
func (s *Store) DB() *sql.DB { return s.db }

// DSN is the DSN the store was opened with (the queue's PostgreSQL
// pool connects with it).
func (s *Store) DSN() string { return s.dsn }

// Engine is the database engine.
func (s *Store) Engine() Engine { return s.engine }

// Close closes the database.
func (s *Store) Close() error {
	defer func() {
		s.hot.close()
		for _, f := range s.spare {
			f.Close()
		}
	}()
	s.closeStmts()
	if s.rdb != s.db {
		s.rdb.Close()
	}
	return s.db.Close()
}

// Ping checks the database answers (readiness).
func (s *Store) Ping(ctx context.Context) error { return s.rdb.PingContext(ctx) }

// q rewrites ? placeholders to PostgreSQL's $n.
func (s *Store) q(query string) string {
	if s.engine != Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	if tx := txFrom(ctx); tx != nil { // an audited transaction: its connection, no gate
		res, err := tx.ExecContext(ctx, s.q(query), args...)
		if err != nil {
			return 0, uniqueErr(err)
		}
		return res.RowsAffected()
	}
	if err := s.wgate.acquire(ctx); err != nil {
		return 0, err
	}
	defer s.wgate.release()
	res, err := s.db.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return 0, uniqueErr(err)
	}
	return res.RowsAffected()
}

// uniqueErr maps a unique-constraint violation of either engine to ErrExists.
func uniqueErr(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505") {
		return fmt.Errorf("%w: %v", ErrExists, err)
	}
	return err
}

// NewID returns a random identifier with the prefix: 128 bits, so that
// ids cannot be guessed or enumerated.
func NewID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// HashKey is the stored form of a key: its SHA-256. A key holds 256
// random bits, so no stretching is needed for a brute-force search to be
// hopeless.
func HashKey(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func newSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return KeyPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Tenant is one tenant.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Ceiling   []byte    `json:"-"` // the grant set every project's must be covered by
	CreatedAt time.Time `json:"created_at"`
}

// CreateTenant adds a tenant with its ceiling grant set.
func (s *Store) CreateTenant(ctx context.Context, name string, ceiling []byte) (*Tenant, error) {
	t := &Tenant{ID: NewID("ten_"), Name: name, Ceiling: ceiling, CreatedAt: s.now().UTC()}
	if _, err := s.exec(ctx, `INSERT INTO tenants (id, name, ceiling, created_at) VALUES (?, ?, ?, ?)`,
		t.ID, t.Name, string(ceiling), t.CreatedAt.UnixNano()); err != nil {
		return nil, fmt.Errorf("store: tenant %q: %w", name, err)
	}
	return t, nil
}

// Tenant returns a tenant by id.
func (s *Store) Tenant(ctx context.Context, id string) (*Tenant, error) {
	var t Tenant
	var ceiling string
	var created int64
	err := s.readRow(ctx, `SELECT id, name, ceiling, created_at FROM tenants WHERE id = ?`, id).Scan(&t.ID, &t.Name, &ceiling, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: tenant %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	t.Ceiling, t.CreatedAt = []byte(ceiling), time.Unix(0, created).UTC()
	return &t, nil
}

// Tenants lists every tenant.
func (s *Store) Tenants(ctx context.Context) ([]*Tenant, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, name, ceiling, created_at FROM tenants ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Tenant{}
	for rows.Next() {
		var t Tenant
		var ceiling string
		var created int64
		if err := rows.Scan(&t.ID, &t.Name, &ceiling, &created); err != nil {
			return nil, err
		}
		t.Ceiling, t.CreatedAt = []byte(ceiling), time.Unix(0, created).UTC()
		out = append(out, &t)
	}
	return out, rows.Err()
}

// SetCeiling replaces a tenant's ceiling grant set.
func (s *Store) SetCeiling(ctx context.Context, tenantID string, ceiling []byte) error {
	n, err := s.exec(ctx, `UPDATE tenants SET ceiling = ? WHERE id = ?`, string(ceiling), tenantID)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("store: tenant %q: %w", tenantID, ErrNotFound)
	}
	return nil
}

// User is one of a tenant's users.
type User struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"tenant"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateUser adds a user with a role (RoleMember or RoleApprover).
func (s *Store) CreateUser(ctx context.Context, tenantID, name, role string) (*User, error) {
	if role != RoleMember && role != RoleApprover {
		return nil, fmt.Errorf("store: role %q: want %q or %q", role, RoleMember, RoleApprover)
	}
	u := &User{ID: NewID("usr_"), TenantID: tenantID, Name: name, Role: role, CreatedAt: s.now().UTC()}
	if _, err := s.exec(ctx, `INSERT INTO users (id, tenant_id, name, role, created_at) VALUES (?, ?, ?, ?, ?)`,
		u.ID, u.TenantID, u.Name, u.Role, u.CreatedAt.UnixNano()); err != nil {
		return nil, fmt.Errorf("store: user %q: %w", name, err)
	}
	return u, nil
}

// user returns a tenant's user.
func (s *Store) user(ctx context.Context, tenantID, id string) (*User, error) {
	var u User
	var created int64
	err := s.r(ctx).QueryRowContext(ctx, s.q(`SELECT id, tenant_id, name, role, created_at FROM users WHERE id = ? AND tenant_id = ?`), id, tenantID).
		Scan(&u.ID, &u.TenantID, &u.Name, &u.Role, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: user %q: %w", id, ErrNotFound)
	}
	u.CreatedAt = time.Unix(0, created).UTC()
	return &u, err
}

// Key is an issued key, without its secret.
type Key struct {
	ID        string     `json:"id"`
	TenantID  string     `json:"tenant"`
	UserID    string     `json:"user,omitempty"` // "": a bare tenant key
	Hint      string     `json:"hint"`           // the secret's first characters
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// CreateKey issues a key for the tenant, or for one of its users when
// userID is not "". The secret is returned once and stored only hashed.
func (s *Store) CreateKey(ctx context.Context, tenantID, userID string) (*Key, string, error) {
	if _, err := s.Tenant(ctx, tenantID); err != nil {
		return nil, "", err
	}
	var uid any
	if userID != "" {
		if _, err := s.user(ctx, tenantID, userID); err != nil {
			return nil, "", err
		}
		uid = userID
	}
	secret := newSecret()
	k := &Key{ID: NewID("key_"), TenantID: tenantID, UserID: userID, Hint: secret[:len(KeyPrefix)+4], CreatedAt: s.now().UTC()}
	if _, err := s.exec(ctx, `INSERT INTO keys (id, tenant_id, user_id, hash, hint, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, k.TenantID, uid, HashKey(secret), k.Hint, k.CreatedAt.UnixNano()); err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// Keys lists a tenant's keys, revoked ones included.
func (s *Store) Keys(ctx context.Context, tenantID string) ([]*Key, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT id, tenant_id, user_id, hint, created_at, revoked_at FROM keys WHERE tenant_id = ? ORDER BY created_at, id`), tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Key{}
	for rows.Next() {
		var k Key
		var uid sql.NullString
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&k.ID, &k.TenantID, &uid, &k.Hint, &created, &revoked); err != nil {
			return nil, err
		}
		k.UserID, k.CreatedAt = uid.String, time.Unix(0, created).UTC()
		if revoked.Valid {
			t := time.Unix(0, revoked.Int64).UTC()
			k.RevokedAt = &t
		}
		out = append(out, &k)
	}
	return out, rows.Err()
}

// RevokeKey revokes a tenant's key; revoking a revoked key is ErrNotFound.
func (s *Store) RevokeKey(ctx context.Context, tenantID, keyID string) error {
	done := s.writing(ctx, true, "")
	n, err := s.exec(ctx, `UPDATE keys SET revoked_at = ? WHERE id = ? AND tenant_id = ? AND revoked_at IS NULL`, s.now().UnixNano(), keyID, tenantID)
	done()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("store: key %q (or it is revoked already): %w", keyID, ErrNotFound)
	}
	return nil
}

// RotateKey revokes a key and issues its replacement for the same
// tenant and user.
func (s *Store) RotateKey(ctx context.Context, tenantID, keyID string) (*Key, string, error) {
	var uid sql.NullString
	err := s.w(ctx).QueryRowContext(ctx, s.q(`SELECT user_id FROM keys WHERE id = ? AND tenant_id = ? AND revoked_at IS NULL`), keyID, tenantID).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", fmt.Errorf("store: key %q (or it is revoked already): %w", keyID, ErrNotFound)
	}
	if err != nil {
		return nil, "", err
	}
	if err := s.RevokeKey(ctx, tenantID, keyID); err != nil {
		return nil, "", err
	}
	return s.CreateKey(ctx, tenantID, uid.String)
}

// Principal is who a key authenticates.
type Principal struct {
	TenantID string
	KeyID    string
	UserID   string // "": a bare tenant key
	UserName string
	Role     string // "" for a bare tenant key
}

// Authenticate returns the principal of an unrevoked key.
func (s *Store) Authenticate(ctx context.Context, secret string) (*Principal, error) {
	hash := HashKey(secret)
	hot, gen, fill, now := s.hotFor(ctx), uint64(0), false, time.Time{}
	if hot != nil {
		now = s.now()
		var p *Principal
		if p, gen, fill = hot.key(hash, now); p != nil {
			return p, nil
		}
	}
	var p Principal
	var uid, name, role sql.NullString
	err := s.readRow(ctx, `SELECT k.tenant_id, k.id, k.user_id, u.name, u.role FROM keys k LEFT JOIN users u ON u.id = k.user_id
		WHERE k.hash = ? AND k.revoked_at IS NULL`, hash).Scan(&p.TenantID, &p.KeyID, &uid, &name, &role)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, err
	}
	p.UserID, p.UserName, p.Role = uid.String, name.String, role.String
	if fill {
		hot.putKey(hash, &p, gen, now)
	}
	return &p, nil
}

// Project is a tenant's declarative project.
type Project struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"-"`
	Name      string    `json:"name"`
	Config    []byte    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// UpdatedBy is the user who last wrote the project (its tasks' author:
	// gate independence refuses their approval of a run of it).
	UpdatedBy string `json:"updated_by,omitempty"`
}

// PutProject creates or replaces a project. check is called with the
// tenant's ceiling inside the write's transaction and refuses the write
// by returning an error, so that a ceiling changed concurrently cannot
// slip a project past it.
func (s *Store) PutProject(ctx context.Context, tenantID, name, by string, config []byte, check func(ceiling []byte) error) (*Project, error) {
	tx, own, err := s.begin(ctx) // joins an audited transaction
	if err != nil {
		return nil, err
	}
	if own {
		defer tx.Rollback()
	}
	var ceiling string
	// FOR UPDATE is PostgreSQL's; SQLite's immediate transaction already
	// holds the write lock.
	lock := ""
	if s.engine == Postgres {
		lock = " FOR UPDATE"
	}
	err = tx.QueryRowContext(ctx, s.q(`SELECT ceiling FROM tenants WHERE id = ?`+lock), tenantID).Scan(&ceiling)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: tenant %q: %w", tenantID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if err := check([]byte(ceiling)); err != nil {
		return nil, err
	}
	now := s.now().UTC()
	p := &Project{ID: NewID("prj_"), TenantID: tenantID, Name: name, Config: config, CreatedAt: now, UpdatedAt: now, UpdatedBy: by}
	var id string
	var created int64
	err = tx.QueryRowContext(ctx, s.q(`SELECT id, created_at FROM projects WHERE tenant_id = ? AND name = ?`), tenantID, name).Scan(&id, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO projects (id, tenant_id, name, config, created_at, updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?, ?)`),
			p.ID, tenantID, name, string(config), now.UnixNano(), now.UnixNano(), nullable(by))
	case err == nil:
		p.ID, p.CreatedAt = id, time.Unix(0, created).UTC()
		_, err = tx.ExecContext(ctx, s.q(`UPDATE projects SET config = ?, updated_at = ?, updated_by = ? WHERE id = ?`), string(config), now.UnixNano(), nullable(by), id)
	}
	if err != nil {
		return nil, uniqueErr(err)
	}
	if !own {
		return p, nil
	}
	return p, tx.Commit()
}

// Project returns a tenant's project by name.
func (s *Store) Project(ctx context.Context, tenantID, name string) (*Project, error) {
	var p Project
	var config string
	var created, updated int64
	var by sql.NullString
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT id, tenant_id, name, config, created_at, updated_at, updated_by FROM projects WHERE tenant_id = ? AND name = ?`), tenantID, name).
		Scan(&p.ID, &p.TenantID, &p.Name, &config, &created, &updated, &by)
	p.UpdatedBy = by.String
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: project %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	p.Config, p.CreatedAt, p.UpdatedAt = []byte(config), time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return &p, nil
}

// Projects lists a tenant's projects.
func (s *Store) Projects(ctx context.Context, tenantID string) ([]*Project, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT id, name, created_at, updated_at, updated_by FROM projects WHERE tenant_id = ? ORDER BY name`), tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Project{}
	for rows.Next() {
		p := Project{TenantID: tenantID}
		var created, updated int64
		var by sql.NullString
		if err := rows.Scan(&p.ID, &p.Name, &created, &updated, &by); err != nil {
			return nil, err
		}
		p.UpdatedBy = by.String
		p.CreatedAt, p.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
		out = append(out, &p)
	}
	return out, rows.Err()
}
