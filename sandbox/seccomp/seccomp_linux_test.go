//go:build linux && (amd64 || arm64)

package seccomp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The behavioural tests run the probes in a child process (this test
// binary again, told what to do by childEnv): once with the filter
// installed on the probing thread, once without it as a control. The
// child reports one JSON line per probe; the tests here judge them.

const (
	childEnv = "CORDON_SECCOMP_TEST_CHILD"
	execEnv  = "CORDON_SECCOMP_TEST_EXEC" // program the "exec-*" children run
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// report is one line of a child's output.
type report struct {
	Probe  string `json:"probe"`
	Errno  int    `json:"errno"` // 0: success; -1: an error without an errno, see Detail
	Detail string `json:"detail,omitempty"`

	// Thread state, for the "threads" lines.
	Tid        int   `json:"tid,omitempty"`        // the reporting thread
	All        []int `json:"all,omitempty"`        // every thread of the process
	Filtered   []int `json:"filtered,omitempty"`   // threads in seccomp filter mode
	NoNewPrivs bool  `json:"noNewPrivs,omitempty"` // of the reporting thread

	// How a program ended, for the "exec" line.
	Exit   int    `json:"exit,omitempty"`
	Signal string `json:"signal,omitempty"`
}

func result(name string, err error) report {
	r := report{Probe: name}
	var errno unix.Errno
	switch {
	case err == nil:
	case errors.As(err, &errno):
		r.Errno = int(errno)
		r.Detail = err.Error()
	default:
		r.Errno = -1
		r.Detail = err.Error()
	}
	return r
}

func errnoString(n int) string {
	switch n {
	case 0:
		return "success"
	case -1:
		return "non-errno error"
	}
	if name := unix.ErrnoName(unix.Errno(n)); name != "" {
		return name
	}
	return "errno " + strconv.Itoa(n)
}

// child runs in the child process and returns its exit code.
func child(mode string) int {
	if mode == "sleep" { // a process for the ptrace probe to trace
		time.Sleep(time.Minute)
		return 0
	}
	// Never unlocked: the filter stays on this thread, which the runtime
	// discards when the process exits.
	runtime.LockOSThread()
	out := json.NewEncoder(os.Stdout)
	fail := func(what string, err error) int {
		out.Encode(report{Probe: what, Errno: -1, Detail: err.Error()})
		return 3
	}
	switch mode {
	case "filtered", "control", "inherited":
		e, cleanup, err := newProbeEnv()
		if err != nil {
			return fail("setup", err)
		}
		defer cleanup()
		if mode == "filtered" {
			if err := Install(); err != nil {
				return fail("install", err)
			}
		}
		out.Encode(threadReport("threads"))
		for _, p := range probes {
			out.Encode(result(p.name, p.run(e)))
		}
		if mode == "inherited" {
			for _, r := range onNewThreads() {
				out.Encode(r)
			}
			out.Encode(threadReport("threads after"))
		}
		return 0

	case "spawn": // installs the filter, then starts an "inherited" child
		if err := Install(); err != nil {
			return fail("install", err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"=inherited")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fail("inherited", err)
		}
		return 0

	case "exec-filtered", "exec-control": // runs the program named by execEnv
		if mode == "exec-filtered" {
			if err := Install(); err != nil {
				return fail("install", err)
			}
		}
		cmd := exec.Command(os.Getenv(execEnv))
		err := cmd.Run()
		if cmd.ProcessState == nil {
			out.Encode(result("exec", err))
			return 0
		}
		r := report{Probe: "exec"}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			r.Signal = unix.SignalName(ws.Signal())
		} else {
			r.Exit = ws.ExitStatus()
		}
		out.Encode(r)
		return 0
	}
	return fail("mode", fmt.Errorf("unknown %s %q", childEnv, mode))
}

// threadReport reads the seccomp mode of every thread of this process and
// the no_new_privs bit of the calling one.
func threadReport(name string) report {
	r := report{Probe: name, Tid: unix.Gettid()}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return result(name, err)
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue // the thread has exited
		}
		if err != nil {
			return result(name, err)
		}
		r.All = append(r.All, tid)
		if bytes.Contains(status, []byte("\nSeccomp:\t2\n")) {
			r.Filtered = append(r.Filtered, tid)
		}
		if tid == r.Tid {
			r.NoNewPrivs = bytes.Contains(status, []byte("\nNoNewPrivs:\t1\n"))
		}
	}
	return r
}

// onNewThreads runs probes on goroutines locked to threads of their own,
// all alive at once, so that each is a distinct thread.
func onNewThreads() []report {
	const n = 4
	results := make([][]report, n)
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
			ready.Done()
			ready.Wait()
			prefix := fmt.Sprintf("thread %d: ", i)
			r := threadReport(prefix + "threads")
			results[i] = append(results[i], r,
				result(prefix+"unshare(0)", unix.Unshare(0)),
				result(prefix+"socket(AF_NETLINK)", socketProbe(unix.AF_NETLINK, unix.SOCK_RAW)(nil)),
				result(prefix+"getpid", func() error { _, err := sys(unix.SYS_GETPID); return err }()),
				result(prefix+"os/exec /bin/true", execTrue(nil)))
		}()
	}
	done.Wait()
	return slices.Concat(results...)
}

