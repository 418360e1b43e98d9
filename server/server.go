// Package server is cordon's control plane (docs/server.md): a JSON HTTP
// API over package store, in which tenants keep declarative projects and
// submit runs that execute only once an approver who is not the
// submitter approves them. Execution goes through the River queue to the
// agent runner, so a run submitted here is contained and recorded exactly
// as `cordon run` is: in the sandbox, with its journal, signed result,
// receipt and attestation, which verify offline with `cordon verify run`.
//
// Every route sits behind one guard of distinct blast radius (guards.go);
// docs/security/authz-surface.json lists every route with its guard, tier
// and blast radius, and a test walks the live router against it.
package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/netutil"

	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/store"
)

// Defaults of Config's zero values.
const (
	DefaultMaxBody    = 1 << 20
	DefaultMaxWall    = 30 * time.Minute
	DefaultHeaderWait = 10 * time.Second
	DefaultBodyWait   = 30 * time.Second
	DefaultWorkers    = 4
	DefaultMaxPending = 100
	DefaultMaxConns   = 1024
	DefaultIdleWait   = 30 * time.Second
	// DefaultGCPercent is the garbage collector's target `cordon serve`
	// sets (runtime/debug.SetGCPercent) unless GOGC is set or
	// --gc-percent names another: with Go's default of 100 the
	// collector, and the stack regrowth of every idle connection's
	// goroutine it shrinks, cost a fifth of a read's CPU
	// (docs/server.md, "Figures"); 400 lets the heap grow to five times
	// what is live (tens of MB) between collections.
	DefaultGCPercent = 400
)

// Config is one control plane.
type Config struct {
	// Store is the database; the Server does not close it.
	Store *store.Store
	// AdminKey is the operator's admin key, read from a key file or
	// config by the caller, never from a request. At least 32 bytes.
	AdminKey string
	// StateDir holds each run's workspace (runs/ID) and the sandbox's
	// state (sandbox/).
	StateDir string
	// Key signs every run's result, receipt and attestation.
	Key *sign.PrivateKey
	// Version is cordon's version, for the attestation.
	Version string
	// Log receives structured logs; nil discards them.
	Log *slog.Logger
	// MaxBody caps a request body (0: DefaultMaxBody).
	MaxBody int64
	// MaxWall is the operator's maximum wall time of a run (0: DefaultMaxWall).
	MaxWall time.Duration
	// Execute, when true, runs queued runs in this process (the
	// embedded mode, and every `cordon worker`); false only enqueues.
	Execute bool
	// MaxPending caps a tenant's runs pending approval or queued (0:
	// DefaultMaxPending): a submission over it is refused with 429.
	MaxPending int
	// Workers is how many runs execute at once (0: DefaultWorkers).
	Workers int
	// SpareProc gives the Go runtime one more P than it chose while runs
	// execute in this process (procs.go): a P blocked in a run's fsync
	// would leave a core idle. GOMAXPROCS is the process's; cordon serve
	// and cordon worker set this unless the GOMAXPROCS variable is set.
	SpareProc bool
	// WorkerID names this process in each run it executes.
	WorkerID string
	// RescueAfter is how long a job may stay running before the queue
	// rescues it (0: MaxWall plus five minutes). A rescued run is failed
	// with the reason, never executed twice.
	RescueAfter time.Duration
	// HeaderTimeout and BodyTimeout bound how long a client may take to
	// send a request's headers and its whole request (0: the defaults):
	// a slow client cannot hold a connection open.
	HeaderTimeout, BodyTimeout time.Duration
	// MaxConns caps the connections served at once (0: DefaultMaxConns);
	// more wait in the listen queue. IdleTimeout is how long a keep-alive
	// connection may sit idle between requests (0: DefaultIdleWait).
	MaxConns    int
	IdleTimeout time.Duration
	// Executor runs one run; nil is the agent runner in the sandbox.
	Executor Executor
	// Spawner, when not nil, starts the default Executor's sandboxes
	// (sandbox.Spawner), so that no run forks this process; the caller
	// owns it and closes it after Stop.
	Spawner *sandbox.Spawner
	// Broker is the credential broker (secrets.go): its Store is
	// written by the admin secret routes, and the default Executor
	// resolves tasks' references with it. nil: no secrets.
	Broker *broker.Broker
	// AuditKey signs the audit log's head, and the records' salts derive
	// from it (audit.go); nil: Key. Every process appending to one
	// database (serve and its workers) must hold the same one.
	AuditKey *sign.PrivateKey
	// Secrets are the operator's secret values to mask wherever text
	// leaves (redact.go), resolved from the operator's configuration;
	// SecretsConfigured is how many were configured: above zero with
	// none resolved, every output that needs masking is refused.
	Secrets           []string
	SecretsConfigured int
}

