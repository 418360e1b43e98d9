package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/internal/flock"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

const defaultListen = "127.0.0.1:8420"

// serveFlags are what `cordon serve` and `cordon worker` share.
type serveFlags struct {
	state, database, adminKeyFile, stewardKeyFile *string
	masterKeyFile, auditKeyFile, secretsFile      *string
	maxWall                                       *time.Duration
	workers, maxPending                           *int
	worker                                        bool // a worker serves no HTTP and needs no admin key
}

func addServeFlags(fs *flag.FlagSet) serveFlags {
	return serveFlags{
		state:          fs.String("state", "", "cordon's state directory: the database, keys, run workspaces (default: $CORDON_STATE, or /var/lib/cordon as root)"),
		database:       fs.String("database", "", "postgres://… for PostgreSQL (default: SQLite in STATE/control.db)"),
		adminKeyFile:   fs.String("admin-key-file", "", "the file holding the operator's admin key (default: STATE/admin.key, made on first start)"),
		stewardKeyFile: fs.String("steward-key", "", "the key that signs every run's evidence (default: STATE/steward.key, made on first start)"),
		masterKeyFile:  fs.String("master-key-file", "", "the file holding the operator's master key (an age identity, AGE-SECRET-KEY-1…, as age-keygen writes it) that encrypts tenants' secrets in STATE/secrets; without it there is no credential broker"),
		auditKeyFile:   fs.String("audit-key", "", "the key that signs the audit log's head; its salts derive from it (default: STATE/audit.key, made on first start; serve and its workers need the same one)"),
		secretsFile:    fs.String("secrets", "", "a file of the operator's secrets to mask wherever text leaves: one a line, the value or file:PATH"),
		maxWall:        durationVar(fs, "max-wall", server.DefaultMaxWall, "the longest any run may take"),
		workers:        fs.Int("workers", server.DefaultWorkers, "runs executed at once by this process"),
		maxPending:     fs.Int("max-pending", server.DefaultMaxPending, "the most runs one tenant may have pending approval or queued"),
	}
}

// open opens the store and the keys the flags name, holding the state
// directory's lock (one process per state directory: a second server on
// it would fail the first's running runs as interrupted); release closes
// the store and the lock.
func (f serveFlags) open(ctx context.Context, e *env, verb string) (st *store.Store, cfg server.Config, release func(), err error) {
	var lock *os.File
	defer func() {
		if err != nil && lock != nil {
			lock.Close()
		}
	}()
	state, err := execStateDir(*f.state)
	if err != nil {
		return nil, server.Config{}, nil, fmt.Errorf("%s: %w", verb, err)
	}
	if err := checkPrivate("state directory", state); err != nil {
		return nil, server.Config{}, nil, fmt.Errorf("%s: %w", verb, err)
	}
	if lock, err = lockState(state); err != nil {
		return nil, server.Config{}, nil, fmt.Errorf("%s: %w", verb, err)
	}
	dsn := *f.database
	sqliteFile := ""
	if dsn == "" {
		dsn = filepath.Join(state, "control.db")
		sqliteFile = dsn
	}
	adminFile := *f.adminKeyFile
	var admin []byte
	if f.worker {
		// A worker serves no API: a random admin key no one holds.
		var b [32]byte
		rand.Read(b[:])
		admin = []byte(hex.EncodeToString(b[:]))
		adminFile = "-"
	}
	if adminFile == "" {
		adminFile = filepath.Join(state, "admin.key")
		if err := makeSecretFile(e, adminFile); err != nil {
			return nil, server.Config{}, nil, fmt.Errorf("%s: admin key: %w", verb, err)
		}
	}
	if admin == nil {
		if err := checkPrivate("admin key file", adminFile); err != nil {
			return nil, server.Config{}, nil, fmt.Errorf("%s: %w", verb, err)
		}
		if admin, err = readLimited(adminFile, 4096); err != nil {
			return nil, server.Config{}, nil, withHint(fmt.Errorf("%s: admin key: %w", verb, err), "the admin key comes only from a file; pass --admin-key-file or let serve make STATE/admin.key")
		}
	}
	stewardFile := *f.stewardKeyFile
	if stewardFile == "" {
		stewardFile = filepath.Join(state, "steward.key")
		if _, err := os.Lstat(stewardFile); errors.Is(err, fs.ErrNotExist) {
			k, err := sign.Generate()
			if err != nil {
				return nil, server.Config{}, nil, err
			}
			if err := sign.WritePrivate(stewardFile, k); err != nil {
				return nil, server.Config{}, nil, fmt.Errorf("%s: steward key: %w", verb, err)
			}
		}
	}
	if err := checkPrivate("steward key file", stewardFile); err != nil {
		return nil, server.Config{}, nil, fmt.Errorf("%s: %w", verb, err)
	}
	key, err := sign.LoadPrivate(stewardFile)
	if err != nil {
		return nil, server.Config{}, nil, fmt.Errorf("%s: steward key: %w", verb, err)
	}
	brk, err := openBroker(*f.masterKeyFile, state)
	if err != nil {
		return nil, server.Config{}, nil, fmt.Errorf("%s: %w", verb, err)
	}
	auditKey, err := loadAuditKey(verb, state, *f.auditKeyFile)
	if err != nil {
		return nil, server.Config{}, nil, err
	}
	secrets, configured, err := loadSecrets(e, verb, *f.secretsFile)
	if err != nil {
		return nil, server.Config{}, nil, err
	}
	if sqliteFile != "" {
		// The database holds key hashes and every tenant's runs: 0600.
		// SQLite makes its -wal and -shm files with the database's mode;
		// those an older version made are narrowed too.
		if f, err := os.OpenFile(sqliteFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
		}
		for _, sfx := range []string{"", "-wal", "-shm"} {
			if err := os.Chmod(sqliteFile+sfx, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, server.Config{}, nil, fmt.Errorf("%s: database: %w", verb, err)
			}
		}
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		st, err = store.Open(ctx, dsn)
	} else {
		// This process is the database's one writer: its hot reads are
		// cached, and a second server on the same file is refused, before
		// it has migrated or changed anything.
		st, err = store.OpenCached(ctx, dsn)
	}
	if err != nil {
		return nil, server.Config{}, nil, fmt.Errorf("%s: %w", verb, err)
	}
	host, _ := os.Hostname()
	release = func() { st.Close(); lock.Close() }
	return st, server.Config{
		Store: st, AdminKey: strings.TrimSpace(string(admin)), StateDir: state, Key: key, Version: version,
		Log: slog.New(slog.NewJSONHandler(e.stderr, nil)), MaxWall: *f.maxWall, Workers: *f.workers, MaxPending: *f.maxPending,
		WorkerID: workerID(host, os.Getpid()), Broker: brk, AuditKey: auditKey, Secrets: secrets, SecretsConfigured: configured,
		// The operator's GOMAXPROCS is left as set (docs/server.md).
		SpareProc: os.Getenv("GOMAXPROCS") == "",
	}, release, nil
}

