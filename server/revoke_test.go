package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-dev/cordon/internal/pgtest"
	"github.com/cordon-dev/cordon/store"
)

// TestRevokedKeyRefusedAtOnceEverywhere: no server uses a key after
// its revocation has returned. On PostgreSQL two servers share the
// database; on SQLite one server holds it (a second is refused) and
// caches its hot reads (store.CacheHotReads). A key reads through every
// server, warming anything one could cache, then is revoked (and another
// rotated) through the first, and the very next request with it to
// every server is refused 401, under reads from other goroutines in
// flight.
func TestRevokedKeyRefusedAtOnceEverywhere(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			dsn := filepath.Join(dir, "cordon.db")
			if engine == "postgres" {
				dsn = pgtest.DSN(t, os.Getenv("CORDON_TEST_POSTGRES"), pgtest.Required(os.Getenv("CORDON_CI")))
			}
			a := newEnv(t, envOpts{dir: filepath.Join(dir, "a"), dsn: dsn})
			a.setup(projectFor("true"))
			b := a // SQLite: the one server
			if engine == "postgres" {
				b = newEnv(t, envOpts{dir: filepath.Join(dir, "b"), dsn: dsn})
			} else {
				other, err := store.Open(t.Context(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				if err := other.CacheHotReads(); !errors.Is(err, store.ErrDatabaseHeld) {
					t.Errorf("a second server on the SQLite database: %v, want ErrDatabaseHeld", err)
				}
				other.Close()
			}
			for name, key := range map[string]string{"member": a.keys["member"], "approver": a.keys["approver"]} {
				for _, e := range []*env{a, b, b, a} {
					e.must(200, "GET", "/v1/whoami", key, "")
					e.must(200, "GET", "/v1/runs?limit=1", key, "")
				}
				var who struct{ Key string }
				a.must(200, "GET", "/v1/whoami", key, "").json(t, &who)
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() { // other reads in flight with the same key
					defer close(done)
					for {
						select {
						case <-stop:
							return
						default:
							b.doQuiet("GET", "/v1/runs?limit=1", key, "")
						}
					}
				}()
				if name == "member" {
					a.must(200, "DELETE", "/v1/tenants/"+a.tenantA+"/keys/"+who.Key, adminKey, "")
				} else {
					a.must(201, "POST", "/v1/tenants/"+a.tenantA+"/keys/"+who.Key+"/rotate", adminKey, "")
				}
				for _, e := range []*env{b, a} {
					if r := e.do("GET", "/v1/runs?limit=1", key, ""); r.code != 401 {
						t.Errorf("%s key, the request right after its revocation: %d %s, want 401", name, r.code, r.body)
					}
					if r := e.do("GET", "/v1/whoami", key, ""); r.code != 401 {
						t.Errorf("%s key, whoami right after its revocation: %d %s, want 401", name, r.code, r.body)
					}
				}
				close(stop)
				<-done
			}
			// Keys not revoked still work on both.
			a.must(200, "GET", "/v1/whoami", a.keys["tenant"], "")
			b.must(200, "GET", "/v1/whoami", a.keys["tenant"], "")
		})
	}
}
