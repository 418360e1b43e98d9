//go:build linux && (amd64 || arm64)

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
		marks.print()
		syscall.Exit(code)
	}
}

// handoffMarks are the hand-off's phase marks; nil unless PhasesEnv asks.
type handoffMarks struct {
	t0   int64
	name [8]string
	at   [8]int64
	n    int
}

var marks *handoffMarks

func (m *handoffMarks) add(name string) {
	if m == nil || m.n == len(m.at) {
		return
	}
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return
	}
	m.at[m.n], m.name[m.n] = ts.Nano(), name
	m.n++
}

func (m *handoffMarks) print() {
	if m == nil {
		return
	}
	var b []byte
	for i := 0; i < m.n; i++ {
		b = append(b, "cordon: phase "...)
		b = appendDecimal(b, int(m.at[i]-m.t0))
		b = append(b, " hand-off: "...)
		b = append(b, m.name[i]...)
		b = append(b, '\n')
	}
	writeStderr(string(b))
}

const clockMonotonic = 1 // CLOCK_MONOTONIC

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
	if t0, ok := parseClock(Getenv(env, PhasesEnv)); ok {
		marks = &handoffMarks{t0: t0}
		marks.add("started")
	}
	wd, err := syscall.Getwd()
	if err != nil {
		return -1, ""
	}
	flag, ok := StateFlag(args[2:], wd)
	if !ok {
		return -1, ""
	}
	for _, name := range ProcessFileEnv {
		if NamesProcessFile(Getenv(env, name), wd) {
			return -1, ""
		}
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
	// The pool directory is opened once, and the socket reached through
	// that descriptor: what was checked is what is connected to, whoever
	// renames the directories above it.
	dir := state + "/pool"
	dfd, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, "" // no pool directory (or not a directory): nothing serves
	}
	defer syscall.Close(dfd)
	var st syscall.Stat_t
	if syscall.Fstat(dfd, &st) != nil || int(st.Uid) != euid || st.Mode&0o022 != 0 {
		return -1, "note: exec: ignoring the resident exec server's " + dir + ": not this uid's own, or open to others; starting cold"
	}
	if err := fstatat(dfd, SocketName, &st); err != nil {
		return -1, ""
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK || int(st.Uid) != euid {
		return -1, "note: exec: ignoring the resident exec server's " + dir + "/" + SocketName + ": not this uid's own socket; starting cold"
	}
	sock := "/proc/self/fd/" + string(appendDecimal(nil, dfd)) + "/" + SocketName
	// A non-blocking connect: a listener whose queue is full (however it
	// filled) sends the caller cold at once instead of holding it.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, ""
	}
	defer syscall.Close(fd)
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		return -1, "" // nothing serves there (a stale socket), or its queue is full: cold
	}
	marks.add("connected")
	if err := syscall.SetNonblock(fd, false); err != nil {
		return -1, ""
	}
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil || int(cred.Uid) != euid {
		return -1, "note: exec: ignoring the resident exec server at " + dir + ": it does not run as this uid; starting cold"
	}
	if !sameBinary(int(cred.Pid)) {
		return -1, "note: exec: ignoring the resident exec server at " + dir + ": it runs another cordon binary (or another program); starting cold"
	}
	// A warm process takes the connection and says so, or none is free:
	// then cold, at once.
	tv := syscall.NsecToTimeval(int64(Wait(env)) * 1000 * 1000)
	if syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv) != nil {
		return -1, ""
	}
	line, complete := readLine(fd)
	if !complete {
		return -1, "" // busy (or gone): cold
	}
	marks.add("ready")
	if hasPrefix(line, "decline ") {
		return -1, "note: exec: the resident exec server declined (" + line[8:] + "); starting cold"
	}
	pid, ok := 0, hasPrefix(line, "ready ")
	if ok {
		pid, ok = parseDecimal(line[6:])
	}
	if !ok || !sameBinary(pid) {
		return -1, "note: exec: the resident exec server at " + dir + " answered " + quote(line) + "; starting cold"
	}
	// What the caller sends (its command line, environment, streams) goes
	// only to a warm process no more confined or watched than itself.
	if why := sameContext(pid); why != "" {
		return -1, "note: exec: ignoring the resident exec server's warm process (pid " + line[6:] + "): its " + why + " is not this process's; starting cold"
	}
	nonce, ok := readNonce(pid)
	if !ok {
		// Only a process that may ptrace-read the warm process reads
		// its nonce: not one confined (by Landlock, say) where it is not.
		return -1, "note: exec: cannot read the resident exec server's warm process (pid " + line[6:] + "), as a confined process cannot; starting cold"
	}
	tv = syscall.Timeval{}
	if syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv) != nil {
		return -1, ""
	}
	req, ok := Encode(nonce, args, env)
	if !ok {
		return -1, ""
	}
	cwd, err := syscall.Open(".", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, ""
	}
	err = syscall.Sendmsg(fd, req, syscall.UnixRights(0, 1, 2, cwd), nil, syscall.MSG_NOSIGNAL)
	syscall.Close(cwd)
	marks.add("request sent")
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
			// Nothing ran: the warm process went away before it started
			// the command.
			return -1, "note: exec: the resident exec server at " + dir + " closed the connection before starting the command; starting cold"
		case !complete:
			return 125, "error: exec: the resident exec server at " + dir + " went away before the command finished"
		case line == "start" && !started:
			started = true
			marks.add("command started")
			continue
		case hasPrefix(line, "exit "):
			if n, ok := parseDecimal(line[5:]); ok && n < 256 {
				marks.add("answered")
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
		return 125, "error: exec: the resident exec server at " + dir + " answered " + quote(line)
	}
}