type childOutput struct {
	reports []report
	byProbe map[string]report
	stderr  string
}

// children runs each kind of child once per test binary.
var children sync.Map // mode -> func() (childOutput, error)

func runChild(t *testing.T, mode string, env ...string) childOutput {
	t.Helper()
	key := mode + "\x00" + strings.Join(env, "\x00")
	f, _ := children.LoadOrStore(key, sync.OnceValues(func() (childOutput, error) {
		return startChild(mode, env...)
	}))
	out, err := f.(func() (childOutput, error))()
	if err != nil {
		t.Fatalf("child %q: %v\nstderr:\n%s", mode, err, out.stderr)
	}
	return out
}

func startChild(mode string, env ...string) (childOutput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	// A session of its own, with no controlling terminal: vhangup and
	// TIOCSTI then have nothing of the user's to act on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := childOutput{byProbe: map[string]report{}, stderr: stderr.String()}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r report
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return out, fmt.Errorf("bad report line %q: %v", sc.Text(), err)
		}
		if _, dup := out.byProbe[r.Probe]; dup {
			return out, fmt.Errorf("two reports for %q", r.Probe)
		}
		out.reports = append(out.reports, r)
		out.byProbe[r.Probe] = r
	}
	if runErr != nil {
		return out, fmt.Errorf("%v; reports: %+v", runErr, out.reports)
	}
	return out, nil
}

func TestSupported(t *testing.T) {
	if err := Supported(); err != nil {
		t.Fatalf("Supported() = %v; the behavioural tests need seccomp filter mode", err)
	}
}

// TestLinuxConstants checks the values rules.go spells out against
// golang.org/x/sys/unix.
func TestLinuxConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"EPERM", errnoEPERM, uint64(unix.EPERM)},
		{"ENOSYS", errnoENOSYS, uint64(unix.ENOSYS)},
		{"AF_UNIX", afUnix, unix.AF_UNIX},
		{"AF_INET", afInet, unix.AF_INET},
		{"AF_INET6", afInet6, unix.AF_INET6},
		{"CLONE_NEWNS", cloneNewNS, unix.CLONE_NEWNS},
		{"CLONE_NEWCGROUP", cloneNewCgroup, unix.CLONE_NEWCGROUP},
		{"CLONE_NEWUTS", cloneNewUTS, unix.CLONE_NEWUTS},
		{"CLONE_NEWIPC", cloneNewIPC, unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", cloneNewUser, unix.CLONE_NEWUSER},
		{"CLONE_NEWPID", cloneNewPID, unix.CLONE_NEWPID},
		{"CLONE_NEWNET", cloneNewNet, unix.CLONE_NEWNET},
		{"TIOCSTI", tiocsti, unix.TIOCSTI},
		{"TIOCLINUX", tioclinux, unix.TIOCLINUX},
		{"RLIMIT_CORE", rlimitCore, unix.RLIMIT_CORE},
		{"SECCOMP_RET_ALLOW", retAllow, unix.SECCOMP_RET_ALLOW},
		{"SECCOMP_RET_KILL_PROCESS", retKillProcess, unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO|EPERM", retEPERM, unix.SECCOMP_RET_ERRNO | uint64(unix.EPERM)},
		{"SECCOMP_RET_ERRNO|ENOSYS", retENOSYS, unix.SECCOMP_RET_ERRNO | uint64(unix.ENOSYS)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// TestEveryRuleProbed checks that the probes exercise every rule that
// applies on this GOARCH, each with the rule's errno.
func TestEveryRuleProbed(t *testing.T) {
	probed := map[string]bool{}
	errnos := map[string]string{}
	quietRules := map[string]bool{}
	for _, r := range rulesForGOARCH(runtime.GOARCH) {
		errnos[r.Syscall] = r.Errno
		quietRules[r.Syscall] = r.quiet
	}
	for _, p := range probes {
		if p.rule == "" {
			continue // an allowed call, or a check made before the rules
		}
		probed[p.rule] = true
		want, ok := errnos[p.rule]
		if !ok {
			t.Errorf("probe %q: no rule %q on %s", p.name, p.rule, runtime.GOARCH)
			continue
		}
		if got := unix.ErrnoName(p.deny); got != want {
			t.Errorf("probe %q: deny %s, rule %s says %s", p.name, got, p.rule, want)
		}
	}
	for name := range errnos {
		// A quiet rule (an obsolete or unimplemented call) needs no probe:
		// TestProgramScan covers it, and the "number below the newest"
		// probe shows the default's EPERM in the kernel.
		if !probed[name] && !quietRules[name] {
			t.Errorf("no probe for rule %s", name)
		}
	}
}

// TestInstallDenies checks that every denied probe, made on the filtered
// thread, gets the filter's errno.
func TestInstallDenies(t *testing.T) {
	out := runChild(t, "filtered")
	for _, p := range probes {
		if p.deny == 0 {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			got, ok := out.byProbe[p.name]
			if !ok {
				t.Fatalf("no report")
			}
			if got.Errno != int(p.deny) {
				t.Errorf("with the filter: %s (%s), want %s", errnoString(got.Errno), got.Detail, unix.ErrnoName(p.deny))
			}
		})
	}
}

// TestInstallAllows checks that the calls the filter must let through,
// made on the filtered thread, reach the kernel: os/exec, threads, the
// allowed socket families, ordinary ioctls.
func TestInstallAllows(t *testing.T) {
	out := runChild(t, "filtered")
	for _, p := range probes {
		if p.deny != 0 {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			got, ok := out.byProbe[p.name]
			if !ok {
				t.Fatalf("no report")
			}
			if got.Errno != int(p.want) {
				t.Errorf("with the filter: %s (%s), want %s", errnoString(got.Errno), got.Detail, errnoString(int(p.want)))
			}
		})
	}
}

// TestDenialsComeFromFilter runs the probes without the filter: a denied
// probe must then answer something other than the filter's errno, so the
// filtered run's errno was the filter's doing; an allowed probe must give
// the same result as under the filter.
func TestDenialsComeFromFilter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: the unfiltered control must be allowed the privileged calls the filter denies (uid %d)", os.Geteuid())
	}
	out := runChild(t, "control")
	if r := out.byProbe["threads"]; len(r.Filtered) != 0 || len(r.All) == 0 {
		t.Fatalf("control child: threads %v, filtered %v; want none filtered", r.All, r.Filtered)
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			got, ok := out.byProbe[p.name]
			if !ok {
				t.Fatalf("no report")
			}
			switch {
			case p.deny == 0 && got.Errno != int(p.want):
				t.Errorf("without the filter: %s (%s), want %s", errnoString(got.Errno), got.Detail, errnoString(int(p.want)))
			case p.deny != 0 && got.Errno == int(p.deny) && p.same == "":
				t.Errorf("without the filter: %s (%s) too, so the filtered run does not show the filter's effect", errnoString(got.Errno), got.Detail)
			case p.deny != 0 && got.Errno == int(p.deny):
				t.Logf("without the filter: %s as well (%s)", errnoString(got.Errno), p.same)
			case p.deny != 0:
				t.Logf("without the filter: %s", errnoString(got.Errno))
			}
		})
	}
}