// openBroker opens the credential broker's store, STATE/secrets,
// encrypted to the master key in keyFile; "" means no broker. The key
// comes only from a file the process's user owns and others cannot
// write, never from a request or a flag's value.
func openBroker(keyFile, state string) (*broker.Broker, error) {
	if keyFile == "" {
		return nil, nil
	}
	if err := checkPrivate("master key file", keyFile); err != nil {
		return nil, err
	}
	k, err := readLimited(keyFile, 4096)
	if err != nil {
		return nil, withHint(fmt.Errorf("master key: %w", err), "make one with age-keygen -o FILE and pass --master-key-file FILE")
	}
	defer clear(k)
	dir := filepath.Join(state, "secrets")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secret store: %w", err)
	}
	if err := checkPrivate("secret store", dir); err != nil {
		return nil, err
	}
	// age-keygen writes comment lines before the key.
	var id string
	for _, line := range strings.Split(string(k), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			id = line
			break
		}
	}
	st, err := broker.NewStore(dir, id)
	if err != nil {
		return nil, withHint(fmt.Errorf("master key %s: %w", keyFile, err), "the master key is an age X25519 identity (AGE-SECRET-KEY-1…), as age-keygen writes it")
	}
	return &broker.Broker{Store: st}, nil
}

// workerID names this process in the runs it executes, which tenants
// see: an opaque digest of its host name and process id, not the two
// themselves (serve and worker log the mapping at start).
func workerID(host string, pid int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", host, pid)))
	return "wrk_" + hex.EncodeToString(h[:8])
}

