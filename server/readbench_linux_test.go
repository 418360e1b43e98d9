package server_test

import (
	"sync"
	"testing"
)

// BenchmarkReadRun measures GET /v1/runs/{run} over loopback with 50
// concurrent clients (go test -bench ReadRun -cpuprofile …).
func BenchmarkReadRun(b *testing.B) {
	e := newEnv(b, envOpts{})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	readConcurrently(b, e, "/v1/runs/"+id, e.keys["member"])
}

// BenchmarkListRuns lists the newest 20 of a tenant's 1,000 runs, from 50
// clients at once.
func BenchmarkListRuns(b *testing.B) {
	e := newEnv(b, envOpts{})
	e.setup(projectFor("true"))
	for range 1000 {
		e.submit(e.keys["member"])
	}
	readConcurrently(b, e, "/v1/runs?limit=20", e.keys["tenant"])
}

// readConcurrently times b.N reads of path with key, from 50 clients at
// once.
func readConcurrently(b *testing.B, e *env, path, key string) {
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/50 + 1
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				e.doQuiet("GET", path, key, "")
			}
		}()
	}
	wg.Wait()
}