// sameBinary reports whether process pid runs this process's executable
// (the same file: device and inode).
func sameBinary(pid int) bool {
	if pid <= 0 {
		return false
	}
	var mine, theirs syscall.Stat_t
	if syscall.Stat("/proc/self/exe", &mine) != nil {
		return false
	}
	if syscall.Stat("/proc/"+string(appendDecimal(nil, pid))+"/exe", &theirs) != nil {
		return false
	}
	return mine.Dev == theirs.Dev && mine.Ino == theirs.Ino
}

// sameContext names what of process pid's confinement differs from this
// process's ("" when nothing does): no_new_privs, seccomp, the bounding
// set, a tracer (it must have none), every namespace, the root
// directory and the cgroups. (Its ids may show another uid: the warm
// process's main thread may have made a sandbox's user namespace.)
func sameContext(pid int) string {
	them := "/proc/" + string(appendDecimal(nil, pid))
	st, ok1 := readAll(them+"/status", 64<<10)
	mine, ok2 := readAll("/proc/self/status", 64<<10)
	if !ok1 || !ok2 {
		return "status"
	}
	if statusLine(st, "TracerPid") != "0" {
		return "tracer"
	}
	for _, k := range []string{"NoNewPrivs", "Seccomp", "Seccomp_filters", "CapBnd"} {
		if statusLine(st, k) != statusLine(mine, k) {
			return k
		}
	}
	for _, ns := range []string{"cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"} {
		a, erra := readlink(them + "/ns/" + ns)
		b, errb := readlink("/proc/self/ns/" + ns)
		if erra != errb || a != b {
			return "ns/" + ns
		}
	}
	var a, b syscall.Stat_t
	if syscall.Stat(them+"/root", &a) != nil || syscall.Stat("/proc/self/root", &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		return "root"
	}
	ca, oka := readAll(them+"/cgroup", 64<<10)
	cb, okb := readAll("/proc/self/cgroup", 64<<10)
	if !oka || !okb || string(ca) != string(cb) {
		return "cgroup"
	}
	return ""
}

// statusLine is the value of a /proc/PID/status line ("" when none).
func statusLine(status []byte, key string) string {
	start := 0
	for i := 0; i <= len(status); i++ {
		if i < len(status) && status[i] != '\n' {
			continue
		}
		line := string(status[start:i])
		start = i + 1
		if hasPrefix(line, key+":") {
			v := line[len(key)+1:]
			for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
				v = v[1:]
			}
			return v
		}
	}
	return ""
}

func readlink(path string) (string, error) {
	buf := make([]byte, 256)
	n, err := syscall.Readlink(path, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// readNonce reads the nonce in process pid's initial environment
// (/proc/PID/environ, which the kernel lets only a process that may
// ptrace-read pid open).
func readNonce(pid int) (string, bool) {
	b, ok := readAll("/proc/"+string(appendDecimal(nil, pid))+"/environ", 256<<10)
	if !ok {
		return "", false
	}
	start := 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == 0 {
			kv := string(b[start:i])
			if hasPrefix(kv, NonceEnv+"=") && ValidNonce(kv[len(NonceEnv)+1:]) {
				return kv[len(NonceEnv)+1:], true
			}
			start = i + 1
		}
	}
	return "", false
}

// fstatat is fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW).
func fstatat(dirfd int, name string, st *syscall.Stat_t) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := syscall.Syscall6(sysFstatat, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(st)), atSymlinkNofollow, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

const atSymlinkNofollow = 0x100

// cmdline is this process's arguments, from /proc (the os package,
// which holds them, is not initialised yet).
func cmdline() ([]string, bool) {
	buf, ok := readAll("/proc/self/cmdline", 64<<10)
	if !ok {
		return nil, false // unreadable, or a command line this long: cold
	}
	var args []string
	start := 0
	for i := 0; i < len(buf); i++ {
		if buf[i] == 0 {
			args = append(args, string(buf[start:i]))
			start = i + 1
		}
	}
	if start != len(buf) {
		return nil, false
	}
	return args, true
}

// readAll reads the file at path, which must be shorter than max bytes.
func readAll(path string, max int) ([]byte, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	buf := make([]byte, min(1024, max)) // grown as needed: most files here are small
	n := 0
	for {
		if n == len(buf) {
			if len(buf) >= max {
				return nil, false
			}
			buf = append(buf, make([]byte, min(len(buf), max-len(buf)))...)
		}
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			return buf[:n], true
		}
		n += m
	}
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
