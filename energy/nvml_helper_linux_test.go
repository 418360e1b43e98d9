//go:build linux

package energy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/energy/nvmldl"
)

// fakeHelperEnv makes this test binary, started as NVMLHelper, act as
// one: "serve" answers through nvmldl.Serve with two fake GPUs whose
// counters rise by 5 mJ a read; the other modes break the protocol.
const fakeHelperEnv = "CORDON_TEST_NVML_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeHelperEnv); mode != "" && filepath.Base(os.Args[0]) == NVMLHelper {
		os.Exit(fakeHelper(mode))
	}
	os.Exit(m.Run())
}

type risingNVML struct{ mj []uint64 }

func (r *risingNVML) Init() error               { return nil }
func (r *risingNVML) DeviceCount() (int, error) { return len(r.mj), nil }
func (r *risingNVML) TotalEnergy(i int) (uint64, error) {
	r.mj[i] += 5
	return r.mj[i], nil
}
func (r *risingNVML) Shutdown() error { return nil }

func fakeHelper(mode string) int {
	if len(os.Args) != 1 {
		return 2 // started with arguments: not as cordon starts it
	}
	line := func() string {
		var b [64]byte
		n, _ := os.Stdin.Read(b[:])
		return string(b[:n])
	}
	switch mode {
	case "serve":
		if err := nvmldl.Serve(&risingNVML{mj: []uint64{1000, 2000}}, os.Stdin, os.Stdout); err != nil {
			return 1
		}
	case "garbage":
		line()
		fmt.Println("hello")
	case "long":
		line()
		fmt.Println("ok " + strings.Repeat("9", 4096))
	case "bad count":
		fmt.Print(line()[:0] + "ok\n")
		line()
		fmt.Println("ok -3")
	case "bad energy":
		line()
		fmt.Println("ok")
		line()
		fmt.Println("ok 1")
		line()
		fmt.Println("ok 12abc")
	case "hang":
		line()
		time.Sleep(time.Hour)
	case "two answers":
		// Answers init twice in one write, then "ok 5" to anything: a
		// meter that took the extra answer for the next request's would
		// count three GPUs and read 5 mJ from each.
		line()
		fmt.Print("ok\nok 3\n")
		for line() != "" {
			fmt.Println("ok 5")
		}
	case "energy as":
		// Counts one GPU, then answers every energy request with the
		// test's answer.
		line()
		fmt.Println("ok")
		line()
		fmt.Println("ok 1")
		for line() != "" {
			fmt.Print("ok " + os.Getenv("CORDON_TEST_NVML_ANSWER") + "\n")
		}
	case "escape":
		line()
		fmt.Print("err \x1b[2J\x1b]0;owned\x07\r\n")
	case "exit":
		return 0
	case "env":
		// The helper sees cordon's environment (LD_LIBRARY_PATH may
		// name where libnvidia-ml is).
		line()
		fmt.Println("err " + os.Getenv("CORDON_TEST_NVML_ENV"))
	}
	return 0
}

// installFakeHelper copies this test binary to DIR/cordon-nvml with
// mode, and points helperDir there; the helper acts in mode.
func installFakeHelper(t *testing.T, mode string, perm os.FileMode) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, NVMLHelper)
	if err := os.WriteFile(path, b, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeHelperEnv, mode)
	old := helperDir
	helperDir = func() (string, error) { return dir, nil }
	t.Cleanup(func() { helperDir = old })
	return path
}

// children is how many child processes this process has (the helper
// must never be left running, nor unreaped).
func children(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		c, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		n += len(strings.Fields(string(c)))
	}
	return n
}

// openFDs is how many descriptors this process has open (the poller's
// own are opened first, by a pipe).
func openFDs(t *testing.T) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