// TestInstallThreadOnly checks that Install filters the calling thread and
// no other, and sets no_new_privs on it.
func TestInstallThreadOnly(t *testing.T) {
	r := runChild(t, "filtered").byProbe["threads"]
	if !slices.Equal(r.Filtered, []int{r.Tid}) {
		t.Errorf("filtered threads %v, want only the installing thread %d (of %v)", r.Filtered, r.Tid, r.All)
	}
	if len(r.All) < 2 {
		t.Errorf("child has threads %v; want others besides %d to show they stay unfiltered", r.All, r.Tid)
	}
	if !r.NoNewPrivs {
		t.Errorf("no_new_privs not set on the installing thread")
	}
}

// TestInstallInherited starts, from the filtered thread, a copy of the
// test binary. Every thread of it must be filtered, including those its
// Go runtime creates, the probes must answer as on the filtered thread,
// and Go's runtime, goroutines on new threads and os/exec must still work.
func TestInstallInherited(t *testing.T) {
	out := runChild(t, "spawn")
	for _, name := range []string{"threads", "threads after"} {
		r, ok := out.byProbe[name]
		if !ok {
			t.Fatalf("no %q report", name)
		}
		if len(r.All) < 2 || !slices.Equal(r.Filtered, r.All) {
			t.Errorf("%s: filtered threads %v, want all of %v", name, r.Filtered, r.All)
		}
		if !r.NoNewPrivs {
			t.Errorf("%s: no_new_privs not inherited", name)
		}
	}
	for _, p := range probes {
		want := p.want
		if p.deny != 0 {
			want = p.deny
		}
		got, ok := out.byProbe[p.name]
		if !ok {
			t.Errorf("%s: no report", p.name)
		} else if got.Errno != int(want) {
			t.Errorf("%s: %s (%s), want %s", p.name, errnoString(got.Errno), got.Detail, errnoString(int(want)))
		}
	}
	tids := map[int]bool{}
	for i := range 4 {
		prefix := fmt.Sprintf("thread %d: ", i)
		r := out.byProbe[prefix+"threads"]
		if r.Tid == 0 || tids[r.Tid] || !slices.Contains(r.Filtered, r.Tid) {
			t.Errorf("%sthread %d, seen %v, filtered %v (%s): want a distinct, filtered thread", prefix, r.Tid, tids, r.Filtered, r.Detail)
		}
		tids[r.Tid] = true
		for probe, want := range map[string]unix.Errno{
			"unshare(0)":         unix.EPERM,
			"socket(AF_NETLINK)": unix.EPERM,
			"getpid":             0,
			"os/exec /bin/true":  0,
		} {
			if got := out.byProbe[prefix+probe]; got.Errno != int(want) || got.Probe == "" {
				t.Errorf("%s%s: %s (%s), want %s", prefix, probe, errnoString(got.Errno), got.Detail, errnoString(int(want)))
			}
		}
	}
}
