package pool

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/energy"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/tier"
)

// testGrants is package sandbox's test grant set: untrusted code and the
// common tools, like the CLI's default.
const testGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"sh"},{"name":"dash"},{"name":"bash"},{"name":"python3"},{"name":"cat"},{"name":"echo"},
{"name":"true"},{"name":"false"},{"name":"ls"},{"name":"cp"},{"name":"ln"},{"name":"mkdir"},{"name":"rm"},
{"name":"sleep"},{"name":"id"},{"name":"head"},{"name":"sha256sum"},{"name":"chmod"},{"name":"env"}]}}`

func testSpec(t testing.TB) *sandbox.Spec {
	t.Helper()
	gs, err := grant.Parse([]byte(testGrants))
	if err != nil {
		t.Fatal(err)
	}
	s := &sandbox.Spec{Grants: gs, Tier: tier.S2, StateDir: t.TempDir(), Limits: sandbox.DefaultLimits()}
	s.Limits.Wall = 30 * time.Second
	s.Limits.CgroupOptional = true
	return s
}

func newPool(t testing.TB, size int) *Pool {
	t.Helper()
	s := testSpec(t)
	p, err := New(context.Background(), Config{Spec: s, Env: EnvAddress(s), Size: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

func waitReady(t testing.TB, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := p.Status()
		if st.Ready >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool has %d ready slots after 20 s, want %d (last error: %s)", st.Ready, n, st.LastErr)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestPoolClaimRuns: a claim with the pool's key takes a slot, is
// charged the slot's idle energy (never zero, provenance Estimator), and
// runs its program under the pool's grants; the slot runs once; claims
// for another environment or another policy are refused and take no
// slot; the books balance.
func TestPoolClaimRuns(t *testing.T) {
	p := newPool(t, 2)
	waitReady(t, p, 2)
	time.Sleep(5 * time.Millisecond) // some idle time to be charged
	c, err := p.Claim(p.Key())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	if c.Charge.UJ == 0 || c.Charge.Provenance != energy.Estimator || c.Charge.Parked <= 0 {
		t.Fatalf("charge %+v", c.Charge)
	}
	// 2 W for ≥ 5 ms is ≥ 10 000 µJ.
	if c.Charge.UJ < 10_000 {
		t.Fatalf("charge of %d µJ for %s parked at 2 W", c.Charge.UJ, c.Charge.Parked)
	}
	var out bytes.Buffer
	if err := c.Start(context.Background(), &sandbox.Launch{Argv: []string{"echo", "warm"}, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait()
	if err != nil || res.ExitCode != 0 || out.String() != "warm\n" {
		t.Fatalf("run: %v, %+v, %q", err, res, out.String())
	}
	if err := c.Start(context.Background(), &sandbox.Launch{Argv: []string{"true"}}); !errors.Is(err, ErrGone) {
		t.Fatalf("second Start of a claim: %v, want ErrGone", err)
	}
	// A program the pool's grants do not allow is refused, as cold.
	c2, err := p.Claim(p.Key())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Destroy()
	var ee *sandbox.ExitError
	if err := c2.Start(context.Background(), &sandbox.Launch{Argv: []string{"/usr/bin/tail", "/etc/passwd"}}); !errors.As(err, &ee) || ee.Code != sandbox.ExitRefused {
		t.Fatalf("a program outside the grants: %v", err)
	}

	waitReady(t, p, 1)
	before := p.Status()
	other := p.Key()
	other.Env = "b3:0000"
	if _, err := p.Claim(other); !errors.Is(err, ErrMismatch) {
		t.Fatalf("claim for another environment: %v", err)
	}
	s := testSpec(t)
	s.Limits.PIDs = 17
	if _, err := p.Claim(KeyFor(s, p.Key().Env)); !errors.Is(err, ErrMismatch) {
		t.Fatalf("claim for other limits: %v", err)
	}
	after := p.Status()
	if after.Totals.Claims != before.Totals.Claims || after.Totals.Claims != 2 {
		t.Fatalf("refused claims took slots: %+v → %+v", before.Totals, after.Totals)
	}
	if !after.Totals.Balanced() {
		t.Fatalf("books do not balance: %+v", after.Totals)
	}
}

// TestPoolDiscardsBrokenSlot: a slot whose init died is never handed
// out: the claim gets the next slot, and the dead one is evicted with
// its idle energy as overhead (not zero).
func TestPoolDiscardsBrokenSlot(t *testing.T) {
	p := newPool(t, 2)
	waitReady(t, p, 2)
	p.mu.Lock()
	dead := p.ready[0]
	p.mu.Unlock()
	if err := syscall.Kill(dead.p.InitPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for dead.p.Check() == nil {
		time.Sleep(time.Millisecond)
	}
	c, err := p.Claim(p.Key())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	if c.Slot == dead.id {
		t.Fatal("the dead slot was handed out")
	}
	if err := c.Start(context.Background(), &sandbox.Launch{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Wait(); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	st := p.Status()
	if st.Totals.Evicted != 1 || st.Totals.Overhead == 0 || !st.Totals.Balanced() {
		t.Fatalf("books after a dead slot: %+v", st.Totals)
	}
}

// TestIdleConservation: with claims (each running a program), evictions
// and status reads racing each other and Stop, the pool's total idle
// energy is always claimed + overhead + pending; at the end nothing is
// pending, the claims' charges sum to the claimed total, and every
// eviction recorded a non-zero overhead. Run with -race.
func TestIdleConservation(t *testing.T) {
	p := newPool(t, 3)
	waitReady(t, p, 2)
	var (
		charged atomic.Uint64
		claims  atomic.Int64
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := p.Claim(p.Key())
				if errors.Is(err, ErrEmpty) {
					time.Sleep(time.Millisecond)
					continue
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				charged.Add(c.Charge.UJ)
				claims.Add(1)
				if err := c.Start(context.Background(), &sandbox.Launch{Argv: []string{"true"}}); err != nil {
					t.Error(err)
				} else if res, err := c.Wait(); err != nil || res.ExitCode != 0 {
					t.Errorf("%v %+v", err, res)
				}
				c.Destroy()
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
				p.Evict()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				if st := p.Status(); !st.Totals.Balanced() {
					t.Errorf("books do not balance: %+v", st.Totals)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	final := make(chan Totals)
	go func() { final <- p.Stop() }() // Stop races the claimers
	first := <-final
	close(stop)
	wg.Wait()
	tot := p.Stop() // again: the books were final at the first Stop
	if !tot.Balanced() || tot.Pending != 0 || tot.Parked != 0 || tot != first {
		t.Fatalf("final books: %+v (at the first Stop: %+v)", tot, first)
	}
	if tot.Claimed != charged.Load() || int64(tot.Claims) != claims.Load() {
		t.Fatalf("claimed %d µJ in %d claims, the claims were charged %d µJ in %d", tot.Claimed, tot.Claims, charged.Load(), claims.Load())
	}
	if tot.Claims == 0 || tot.Evicted == 0 || tot.Overhead < uint64(tot.Evicted) {
		t.Fatalf("the test exercised too little, or an eviction recorded zero: %+v", tot)
	}
	t.Logf("books: %+v", tot)
}

// TestClaimWaitsForRefill: back-to-back claims on a pool of one outrun
// its refill; ClaimWait has the next slot prepared at once and waits for
// it, while a mismatched key is still refused at once.
func TestClaimWaitsForRefill(t *testing.T) {
	p := newPool(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		c, err := p.ClaimWait(ctx, p.Key())
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if err := c.Start(ctx, &sandbox.Launch{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		if res, err := c.Wait(); err != nil || res.ExitCode != 0 {
			t.Fatalf("%v %+v", err, res)
		}
		c.Destroy()
	}
	other := p.Key()
	other.Policy = "b3:other"
	start := time.Now()
	if _, err := p.ClaimWait(ctx, other); !errors.Is(err, ErrMismatch) || time.Since(start) > time.Second {
		t.Fatalf("a mismatched ClaimWait: %v after %s", err, time.Since(start))
	}
	p.Stop()
	start = time.Now()
	if _, err := p.ClaimWait(ctx, p.Key()); !errors.Is(err, ErrClosed) || time.Since(start) > time.Second {
		t.Fatalf("ClaimWait on a stopped pool: %v after %s", err, time.Since(start))
	}

	// A pool that cannot prepare (its state directory is missing): a
	// waiting claim ends with the preparation's error when its context
	// does, and at once with ErrClosed when the pool stops.
	s := testSpec(t)
	s.StateDir = "/nonexistent/cordon-state"
	broken, err := New(context.Background(), Config{Spec: s, Env: "b3:env", Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancelShort()
	if _, err := broken.ClaimWait(short, broken.Key()); !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "last preparation failed") {
		t.Fatalf("ClaimWait on a pool that cannot prepare: %v", err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := broken.ClaimWait(ctx, broken.Key())
		waiting <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	broken.Stop()
	if err := <-waiting; !errors.Is(err, ErrClosed) || time.Since(start) > 2*time.Second {
		t.Fatalf("a waiting claim when the pool stopped: %v after %s", err, time.Since(start))
	}
}