func TestNVMLHelper(t *testing.T) {
	installFakeHelper(t, "serve", 0o755)
	m, err := NewNVML(context.Background())
	if err != nil {
		t.Fatalf("NewNVML through the helper: %v", err)
	}
	if m.Devices() != 2 || m.Class() != "gpu" {
		t.Fatalf("%d devices of class %s", m.Devices(), m.Class())
	}
	a, err := m.Read()
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Read()
	if err != nil {
		t.Fatal(err)
	}
	// Each read adds 5 mJ per device: 10 mJ = 10000 µJ between reads.
	if d, err := m.Delta(a, b); err != nil || d != 10_000 {
		t.Fatalf("Delta = %d, %v; want 10000 µJ (%v → %v)", d, err, a.Values, b.Values)
	}
	if children(t) == 0 {
		t.Fatal("no helper process while the meter is open")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := children(t); n != 0 {
		t.Fatalf("%d child processes after Close: the helper was not reaped", n)
	}
	if _, err := m.Read(); err == nil {
		t.Fatal("a read after Close succeeded")
	}
}

// TestNVMLHelperEnvironment: the helper is started with cordon's
// environment, so that LD_LIBRARY_PATH reaches its dlopen.
func TestNVMLHelperEnvironment(t *testing.T) {
	installFakeHelper(t, "env", 0o755)
	t.Setenv("CORDON_TEST_NVML_ENV", "seen")
	_, err := NewNVML(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "seen") {
		t.Fatalf("NewNVML = %v; want ErrUnavailable naming the helper's answer", err)
	}
}

func TestNVMLHelperBroken(t *testing.T) {
	oldInit, oldCall := helperInitTimeout, helperCallTimeout
	helperInitTimeout, helperCallTimeout = 2*time.Second, 2*time.Second
	t.Cleanup(func() { helperInitTimeout, helperCallTimeout = oldInit, oldCall })
	for answer, want := range map[string]string{
		"+5":                   `device 0's energy as "+5"`,
		"05":                   `device 0's energy as "05"`,
		" 5":                   `device 0's energy as " 5"`,
		"5\r":                  `device 0's energy as "5?"`,
		"5 6":                  `device 0's energy as "5 6"`,
		"":                     `device 0's energy as ""`,
		"18446744073709551616": `device 0's energy as "18446744073709551616"`,
		"18446744073709551615": "counter 18446744073709551615 mJ overflows µJ",
	} {
		t.Run("energy "+answer, func(t *testing.T) {
			installFakeHelper(t, "energy as", 0o755)
			t.Setenv("CORDON_TEST_NVML_ANSWER", answer)
			before := openFDs(t)
			if _, err := NewNVML(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("NewNVML = %v; want an error with %q", err, want)
			}
			if n := children(t); n != 0 {
				t.Fatalf("%d child processes left after a broken helper", n)
			}
			if after := openFDs(t); after != before {
				t.Fatalf("%d descriptors open after a broken helper, %d before", after, before)
			}
		})
	}
	for mode, want := range map[string]string{
		"garbage":     `answered "hello" to "init"`,
		"long":        "over 512 bytes",
		"bad count":   `a device count of "-3"`,
		"bad energy":  `device 0's energy as "12abc"`,
		"hang":        `no answer to "init" within 2s`,
		"exit":        "EOF",
		"two answers": `more than one answer to "init"`,
		"escape":      "NVML: ?[2J?]0;owned??",
	} {
		t.Run(mode, func(t *testing.T) {
			installFakeHelper(t, mode, 0o755)
			before := openFDs(t)
			start := time.Now()
			_, err := NewNVML(context.Background())
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
				t.Fatalf("NewNVML = %v; want ErrUnavailable with %q", err, want)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Fatalf("took %v", d)
			}
			if n := children(t); n != 0 {
				t.Fatalf("%d child processes left after a broken helper", n)
			}
			if after := openFDs(t); after != before {
				t.Fatalf("%d descriptors open after a broken helper, %d before", after, before)
			}
		})
	}
}

