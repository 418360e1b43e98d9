// Package handoff hands a `cordon exec` invocation to a resident exec
// server (`cordon pool serve --exec N`), before the rest of cordon
// starts.
//
// A cold `cordon exec` pays two Go process starts of a large binary:
// cordon's, and its sandbox init's. With a resident server on the state
// directory, warm cordon processes wait there, each already started and
// holding a prepared sandbox; this package's init, which Go runs before
// nearly every other package's (it imports only syscall), connects to
// one, passes it the command line, the environment, the working
// directory and the standard streams, waits for the command's exit
// status and exits with it. The warm process runs the same `cordon exec`
// code a cold one would, with the caller's inputs (docs/sandbox.md,
// "Resident exec server").
//
// The hand-off is tried only when nothing could differ: it is skipped
// (cordon starts cold) unless the first argument is "exec", the
// environment does not set CORDON_RESIDENT=off, the exec flags before
// the program are ones this package knows and name no file of the
// process's own (/dev, /proc), no standard stream is a terminal or
// non-blocking, the state directory's pool directory and socket are the
// caller's own (uid and mode), the listener and the warm process run
// this same executable and are no more confined than the caller, a warm
// process answers within ReadyWait, and the caller can read its nonce
// (which only a process that may ptrace-read it can). The server
// declines (and cordon starts cold) unless the caller runs with exactly
// its credentials, namespaces, root, cgroups, limits and confinement,
// carries its nonce, and names the same state directory.
//
// The code here runs before the os package is initialised, so it uses
// only syscall, and byte loops instead of strings.
package handoff

// Wire format. The server speaks first, once a warm process has taken
// the connection: "ready PID" (the warm process's pid). Within
// ReadyWait of connecting, or the caller starts cold; it then checks
// that PID runs this same binary, reads the nonce the server gave that
// process (NonceEnv in its /proc/PID/environ: only a process that may
// ptrace-read it can, so not one confined by Landlock, or by another LSM
// that restricts ptrace, into a domain the warm process is not in) and
// sends one message: Magic, a 4-byte little-endian length L and L bytes
// of NUL-terminated strings: the nonce, the argument count in decimal,
// that many arguments (argv[0] first), then the environment, one
// "NAME=value" each. The message carries four descriptors (SCM_RIGHTS):
// standard input, output and error, and the working directory (O_PATH).
//
// Then the server answers lines: "start" (the command runs now), then
// "exit N" (cordon's exit status) or "sigpipe N" (the caller's stdout,
// 1, or stderr, 2, lost its reader: the caller dies of SIGPIPE, as a
// cold cordon would); or, before "start", "decline REASON" (nothing ran:
// start cold).
const (
	Magic      = "cordon-handoff-2\x00"
	MaxPayload = 1 << 20
	// SocketName is the server's socket in the state directory's pool
	// directory.
	SocketName = "exec.sock"
	// Off, as CORDON_RESIDENT's value, makes every cordon exec start
	// cold.
	Off = "off"
	// NonceEnv names the warm process's nonce in its environment.
	NonceEnv = "CORDON_WARM_NONCE"
	// NonceLen is a nonce's length: 32 random bytes in lowercase hex.
	NonceLen = 64
)

// ReadyWait is how long a caller waits for a warm process to take its
// connection ("ready") before it starts cold instead, in milliseconds:
// about half a served start, so that a caller never waits long for a
// busy server. $CORDON_RESIDENT_WAIT (1 to 10000) sets another.
const ReadyWait = 10

// WaitEnv names the variable that sets the wait for "ready".
const WaitEnv = "CORDON_RESIDENT_WAIT"

// PhasesEnv names the variable that asks cordon for its phase marks
// (package internal/phase): the monotonic time of the caller's spawn, in
// nanoseconds. A served caller then records when each step of the
// hand-off ended and prints them after the warm process's marks, as
// "cordon: phase NS hand-off: STEP" (scripts/bench-phases).
const PhasesEnv = "CORDON_PHASES"

// Wait is the wait for "ready" that env asks for, in milliseconds.
func Wait(env []string) int {
	if n, ok := parseDecimal(Getenv(env, WaitEnv)); ok && n >= 1 && n <= 10000 {
		return n
	}
	return ReadyWait
}

// Encode is the request for nonce, args (argv[0] first) and env.
func Encode(nonce string, args, env []string) ([]byte, bool) {
	if !ValidNonce(nonce) {
		return nil, false
	}
	n := len(nonce) + 1
	for _, s := range args {
		n += len(s) + 1
	}
	for _, s := range env {
		n += len(s) + 1
	}
	n += 12
	if n > MaxPayload {
		return nil, false
	}
	b := make([]byte, 0, len(Magic)+4+n)
	b = append(b, Magic...)
	b = append(b, 0, 0, 0, 0)
	b = append(b, nonce...)
	b = append(b, 0)
	b = appendDecimal(b, len(args))
	b = append(b, 0)
	for _, list := range [][]string{args, env} {
		for _, s := range list {
			if hasNUL(s) {
				return nil, false
			}
			b = append(b, s...)
			b = append(b, 0)
		}
	}
	l := len(b) - len(Magic) - 4
	h := len(Magic)
	b[h], b[h+1], b[h+2], b[h+3] = byte(l), byte(l>>8), byte(l>>16), byte(l>>24)
	return b, true
}

