package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/egress"
)

// recordingBackend is a fake HTTP secrets backend that records every
// request it receives.
type recordingBackend struct {
	mu   sync.Mutex
	reqs []string
	data map[string]string // namespace/name → value
}

func (r *recordingBackend) Get(_ context.Context, ns, name string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, ns+"|"+name)
	v, ok := r.data[ns+"/"+name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", broker.ErrNotFound, name)
	}
	return []byte(v), nil
}

func (r *recordingBackend) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

func testManifest(t *testing.T, grants string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(`{"type":"cordon.manifest.v1","task":"t",
"model":{"provider":"replay","name":"recorded","replay":"session.jsonl"},
"inputs":[],"outputs":[],"commands":["true"],
"grants":{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,` + grants + `
 "exec":{"allow":[{"name":"true"}]},"limits":{"wall_ms":60000,"memory_bytes":268435456,"pids":64}},
"budgets":{"max_turns":4,"max_model_calls":4,"max_input_tokens":100000,"max_output_tokens":10000,"wall_ms":120000,"max_loops":0,"max_pending_tasks":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDeliveryEntitlementMatrix: tenant × reference, through the path a
// run takes (resolveDelivery, with the run's tenant). Each tenant gets
// its own secrets only; a reference outside the tenant's namespace (or
// an operator source) is refused before the HTTP backend, which records
// every request, sees anything — and every request it does see is in
// the asking tenant's own namespace.
func TestDeliveryEntitlementMatrix(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	st, err := broker.NewStore(t.TempDir(), id.String())
	if err != nil {
		t.Fatal(err)
	}
	tenants := []string{"ten_a", "ten_b"}
	for _, ten := range tenants {
		if err := st.Put(ten, "db", []byte(ten+"-db")); err != nil {
			t.Fatal(err)
		}
	}
	be := &recordingBackend{data: map[string]string{"tenant/ten_a/tok": "ten_a-tok", "tenant/ten_b/tok": "ten_b-tok"}}
	b := &broker.Broker{Store: st, HTTP: be}
	m := testManifest(t, `"env":["V"],`)
	refs := []struct {
		ref     string
		own     bool // resolves to the tenant's own value
		backend bool // asks the HTTP backend (in the tenant's namespace)
	}{
		{"db", true, false},
		{"store:db", true, false},
		{"http:tok", true, true},
		{"http:nope", false, true},
		{"../ten_b/db", false, false},
		{"store:../ten_b/db", false, false},
		{"http:../ten_b/tok", false, false},
		{"http:tenant/ten_b/tok", false, false},
		{"http:ten_b/tok", false, false},
		{"tenant/ten_b/db", false, false},
		{"file:/etc/shadow", false, false},
		{"env:CORDON_ADMIN_KEY", false, false},
		{"vault:tok", false, false},
		{"http:tok\n", false, false},
		{"", false, false},
	}
	for _, ten := range tenants {
		for _, c := range refs {
			be.take()
			tc := TaskConfig{Secrets: []SecretUse{{Ref: c.ref, Env: "V"}}}
			var log bytes.Buffer
			d, err := resolveDelivery(t.Context(), b, ten, "run_test", tc, m, &log)
			reqs := be.take()
			cell := fmt.Sprintf("tenant %s ref %q", ten, c.ref)
			if c.own {
				if err != nil || !strings.HasPrefix(d.Env["V"], ten+"-") {
					t.Errorf("%s: %v %v, want its own value", cell, err, d)
				}
			} else if err == nil {
				t.Errorf("%s: resolved %q, want refused", cell, d.Env["V"])
			}
			if !c.backend && len(reqs) > 0 {
				t.Errorf("%s: the backend saw %v, want nothing", cell, reqs)
			}
			for _, q := range reqs {
				if !strings.HasPrefix(q, "tenant/"+ten+"|") {
					t.Errorf("%s: the backend was asked %q, outside the tenant's namespace", cell, q)
				}
			}
			if strings.Contains(log.String(), "-db") || strings.Contains(log.String(), "-tok") {
				t.Errorf("%s: the log holds a value: %s", cell, log.String())
			}
			if d != nil {
				d.Destroy()
			}
		}
	}
}

// TestDeliveryValues: env delivery names the variable; header and
// repository deliveries become injections for exactly their destination
// whose labels name the reference, never the value; Destroy wipes them.
func TestDeliveryValues(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	st, _ := broker.NewStore(t.TempDir(), id.String())
	st.Put("ten_a", "api", []byte("api-secret"))
	st.Put("ten_a", "git", []byte("git-secret"))
	b := &broker.Broker{Store: st}
	m := testManifest(t, `"env":["CORDON_GIT_URL"],"egress":[{"cidr":"127.0.0.1/32","proto":"tcp","ports":[8080,8080]}],`)
	tc := TaskConfig{
		Secrets:    []SecretUse{{Ref: "api", Header: "X-Api-Key", Prefix: "Key ", URL: "http://127.0.0.1:8080"}},
		Repository: &RepoConfig{URL: "http://127.0.0.1:8080/r.git", Token: "git"},
	}
	var log bytes.Buffer
	d, err := resolveDelivery(t.Context(), b, "ten_a", "run_test", tc, m, &log)
	if err != nil {
		t.Fatal(err)
	}
	if d.Env[GitURLEnv] != "http://127.0.0.1:8080/r.git" || len(d.Inject) != 2 {
		t.Fatalf("delivery %+v", d)
	}
	// The run's review ref, and the repository's confinement: git's
	// requests for /r.git only, pushes to the review ref only.
	if d.Env[GitPushRefEnv] != "refs/heads/cordon/review/run_test" || d.Repo == nil ||
		*d.Repo != (egress.Repository{Host: "127.0.0.1", Port: 8080, Path: "/r.git", PushRef: "refs/heads/cordon/review/run_test"}) {
		t.Errorf("the repository's delivery: env %q, confinement %+v", d.Env[GitPushRefEnv], d.Repo)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:git-secret"))
	if in := d.Inject[0]; in.Host != "127.0.0.1" || in.Port != 8080 || in.Header != "X-Api-Key" || string(in.Value) != "Key api-secret" {
		t.Errorf("injection %+v", in)
	}
	if in := d.Inject[1]; in.Header != "Authorization" || in.Path != "/r.git" || string(in.Value) != basic || !strings.Contains(in.Label, `"git"`) {
		t.Errorf("injection %+v", in)
	}
	for _, in := range d.Inject {
		if strings.Contains(in.Label, "secret-") {
			t.Errorf("label %q holds the value", in.Label)
		}
	}
	if strings.Contains(log.String(), "secret-") {
		t.Errorf("log %q holds a value", log.String())
	}
	v0, v1 := d.Inject[0].Value, d.Inject[1].Value
	d.Destroy()
	if strings.Trim(string(v0), "\x00") != "" || strings.Trim(string(v1), "\x00") != "" {
		t.Errorf("Destroy left %q %q", v0, v1)
	}
	// A secret that does not decrypt: the error names the reference, not
	// the store's paths (those go to the log).
	dir := st.Dir
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".age") {
			os.WriteFile(p, []byte("not age"), 0o600)
		}
		return nil
	})
	log.Reset()
	if _, err := resolveDelivery(t.Context(), b, "ten_a", "run_test", tc, m, &log); err == nil || strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), `"api"`) {
		t.Errorf("a broken secret: %v", err)
	}
	// No broker: a task that names secrets fails, naming the fix.
	if _, err := resolveDelivery(t.Context(), nil, "ten_a", "run_test", tc, m, &log); !errors.Is(err, errNoBroker) {
		t.Errorf("no broker: %v", err)
	}
}

// TestCheckDelivery: the project-write checks of secrets and repository.
func TestCheckDelivery(t *testing.T) {
	m := testManifest(t, `"env":["TOKEN"],"egress":[{"host":"api.example.com","proto":"tcp","ports":[80,80]}],`)
	git := testManifest(t, `"egress":[{"host":"git.example.com","proto":"tcp","ports":[80,80]}],`)
	gitTLS := testManifest(t, `"egress":[{"host":"git.example.com","proto":"tcp","ports":[443,443]}],`)
	pushRef := testManifest(t, `"env":["CORDON_GIT_PUSH_REF"],`)
	for name, c := range map[string]struct {
		m    *manifest.Manifest
		tc   TaskConfig
		want string // "" when accepted
	}{
		"env":                  {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Env: "TOKEN"}}}, ""},
		"env not granted":      {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Env: "OTHER"}}}, `does not list "OTHER"`},
		"env twice":            {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Env: "TOKEN"}, {Ref: "b", Env: "TOKEN"}}}, "twice"},
		"operator ref":         {m, TaskConfig{Secrets: []SecretUse{{Ref: "file:/etc/shadow", Env: "TOKEN"}}}, "operator source"},
		"other namespace":      {m, TaskConfig{Secrets: []SecretUse{{Ref: "../t/a", Env: "TOKEN"}}}, "bad secret reference"},
		"no delivery":          {m, TaskConfig{Secrets: []SecretUse{{Ref: "a"}}}, "say how"},
		"both":                 {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Env: "TOKEN", Header: "Authorization", URL: "http://api.example.com"}}}, "not both"},
		"header":               {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", Prefix: "Bearer ", URL: "http://api.example.com"}}}, ""},
		"header https":         {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "https://api.example.com"}}}, "certificate authority"},
		"header not granted":   {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "http://evil.example.com"}}}, "does not allow egress"},
		"header other port":    {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "http://api.example.com:8080"}}}, "does not allow egress"},
		"header with path":     {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "http://api.example.com/x"}}}, "origin"},
		"header userinfo":      {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "http://u@api.example.com"}}}, "refused"},
		"header Host":          {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Host", URL: "http://api.example.com"}}}, "frames or routes"},
		"repo":                 {git, TaskConfig{Repository: &RepoConfig{URL: "http://git.example.com/r.git", Token: "t"}}, ""},
		"repo no token":        {gitTLS, TaskConfig{Repository: &RepoConfig{URL: "https://git.example.com/r.git"}}, ""},
		"repo https token":     {gitTLS, TaskConfig{Repository: &RepoConfig{URL: "https://git.example.com/r.git", Token: "t"}}, "certificate authority"},
		"repo elsewhere":       {git, TaskConfig{Repository: &RepoConfig{URL: "http://evil.example.com/r.git"}}, "exactly"},
		"repo ext":             {git, TaskConfig{Repository: &RepoConfig{URL: "ext::sh -c id"}}, "git remote refused"},
		"repo file":            {git, TaskConfig{Repository: &RepoConfig{URL: "file:///srv/r.git"}}, "git remote refused"},
		"repo on the api host": {m, TaskConfig{Repository: &RepoConfig{URL: "http://api.example.com/r.git"}}, ""},
		"repo bad user":        {git, TaskConfig{Repository: &RepoConfig{URL: "http://git.example.com/r.git", Token: "t", User: "a:b"}}, "repository.user"},
		"env and header":       {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "http://api.example.com"}, {Ref: "store:a", Env: "TOKEN"}}}, "both delivered by env"},
		"two headers":          {m, TaskConfig{Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "http://api.example.com"}, {Ref: "store:a", Header: "X-Key", URL: "http://api.example.com"}}}, ""},
		"push ref by env":      {pushRef, TaskConfig{Secrets: []SecretUse{{Ref: "a", Env: "CORDON_GIT_PUSH_REF"}}}, "twice"},
		"https repo env":       {testManifest(t, `"env":["TOKEN"],"egress":[{"host":"git.example.com","proto":"tcp","ports":[443,443]}],`), TaskConfig{Repository: &RepoConfig{URL: "https://git.example.com/r.git"}, Secrets: []SecretUse{{Ref: "a", Env: "TOKEN"}}}, "cannot receive a secret by env"},
		"repo and header":      {git, TaskConfig{Repository: &RepoConfig{URL: "http://git.example.com/r.git", Token: "t"}, Secrets: []SecretUse{{Ref: "a", Header: "Authorization", URL: "http://git.example.com"}}}, "already"},
	} {
		err := checkDelivery(c.tc, c.m)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}
