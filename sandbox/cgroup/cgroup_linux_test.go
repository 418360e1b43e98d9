package cgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests create real groups on this host's cgroups (v1 or v2,
// whichever it has) and need root; as root they do not skip: a host
// where Probe fails fails them.

// helperEnv selects a helper mode when the test binary runs as a child.
const helperEnv = "CORDON_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		code := m.Run()
		if code == 0 && os.Geteuid() == 0 {
			code = checkNoLeftovers()
		}
		os.Exit(code)
	case "alloc":
		// Wait to be moved into the group, then touch 256 MiB.
		bufio.NewReader(os.Stdin).ReadString('\n')
		b := make([]byte, 256<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		os.Exit(0)
	case "spawn", "spawn-child":
		if os.Getenv(helperEnv) == "spawn" {
			bufio.NewReader(os.Stdin).ReadString('\n')
		}
		env := append(os.Environ(), helperEnv+"=spawn-child")
		for {
			cmd := exec.Command(os.Args[0])
			cmd.Env = env
			cmd.Start() // fails at the pids limit; keep trying
			time.Sleep(time.Millisecond)
		}
	case "spin":
		bufio.NewReader(os.Stdin).ReadString('\n')
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		}
		os.Exit(0)
	default:
		os.Exit(3)
	}
}

// checkNoLeftovers fails the run if a test left a cordon-test directory.
func checkNoLeftovers() int {
	h, err := Config{}.discover()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dirs := []string{h.dir, "/sys/fs/cgroup"}
	for _, base := range h.base {
		dirs = append(dirs, base, filepath.Dir(base))
	}
	code := 0
	for _, d := range dirs {
		if d != "" && exists(filepath.Join(d, "cordon-test")) {
			fmt.Fprintf(os.Stderr, "FAIL: the tests left %s/cordon-test behind\n", d)
			code = 1
		}
	}
	return code
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: creates cgroups (uid %d)", os.Geteuid())
	}
	if err := Probe(); err != nil {
		t.Fatalf("Probe() = %v, want nil for a root test", err)
	}
}

// uniqueName returns "cordon-test/<random>".
func uniqueName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	return "cordon-test/" + hex.EncodeToString(b)
}

// newTestGroup creates a group and closes it when the test ends, passed
// or not.
func newTestGroup(t *testing.T, lim Limits) *Group {
	t.Helper()
	g, err := New(uniqueName(t), lim)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("cleanup: Close: %v", err)
		}
	})
	return g
}

var testLimits = Limits{MemoryBytes: 256 << 20, PIDs: 64, CPUMillis: 1500}

// startGated starts cmd with a pipe on stdin, so that a script can wait
// with `read _` until it has been added to the group. It is killed and
// reaped when the test ends.
func startGated(t *testing.T, cmd *exec.Cmd) io.WriteCloser {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return in
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestProbe(t *testing.T) {
	requireRoot(t)
}

func TestNewWritesLimits(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, testLimits)
	var want map[string]string
	switch g.Version() {
	case 1:
		want = map[string]string{
			"memory/memory.limit_in_bytes": "268435456",
			"memory/memory.swappiness":     "0",
			"pids/pids.max":                "64",
			"cpu/cpu.cfs_period_us":        "100000",
			"cpu/cpu.cfs_quota_us":         "150000",
			"freezer/freezer.state":        "THAWED",
		}
		if exists(filepath.Join(g.ctl["memory"], "memory.memsw.limit_in_bytes")) {
			want["memory/memory.memsw.limit_in_bytes"] = "268435456"
		}
	case 2:
		want = map[string]string{
			"memory/memory.max":      "268435456",
			"memory/memory.swap.max": "0",
			"pids/pids.max":          "64",
			"cpu/cpu.max":            "150000 100000",
		}
	default:
		t.Fatalf("Version() = %d", g.Version())
	}
	for k, v := range want {
		ctl, name, _ := strings.Cut(k, "/")
		if got := readFile(t, filepath.Join(g.ctl[ctl], name)); got != v {
			t.Errorf("%s/%s = %q, want %q", g.ctl[ctl], name, got, v)
		}
	}
	for _, dir := range g.dirs {
		if !strings.HasSuffix(dir, "/"+g.name) {
			t.Errorf("group directory %s does not end in the group's name %s", dir, g.name)
		}
	}
}