// lockState takes the state directory's exclusive lock (STATE/lock),
// held while the returned file is open.
func lockState(state string) (*os.File, error) {
	name := filepath.Join(state, "lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|flock.NoFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := flock.TryLock(f); err != nil {
		f.Close()
		if errors.Is(err, flock.ErrHeld) {
			return nil, withHint(fmt.Errorf("another cordon serve or worker is using the state directory %s (it holds %s)", state, name),
				"stop that process, or give this one its own --state")
		}
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	return f, nil
}

// makeSecretFile writes a new random admin key to name (0600) unless the
// file exists.
func makeSecretFile(e *env, name string) error {
	var b [32]byte
	rand.Read(b[:])
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s\n", hex.EncodeToString(b[:])); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(e.stderr, "cordon: made the admin key %s (keep it secret; clients read it with --key-file)\n", name)
	return f.Close()
}

func runServe(e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", defaultListen, "the address to serve the API on")
	tlsCert := fs.String("tls-cert", "", "serve TLS with this certificate (PEM), with --tls-key")
	tlsKey := fs.String("tls-key", "", "the TLS certificate's private key (PEM)")
	noExec := fs.Bool("no-execute", false, "serve the API only; runs are executed by 'cordon worker' processes (PostgreSQL)")
	grace := durationVar(fs, "grace", 30*time.Second, "how long shutdown waits for requests and running runs")
	maxConns := fs.Int("max-conns", server.DefaultMaxConns, "the most connections served at once (more wait to be accepted)")
	gcPercent := fs.Int("gc-percent", server.DefaultGCPercent, "the garbage collector's target percentage (Go's GOGC; the GOGC variable wins unless this flag is given)")
	sf := addServeFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf("serve: unexpected arguments %q", pos)
	}
	if err := setGCPercent(fs, *gcPercent, os.Getenv("GOGC")); err != nil {
		return err
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return &usageError{msg: "serve: --tls-cert and --tls-key go together"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, cfg, release, err := sf.open(ctx, e, "serve")
	if err != nil {
		return err
	}
	defer release()
	if *noExec && st.Engine() != store.Postgres {
		return withHint(errors.New("serve: --no-execute needs PostgreSQL"), "with SQLite the server is the only process that can execute runs")
	}
	cfg.Execute = !*noExec
	cfg.MaxConns = *maxConns
	if cfg.Execute {
		closeSpawner, err := startSpawner("serve", &cfg)
		if err != nil {
			return err
		}
		defer closeSpawner()
	}
	s, err := server.New(cfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return fmt.Errorf("serve: %w", err)
	}
	scheme := "http"
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			l.Close()
			s.Stop(context.WithoutCancel(ctx))
			return fmt.Errorf("serve: TLS: %w", err)
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	host, _ := os.Hostname()
	fmt.Fprintf(e.stderr, "cordon: serving %s://%s (database %s, state %s, worker %s = %s/%d)\n", scheme, l.Addr(), st.Engine(), cfg.StateDir, cfg.WorkerID, host, os.Getpid())
	fmt.Fprintf(e.stderr, "cordon: web console at %s://%s/console/login (sign in with a user's key or the admin key)\n", scheme, l.Addr())
	if err := s.Serve(ctx, l, *grace); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// startSpawner starts the sandbox spawner of a process that executes
// runs (sandbox.Spawner; Linux only: elsewhere no run executes), so that
// no run's sandbox forks this large process; the returned function
// closes it once the server has stopped.
func startSpawner(verb string, cfg *server.Config) (func(), error) {
	if runtime.GOOS != "linux" {
		return func() {}, nil
	}
	sp, err := sandbox.StartSpawner()
	if err != nil {
		return nil, withHint(fmt.Errorf("%s: %w", verb, err), "the spawner is this same binary started again; check that it can still be executed")
	}
	cfg.Spawner = sp
	return func() { _ = sp.Close() }, nil
}

func runWorker(e *env, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	grace := durationVar(fs, "grace", 30*time.Second, "how long shutdown waits for running runs")
	sf := addServeFlags(fs)
	sf.worker = true
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf("worker: unexpected arguments %q", pos)
	}
	if *sf.adminKeyFile != "" {
		return &usageError{msg: "worker: --admin-key-file: a worker serves no API and holds no admin key"}
	}
	if !strings.HasPrefix(*sf.database, "postgres://") && !strings.HasPrefix(*sf.database, "postgresql://") {
		return &usageError{msg: "worker: --database postgres://… is required", hint: "workers share the server's PostgreSQL; with SQLite, 'cordon serve' executes runs itself"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, cfg, release, err := sf.open(ctx, e, "worker")
	if err != nil {
		return err
	}
	defer release()
	cfg.Execute = true
	closeSpawner, err := startSpawner("worker", &cfg)
	if err != nil {
		return err
	}
	defer closeSpawner()
	s, err := server.New(cfg)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	host, _ := os.Hostname()
	fmt.Fprintf(e.stderr, "cordon: worker %s (%s/%d) executing runs (state %s)\n", cfg.WorkerID, host, os.Getpid(), cfg.StateDir)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *grace)
	defer cancel()
	return s.Stop(sctx)
}

// setGCPercent applies serve's --gc-percent: the flag when given, else
// the GOGC variable when set (the runtime already applied it), else
// server.DefaultGCPercent.
func setGCPercent(fs *flag.FlagSet, percent int, gogc string) error {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "gc-percent" })
	if percent < 10 || percent > 10000 {
		return usageErrorf("serve: --gc-percent %d: give a percentage from 10 to 10000 (Go's default is 100)", percent)
	}
	if given || gogc == "" {
		debug.SetGCPercent(percent)
	}
	return nil
}
