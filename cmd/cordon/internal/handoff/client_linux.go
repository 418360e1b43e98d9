package handoff

import (
	"syscall"
	"unsafe"
)

// sandboxInit is argv[0] of cordon's sandbox init (sandbox.InitArg0):
// never handed off.
const sandboxInit = "cordon-sandbox-init"

// oPath is O_PATH (the syscall package does not name it).
const oPath = 0x200000

func init() {
	code, note := try()
	if note != "" {
		writeStderr("cordon: " + note + "\n")
	}
	if code >= 0 {
		syscall.Exit(code)
	}
}

// try hands the invocation off: the command's exit status, or -1 to
// start cold; note is a line for standard error.
func try() (code int, note string) {
	args, ok := cmdline()
	if !ok || len(args) < 2 || args[1] != "exec" || args[0] == sandboxInit {
		return -1, ""
	}
	env := syscall.Environ()
	if Getenv(env, "CORDON_RESIDENT") == Off {
		return -1, ""
	}
	flag, ok := StateFlag(args[2:])
	if !ok {
		return -1, ""
	}
	euid := syscall.Geteuid()
	state, ok := StateDir(flag, env, euid)
	if !ok {
		return -1, ""
	}
	for fd := 0; fd < 3; fd++ {
		fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
		if e != 0 || fl&syscall.O_NONBLOCK != 0 || isTerminal(fd) {
			return -1, "" // a closed or non-blocking stream, or a terminal: cold (docs/sandbox.md)
		}
	}
	dir := state + "/pool"
	sock := dir + "/" + SocketName
	if len(sock) >= 108 {
		return -1, ""
	}
	if why := owned(dir, syscall.S_IFDIR, euid); why != "" {
		return -1, why
	}
	if why := owned(sock, syscall.S_IFSOCK, euid); why != "" {
		return -1, why
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, ""
	}
	defer syscall.Close(fd)
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		return -1, "" // nothing serves there (a stale socket): cold
	}
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil || int(cred.Uid) != euid {
		return -1, "note: exec: ignoring the resident exec server at " + sock + ": it does not run as this uid; starting cold"
	}
	req, ok := Encode(args, env)
	if !ok {
		return -1, ""
	}
	cwd, err := syscall.Open(".", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, ""
	}
	err = syscall.Sendmsg(fd, req, syscall.UnixRights(0, 1, 2, cwd), nil, syscall.MSG_NOSIGNAL)
	syscall.Close(cwd)
	if err != nil {
		// The server got nothing it can run; it may have said why.
		if line, ok := readLine(fd); ok && hasPrefix(line, "decline ") {
			return -1, "note: exec: the resident exec server declined (" + line[8:] + "); starting cold"
		}
		return -1, ""
	}
	started := false
	for {
		line, complete := readLine(fd)
		switch {
		case !complete && !started:
			// Nothing ran: the server went away (or stopped) before a
			// warm process took the request, or before it started it.
			return -1, "note: exec: the resident exec server at " + sock + " closed the connection before starting the command; starting cold"
		case !complete:
			return 125, "error: exec: the resident exec server at " + sock + " went away before the command finished"
		case line == "start" && !started:
			started = true
			continue
		case hasPrefix(line, "exit "):
			if n, ok := parseDecimal(line[5:]); ok && n < 256 {
				return n, ""
			}
		case started && (line == "sigpipe 1" || line == "sigpipe 2"):
			// The served run's stdout or stderr reader went away: die of
			// SIGPIPE, as a cold cordon does at its next write there.
			diePipe()
			return 141, ""
		case hasPrefix(line, "decline ") && !started:
			return -1, "note: exec: the resident exec server declined (" + line[8:] + "); starting cold"
		}
		return 125, "error: exec: the resident exec server at " + sock + " answered " + quote(line)
	}
}

// owned reports why path is not what the hand-off may trust ("" when it
// is): it must be of type typ and owned by euid, and a directory must be
// writable by its owner alone. A path that is not there is no reason to
// note: nothing serves.
func owned(path string, typ uint32, euid int) string {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return ""
	}
	if st.Mode&syscall.S_IFMT != typ || int(st.Uid) != euid || typ == syscall.S_IFDIR && st.Mode&0o022 != 0 {
		return "note: exec: ignoring the resident exec server's " + path + ": not this uid's own (or open to others); starting cold"
	}
	return ""
}

// cmdline is this process's arguments, from /proc (the os package,
// which holds them, is not initialised yet).
func cmdline() ([]string, bool) {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	buf := make([]byte, 64<<10)
	n := 0
	for {
		if n == len(buf) {
			return nil, false // a command line this long starts cold
		}
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			break
		}
		n += m
	}
	var args []string
	start := 0
	for i := 0; i < n; i++ {
		if buf[i] == 0 {
			args = append(args, string(buf[start:i]))
			start = i + 1
		}
	}
	if start != n {
		return nil, false
	}
	return args, true
}

// readLine reads one line of the server's answer (at most 4 KiB), a
// byte at a time: what follows it is the next line's.
func readLine(fd int) (string, bool) {
	var buf [4096]byte
	var b [1]byte
	for n := 0; n < len(buf); {
		m, err := syscall.Read(fd, b[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m == 0 {
			return "", false
		}
		if b[0] == '\n' {
			return string(buf[:n]), true
		}
		buf[n] = b[0]
		n++
	}
	return "", false
}

// diePipe ends this process by SIGPIPE's default action (the runtime's
// handler would ignore it: a Go program dies of SIGPIPE only on its own
// stdout or stderr, through the os package).
func diePipe() {
	var dfl [4]uintptr // struct sigaction: SIG_DFL, no flags, an empty mask
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGPIPE), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	syscall.Kill(syscall.Getpid(), syscall.SIGPIPE)
}

func isTerminal(fd int) bool {
	var t syscall.Termios
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return e == 0
}

func writeStderr(s string) {
	b := []byte(s)
	for len(b) > 0 {
		n, err := syscall.Write(2, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		b = b[n:]
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// quote shows a server's unexpected answer: printable ASCII as is, the
// rest as '?', at most 200 bytes.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return "\"" + string(b) + "\""
}