// Server is a control plane.
type Server struct {
	cleanMemo cleanMemo // documents found clean (redact.go)
	cfg       Config
	store     *store.Store
	log       *slog.Logger
	adminHash [32]byte
	mux       *http.ServeMux
	routes    []Route
	queue     *queue
	metrics   *metrics
	secrets   secrets
	streams   streamLimit // the console's open event streams
}

// New validates cfg and builds the server; Start starts its queue.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("server: no store")
	case len(cfg.AdminKey) < 32:
		return nil, errors.New("server: the admin key must be at least 32 bytes")
	case cfg.StateDir == "":
		return nil, errors.New("server: no state directory")
	case cfg.Key == nil:
		return nil, errors.New("server: no steward key to sign runs with")
	case cfg.Version == "":
		return nil, errors.New("server: no version")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxWall <= 0 {
		cfg.MaxWall = DefaultMaxWall
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderWait
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyWait
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleWait
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = cfg.MaxWall + 5*time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Executor == nil {
		cfg.Executor = &RunnerExecutor{StateDir: cfg.StateDir, Key: cfg.Key, Version: cfg.Version, Broker: cfg.Broker, Spawner: cfg.Spawner}
	}
	s := &Server{cfg: cfg, store: cfg.Store, adminHash: sha256.Sum256([]byte(cfg.AdminKey))}
	if err := s.SetSecretSource("operator", cfg.Secrets, cfg.SecretsConfigured); err != nil {
		return nil, err
	}
	if err := s.refreshBrokerSecrets(); err != nil {
		return nil, fmt.Errorf("server: the credential broker's secrets for the mask pool: %w", err)
	}
	s.log = slog.New(redactHandler{inner: cfg.Log.Handler(), pool: s.Pool})
	if err := useAuditKey(cfg.Store, s.auditKey()); err != nil {
		return nil, err
	}
	if re, ok := cfg.Executor.(*RunnerExecutor); ok && re.Audit == nil {
		re.Audit = s.auditResolution
	}
	if re, ok := cfg.Executor.(*RunnerExecutor); ok && re.Redact == nil {
		re.Redact = s.Pool
	}
	s.metrics = newMetrics()
	s.mux = http.NewServeMux()
	for _, rt := range s.table() {
		s.routes = append(s.routes, rt)
		g := s.guard
		if isConsole(rt.Path) {
			g = s.consoleGuard // the session cookie, never a bearer header
		}
		s.mux.Handle(rt.Method+" "+rt.Path, s.instrument(rt, g(rt.Guard, rt.handler)))
	}
	s.mux.HandleFunc("/console/", s.consoleNotFound)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, &apiError{Code: 404, Msg: "no such route; GET /openapi.json lists them"})
	})
	return s, nil
}

// Route is one route of the live router.
type Route struct {
	Method, Path, Guard string
	handler             http.HandlerFunc
}