func TestNoCPULimit(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, Limits{MemoryBytes: 64 << 20, PIDs: 8})
	switch g.Version() {
	case 1:
		if got := readFile(t, filepath.Join(g.ctl["cpu"], "cpu.cfs_quota_us")); got != "-1" {
			t.Errorf("cpu.cfs_quota_us = %q, want -1", got)
		}
	case 2:
		if got := readFile(t, filepath.Join(g.ctl["cpu"], "cpu.max")); !strings.HasPrefix(got, "max ") {
			t.Errorf("cpu.max = %q, want max", got)
		}
	}
}

func TestAddAndStats(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, testLimits)
	cmd := exec.Command("/bin/sh", "-c", `read _; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done; read _`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	for _, dir := range g.dirs {
		pids := strings.Fields(readFile(t, filepath.Join(dir, "cgroup.procs")))
		if !slices.Equal(pids, []string{strconv.Itoa(cmd.Process.Pid)}) {
			t.Errorf("%s/cgroup.procs = %v, want only %d", dir, pids, cmd.Process.Pid)
		}
	}
	fmt.Fprintln(in)
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "done\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	s, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("Stats() = %+v", s)
	if s.CPUNanos < int64(time.Millisecond) {
		t.Errorf("CPUNanos = %d, want at least 1ms after a busy loop", s.CPUNanos)
	}
	if s.PeakMemoryBytes <= 0 {
		t.Errorf("PeakMemoryBytes = %d, want > 0", s.PeakMemoryBytes)
	}
	if exists(filepath.Join(g.ctl["pids"], "pids.peak")) && s.PIDsPeak < 1 {
		t.Errorf("PIDsPeak = %d, want >= 1 where pids.peak exists", s.PIDsPeak)
	}
	if s.OOMKills != 0 {
		t.Errorf("OOMKills = %d, want 0", s.OOMKills)
	}
}

func TestPIDsLimit(t *testing.T) {
	requireRoot(t)
	const limit = 5
	g := newTestGroup(t, Limits{MemoryBytes: 64 << 20, PIDs: limit})
	// dash gives up at the first failed fork; count what it managed.
	cmd := exec.Command("/bin/sh", "-c", `read _; i=0; while [ $i -lt 20 ]; do sleep 1000 & echo started; i=$((i+1)); done; wait`)
	// A file, not a pipe: the sleeps hold their stdout open.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	fmt.Fprintln(in)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the shell forked 20 children in a group limited to %d tasks", limit)
	}
	if n := strings.Count(readFile(t, out.Name()), "started"); n != limit-1 {
		t.Errorf("shell started %d children, want %d (the limit %d less the shell)", n, limit-1, limit)
	}
	pids, err := g.procs()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != limit-1 {
		t.Errorf("group holds %d processes after the shell exited, want its %d children", len(pids), limit-1)
	}
	if s, err := g.Stats(); err != nil {
		t.Fatal(err)
	} else if exists(filepath.Join(g.ctl["pids"], "pids.peak")) && s.PIDsPeak != limit {
		t.Errorf("PIDsPeak = %d, want %d", s.PIDsPeak, limit)
	}
}

func TestMemoryLimit(t *testing.T) {
	requireRoot(t)
	const limit = 64 << 20
	g := newTestGroup(t, Limits{MemoryBytes: limit, PIDs: 64})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=alloc")
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	fmt.Fprintln(in)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("allocating 256 MiB under a %d-byte limit: Wait() = %v, want killed by SIGKILL", limit, err)
	}
	s, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Stats() = %+v", s)
	if s.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want >= 1", s.OOMKills)
	}
	// The kernel may charge a little past the limit for allocations that
	// must not fail (up to a charge batch, 64 pages); a peak beyond that
	// would mean the limit did not hold.
	const slack = 64 * 4096
	if s.PeakMemoryBytes > limit+slack || s.PeakMemoryBytes < limit/2 {
		t.Errorf("PeakMemoryBytes = %d, want in [%d, %d]", s.PeakMemoryBytes, limit/2, limit+slack)
	}
}

