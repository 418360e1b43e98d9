package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Repository confines plain HTTP to one host and port to git's smart
// HTTP protocol for exactly one repository (docs/governance.md,
// "Sandboxed git"): the proxy forwards only
//
//	GET  PATH/info/refs?service=git-upload-pack
//	GET  PATH/info/refs?service=git-receive-pack
//	POST PATH/git-upload-pack
//	POST PATH/git-receive-pack
//
// and refuses every other request to that host and port (403, recorded
// with rule "repository"), a CONNECT tunnel to it included. A push
// (POST PATH/git-receive-pack) is forwarded only when every command of
// its command list updates PushRef or a ref below it (PushRef + "/…"),
// deletes nothing and asks for no push options; the proxy reads only the
// command list at the head of the body, never the pack, and forwards the
// body unchanged. Each allowed push's commands are recorded
// (Record.Pushed).
type Repository struct {
	Host string
	Port int
	// Path is the repository's path, "/…" without a trailing slash or a
	// query: segments of A-Z a-z 0-9 . _ - ~ (gitremote.Parse's).
	Path string
	// PushRef is the ref a push may create or update, with the refs
	// below it, e.g. "refs/heads/cordon/review/run_x"; "" refuses every
	// push.
	PushRef string
}

// ruleRepository names a refusal by the repository's confinement.
const ruleRepository = "repository"

// Bounds of a push's command list.
const (
	maxPushCommands = 64   // pkt-lines before the flush, shallow lines included
	maxPushLine     = 1024 // bytes of one pkt-line, its 4-byte length included
)

// CheckRepository checks r's host, port, path and push ref.
func CheckRepository(r Repository) error {
	if err := CheckInjection(Injection{Host: r.Host, Port: r.Port, Header: "X", Value: []byte("x")}); err != nil {
		return fmt.Errorf("egress: repository: %w", err)
	}
	if err := checkRepoPath(r.Path); err != nil {
		return fmt.Errorf("egress: repository path %q: %w", r.Path, err)
	}
	if r.PushRef != "" && !checkRefName(r.PushRef) {
		return fmt.Errorf("egress: repository push ref %q is not a plain ref under refs/", r.PushRef)
	}
	return nil
}

// checkRepoPath checks a repository's (or an injection's) path: "/" and
// plain segments, no empty, dot or dot-dot segment, no escape.
func checkRepoPath(p string) error {
	if len(p) < 2 || p[0] != '/' || len(p) > 1024 {
		return fmt.Errorf("not an absolute path of 2 to 1024 bytes")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("empty, dot or dot-dot segment")
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-~", c) >= 0) {
				return fmt.Errorf("byte %q (use A-Z a-z 0-9 . _ - ~ and /)", c)
			}
		}
	}
	return nil
}

// checkRequestPath refuses a request path (before the query) that is not
// in the one spelling checkRepoPath allows: a dot segment, an empty
// segment ("//"), a percent escape (%2f, %5c and every other: a
// repository's path has none, so any escape is a second spelling), a
// backslash or a byte outside the plain set. The query is checked by the
// caller.
func checkRequestPath(p string) error {
	if p == "/" {
		return nil
	}
	return checkRepoPath(p)
}

// checkRefName reports whether ref is a plain ref name under refs/:
// segments of A-Z a-z 0-9 . _ - / with none empty, starting with a dot
// or ending in ".lock", no "..", and at most 256 bytes. Stricter than
// git check-ref-format, so a recorded ref is always plain text.
func checkRefName(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") || len(ref) > 256 || strings.Contains(ref, "..") {
		return false
	}
	for _, seg := range strings.Split(ref, "/") {
		if seg == "" || seg[0] == '.' || strings.HasSuffix(seg, ".lock") {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-", c) >= 0) {
				return false
			}
		}
	}
	return true
}

// route checks a request to the repository's host and port: it returns
// whether it is a push, or why it is refused. path is the request's
// origin-form path and query.
func (r *Repository) route(method, target string) (push bool, err error) {
	p, q, hasQuery := strings.Cut(target, "?")
	if err := checkRequestPath(p); err != nil {
		return false, fmt.Errorf("request path %q: %v", clipText(target), err)
	}
	switch {
	case method == http.MethodGet && p == r.Path+"/info/refs" && hasQuery &&
		(q == "service=git-upload-pack" || q == "service=git-receive-pack"):
		return false, nil
	case method == http.MethodPost && p == r.Path+"/git-upload-pack" && !hasQuery:
		return false, nil
	case method == http.MethodPost && p == r.Path+"/git-receive-pack" && !hasQuery:
		if r.PushRef == "" {
			return false, fmt.Errorf("a push to the repository is not allowed in this run")
		}
		return true, nil
	}
	return false, fmt.Errorf("%s %s is not a git smart-HTTP request for the repository %s (only GET %s/info/refs?service=git-upload-pack|git-receive-pack and POST %s/git-upload-pack|git-receive-pack are forwarded)",
		method, clipText(target), r.Path, r.Path, r.Path)
}

