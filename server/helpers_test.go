package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/internal/pgtest"
	"github.com/cordon-dev/cordon/risk"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

const adminKey = "admin-key-for-tests-0123456789abcdef0123456789"

// ceiling is a tenant ceiling that covers the test manifests.
const ceiling = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"true"},{"name":"sh"},{"name":"sleep"},{"name":"echo"}]},
"limits":{"wall_ms":600000,"memory_bytes":1073741824,"pids":256}}`

// manifestFor is a replay manifest that runs argv once and finishes.
func manifestFor(argv ...string) string {
	return `{"type":"cordon.manifest.v1","task":"Run the command.",
"model":{"provider":"replay","name":"recorded","replay":"session.jsonl"},
"inputs":[],"outputs":[],"commands":["` + argv[0] + `"],
"grants":{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
 "exec":{"allow":[{"name":"` + argv[0] + `"}]},"limits":{"wall_ms":60000,"memory_bytes":268435456,"pids":64}},
"budgets":{"max_turns":4,"max_model_calls":4,"max_input_tokens":100000,"max_output_tokens":10000,"wall_ms":120000,"max_loops":0,"max_pending_tasks":0}}`
}

func replayFor(argv ...string) string {
	a, _ := json.Marshal(argv)
	return `{"content":[{"type":"tool_use","id":"t1","name":"run","input":{"argv":` + string(a) + `}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"recorded"}
{"content":[{"type":"tool_use","id":"t2","name":"finish","input":{"summary":"done"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":10,"reported":true},"model":"recorded"}
`
}

// projectFor is a project with one task "t" that runs argv.
func projectFor(argv ...string) string {
	f, _ := json.Marshal(map[string]string{"session.jsonl": replayFor(argv...)})
	return `{"tasks":{"t":{"manifest":` + manifestFor(argv...) + `,"files":` + string(f) + `}}}`
}

// fakeExec counts executions per run and can block until cancelled.
type fakeExec struct {
	mu      sync.Mutex
	count   map[string]int // guarded by mu
	maxConc map[string]int // guarded by mu: the most concurrent executions of one run
	cur     map[string]int // guarded by mu
	block   bool
	delay   time.Duration
	started chan string
	configs []string // guarded by mu: the snapshots executed
	// change is the change a finished run reports (nil: an empty one).
	change []risk.File
}

func newFake() *fakeExec {
	return &fakeExec{count: map[string]int{}, maxConc: map[string]int{}, cur: map[string]int{}, started: make(chan string, 10000)}
}

func (f *fakeExec) Execute(ctx context.Context, run *store.Run) store.Outcome {
	f.mu.Lock()
	f.configs = append(f.configs, string(run.Config))
	f.count[run.ID]++
	f.cur[run.ID]++
	f.maxConc[run.ID] = max(f.maxConc[run.ID], f.cur[run.ID])
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.cur[run.ID]--; f.mu.Unlock() }()
	f.started <- run.ID
	if f.block {
		<-ctx.Done()
		return store.Outcome{State: store.StateCancelled, Reason: "stopped"}
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return store.Outcome{State: store.StateCancelled, Reason: "stopped"}
		}
	}
	zero := 0
	change := f.change
	if change == nil {
		change = []risk.File{}
	}
	return store.Outcome{State: store.StateFinished, ExitCode: &zero, Tier: "S2", Status: "finished", Change: change}
}

func (f *fakeExec) executions(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[id]
}

type env struct {
	t     testing.TB
	srv   *server.Server
	url   string
	store *store.Store
	dir   string
	// principals' keys
	keys map[string]string
	// ids
	tenantA, tenantB string
	member, approver string // user ids in tenant A
}

type envOpts struct {
	exec     server.Executor
	real     bool // the agent runner in the sandbox
	postgres bool
	maxWall  time.Duration
	pending  int // Config.MaxPending
	workers  int // Config.Workers (0: the default)
	rescue   time.Duration
	dsn      string
	dir      string
	broker   *broker.Broker // nil: a store under the state directory, with a new master key
	// the operator's secrets to mask, and how many were configured
	secrets    []string
	configured int
	log        io.Writer // the server's log (nil: discarded)
}

// noBroker, as envOpts.broker, starts a server without a broker.
var noBroker = &broker.Broker{}

// newTestBroker is a credential broker whose store lives in dir/secrets,
// encrypted to a new master key.
func newTestBroker(t testing.TB, dir string) *broker.Broker {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	st, err := broker.NewStore(filepath.Join(dir, "secrets"), id.String())
	if err != nil {
		t.Fatal(err)
	}
	return &broker.Broker{Store: st}
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	dsn := o.dsn
	if dsn == "" {
		dsn = filepath.Join(dir, "cordon.db")
		if o.postgres {
			dsn = pgtest.DSN(t, os.Getenv("CORDON_TEST_POSTGRES"), pgtest.Required(os.Getenv("CORDON_CI")))
		}
	}
	st, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if st.Engine() == store.SQLite {
		if err := st.CacheHotReads(); err != nil { // as cordon serve does
			t.Fatal(err)
		}
	}
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if o.pending == 0 {
		o.pending = 1 << 20 // the matrix and load tests submit hundreds; TestRedteamPendingCap tests the cap
	}
	if o.exec == nil && !o.real {
		o.exec = newFake()
	}
	switch o.broker {
	case nil:
		o.broker = newTestBroker(t, dir)
	case noBroker:
		o.broker = nil
	}
	cfg := server.Config{Store: st, AdminKey: adminKey, StateDir: dir, Key: k, Version: "test", Execute: true,
		SpareProc: os.Getenv("GOMAXPROCS") == "", // as cordon serve
		Executor:  o.exec, MaxBody: 64 << 10, MaxWall: o.maxWall, RescueAfter: o.rescue, MaxPending: o.pending, Workers: o.workers, WorkerID: "test-" + filepath.Base(dir),
		Broker: o.broker, AuditKey: sharedAuditKey(), Secrets: o.secrets, SecretsConfigured: o.configured}
	if o.log != nil {
		cfg.Log = slog.New(slog.NewJSONHandler(o.log, nil))
	}
	if o.real {
		// As cordon serve runs them: the sandboxes started by a spawner.
		// Registered before the server's cleanup, so closed after it.
		sp, err := sandbox.StartSpawner()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sp.Close() })
		cfg.Spawner = sp
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		sctx, c := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		s.Stop(sctx)
		c()
		cancel()
		st.Close()
	})
	return &env{t: t, srv: s, url: hs.URL, store: st, dir: dir, keys: map[string]string{"none": "", "admin": adminKey}}
}

type resp struct {
	code int
	body []byte
}

func (r resp) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d %s: %v", r.code, r.body, err)
	}
}

func (e *env) do(method, path, key, body string, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, b}
}

func (e *env) must(code int, method, path, key, body string) resp {
	e.t.Helper()
	r := e.do(method, path, key, body)
	if r.code != code {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, r.code, bytes.TrimSpace(r.body), code)
	}
	return r
}

// setup makes tenants a and b, each with a bare key, a member and an
// approver, and a project "p" in each: keys are "tenant", "member",
// "approver" (tenant a) and "other", "other-member", "other-approver"
// (tenant b).
func (e *env) setup(project string) {
	e.t.Helper()
	for _, tn := range []struct{ name, prefix string }{{"a", ""}, {"b", "other-"}} {
		var ten struct{ ID string }
		e.must(201, "POST", "/v1/tenants", adminKey, `{"name":"`+tn.name+`","ceiling":`+ceiling+`}`).json(e.t, &ten)
		var k struct{ Secret string }
		e.must(201, "POST", "/v1/tenants/"+ten.ID+"/keys", adminKey, ``).json(e.t, &k)
		bare := "tenant"
		if tn.prefix != "" {
			bare = "other"
			e.tenantB = ten.ID
		} else {
			e.tenantA = ten.ID
		}
		e.keys[bare] = k.Secret
		for _, role := range []string{"member", "approver"} {
			var u struct{ ID string }
			e.must(201, "POST", "/v1/tenants/"+ten.ID+"/users", adminKey, `{"name":"`+role+`","role":"`+role+`"}`).json(e.t, &u)
			e.must(201, "POST", "/v1/tenants/"+ten.ID+"/keys", adminKey, `{"user":"`+u.ID+`"}`).json(e.t, &k)
			e.keys[tn.prefix+role] = k.Secret
			if tn.prefix == "" && role == "member" {
				e.member = u.ID
			} else if tn.prefix == "" {
				e.approver = u.ID
			}
		}
		name := "p"
		if tn.prefix != "" {
			name = "q" // tenant b has no project p: p is another tenant's
		}
		e.must(200, "PUT", "/v1/projects/"+name, e.keys[tn.prefix+"member"], project)
	}
}

// submit submits task t of project p as key and returns the run id.
func (e *env) submit(key string) string {
	e.t.Helper()
	var r struct{ ID, State string }
	e.must(201, "POST", "/v1/projects/p/runs", key, `{"task":"t"}`).json(e.t, &r)
	if r.State != store.StatePending {
		e.t.Fatalf("a new run is %s", r.State)
	}
	return r.ID
}

// wait polls the run until it is in a terminal state.
func (e *env) wait(id, key string, within time.Duration) *store.Run {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var r store.Run
		e.must(200, "GET", "/v1/runs/"+id, key, "").json(e.t, &r)
		if store.Terminal(r.State) {
			return &r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s still %s after %s", id, r.State, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bothEngines runs f on an embedded SQLite server and on a PostgreSQL one.
func bothEngines(t *testing.T, f func(t *testing.T, pg bool)) {
	t.Run("sqlite", func(t *testing.T) { f(t, false) })
	t.Run("postgres", func(t *testing.T) { f(t, true) })
}

// doQuiet is do for goroutines: a transport error is status 0.
func (e *env) doQuiet(method, path, key, body string) resp {
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		return resp{}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := loadClient.Do(req)
	if err != nil {
		return resp{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, b}
}

var loadClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000}, Timeout: time.Minute}

func (r resp) jsonQuiet(v any) error { return json.Unmarshal(r.body, v) }
