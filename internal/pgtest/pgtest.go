// Package pgtest gives tests a PostgreSQL database: a fresh database on
// the server a DSN names (CI sets one after starting Debian's
// PostgreSQL), or else on a private cluster it starts once per test
// binary (initdb and pg_ctl in a temporary directory, listening only on
// a unix socket there, run as the postgres user when the tests run as
// root, because PostgreSQL refuses to run as root).
//
// The caller reads the environment (library code does not) and says
// whether PostgreSQL is required: then a missing PostgreSQL fails the
// test instead of skipping it.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

var (
	mu      sync.Mutex
	cluster *private // guarded by mu
	failed  error    // guarded by mu: why the cluster could not start
)

type private struct {
	dir, pgctl string
	asUser     string
	dsn        string // the postgres database
}

// DSN returns the DSN of a new, empty database. base is a server DSN
// from the environment ("" to use a private cluster); required makes an
// unavailable PostgreSQL a failure rather than a skip.
func DSN(t testing.TB, base string, required bool) string {
	t.Helper()
	if base == "" {
		mu.Lock()
		if cluster == nil && failed == nil {
			cluster, failed = start()
		}
		c, err := cluster, failed
		mu.Unlock()
		if err != nil {
			if required {
				t.Fatalf("PostgreSQL is required (CORDON_CI=1) but unavailable: %v", err)
			}
			t.Skipf("no PostgreSQL: %v (set CORDON_TEST_POSTGRES to a server's DSN, or install PostgreSQL's initdb and pg_ctl)", err)
		}
		base = c.dsn
	}
	var b [6]byte
	rand.Read(b[:])
	name := "cordon_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		if required {
			t.Fatalf("PostgreSQL is required (CORDON_CI=1): create database: %v", err)
		}
		t.Skipf("PostgreSQL at %s: %v", redact(base), err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return u.Redacted()
}

// Stop stops the private cluster, if one was started; call it from
// TestMain after m.Run.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if cluster == nil {
		return
	}
	run(cluster.asUser, cluster.pgctl, "-D", filepath.Join(cluster.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(cluster.dir)
	cluster = nil
}

func start() (*private, error) {
	initdb, err := find("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := find("pg_ctl")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cordon-pg-")
	if err != nil {
		return nil, err
	}
	c := &private{dir: dir, pgctl: pgctl}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		c.asUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	if out, err := run(c.asUser, initdb, "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := "-c listen_addresses='' -k " + dir + " -c fsync=off -c max_connections=200"
	if out, err := run(c.asUser, pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	c.dsn = "postgres:///postgres?host=" + url.QueryEscape(dir) + "&user=postgres&sslmode=disable"
	return c, nil
}

func run(asUser, prog string, args ...string) ([]byte, error) {
	if asUser != "" {
		args = append([]string{"-u", asUser, "--", prog}, args...)
		prog = "runuser"
	}
	cmd := exec.Command(prog, args...)
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

// find looks for a PostgreSQL program on PATH, then in Debian's versioned
// directories.
func find(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(dirs) > 0 {
		return dirs[len(dirs)-1], nil
	}
	return "", fmt.Errorf("%s not found on PATH or in /usr/lib/postgresql/*/bin", name)
}

// Required reports whether the environment value of CORDON_CI makes
// PostgreSQL required.
func Required(ci string) bool { return strings.TrimSpace(ci) == "1" }