func TestNVMLHelperRefused(t *testing.T) {
	before := openFDs(t)
	defer func() {
		if after := openFDs(t); after != before {
			t.Errorf("%d descriptors open after the refusals, %d before", after, before)
		}
	}()
	// Missing: the error says where it was looked for and how to build it.
	dir := t.TempDir()
	old := helperDir
	helperDir = func() (string, error) { return dir, nil }
	_, err := NewNVML(context.Background())
	helperDir = old
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no cordon-nvml next to cordon ("+dir) || !strings.Contains(err.Error(), "go build -o "+dir) {
		t.Fatalf("no helper: %v", err)
	}
	for name, c := range map[string]struct {
		perm os.FileMode
		want string
	}{
		"group-writable": {0o775, "writable by group or others"},
		"world-writable": {0o757, "writable by group or others"},
		"not executable": {0o644, "not executable"},
		// A set-user-ID or set-group-ID helper would run with other
		// privileges than cordon's, and one cordon cannot kill would
		// hang its Close.
		"set-user-ID":  {0o755 | os.ModeSetuid, "set-user-ID or set-group-ID"},
		"set-group-ID": {0o755 | os.ModeSetgid, "set-user-ID or set-group-ID"},
	} {
		t.Run(name, func(t *testing.T) {
			installFakeHelper(t, "serve", c.perm)
			if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewNVML = %v; want ErrUnavailable with %q", err, c.want)
			}
		})
	}
	t.Run("symbolic link", func(t *testing.T) {
		path := installFakeHelper(t, "serve", 0o755)
		real := path + ".real"
		if err := os.Rename(path, real); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, path); err != nil {
			t.Fatal(err)
		}
		if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("NewNVML = %v; want a refused symbolic link", err)
		}
	})
	// Whoever can write a directory on the way can swap the helper for
	// another file: every directory must be as trusted as the helper.
	t.Run("directory writable by others", func(t *testing.T) {
		path := installFakeHelper(t, "serve", 0o755)
		dir := filepath.Dir(path)
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "the directory "+dir+" on the way to the NVML helper is writable by group or others") {
			t.Fatalf("NewNVML = %v; want a refused directory %s", err, dir)
		}
		// A sticky directory (as /tmp) keeps others from renaming what
		// they do not own: accepted, as every test's temporary directory
		// under /tmp is.
		if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		m, err := NewNVML(context.Background())
		if err != nil {
			t.Fatalf("NewNVML in a sticky directory: %v", err)
		}
		m.Close()
	})
	t.Run("directory symbolic link", func(t *testing.T) {
		path := installFakeHelper(t, "serve", 0o755)
		dir := filepath.Dir(path)
		link := filepath.Join(t.TempDir(), "bin")
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
		helperDir = func() (string, error) { return link, nil }
		if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "the directory "+link+" on the way to the NVML helper is a symbolic link") {
			t.Fatalf("NewNVML = %v; want a refused symbolic link %s", err, link)
		}
	})
	t.Run("relative directory", func(t *testing.T) {
		installFakeHelper(t, "serve", 0o755)
		helperDir = func() (string, error) { return "bin", nil }
		if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not an absolute path") {
			t.Fatalf("NewNVML = %v; want a refused relative path", err)
		}
	})
	t.Run("a directory", func(t *testing.T) {
		path := installFakeHelper(t, "serve", 0o755)
		os.Remove(path)
		os.Mkdir(path, 0o755)
		if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("NewNVML = %v; want a refused directory", err)
		}
	})
}

// TestNVMLHelperOtherOwnerNeedsRoot: a helper owned by another user is
// not started (chown needs root).
func TestNVMLHelperOtherOwnerNeedsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown to another uid")
	}
	path := installFakeHelper(t, "serve", 0o755)
	if err := os.Chown(path, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "owned by uid 4321") {
		t.Fatalf("NewNVML = %v; want a refused helper owned by uid 4321", err)
	}
}