func TestCPULimit(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, Limits{MemoryBytes: 256 << 20, PIDs: 64, CPUMillis: 100})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=spin")
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	fmt.Fprintln(in)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("spinner: %v", err)
	}
	s, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// 500 ms of wall time at a tenth of a CPU is 50 ms of CPU, plus up to
	// a period's quota of slack at either end.
	if s.CPUNanos > int64(200*time.Millisecond) || s.CPUNanos < int64(10*time.Millisecond) {
		t.Errorf("CPUNanos = %v after spinning 500ms at 0.1 CPU, want in [10ms, 200ms]", time.Duration(s.CPUNanos))
	}
}

// alive reports whether pid names a process that has not exited.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func TestKillDaemon(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, testLimits)
	cmd := exec.Command("/bin/sh", "-c", `read _; (sleep 1000 &); sleep 1000`)
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	fmt.Fprintln(in)
	var pids []int
	ok, err := waitUntil(time.Now().Add(5*time.Second), func() (bool, error) {
		var err error
		pids, err = g.procs()
		return len(pids) >= 3 || err != nil, err // sh, the orphan, the foreground sleep
	})
	if !ok || err != nil {
		t.Fatalf("group holds %v, want 3 processes: %v", pids, err)
	}
	if err := g.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if left, err := g.procs(); err != nil || len(left) != 0 {
		t.Errorf("after Kill the group holds %v, %v; want none", left, err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d is alive after Kill", pid)
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("shell: Wait() = %v, want killed by SIGKILL", err)
	}
}

func TestKillForkingGroup(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, Limits{MemoryBytes: 512 << 20, PIDs: 64})
	// Every process keeps starting copies of itself, up to the pids limit.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=spawn", "GOMAXPROCS=1")
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	fmt.Fprintln(in)
	var pids []int
	ok, err := waitUntil(time.Now().Add(5*time.Second), func() (bool, error) {
		var err error
		pids, err = g.procs()
		return len(pids) >= 5, err
	})
	if !ok || err != nil {
		t.Fatalf("group holds %d processes, want the spawners to have filled it: %v", len(pids), err)
	}
	if err := g.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if left, err := g.procs(); err != nil || len(left) != 0 {
		t.Errorf("after Kill the group holds %v, %v; want none", left, err)
	}
}