// Routes returns the routes the router serves, as registered.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// Handler is the HTTP handler: the router with the body limit.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		if strings.HasPrefix(r.URL.Path, "/console/") {
			consoleHeaders(w, r) // every console response, the router's own 405s included
		}
		s.redactResponses(s.mux).ServeHTTP(w, r)
	})
}

// Mux is the router itself, for tests that ask which route a request
// reaches.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Start starts the queue (and, with Config.Execute, its workers), after
// recovering the runs an earlier process left.
func (s *Server) Start(ctx context.Context) error {
	if err := s.store.CheckAuditKey(ctx); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	q, err := newQueue(ctx, s)
	if err != nil {
		return err
	}
	s.queue = q
	return nil
}

// Stop stops the queue, waiting for running jobs up to ctx's deadline.
func (s *Server) Stop(ctx context.Context) error {
	if s.queue == nil {
		return nil
	}
	return s.queue.stop(ctx)
}

// Serve serves HTTP on l until ctx ends, then shuts down gracefully:
// no new connections, in-flight requests finished (up to grace), the
// queue stopped. At most MaxConns connections are served at once (an
// unauthenticated client cannot exhaust the process's descriptors); an
// idle one is closed after IdleTimeout, one that sends no request after
// HeaderTimeout.
func (s *Server) Serve(ctx context.Context, l net.Listener, grace time.Duration) error {
	l = netutil.LimitListener(l, s.cfg.MaxConns)
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		ReadTimeout:       s.cfg.BodyTimeout,
		WriteTimeout:      5 * time.Minute, // evidence downloads
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.InfoContext(ctx, "shutting down", slog.Duration("grace", grace))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := hs.Shutdown(sctx)
	if qerr := s.Stop(sctx); err == nil {
		err = qerr
	}
	return err
}

// apiError is an error with the status and safe message the client
// gets; Err, the detail, goes only to the log.
type apiError struct {
	Code int
	Msg  string
	Hint string
	Err  error
}

func (e *apiError) Error() string { return e.Msg }

func (s *Server) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	lvl := slog.LevelInfo
	if e.Code >= 500 {
		lvl = slog.LevelError
	}
	attrs := []any{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", e.Code), slog.String("reason", e.Msg)}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	s.log.Log(r.Context(), lvl, "request refused", attrs...)
	body := map[string]string{"error": e.Msg}
	if e.Hint != "" {
		body["hint"] = e.Hint
	}
	writeJSON(w, e.Code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"internal error"}`, 500)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// readBody reads the request body within the size limit.
func readBody(r *http.Request) ([]byte, *apiError) {
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &apiError{Code: 413, Msg: fmt.Sprintf("the body exceeds %d bytes", mbe.Limit)}
	}
	if err != nil {
		return nil, &apiError{Code: 400, Msg: "the body could not be read (sent too slowly, or cut short)", Err: err}
	}
	return b, nil
}

// storeError maps a store error to the client's.
func storeError(err error, what string) *apiError {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Code: 404, Msg: "no such " + what}
	case errors.Is(err, store.ErrExists):
		return &apiError{Code: 409, Msg: what + " exists already"}
	case errors.Is(err, store.ErrSelfApproval):
		return &apiError{Code: 403, Msg: "the submitter of a run cannot approve or reject it; another approver must", Err: err}
	case errors.Is(err, store.ErrAuthorApproval):
		return &apiError{Code: 403, Msg: "the author of a run's task configuration (who last wrote the project) cannot approve it; another approver must", Err: err}
	case errors.Is(err, store.ErrSubmitterRevoked):
		return &apiError{Code: 409, Msg: "the key that submitted this run has been revoked (or rotated out): the run cannot be approved; reject or cancel it, and submit it again with a current key if it is wanted", Err: err}
	case errors.Is(err, store.ErrState):
		return &apiError{Code: 409, Msg: err.Error()[len("store: "):]}
	}
	return &apiError{Code: 500, Msg: "internal error", Err: err}
}