// TestNVMLHelperStartsWhatWasChecked: the helper is started through the
// descriptor its checks were made on, so a file swapped in after the
// checks is not what runs.
func TestNVMLHelperStartsWhatWasChecked(t *testing.T) {
	path := installFakeHelper(t, "serve", 0o755)
	h, err := startHelperHook(path, func() {
		// Between the checks and the start: replace the file with a
		// group-writable script that would answer "ok 99".
		os.Remove(path)
		os.WriteFile(path, []byte("#!/bin/sh\necho ok\necho ok 99\n"), 0o777)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if err := h.Init(); err != nil {
		t.Fatal(err)
	}
	if n, err := h.DeviceCount(); err != nil || n != 2 {
		t.Fatalf("DeviceCount = %d, %v: the swapped file ran instead of the checked one", n, err)
	}
}

// fakeLibNVML is a libnvidia-ml.so.1 with two GPUs whose counters rise by
// 7 and 14 mJ a read; with FAKE_NVML_UNSUPPORTED set, reading energy
// fails as on a GPU older than Volta.
const fakeLibNVML = `#include <stdint.h>
#include <stdlib.h>
static unsigned long long e[2] = {1000, 5000};
static int up;
int nvmlInit_v2(void) { up = 1; return 0; }
int nvmlShutdown(void) { up = 0; return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { if (!up) return 1; *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { if (!up || i >= 2) return 2; *h = (void *)(uintptr_t)(0x100 + i); return 0; }
int nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj) {
	unsigned i = (unsigned)((uintptr_t)h - 0x100);
	if (!up || i >= 2) return 2;
	if (getenv("FAKE_NVML_UNSUPPORTED")) return 3;
	e[i] += 7 * (i + 1);
	*mj = e[i];
	return 0;
}
const char *nvmlErrorString(int r) { return r == 3 ? "Not Supported" : "Uninitialized"; }
`

// TestNVMLHelperRealLibrary runs the whole chain: this package's meter,
// the real helper (cmd/cordon-nvml, built here), its dlopen through
// purego, and a fake libnvidia-ml.so.1 compiled with gcc, found through
// LD_LIBRARY_PATH as a driver's library would be through the loader.
func TestNVMLHelperRealLibrary(t *testing.T) {
	dir := realHelper(t)
	// Without the library on the loader's path: unavailable, naming it.
	t.Setenv("LD_LIBRARY_PATH", "")
	if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), nvmldl.Library) {
		t.Fatalf("no library: NewNVML = %v; want ErrUnavailable naming %s", err, nvmldl.Library)
	}
	t.Setenv("LD_LIBRARY_PATH", dir)
	m, err := NewNVML(context.Background())
	if err != nil {
		t.Fatalf("NewNVML through the real helper: %v", err)
	}
	a, err := m.Read()
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Read()
	if err != nil {
		t.Fatal(err)
	}
	if d, err := m.Delta(a, b); err != nil || d != 21_000 || m.Devices() != 2 {
		t.Fatalf("Delta = %d, %v over %d devices; want 21000 µJ over 2 (%v → %v)", d, err, m.Devices(), a.Values, b.Values)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := children(t); n != 0 {
		t.Fatalf("%d child processes after Close", n)
	}
	// A counter the GPU does not have: unavailable, with NVML's words.
	t.Setenv("FAKE_NVML_UNSUPPORTED", "1")
	if _, err := NewNVML(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Not Supported (NVML error 3)") {
		t.Fatalf("no energy counter: NewNVML = %v", err)
	}
	if n := children(t); n != 0 {
		t.Fatalf("%d child processes after a refused meter", n)
	}
}

// realHelper builds the real helper (cmd/cordon-nvml) and the fake
// libnvidia-ml.so.1 into a temporary directory, points helperDir there,
// and returns it.
func realHelper(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("CORDON_CI") == "1" {
			t.Fatal("gcc is missing: .ci/run installs it (Debian's gcc)")
		}
		t.Skip("needs gcc to build a fake libnvidia-ml.so.1 (CI installs it)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "nvml.c")
	if err := os.WriteFile(src, []byte(fakeLibNVML), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", filepath.Join(dir, nvmldl.Library), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, NVMLHelper), "../cmd/cordon-nvml")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/cordon-nvml: %v\n%s", err, out)
	}
	old := helperDir
	helperDir = func() (string, error) { return dir, nil }
	t.Cleanup(func() { helperDir = old })
	return dir
}

// helperPID is the process id of m's helper.
func helperPID(t *testing.T, m *NVML) int {
	t.Helper()
	h, ok := m.api.(*helperNVML)
	if !ok {
		t.Fatalf("the meter reads through %T, not the helper", m.api)
	}
	return h.cmd.Process.Pid
}

// TestNVMLHelperOnlyStdio: the helper holds none of cordon's
// descriptors but its standard input and output. cordon opens its own
// close-on-exec, but what it inherited from its parent is not, and
// os/exec passes that on: the real helper closes it before it opens
// NVIDIA's library.
func TestNVMLHelperOnlyStdio(t *testing.T) {
	dir := realHelper(t)
	t.Setenv("LD_LIBRARY_PATH", dir)
	secret := filepath.Join(t.TempDir(), "inherited")
	if err := os.WriteFile(secret, []byte("cordon's"), 0o600); err != nil {
		t.Fatal(err)
	}
	// As cordon would hold a descriptor from its caller: no O_CLOEXEC.
	fd, err := unix.Open(secret, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m, err := NewNVML(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pid := helperPID(t, m)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if target == secret {
			t.Errorf("the helper holds cordon's descriptor %d (%s) as its %s", fd, secret, e.Name())
		}
	}
	for i, want := range []string{"pipe:", "pipe:", "/dev/null"} {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, i)); err != nil || !strings.HasPrefix(target, want) {
			t.Errorf("the helper's descriptor %d is %q (%v); want %s…", i, target, err, want)
		}
	}
}

