//go:build linux

package energy

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// NVMLHelper is the file name of the program that reads NVML for cordon
// (cmd/cordon-nvml), looked for in the directory of cordon's own
// executable. It is a separate program because opening a shared library
// needs a dynamically linked binary, and cordon is static (package
// energy/nvmldl has the protocol, docs/SPEC.md "NVML").
const NVMLHelper = "cordon-nvml"

// Helper timeouts: nvmlInit may take seconds on a host with many GPUs
// and no persistence daemon; a counter read takes microseconds.
var (
	helperInitTimeout = 60 * time.Second
	helperCallTimeout = 10 * time.Second
)

// helperDir is where loadNVML looks for NVMLHelper: the directory of
// this process's executable (tests point it elsewhere).
var helperDir = func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Dir(exe), nil
}

// loadNVML finds and starts the NVML helper; a helper that is missing,
// not trustworthy, or cannot start gives an nvmlAPI whose Init fails
// with why.
func loadNVML() nvmlAPI {
	dir, err := helperDir()
	if err != nil {
		return unavailableNVML{fmt.Errorf("finding %s: %v", NVMLHelper, err)}
	}
	h, err := startHelper(filepath.Join(dir, NVMLHelper))
	if err != nil {
		return unavailableNVML{err}
	}
	return h
}

// helperNVML is nvmlAPI over the helper's protocol.
type helperNVML struct {
	mu    sync.Mutex
	cmd   *exec.Cmd
	in    *os.File // the helper's standard input
	out   *os.File // its standard output
	r     *bufio.Reader
	dead  error // set once the helper failed the protocol or closed: every call fails
	ended bool  // the helper was waited for
}

// startHelper checks the helper at path and starts it. It must be a
// regular file (not a symbolic link), owned by root or by this process's
// effective uid, and writable by neither group nor others: it runs with
// cordon's privileges. The file checked is the file started (through
// its descriptor), whoever renames the directory's entries meanwhile.
func startHelper(path string) (*helperNVML, error) { return startHelperHook(path, nil) }

// startHelperHook is startHelper; checked, when not nil, runs between the
// checks and the start (tests swap the file there).
func startHelperHook(path string, checked func()) (*helperNVML, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("no %s next to cordon (%s): GPU energy is read through that helper; build it there with 'CGO_ENABLED=0 go build -o %s ./cmd/cordon ./cmd/cordon-nvml'", NVMLHelper, path, filepath.Dir(path))
		}
		return nil, fmt.Errorf("opening the NVML helper: %v", err)
	}
	exe := os.NewFile(uintptr(fd), path)
	defer exe.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("the NVML helper %s: %v", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK: // O_PATH|O_NOFOLLOW opens the link itself
		return nil, fmt.Errorf("the NVML helper %s is a symbolic link: not started; install the program itself there", path)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("the NVML helper %s is not a regular file", path)
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("the NVML helper %s is owned by uid %d, neither root nor this user (%d): not started", path, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("the NVML helper %s is writable by group or others (mode %#o): not started; chmod go-w it", path, st.Mode&0o7777)
	case st.Mode&0o111 == 0:
		return nil, fmt.Errorf("the NVML helper %s is not executable", path)
	}
	if checked != nil {
		checked()
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	// Started through /proc/self/fd: the child resolves it in its own
	// descriptor table, a copy of this one, before exec closes it.
	cmd := exec.Command("/proc/self/fd/" + strconv.Itoa(fd))
	cmd.Args[0] = NVMLHelper
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, nil
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting the NVML helper %s: %v", path, err)
	}
	return &helperNVML{cmd: cmd, in: inW, out: outR, r: bufio.NewReaderSize(outR, 512)}, nil
}

// call sends one request and returns the "ok" answer's value ("" for a
// bare "ok"). An "err" answer is an error; anything else, a timeout or
// the helper's end kills the helper, and every later call fails.
func (h *helperNVML) call(req string, timeout time.Duration) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead != nil {
		return "", h.dead
	}
	broken := func(err error) (string, error) {
		h.dead = fmt.Errorf("the NVML helper: %v", err)
		h.kill()
		return "", h.dead
	}
	h.in.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := h.in.WriteString(req + "\n"); err != nil {
		return broken(fmt.Errorf("sending %q: %v", req, err))
	}
	h.out.SetReadDeadline(time.Now().Add(timeout))
	line, err := h.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return broken(fmt.Errorf("no answer to %q within %v", req, timeout))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return broken(fmt.Errorf("an answer to %q over %d bytes", req, h.r.Size()))
		}
		return broken(fmt.Errorf("answering %q: %v", req, err))
	}
	ans := string(line[:len(line)-1])
	switch {
	case ans == "ok":
		return "", nil
	case strings.HasPrefix(ans, "ok "):
		return ans[3:], nil
	case strings.HasPrefix(ans, "err "):
		return "", errors.New(ans[4:])
	}
	return broken(fmt.Errorf("answered %q to %q", oneLine(ans), req))
}

// kill ends the helper and releases its pipes; h.mu is held.
func (h *helperNVML) kill() {
	if h.ended {
		return
	}
	h.ended = true
	h.cmd.Process.Kill()
	h.in.Close()
	h.cmd.Wait()
	h.out.Close()
}

func (h *helperNVML) Init() error {
	_, err := h.call("init", helperInitTimeout)
	if err != nil {
		h.close()
	}
	return err
}

func (h *helperNVML) DeviceCount() (int, error) {
	v, err := h.call("count", helperCallTimeout)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxNVMLDevices || strconv.Itoa(n) != v {
		h.fail(fmt.Errorf("a device count of %q", oneLine(v)))
		return 0, h.dead
	}
	return n, nil
}

func (h *helperNVML) TotalEnergy(i int) (uint64, error) {
	v, err := h.call("energy "+strconv.Itoa(i), helperCallTimeout)
	if err != nil {
		return 0, err
	}
	mj, err := strconv.ParseUint(v, 10, 64)
	if err != nil || strconv.FormatUint(mj, 10) != v {
		h.fail(fmt.Errorf("device %d's energy as %q", i, oneLine(v)))
		return 0, h.dead
	}
	return mj, nil
}

// Shutdown ends NVML and the helper.
func (h *helperNVML) Shutdown() error {
	_, err := h.call("shutdown", helperCallTimeout)
	h.close()
	return err
}

// fail marks the helper broken (an answer of the wrong form) and ends it.
func (h *helperNVML) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead == nil {
		h.dead = fmt.Errorf("the NVML helper: %v", err)
		h.kill()
	}
}

// close ends the helper after its last request: its input closes, and it
// has helperCallTimeout to exit before it is killed.
func (h *helperNVML) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead == nil {
		h.dead = errors.New("the NVML helper: closed")
	}
	if h.ended {
		return
	}
	h.ended = true
	h.in.Close()
	done := make(chan struct{})
	go func() {
		h.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(helperCallTimeout):
		h.cmd.Process.Kill()
		<-done
	}
	h.out.Close()
}

// maxNVMLDevices bounds a helper's device count (nvmldl.MaxDevices).
const maxNVMLDevices = 1024

// oneLine shows a helper's unexpected answer: printable ASCII, at most
// 100 bytes.
func oneLine(s string) string {
	if len(s) > 100 {
		s = s[:100]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}