// clipText bounds a request-controlled string in a reason.
func clipText(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// checkPush reads the command list at the head of a push's body and
// checks every command against the push ref. It returns the commands as
// "REF OLD NEW" and the bytes it read, which the caller sends ahead of
// the rest of the body.
func (r *Repository) checkPush(body io.Reader) (cmds []string, head []byte, err error) {
	var buf bytes.Buffer
	br := bufio.NewReaderSize(io.TeeReader(body, &buf), maxPushLine)
	var shallowDone bool
	for n := 0; ; n++ {
		if n > maxPushCommands {
			return nil, nil, fmt.Errorf("the push's command list has more than %d lines", maxPushCommands)
		}
		line, flush, err := readPkt(br)
		if err != nil {
			return nil, nil, fmt.Errorf("the push's command list: %v", err)
		}
		if flush {
			break
		}
		if oid, ok := strings.CutPrefix(string(line), "shallow "); ok && !shallowDone {
			if !isOID(strings.TrimSuffix(oid, "\n")) {
				return nil, nil, fmt.Errorf("the push's command list: a malformed shallow line")
			}
			continue
		}
		shallowDone = true
		cmd := string(line)
		if i := strings.IndexByte(cmd, 0); i >= 0 {
			if len(cmds) > 0 {
				return nil, nil, fmt.Errorf("the push's command list: capabilities after the first command")
			}
			for _, c := range strings.Fields(strings.TrimSuffix(cmd[i+1:], "\n")) {
				if c == "push-options" || c == "push-cert" || strings.HasPrefix(c, "push-cert=") {
					return nil, nil, fmt.Errorf("the push asks for %q, which the proxy does not allow", c)
				}
			}
			cmd = cmd[:i]
		} else {
			cmd = strings.TrimSuffix(cmd, "\n")
		}
		f := strings.Split(cmd, " ")
		if len(f) != 3 || !isOID(f[0]) || !isOID(f[1]) || len(f[0]) != len(f[1]) {
			return nil, nil, fmt.Errorf("the push's command list: a line is not OLD NEW REF")
		}
		ref := f[2]
		if !checkRefName(ref) || ref != r.PushRef && !strings.HasPrefix(ref, r.PushRef+"/") {
			return nil, nil, fmt.Errorf("the push updates %q; a run may push only to %s or below it", clipText(ref), r.PushRef)
		}
		if strings.Trim(f[1], "0") == "" {
			return nil, nil, fmt.Errorf("the push deletes %s; a run may not delete a ref", ref)
		}
		cmds = append(cmds, ref+" "+f[0]+" "+f[1])
	}
	if len(cmds) == 0 {
		return nil, nil, fmt.Errorf("the push has no commands")
	}
	// The reader may have read ahead into the pack: what it buffered
	// was teed too, so buf holds exactly the bytes taken from body.
	return cmds, buf.Bytes(), nil
}

// readPkt reads one pkt-line: four lower-case hex digits giving the
// length, the length included. "0000" is a flush; any other length under
// 5 (a delimiter, a response end, an empty line) or over maxPushLine is
// refused.
func readPkt(br *bufio.Reader) (line []byte, flush bool, err error) {
	var h [4]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, false, fmt.Errorf("a truncated pkt-line length")
	}
	n := 0
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		default:
			return nil, false, fmt.Errorf("a pkt-line length %q is not four lower-case hex digits", h[:])
		}
	}
	switch {
	case n == 0:
		return nil, true, nil
	case n < 5:
		return nil, false, fmt.Errorf("a pkt-line of length %d", n)
	case n > maxPushLine:
		return nil, false, fmt.Errorf("a pkt-line of %d bytes (at most %d)", n, maxPushLine)
	}
	line = make([]byte, n-4)
	if _, err := io.ReadFull(br, line); err != nil {
		return nil, false, fmt.Errorf("a truncated pkt-line")
	}
	return line, false, nil
}

// isOID reports whether s is a SHA-1 or SHA-256 object id in lower-case hex.
func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