// TestNVMLHelperSurvivesSignals: the terminal's interrupt (and a
// service manager's SIGTERM to the whole group) reaches the helper as it
// reaches cordon; cordon catches it to end the run and seal it, which
// reads the GPU meter once more. The helper must still answer: it ends
// at the end of its input, or when cordon kills it.
func TestNVMLHelperSurvivesSignals(t *testing.T) {
	dir := realHelper(t)
	t.Setenv("LD_LIBRARY_PATH", dir)
	m, err := NewNVML(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pid := helperPID(t, m)
	for _, sig := range []unix.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT} {
		if err := unix.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := m.Read(); err != nil {
		t.Fatalf("a read after the terminal's signals: %v", err)
	}
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v: the helper did not end at shutdown", d)
	}
	if n := children(t); n != 0 {
		t.Fatalf("%d child processes after Close", n)
	}
}

// TestNVMLHelperConcurrent: meters of their own, read at once and
// closed while another goroutine reads, never give a wrong reading, and
// each helper ends at its own Close (none holds another's input open).
func TestNVMLHelperConcurrent(t *testing.T) {
	installFakeHelper(t, "serve", 0o755)
	var ms [3]*NVML
	for i := range ms {
		m, err := NewNVML(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for _, m := range ms {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				last := Counter{Values: []uint64{0, 0}}
				for range 50 {
					c, err := m.Read()
					if err != nil {
						if !errors.Is(err, ErrUnavailable) {
							errs <- fmt.Errorf("a read racing Close: %v", err)
						}
						return
					}
					if _, err := m.Delta(last, c); err != nil || c.Values[0] == 0 {
						errs <- fmt.Errorf("readings %v then %v: %v", last.Values, c.Values, err)
						return
					}
					last = c
				}
			}()
		}
	}
	start := time.Now()
	ms[0].Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v: another helper holds this one's input open", d)
	}
	wg.Wait()
	ms[1].Close()
	ms[2].Close()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := ms[0].Read(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a read after Close: %v", err)
	}
	if n := children(t); n != 0 {
		t.Fatalf("%d child processes after Close", n)
	}
}

// TestNVMLHelperOpeningInterrupted: the meter's opening ends with its
// context: a helper that does not answer is killed and reaped at once,
// well before its timeout, and the meter is unavailable; a context that
// ends after the opening does not touch the open meter.
func TestNVMLHelperOpeningInterrupted(t *testing.T) {
	oldInit := helperInitTimeout
	helperInitTimeout = 30 * time.Second
	t.Cleanup(func() { helperInitTimeout = oldInit })
	installFakeHelper(t, "hang", 0o755)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := NewNVML(ctx)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("NewNVML with an ended context = %v; want ErrUnavailable, interrupted", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the opening took %v after its context ended at 300ms", d)
	}
	if n := children(t); n != 0 {
		t.Fatalf("%d child processes after an interrupted opening", n)
	}
	// Already ended: refused before anything is asked.
	if _, err := NewNVML(ctx); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("NewNVML with a context already ended = %v", err)
	}
	if n := children(t); n != 0 {
		t.Fatalf("%d child processes after a refused opening", n)
	}

	// Open, then the context ends: the meter still reads (a run
	// interrupted after its meters were opened seals with them).
	installFakeHelper(t, "serve", 0o755)
	ctx, cancel = context.WithCancel(context.Background())
	m, err := NewNVML(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	if _, err := m.Read(); err != nil {
		t.Fatalf("a read after the opening's context ended: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
