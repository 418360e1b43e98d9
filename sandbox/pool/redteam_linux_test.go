package pool

// Red-team tests of warm pools (docs/security/redteam-pool.md). Each
// asserts the secure behaviour: a test that fails here is an attack that
// succeeded.

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
)

func gone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && (st[i+2] == 'Z' || st[i+2] == 'X') {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestRedteamPoolStopLeavesNoInit: Stop leaves no parked init behind.
func TestRedteamPoolStopLeavesNoInit(t *testing.T) {
	p := newPool(t, 2)
	waitReady(t, p, 2)
	p.mu.Lock()
	var pids []int
	for _, s := range p.ready {
		pids = append(pids, s.p.InitPID())
	}
	p.mu.Unlock()
	tot := p.Stop()
	if tot.Pending != 0 || !tot.Balanced() {
		t.Errorf("books after Stop: %+v", tot)
	}
	for _, pid := range pids {
		if !gone(pid, 5*time.Second) {
			t.Errorf("a parked init (pid %d) outlives Stop", pid)
		}
	}
}

// TestRedteamPoolStoppedInitNotHandedOut: a parked init stopped by a
// signal (SIGSTOP from the host user, a debugger's attach) is not handed
// to a claim that then waits for the wall clock: the claim is served by
// a healthy slot (or refused) promptly.
func TestRedteamPoolStoppedInitNotHandedOut(t *testing.T) {
	p := newPool(t, 2)
	waitReady(t, p, 2)
	p.mu.Lock()
	stopped := p.ready[0].p.InitPID()
	p.mu.Unlock()
	if err := syscall.Kill(stopped, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(stopped, syscall.SIGCONT)
	time.Sleep(50 * time.Millisecond)
	c, err := p.Claim(p.Key())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	var out bytes.Buffer
	t0 := time.Now()
	err = c.Start(context.Background(), &sandbox.Launch{Argv: []string{"echo", "ok"}, Stdout: &out, Wall: 3 * time.Second})
	var res *sandbox.Result
	if err == nil {
		res, err = c.Wait()
	}
	el := time.Since(t0)
	if c.p.InitPID() == stopped && (el > 2*time.Second || res != nil && res.TimedOut) {
		t.Errorf("FINDING: the claim was handed the stopped slot and waited %s for the wall clock (result %+v, %v)", el.Round(time.Millisecond), res, err)
	}
}

// TestRedteamIdleCoresRoundUp: a slot allotted 1.999 CPUs idles on two
// cores' worth of reservation; the idle model must not round its charge
// down to one core (SPEC §12.3 rounds the energy up, never down).
func TestRedteamIdleCoresRoundUp(t *testing.T) {
	l := sandbox.DefaultLimits()
	l.CPUMillis = 1999
	if m := DefaultIdle(l); m.Cores < 2 {
		t.Errorf("FINDING: DefaultIdle of %d CPU millis charges %d core(s): the idle charge is rounded down by up to half", l.CPUMillis, m.Cores)
	}
}

// TestRedteamPolicyIDSeparates: grant sets, tiers, tenants and limits
// that differ in anything a run's containment depends on have different
// PolicyIDs (no key confusion); the wall clock alone does not.
func TestRedteamPolicyIDSeparates(t *testing.T) {
	base := testSpec(t)
	variant := func(js string, f func(*sandbox.Spec)) *sandbox.Spec {
		s := *base
		if js != "" {
			gs, err := grant.Parse([]byte(js))
			if err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			s.Grants = gs
		}
		if f != nil {
			f(&s)
		}
		return &s
	}
	trimmed := strings.TrimSuffix(testGrants, "}")
	specs := map[string]*sandbox.Spec{
		"base":      base,
		"deny.fs":   variant(trimmed+`,"deny":{"fs":["/etc/hosts"]}}`, nil),
		"fs":        variant(trimmed+`,"fs":[{"path":"/var/tmp","access":"ro"}]}`, nil),
		"fewer":     variant(strings.Replace(testGrants, `{"name":"env"}`, `{"name":"id"}`, 1), nil),
		"tenant":    variant("", func(s *sandbox.Spec) { s.Tenant = "a" }),
		"tenant2":   variant("", func(s *sandbox.Spec) { s.Tenant = "a\x00" }),
		"memory":    variant("", func(s *sandbox.Spec) { s.Limits.MemoryBytes++ }),
		"pids":      variant("", func(s *sandbox.Spec) { s.Limits.PIDs++ }),
		"cpu":       variant("", func(s *sandbox.Spec) { s.Limits.CPUMillis++ }),
		"nofile":    variant("", func(s *sandbox.Spec) { s.Limits.NoFile++ }),
		"fsize":     variant("", func(s *sandbox.Spec) { s.Limits.FileSizeBytes++ }),
		"tmp":       variant("", func(s *sandbox.Spec) { s.Limits.TmpBytes++ }),
		"work":      variant("", func(s *sandbox.Spec) { s.Limits.WorkBytes++ }),
		"cgroupopt": variant("", func(s *sandbox.Spec) { s.Limits.CgroupOptional = !s.Limits.CgroupOptional }),
	}
	seen := map[string]string{}
	for name, s := range specs {
		id := PolicyID(s)
		if other, ok := seen[id]; ok {
			t.Errorf("FINDING: %s and %s share PolicyID %s", name, other, id)
		}
		seen[id] = name
	}
	wall := variant("", func(s *sandbox.Spec) { s.Limits.Wall *= 2 })
	if PolicyID(wall) != PolicyID(base) {
		t.Errorf("the wall clock changes the PolicyID")
	}
}