func TestCloseRemovesDirectories(t *testing.T) {
	requireRoot(t)
	g, err := New(uniqueName(t)+"/run", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	cmd := exec.Command("/bin/sh", "-c", `read _; sleep 1000`)
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	fmt.Fprintln(in)
	created := slices.Clone(g.owned)
	if len(created) < len(g.dirs)*2 {
		t.Errorf("New made %v, want the group and its unique parent in each hierarchy", created)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close with a live process: %v", err)
	}
	for _, dir := range created {
		if exists(dir) {
			t.Errorf("%s exists after Close", dir)
		}
	}
	if alive(cmd.Process.Pid) {
		t.Errorf("process %d is alive after Close", cmd.Process.Pid)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := g.Add(os.Getpid()); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Add after Close = %v, want os.ErrClosed", err)
	}
	if _, err := g.Stats(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Stats after Close = %v, want os.ErrClosed", err)
	}
	if err := g.Kill(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Kill after Close = %v, want os.ErrClosed", err)
	}
}

func TestCloseKeepsSharedParent(t *testing.T) {
	requireRoot(t)
	parent := uniqueName(t)
	a, err := New(parent+"/a", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := New(parent+"/b", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := a.Close(); err != nil {
		t.Fatalf("Close a: %v", err)
	}
	for _, dir := range b.dirs {
		if !exists(dir) {
			t.Errorf("%s is gone after closing its sibling", dir)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close b: %v", err)
	}
	for _, dir := range b.dirs {
		if exists(filepath.Dir(dir)) {
			t.Errorf("%s exists after both groups closed", filepath.Dir(dir))
		}
	}
}

func TestNewRefusesExisting(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, testLimits)
	if _, err := New(g.name, testLimits); err == nil {
		t.Fatalf("New(%q) succeeded for an existing group", g.name)
	}
	for _, dir := range g.dirs {
		if !exists(dir) {
			t.Errorf("%s is gone after a refused New of the same name", dir)
		}
	}
}

func TestNewCleansUpOnFailure(t *testing.T) {
	requireRoot(t)
	name := uniqueName(t) + "/run"
	// The kernel refuses a pids.max above PID_MAX_LIMIT (4M), after the
	// directories are made and the memory limit is written.
	_, err := New(name, Limits{MemoryBytes: 64 << 20, PIDs: 1 << 40})
	if err == nil {
		t.Fatal("New with PIDs 1<<40 succeeded")
	}
	t.Logf("New: %v", err)
	h, err := Config{}.discover()
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	if h.version == 1 {
		for _, ctl := range v1Controllers {
			dirs = append(dirs, filepath.Join(h.base[ctl], name), filepath.Join(h.base[ctl], filepath.Dir(name)))
		}
	} else {
		dirs = append(dirs, filepath.Join(h.dir, name), filepath.Join(h.dir, filepath.Dir(name)))
	}
	for _, dir := range dirs {
		if exists(dir) {
			t.Errorf("%s exists after a failed New", dir)
		}
	}
}

func TestConfigRootV1(t *testing.T) {
	requireRoot(t)
	if exists("/sys/fs/cgroup/cgroup.controllers") {
		t.Skip("the host is cgroup v2; this test is for v1")
	}
	c := Config{Root: "/sys/fs/cgroup"}
	if err := c.Probe(); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	name := uniqueName(t)
	g, err := c.New(name, testLimits)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	want := filepath.Join("/sys/fs/cgroup/memory", name)
	if g.ctl["memory"] != want {
		t.Errorf("memory group at %s, want %s", g.ctl["memory"], want)
	}
	if got := readFile(t, filepath.Join(want, "memory.limit_in_bytes")); got != "268435456" {
		t.Errorf("memory.limit_in_bytes = %s", got)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestProbeMissingV1(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory", "cpu,cpuacct", "blkio"} {
		os.Mkdir(filepath.Join(root, d), 0o755)
	}
	err := Config{Root: root}.Probe()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Probe() = %v, want ErrUnavailable", err)
	}
	want := "cgroup: unavailable: missing controllers: pids, freezer (v1 at " + root + ")"
	if err.Error() != want {
		t.Errorf("Probe() = %q, want %q", err, want)
	}
	if _, err := (Config{Root: root}).New("x", testLimits); !errors.Is(err, ErrUnavailable) {
		t.Errorf("New() = %v, want ErrUnavailable", err)
	}
}

func TestDiscoverMounts(t *testing.T) {
	const thisHost = `32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const thisSelf = "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/process_api/5946\n2:cpuacct:/\n1:cpu:/\n0::/\n"
	for _, tc := range []struct {
		name, mountinfo, self string
		version               int
		base                  map[string]string // v1
		dir                   string            // v2
		missing               bool
	}{
		{name: "v1 with nested memory", mountinfo: thisHost, self: thisSelf, version: 1, base: map[string]string{
			"memory": "/sys/fs/cgroup/memory/process_api/5946", "pids": "/sys/fs/cgroup/pids",
			"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "freezer": "/sys/fs/cgroup/freezer",
		}},
		{
			name: "v1 co-mounted, mount roots below the hierarchy root (docker without cgroupns)",
			mountinfo: `1 0 0:1 /docker/ab /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct
2 0 0:2 /docker/ab /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory
3 0 0:3 /docker/ab /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids
4 0 0:4 /docker/ab /sys/fs/cgroup/freezer ro - cgroup cgroup rw,freezer
`,
			self:    "4:cpu,cpuacct:/docker/ab/x\n3:memory:/docker/ab\n2:pids:/docker/ab\n1:freezer:/docker/ab\n",
			version: 1,
			base: map[string]string{
				"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids",
				"cpu": "/sys/fs/cgroup/cpu,cpuacct/x", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct/x", "freezer": "/sys/fs/cgroup/freezer",
			},
		},
		{
			name:      "v1 own cgroup outside the mount root",
			mountinfo: "2 0 0:2 /other /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			self:      "3:memory:/docker/ab\n",
			version:   1, base: map[string]string{}, missing: true,
		},
		{
			name:      "v2",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			self:      "0::/system.slice/cordon.service\n",
			version:   2, dir: "/sys/fs/cgroup/system.slice/cordon.service",
		},
		{
			name:      "v2 after moving into the supervisor leaf",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			self:      "0::/system.slice/cordon.service/" + selfLeaf + "\n",
			version:   2, dir: "/sys/fs/cgroup/system.slice/cordon.service",
		},
		{
			name:      "v2 with only name=systemd on v1",
			mountinfo: "1 0 0:1 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n2 0 0:2 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			self:      "1:name=systemd:/x\n0::/x\n",
			version:   2, dir: "/sys/fs/cgroup/unified/x",
		},
		{name: "none", mountinfo: "1 0 0:1 / / rw - ext4 /dev/root rw\n", self: "0::/\n", version: 0, base: map[string]string{}, missing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := parseMountinfo([]byte(tc.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			self, err := parseProcCgroup([]byte(tc.self))
			if err != nil {
				t.Fatal(err)
			}
			h := &host{base: map[string]string{}}
			if err := h.discoverMounts(ms, self); err != nil {
				t.Fatal(err)
			}
			if h.version != tc.version {
				t.Errorf("version = %d, want %d", h.version, tc.version)
			}
			if tc.version == 1 {
				for _, ctl := range v1Controllers {
					if h.base[ctl] != tc.base[ctl] {
						t.Errorf("base[%s] = %q, want %q", ctl, h.base[ctl], tc.base[ctl])
					}
				}
			}
			if h.dir != tc.dir {
				t.Errorf("dir = %q, want %q", h.dir, tc.dir)
			}
			if (h.missing != nil) != tc.missing {
				t.Errorf("missing = %q, want some: %v", h.missing, tc.missing)
			}
		})
	}
}

func BenchmarkNewAddClose(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skipf("needs root: creates cgroups (uid %d)", os.Geteuid())
	}
	for b.Loop() {
		b.StopTimer()
		cmd := exec.Command("/bin/sleep", "1000")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		g, err := New("cordon-bench/run", Limits{MemoryBytes: 64 << 20, PIDs: 16, CPUMillis: 1000})
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Add(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		if err := g.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cmd.Wait()
		b.StartTimer()
	}
}

// Dirs names where New puts a group, before and after it exists; Idle
// and RemoveIdle remove a group left behind only once it holds no
// process and no child group, and nothing that is not a cgroup.
func TestDirsAndRemoveIdle(t *testing.T) {
	requireRoot(t)
	name := uniqueName(t)
	want, err := Dirs(name + "/run")
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(name+"/run", testLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if !slices.Equal(want, g.dirs) {
		t.Fatalf("Dirs = %v, New made %v", want, g.dirs)
	}
	cmd := exec.Command("/bin/sh", "-c", `read _; sleep 1000`)
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in)
	for _, dir := range want {
		if ok, err := Idle(dir); ok || err != nil {
			t.Errorf("Idle(%s) = %v, %v with a process in it", dir, ok, err)
		}
		if err := RemoveIdle(dir); !errors.Is(err, ErrBusy) || !exists(dir) {
			t.Errorf("RemoveIdle(%s) with a process in it = %v", dir, err)
		}
		// The parent holds the group: busy too.
		if err := RemoveIdle(filepath.Dir(dir)); !errors.Is(err, ErrBusy) {
			t.Errorf("RemoveIdle(%s) with a child group = %v", filepath.Dir(dir), err)
		}
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range want {
		if ok, err := Idle(dir); !ok || err != nil {
			t.Errorf("Idle(%s) = %v, %v after Kill", dir, ok, err)
		}
		if err := RemoveIdle(dir); err != nil || exists(dir) {
			t.Errorf("RemoveIdle(%s) = %v", dir, err)
		}
		if err := RemoveIdle(filepath.Dir(dir)); err != nil {
			t.Errorf("RemoveIdle(%s) = %v", filepath.Dir(dir), err)
		}
	}
	// The group is gone: remove the ancestors New made, as Close would.
	if err := g.remove(); err != nil {
		t.Errorf("removing the ancestors: %v", err)
	}
	g.closed = true
	plain := t.TempDir()
	if err := RemoveIdle(plain); !errors.Is(err, ErrInvalid) || !exists(plain) {
		t.Errorf("RemoveIdle of a plain directory = %v", err)
	}
	if _, err := Dirs("../escape"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Dirs of a bad path = %v", err)
	}
}
