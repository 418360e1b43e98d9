package session

// These tests run commands in the real sandbox (root, namespaces,
// seccomp, Landlock, cgroups): they fail, never skip, on a host without
// them, as every sandbox test does.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/tier"
)

const testGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"sh"},{"name":"python3"},{"name":"cat"},{"name":"true"},{"name":"cp"},{"name":"sleep"}]}}`

// egressGrants: python3, and one egress rule (a port nothing listens
// on), so that the proxy serves the program and denies the rest.
const egressGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"python3"}]},"egress":[{"cidr":"127.0.0.1/32","proto":"tcp","ports":[1,1]}]}`

func parseGrants(t testing.TB, s string) *grant.Set {
	t.Helper()
	gs, err := grant.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// fixture is a workspace, a state directory and a journal.
type fixture struct {
	ws, state, journal string
	w                  *journal.Writer
	rec                *Recorder
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{ws: filepath.Join(dir, "ws"), state: filepath.Join(dir, "state"), journal: filepath.Join(dir, "journal.jsonl")}
	for _, d := range []string{f.ws, f.state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	w, err := journal.Open(f.journal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	f.w, f.rec = w, NewRecorder(w, nil)
	return f
}

// entries reads the journal back as (type, body JSON) pairs.
func (f *fixture) entries(t testing.TB) []journal.Entry {
	t.Helper()
	b, err := os.ReadFile(f.journal)
	if err != nil {
		t.Fatal(err)
	}
	es, _, err := journal.Scan(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func types(es []journal.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}

func body(t testing.TB, e journal.Entry) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Body().AppendJCS(nil), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// fakePowercap is a powercap tree with one RAPL package domain.
func fakePowercap(t testing.TB) (root string, set func(uint64)) {
	t.Helper()
	root = t.TempDir()
	z := filepath.Join(root, "intel-rapl:0")
	if err := os.Mkdir(z, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(z, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("name", "package-0")
	write("max_energy_range_uj", "262143328850")
	write("energy_uj", "1000")
	return root, func(v uint64) { write("energy_uj", strconv.FormatUint(v, 10)) }
}

// TestExecSealMeasured runs a command in the real sandbox through a
// session whose RAPL meter reads a fake powercap tree, and checks the
// whole path: the decision and command entries, the meter entry, and a
// receipt that says HwShunt with the run's attributed share of the
// counter's delta, verifying offline against the journal.
func TestExecSealMeasured(t *testing.T) {
	f := newFixture(t)
	root, set := fakePowercap(t)
	if err := os.WriteFile(filepath.Join(f.ws, "in.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gs := parseGrants(t, testGrants)
	s, err := Open(t.Context(), Config{Grants: gs, StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Powercap: root, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Exec(t.Context(), Command{Argv: []string{"sh", "-c", "cat in.txt > out.txt; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"},
		Inputs: []string{"in.txt"}, Outputs: []string{"out.txt"}, Capture: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.ExitCode != 0 || out.Result.CPUNanos <= 0 {
		t.Fatalf("exit %d, cpu %d ns", out.Result.ExitCode, out.Result.CPUNanos)
	}
	set(1000 + 7_000_000) // 7 J over the session
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal(k, SealInput{Unit: canon.Sum([]byte("unit"))})
	if err != nil {
		t.Fatal(err)
	}
	es := f.entries(t)
	if got, want := strings.Join(types(es), ","), "decision,command,meter"; got != want {
		t.Fatalf("entries %s, want %s", got, want)
	}
	cmd := body(t, es[1])
	if cmd["type"] != "cordon.command.v1" || cmd["exit"] != 0.0 || cmd["outputs"].(map[string]any)["out.txt"] == nil || cmd["stdout"] == nil {
		t.Fatalf("command entry %v", cmd)
	}
	m := body(t, es[2])
	if m["provenance"] != receipt.HwShunt || m["source"] != "rapl:"+root+":package-0" || m["total_uj"] != 7_000_000.0 {
		t.Fatalf("meter entry %v", m)
	}
	if len(sealed.Core.Devices) != 1 {
		t.Fatalf("devices %+v", sealed.Core.Devices)
	}
	d := sealed.Core.Devices[0]
	if d.Class != "cpu" || d.Provenance != receipt.HwShunt || d.MeasuredUJ == nil || d.Attribution == nil {
		t.Fatalf("device %+v", d)
	}
	a := d.Attribution
	if a.Num != uint64(out.Result.CPUNanos) || a.Den == 0 || a.Num > a.Den {
		t.Fatalf("attribution %+v for %d ns of CPU", a, out.Result.CPUNanos)
	}
	if want, _, _ := attribute(7_000_000, a.Num, a.Den); *d.MeasuredUJ != want || want == 0 {
		t.Fatalf("measured %d µJ, want %d", *d.MeasuredUJ, want)
	}
	if sealed.Core.Total.MeasuredUJ == nil || *sealed.Core.Total.MeasuredUJ != *d.MeasuredUJ {
		t.Fatalf("total %+v", sealed.Core.Total)
	}
	if sealed.Core.JournalRoot != es[2].ID().String() || sealed.Core.Tier != "S2" || sealed.Core.Outputs["out.txt"] == "" {
		t.Fatalf("core %+v", sealed.Core)
	}
	// Offline: the receipt and the attestation verify, bound to the journal.
	rc, _, err := receipt.Verify(sealed.Receipt, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attest.Verify(sealed.Attestation, k.Public(), attest.Options{Receipt: rc}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"true"}}); !errors.Is(err, ErrSealed) {
		t.Fatalf("exec after seal: %v", err)
	}
	if _, err := s.Seal(k, SealInput{Unit: canon.Sum([]byte("unit"))}); !errors.Is(err, ErrSealed) {
		t.Fatalf("second seal: %v", err)
	}
}

func attribute(total, num, den uint64) (uint64, struct{}, error) {
	// total × num / den, as energy.Attribute computes it, for totals that
	// fit: the test's figures are small.
	return total * num / den, struct{}{}, nil
}

// TestMeterFailureFallsBack: a RAPL counter that becomes unreadable
// mid-session is not reported as measured: the class falls back to the
// Estimator, and the meter entry says why.
func TestMeterFailureFallsBack(t *testing.T) {
	f := newFixture(t)
	root, _ := fakePowercap(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Powercap: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Remove(filepath.Join(root, "intel-rapl:0", "energy_uj")); err != nil {
		t.Fatal(err)
	}
	e, err := s.StopMeters()
	if err != nil {
		t.Fatal(err)
	}
	if d := e.Devices[0]; d.Provenance != receipt.Estimator || d.MeasuredUJ != nil {
		t.Fatalf("device %+v", d)
	}
	if m := e.Meters[0]; m.Provenance != receipt.Estimator || !strings.Contains(m.Reason, "energy_uj") {
		t.Fatalf("meter %+v", m)
	}
}

// TestNoMeterIsEstimator: without RAPL the receipt is the Estimator's,
// and the meter entry names why.
func TestNoMeterIsEstimator(t *testing.T) {
	f := newFixture(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Powercap: t.TempDir(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k, _ := sign.Generate()
	sealed, err := s.Seal(k, SealInput{Unit: canon.Sum([]byte("u"))})
	if err != nil {
		t.Fatal(err)
	}
	d := sealed.Core.Devices[0]
	if d.Provenance != receipt.Estimator || d.MeasuredUJ != nil || d.EstimatedUJ == 0 {
		t.Fatalf("device %+v", d)
	}
	if m := sealed.Energy.Meters[0]; !strings.Contains(m.Reason, "no RAPL package domains") {
		t.Fatalf("meter %+v", m)
	}
}

// TestRefusedExecIsRecorded: a command the Before hook refuses, one whose
// grant set is wider than the session's, and one on a host without the
// tier each end in a command entry naming the refusal; nothing runs.
func TestRefusedExecIsRecorded(t *testing.T) {
	f := newFixture(t)
	gs := parseGrants(t, testGrants)
	gate := errors.New("waiting for approval")
	s, err := Open(t.Context(), Config{Grants: gs, StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{},
		Before: func(_ context.Context, e Effect) error {
			if e.Argv[0] == "cat" {
				return gate
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"cat", "/etc/hostname"}}); !errors.Is(err, ErrRefused) || !errors.Is(err, gate) {
		t.Fatalf("gated exec: %v", err)
	}
	wider := parseGrants(t, strings.Replace(testGrants, `{"name":"true"}`, `{"name":"true"},{"name":"curl"}`, 1))
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"curl"}, Grants: wider}); !errors.Is(err, ErrRefused) || !errors.Is(err, grant.ErrWidening) {
		t.Fatalf("wider exec: %v", err)
	}
	// A program the grant set does not allow: the sandbox decides and
	// refuses; the deny decision is followed by its outcome.
	var ee *sandbox.ExitError
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"hostname"}}); !errors.As(err, &ee) {
		t.Fatalf("ungranted exec: %v", err)
	}
	es := f.entries(t)
	if got, want := strings.Join(types(es), ","), "command,command,command"; got != want && got != "command,command,decision,command" {
		t.Fatalf("entries %s, want %s (or with the deny decision)", got, want)
	}
	for i, want := range []string{"waiting for approval", "wider than the session", "hostname"} {
		b := body(t, es[i])
		if es[i].Type == "decision" {
			continue
		}
		if !strings.Contains(fmt.Sprint(b["error"]), want) || b["exit"] != nil {
			t.Errorf("entry %d %v, want an error naming %q and no exit", i, b, want)
		}
	}
	if last := body(t, es[len(es)-1]); !strings.Contains(fmt.Sprint(last["error"]), "hostname") {
		t.Errorf("last entry %v", last)
	}
	if _, ran := s.Ran(); ran {
		t.Error("a refused command counted as run")
	}

	// A host without the tier: every Exec is refused, and recorded.
	f2 := newFixture(t)
	s2, err := Open(t.Context(), Config{Grants: gs, StateDir: f2.state, Recorder: f2.rec, Sandbox: noSandbox{}, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Plan().Err == nil {
		t.Fatal("plan without a sandbox has no error")
	}
	if _, err := s2.Exec(t.Context(), Command{Argv: []string{"true"}}); !errors.Is(err, ErrNoTier) || !strings.Contains(err.Error(), "seccomp: missing") {
		t.Fatalf("exec without a sandbox: %v", err)
	}
	if es := f2.entries(t); len(es) != 1 || es[0].Type != "command" {
		t.Fatalf("entries %v", types(es))
	}
}

type noSandbox struct{}

func (noSandbox) Offers() []tier.Tier   { return nil }
func (noSandbox) Probe(tier.Tier) error { return errors.New("seccomp: missing") }
func (noSandbox) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	return nil, errors.New("must not run")
}

// floodProgram opens n connections to the egress forwarder, each asking
// to CONNECT to a host no grant allows, and reads the answer.
const floodProgram = `import socket, sys
n = int(sys.argv[1])
answered = closed = 0
for i in range(n):
    s = socket.create_connection(("127.0.0.1", 3128))
    try:
        s.sendall(b"CONNECT denied.example:443 HTTP/1.1\r\nHost: denied.example:443\r\n\r\n")
        if s.recv(64):
            answered += 1
        else:
            closed += 1
    except OSError:
        closed += 1
    s.close()
print(answered, closed)
`

// TestEgressFloodCapped: past the cap, a flood of denied connections is
// one recorded denial and then refusal; the journal holds cap + 1 egress
// entries, the command entry counts the rest, and the proxy's cost per
// refused connection is a close.
func TestEgressFloodCapped(t *testing.T) {
	const n, limit = 600, 100
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.ws, "flood.py"), []byte(floodProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, egressGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec,
		Meters: Meters{}, MaxEgress: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Exec(t.Context(), Command{Argv: []string{"python3", "flood.py", strconv.Itoa(n)}, Inputs: []string{"flood.py"}, Capture: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.ExitCode != 0 {
		t.Fatalf("exit %d: %s", out.Result.ExitCode, out.Stderr.Bytes)
	}
	var answered, closed int
	fmt.Sscan(string(out.Stdout.Bytes), &answered, &closed)
	if answered+closed != n || answered < limit-1 || closed == 0 {
		t.Fatalf("program saw %d answered, %d closed", answered, closed)
	}
	es := f.entries(t)
	var egressN, capN int
	for _, e := range es {
		if e.Type != "egress" {
			continue
		}
		egressN++
		if b := body(t, e); b["rule"] == "limit" && strings.Contains(fmt.Sprint(b["reason"]), "cap of 100") {
			capN++
		}
	}
	if egressN != limit+1 || capN != 1 {
		t.Fatalf("%d egress entries (%d cap), want %d and 1", egressN, capN, limit+1)
	}
	cmd := body(t, es[len(es)-1])
	if es[len(es)-1].Type != "command" || cmd["egress_dropped"] != float64(n-limit) {
		t.Fatalf("last entry %s %v, want egress_dropped %d", es[len(es)-1].Type, cmd, n-limit)
	}
	if out.Egress.Dropped != int64(n-limit) || out.Egress.Conns != int64(n) {
		t.Fatalf("stats %+v", out.Egress)
	}
}

// TestExecWallClamp: a command may shorten the wall clock, never extend it.
func TestExecWallClamp(t *testing.T) {
	f := newFixture(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Recorder: f.rec, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"true"}, Wall: time.Hour}); !errors.Is(err, ErrRefused) {
		t.Fatalf("an hour: %v", err)
	}
	out, err := s.Exec(t.Context(), Command{Argv: []string{"sh", "-c", "sleep 5"}, Wall: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Result.TimedOut {
		t.Fatalf("not killed at 200ms: %+v", out.Result)
	}
}

// BenchmarkEgressFlood measures what a flood of denied CONNECTs costs the
// host against what it costs the program: one iteration is one command
// opening n connections, each asking to CONNECT to a host no grant
// allows. Reported per iteration: the program's CPU (its cgroup), the
// host's (this process's user+system time: the proxy, the bridge's
// parent side, the journal), their ratio, and the peak Go heap above the
// starting heap while the command runs. The journal is a real file.
//
//	go test -run '^$' -bench EgressFlood -benchtime 1x ./session
func BenchmarkEgressFlood(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			f := newFixture(b)
			if err := os.WriteFile(filepath.Join(f.ws, "flood.py"), []byte(floodProgram), 0o644); err != nil {
				b.Fatal(err)
			}
			s, err := Open(b.Context(), Config{Grants: parseGrants(b, egressGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var prog, host time.Duration
			var peak uint64
			for b.Loop() {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base := ms.HeapInuse
				stop := make(chan struct{})
				sampled := make(chan uint64)
				go func() {
					var top uint64
					tick := time.NewTicker(5 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							sampled <- top
							return
						case <-tick.C:
							var ms runtime.MemStats
							runtime.ReadMemStats(&ms)
							top = max(top, ms.HeapInuse)
						}
					}
				}()
				before := cpuSelf(b)
				out, err := s.Exec(b.Context(), Command{Argv: []string{"python3", "flood.py", strconv.Itoa(n)}, Inputs: []string{"flood.py"}, Capture: 1 << 10})
				host += cpuSelf(b) - before
				close(stop)
				top := <-sampled
				if err != nil {
					b.Fatal(err)
				}
				if out.Result.ExitCode != 0 || out.Egress.Conns != int64(n) {
					b.Fatalf("exit %d, %+v: %s", out.Result.ExitCode, out.Egress, out.Stderr.Bytes)
				}
				prog += time.Duration(out.Result.CPUNanos)
				if top > base {
					peak = max(peak, top-base)
				}
			}
			it := float64(b.N)
			b.ReportMetric(float64(prog.Milliseconds())/it, "program-cpu-ms/op")
			b.ReportMetric(float64(host.Milliseconds())/it, "host-cpu-ms/op")
			b.ReportMetric(float64(host)/float64(prog), "host/program")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// cpuSelf is this process's user and system CPU time so far.
func cpuSelf(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestEgressTextQuoted: a program that asks the proxy for a host that is
// not plain text (a noncharacter) cannot lose its egress entry, nor its
// command entry: the host is written quoted, and the outcome follows.
func TestEgressTextQuoted(t *testing.T) {
	const prog = `import socket
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT \xef\xbf\xbf\xff:443 HTTP/1.1\r\nHost: x\r\n\r\n")
s.recv(4096)
open("/work/out.txt", "w").write("ran\n")
`
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.ws, "p.py"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, egressGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Exec(t.Context(), Command{Argv: []string{"python3", "p.py"}, Inputs: []string{"p.py"}, Outputs: []string{"out.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.ExitCode != 0 {
		t.Fatalf("exit %d", out.Result.ExitCode)
	}
	es := f.entries(t)
	if got := strings.Join(types(es), ","); got != "decision,egress,command" {
		t.Fatalf("entries %s", got)
	}
	eg := body(t, es[1])
	if eg["host"] != `"\ufffd\xff"` && !strings.HasPrefix(fmt.Sprint(eg["host"]), `"`) {
		t.Fatalf("egress host %q", eg["host"])
	}
	if q := fmt.Sprint(eg["quoted"]); !strings.Contains(q, "host") || eg["allow"] != false {
		t.Fatalf("egress entry %v", eg)
	}
	if cmd := body(t, es[2]); cmd["exit"] != 0.0 || cmd["outputs"].(map[string]any)["out.txt"] == nil {
		t.Fatalf("command entry %v", cmd)
	}
	// An argv that is not text is refused by the grant decision; its
	// command entry still encodes, the argument quoted.
	var ee *sandbox.ExitError
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"python3", "\xfe arg"}}); !errors.As(err, &ee) {
		t.Fatalf("exec of a non-text argv: %v", err)
	}
	es = f.entries(t)
	cmd := body(t, es[len(es)-1])
	if argv := cmd["argv"].([]any); es[len(es)-1].Type != "command" || argv[1] != `"\xfe arg"` || !strings.Contains(fmt.Sprint(cmd["quoted"]), "argv[1]") {
		t.Fatalf("command entry %v", cmd)
	}
}

// TestOversizedRecordRefused: a command whose entries could not fit in a
// journal line is refused before it runs, and the refusal is recorded
// (naming its argv by ContentId), so it cannot run unrecorded.
func TestOversizedRecordRefused(t *testing.T) {
	f := newFixture(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := strings.Repeat("a", 130_000)
	argv := []string{"sh", "-c", "echo RAN > /work/out.txt"}
	for range 9 {
		argv = append(argv, big)
	}
	if _, err := s.Exec(t.Context(), Command{Argv: argv, Outputs: []string{"out.txt"}}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "more than a journal line takes") {
		t.Fatalf("exec: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "out.txt")); err == nil {
		t.Fatal("the oversized command ran")
	}
	es := f.entries(t)
	if len(es) != 1 || es[0].Type != "command" || !strings.Contains(fmt.Sprint(body(t, es[0])["error"]), "b3:") {
		t.Fatalf("entries %v", types(es))
	}
}

// TestManyOutputsAllRecorded: a declared output directory that brings
// back more files than one journal line can name still has every one
// recorded: in outputs entries before the command entry, which names
// their number and the ContentId of the whole map.
func TestManyOutputsAllRecorded(t *testing.T) {
	const n = 5000
	f := newFixture(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prog := fmt.Sprintf("import os\nos.mkdir('/work/d')\nfor i in range(%d): open('/work/d/%%05d%%s' %% (i, 'x'*235), 'w').close()\n", n)
	out, err := s.Exec(t.Context(), Command{Argv: []string{"python3", "-c", prog}, Outputs: []string{"d"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Result.Outputs) != n {
		t.Fatalf("%d outputs came back", len(out.Result.Outputs))
	}
	es := f.entries(t)
	last := es[len(es)-1]
	cmd := body(t, last)
	parts := int(cmd["outputs_parts"].(float64))
	if last.Type != "command" || parts < 2 || len(cmd["outputs"].(map[string]any)) != 0 {
		t.Fatalf("command entry %v", cmd)
	}
	all := map[string]any{}
	for i, e := range es[len(es)-1-parts : len(es)-1] {
		b := body(t, e)
		if e.Type != "outputs" || int(b["part"].(float64)) != i {
			t.Fatalf("entry %d before the command: %s %v", i, e.Type, b["part"])
		}
		for k, v := range b["outputs"].(map[string]any) {
			all[k] = v
		}
	}
	if len(all) != n {
		t.Fatalf("the outputs entries name %d files, want %d", len(all), n)
	}
	j, _ := json.Marshal(all)
	c, _ := canon.JCS(j)
	if cmd["outputs_id"] != canon.Sum(c).String() {
		t.Fatalf("outputs_id %v is not the ContentId of the parts' union", cmd["outputs_id"])
	}
}

// TestOutputNamesNotText: a file the program makes inside a declared
// directory under a name that is not plain text refuses the copy-back
// (the workspace is unchanged, and the command entry says why), and a
// declared path that is not plain text is refused before anything runs:
// journals and receipts name paths as they are.
func TestOutputNamesNotText(t *testing.T) {
	f := newFixture(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Workspace: f.ws, Recorder: f.rec, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{`b"a\xffb"`, `"a\ufffeb".encode()`, `b"tab\there"`} {
		prog := "import os\nos.mkdir(b'/work/d')\nopen(b'/work/d/plain', 'w').close()\nopen(b'/work/d/' + " + name + ", 'w').close()\n"
		out, err := s.Exec(t.Context(), Command{Argv: []string{"python3", "-c", prog}, Outputs: []string{"d"}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Result.ExitCode != 0 || out.Result.OutputsErr == nil || !strings.Contains(out.Result.OutputsErr.Error(), "not plain text") {
			t.Fatalf("%s: exit %d, outputs error %v", name, out.Result.ExitCode, out.Result.OutputsErr)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "d")); err == nil {
			t.Fatalf("%s: the output directory came back", name)
		}
		es := f.entries(t)
		if cmd := body(t, es[len(es)-1]); !strings.Contains(fmt.Sprint(cmd["outputs_error"]), "not plain text") {
			t.Fatalf("%s: command entry %v", name, cmd)
		}
	}
	var ee *sandbox.ExitError
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"true"}, Outputs: []string{"a\uFFFEb"}}); !errors.As(err, &ee) || !strings.Contains(err.Error(), "not plain text") {
		t.Fatalf("a non-text declared output: %v", err)
	}
	if last := f.entries(t); last[len(last)-1].Type != "command" {
		t.Fatal("the refusal has no command entry")
	}
}

// TestHugeArgv0Recorded: a program name that cannot be run and is long
// enough that an error repeating it twice would not fit a journal line
// still ends in a command entry: error texts are clipped.
func TestHugeArgv0Recorded(t *testing.T) {
	f := newFixture(t)
	s, err := Open(t.Context(), Config{Grants: parseGrants(t, testGrants), StateDir: f.state, Recorder: f.rec, Meters: Meters{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Exec(t.Context(), Command{Argv: []string{"/nonexistent/" + strings.Repeat("z", 700_000)}}); err == nil {
		t.Fatal("ran a program that does not exist")
	}
	es := f.entries(t)
	if len(es) == 0 || es[len(es)-1].Type != "command" {
		t.Fatalf("entries %v", types(es))
	}
}
