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
	"sync/atomic"
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
	// interrupted is set while the meter's opening is cut short (its
	// context ended): a call then fails at once (interrupt).
	interrupted atomic.Bool
}

// interrupt makes the call in progress fail now, and every call until
// reset: its deadlines pass at once.
func (h *helperNVML) interrupt() {
	h.interrupted.Store(true)
	h.in.SetWriteDeadline(time.Now())
	h.out.SetReadDeadline(time.Now())
}

func (h *helperNVML) reset() { h.interrupted.Store(false) }

// startHelper checks the helper at path and starts it. It must be a
// regular file (not a symbolic link), owned by root or by this process's
// effective uid, writable by neither group nor others, and neither
// set-user-ID nor set-group-ID: it runs with cordon's privileges. Every
// directory on the way to it is held to the same owners and modes (a
// sticky directory, as /tmp, may be writable by others) and none may be a
// symbolic link: whoever can rename one of them could put another file
// in the helper's place. The file checked is the file started (through
// its descriptor), whoever renames the directories' entries meanwhile.
func startHelper(path string) (*helperNVML, error) { return startHelperHook(path, nil) }

// startHelperHook is startHelper; checked, when not nil, runs between the
// checks and the start (tests swap the file there).
func startHelperHook(path string, checked func()) (*helperNVML, error) {
	fd, err := openHelper(path)
	if err != nil {
		return nil, err
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
	case st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0:
		return nil, fmt.Errorf("the NVML helper %s is set-user-ID or set-group-ID (mode %#o): not started; it runs with cordon's privileges: chmod ug-s it", path, st.Mode&0o7777)
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

// openHelper opens path (O_PATH, close-on-exec) one name at a time from
// the root, without following a symbolic link, and checks each directory
// on the way: owned by root or this user, and writable by neither group
// nor others unless sticky. The caller checks the file itself.
func openHelper(path string) (int, error) {
	if !filepath.IsAbs(path) {
		return -1, fmt.Errorf("the NVML helper %s is not an absolute path", path)
	}
	missing := func() error {
		return fmt.Errorf("no %s next to cordon (%s): GPU energy is read through that helper; build it there with 'CGO_ENABLED=0 go build -o %s ./cmd/cordon ./cmd/cordon-nvml'", NVMLHelper, path, filepath.Dir(path))
	}
	dir, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening / on the way to the NVML helper: %v", err)
	}
	at := "/"
	names := strings.Split(filepath.Clean(path)[1:], "/")
	for i := 0; ; i++ {
		var st unix.Stat_t
		if err := unix.Fstat(dir, &st); err != nil {
			unix.Close(dir)
			return -1, fmt.Errorf("the directory %s on the way to the NVML helper: %v", at, err)
		}
		var bad, hint string
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			bad, hint = "is a symbolic link", "; cordon looks for the helper in its executable's real directory"
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			bad = "is not a directory"
		case st.Uid != 0 && int(st.Uid) != os.Geteuid():
			bad = fmt.Sprintf("is owned by uid %d, neither root nor this user (%d)", st.Uid, os.Geteuid())
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			bad = fmt.Sprintf("is writable by group or others (mode %#o)", st.Mode&0o7777)
			hint = fmt.Sprintf("; chmod go-w it, or install cordon and %s in a directory only root or you can write", NVMLHelper)
		}
		if bad != "" {
			unix.Close(dir)
			return -1, fmt.Errorf("the directory %s on the way to the NVML helper %s: not started%s", at, bad, hint)
		}
		fd, err := unix.Openat(dir, names[i], unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		switch {
		case errors.Is(err, unix.ENOENT):
			return -1, missing()
		case err != nil:
			return -1, fmt.Errorf("opening the NVML helper %s: %v", path, err)
		case i == len(names)-1:
			return fd, nil
		}
		dir, at = fd, filepath.Join(at, names[i])
	}
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
	if h.interrupted.Load() {
		return broken(fmt.Errorf("interrupted before sending %q", req))
	}
	if _, err := h.in.WriteString(req + "\n"); err != nil {
		return broken(fmt.Errorf("sending %q: %v", req, err))
	}
	h.out.SetReadDeadline(time.Now().Add(timeout))
	if h.interrupted.Load() { // after the deadlines: an interrupt from now on passes them
		return broken(fmt.Errorf("interrupted before the answer to %q", req))
	}
	line, err := h.r.ReadSlice('\n')
	if err != nil {
		if h.interrupted.Load() {
			return broken(fmt.Errorf("interrupted before the answer to %q", req))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return broken(fmt.Errorf("no answer to %q within %v", req, timeout))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return broken(fmt.Errorf("an answer to %q over %d bytes", req, h.r.Size()))
		}
		return broken(fmt.Errorf("answering %q: %v", req, err))
	}
	if h.r.Buffered() > 0 {
		// The answer must be the only line: an extra one would be taken
		// for the next request's answer.
		return broken(fmt.Errorf("more than one answer to %q", req))
	}
	ans := string(line[:len(line)-1])
	switch {
	case ans == "ok":
		return "", nil
	case strings.HasPrefix(ans, "ok "):
		return ans[3:], nil
	case strings.HasPrefix(ans, "err "):
		return "", errors.New(oneLine(ans[4:]))
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