// ValidNonce reports whether s has a nonce's form: NonceLen lowercase
// hexadecimal digits.
func ValidNonce(s string) bool {
	if len(s) != NonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// Header checks a request's first len(Magic)+4 bytes and returns the
// payload's length.
func Header(h []byte) (int, bool) {
	if len(h) != len(Magic)+4 || string(h[:len(Magic)]) != Magic {
		return 0, false
	}
	p := h[len(Magic):]
	l := int(p[0]) | int(p[1])<<8 | int(p[2])<<16 | int(p[3])<<24
	if l < 2 || l > MaxPayload {
		return 0, false
	}
	return l, true
}

// Decode splits a request's payload into its nonce, arguments and
// environment. Every string must end with its NUL, the nonce must have
// its form, the count must be a decimal of at most 7 digits naming at
// least one argument and at most the strings there are, and every
// environment string must have a name and "=".
func Decode(p []byte) (nonce string, args, env []string, ok bool) {
	var all []string
	start := 0
	for i, c := range p {
		if c == 0 {
			all = append(all, string(p[start:i]))
			start = i + 1
		}
	}
	if start != len(p) || len(all) < 3 || !ValidNonce(all[0]) {
		return "", nil, nil, false
	}
	n, ok := parseDecimal(all[1])
	if !ok || n < 1 || n > len(all)-2 {
		return "", nil, nil, false
	}
	args, env = all[2:2+n], all[2+n:]
	for _, kv := range env {
		if i := indexByte(kv, '='); i < 1 {
			return "", nil, nil, false
		}
	}
	return all[0], args, env, true
}

// Exec flags: which take a value and which do not. A test in cmd/cordon
// keeps these equal to `cordon exec`'s flag set.
var (
	ValueFlags = []string{"env", "env-pubkey", "grants", "image", "in", "journal", "key", "out", "powercap", "receipt", "record", "state", "tenant", "timeout", "workspace"}
	BoolFlags  = []string{"json", "pool", "pool-fallback-cold", "stats"}
)

// StateFlag scans exec's flags (the arguments after "exec", run in the
// directory cwd) as the flag
// package parses them, and returns the last --state value ("" when none
// is given). It fails on anything it does not know (a flag not in
// ValueFlags or BoolFlags, help, a missing value), and on a flag value
// that may name one of the caller's own descriptors or its /proc
// (NamesProcessFile); the caller then starts cold, where the flag
// package, or the file, says what it is.
func StateFlag(flags []string, cwd string) (string, bool) {
	state := ""
	for i := 0; i < len(flags); i++ {
		s := flags[i]
		if len(s) < 2 || s[0] != '-' {
			break // the program, or "-": flags end
		}
		if s == "--" {
			break
		}
		name := s[1:]
		if name[0] == '-' {
			name = name[1:]
		}
		if len(name) == 0 || name[0] == '-' || name[0] == '=' {
			return "", false
		}
		value, hasValue := "", false
		if j := indexByte(name, '='); j >= 0 {
			name, value, hasValue = name[:j], name[j+1:], true
		}
		switch {
		case contains(BoolFlags, name):
			continue
		case contains(ValueFlags, name):
		default:
			return "", false
		}
		if !hasValue {
			if i+1 >= len(flags) {
				return "", false
			}
			i++
			value = flags[i]
		}
		if NamesProcessFile(value, cwd) {
			return "", false
		}
		if name == "state" {
			state = value
		}
	}
	return state, true
}

// NamesProcessFile reports whether a path, relative to the directory
// cwd when it is not absolute, may name a file of the process that opens
// it — /dev/stdin, /dev/fd/N, /proc/self/…: anything under /dev or /proc
// however it is spelt (//dev, /./proc, fd/3 in /dev), or any path with a
// ".." — which a warm process would open as its own, not the caller's.
// (A symbolic link to one is not seen: docs/sandbox.md, "Resident exec
// server".)
func NamesProcessFile(p, cwd string) bool {
	if p == "" {
		return false
	}
	if p[0] != '/' {
		p = cwd + "/" + p
	}
	first := ""
	for start, i := 0, 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		c := p[start:i]
		start = i + 1
		switch c {
		case "", ".":
			continue
		case "..":
			return true
		}
		if first == "" {
			first = c
		}
	}
	return first == "dev" || first == "proc"
}

// ProcessFileEnv names the variables cordon exec reads a path from
// (besides its flags): a value of one that NamesProcessFile starts cold.
var ProcessFileEnv = []string{"CORDON_KEY_FILE", "CORDON_STATE", "XDG_STATE_HOME", "HOME"}

// StateDir is the state directory `cordon exec` uses, as its
// execStateDir resolves it before making it absolute: the --state flag,
// else $CORDON_STATE, else /var/lib/cordon for root, else
// $XDG_STATE_HOME/cordon when that is absolute, else
// $HOME/.local/state/cordon. It fails where exec would fail (no home).
func StateDir(flagValue string, env []string, euid int) (string, bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if v := Getenv(env, "CORDON_STATE"); v != "" {
		return v, true
	}
	if euid == 0 {
		return "/var/lib/cordon", true
	}
	if v := Getenv(env, "XDG_STATE_HOME"); v != "" && v[0] == '/' {
		return v + "/cordon", true
	}
	if h := Getenv(env, "HOME"); h != "" {
		return h + "/.local/state/cordon", true
	}
	return "", false
}

// Getenv is the value of name in env ("NAME=value" strings), the first
// one as the runtime's syscall.Getenv takes it; "" when unset.
func Getenv(env []string, name string) string {
	for _, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			return kv[len(name)+1:]
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func hasNUL(s string) bool { return indexByte(s, 0) >= 0 }

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func appendDecimal(b []byte, n int) []byte {
	if n == 0 {
		return append(b, '0')
	}
	var d [20]byte
	i := len(d)
	for n > 0 {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[i:]...)
}

func parseDecimal(s string) (int, bool) {
	if len(s) == 0 || len(s) > 7 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// parseClock parses a monotonic clock reading in nanoseconds: 1 to 19
// decimal digits, no sign, no leading zero, not above 2^63-1.
func parseClock(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(s[i]-'0')
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}
