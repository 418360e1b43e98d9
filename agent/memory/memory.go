// Package memory implements the agent runner's long-term memory store, kept
// at WORKSPACE/.cordon/mem and, when git is available, versioned as a git
// repository with exactly one commit per [Store.Write].
//
// # Threat model
//
// The operator and the host's git binary are trusted; the workspace is not.
// A cloned repository (or an agent in an earlier run) can plant anything
// under .cordon: symlinks that point the store elsewhere, a .git file
// (gitdir: pointer) or symlink that points git at another repository, an
// empty .git that makes git fall through to an enclosing repository, or a
// repository whose config, hooks or attributes name programs for git to
// run. Open and Write therefore:
//
//   - refuse a .cordon, mem or any directory on a file's path that is not a
//     real directory, and never follow a symlink (files are opened through
//     [os.Root], one path segment at a time, checking each against Lstat);
//   - refuse a mem/.git that is not a real directory holding only
//     directories and regular files, that has a config key git init would
//     not write, a hook that is not a *.sample, attributes, alternates or a
//     commondir;
//   - require `git rev-parse --absolute-git-dir`, run in mem with git's own
//     discovery, to name mem/.git itself;
//   - run git with a rebuilt environment (nothing inherited from the
//     process) and with hooks, fsmonitor, signing, the pager and auto-gc
//     pinned off on the command line.
//
// Write repeats the repository checks before it runs git, since whatever
// ran in the workspace since Open may have changed the store. The checks
// are not atomic with respect to a concurrent writer: a process racing the
// store can at worst redirect a write to another place inside mem (os.Root
// keeps every open beneath it), never outside. Every refusal wraps
// [ErrUnsafe] and says which path to remove.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Kind of store.
const (
	KindGit  = "git"
	KindFile = "file"
)

// ErrUnsafe is wrapped by every refusal of a store or a path that could
// make the store read, write or run something outside it.
var ErrUnsafe = errors.New("memory: unsafe store")

// Options configures Open. The zero value finds git on PATH.
type Options struct {
	// Git is the git binary, an absolute path. "" means exec.LookPath("git");
	// if that fails the store is file-backed (KindFile) and Reason says why.
	// Set NoGit to force file-backed.
	Git   string
	NoGit bool
}

// Store is an open memory store. Its methods are not safe for concurrent
// use: the runner owns one store per run.
type Store struct {
	workspace string // absolute, clean
	dir       string // workspace/.cordon/mem
	kind      string
	reason    string
	git       string // absolute path of git; "" for a file store
}

// storeSegs are the directories from the workspace to the store.
var storeSegs = []string{".cordon", "mem"}

// Open opens WORKSPACE/.cordon/mem, creating .cordon and mem (mode 0700)
// where absent, and for a git store running `git init` there when mem/.git
// is absent. workspace must be an absolute path to an existing directory.
// Refusals of a planted or tampered store wrap [ErrUnsafe]. ctx bounds the
// git invocations; when it ends first, the error wraps its cause.
func Open(ctx context.Context, workspace string, opts Options) (*Store, error) {
	if !filepath.IsAbs(workspace) {
		return nil, fmt.Errorf("memory: workspace %q is not an absolute path; pass an absolute path", workspace)
	}
	workspace = filepath.Clean(workspace)
	fi, err := os.Stat(workspace)
	if err != nil {
		return nil, fmt.Errorf("memory: workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("memory: workspace %q is not a directory", workspace)
	}
	s := &Store{
		workspace: workspace,
		dir:       filepath.Join(workspace, ".cordon", "mem"),
	}
	switch {
	case opts.NoGit:
		s.kind, s.reason = KindFile, "git disabled (Options.NoGit)"
	case opts.Git != "":
		if !filepath.IsAbs(opts.Git) {
			return nil, fmt.Errorf("memory: Options.Git %q is not an absolute path; give the full path of the git binary", opts.Git)
		}
		s.kind, s.git = KindGit, opts.Git
	default:
		p, err := exec.LookPath("git")
		if err == nil && !filepath.IsAbs(p) {
			err = fmt.Errorf("found %q, which is not an absolute path", p)
		}
		if err != nil {
			s.kind, s.reason = KindFile, fmt.Sprintf("git not found on PATH: %v", err)
		} else {
			s.kind, s.git = KindGit, p
		}
	}

	mem, err := s.openMem(true)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	if s.kind == KindFile {
		return s, nil
	}

	gitDir := filepath.Join(s.dir, ".git")
	if _, err := os.Lstat(gitDir); errors.Is(err, fs.ErrNotExist) {
		if _, err := s.runGit(ctx, s.dir, "-c", "init.defaultBranch=main", "init", "-q"); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if err := s.checkRepo(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Kind returns KindGit or KindFile.
func (s *Store) Kind() string { return s.kind }

// Reason says why the store is file-backed ("" for a git store).
func (s *Store) Reason() string { return s.reason }

// Dir returns the absolute path of the mem directory.
func (s *Store) Dir() string { return s.dir }

// Write stores files (names relative to the store, see [Store.Read] for the
// rules) and, for a git store, makes exactly one commit with message that
// records exactly those files, even when nothing changed or files is
// empty. It returns the commit id (hex), or "" for a file store. Each file
// replaces any previous one by rename (mode 0600); missing directories are
// created (mode 0700). Every name is checked before anything is written.
// A failed Write may leave some files written but uncommitted. ctx bounds
// the git invocations; when it ends first, the error wraps its cause.
func (s *Store) Write(ctx context.Context, files map[string][]byte, message string) (commit string, err error) {
	names := make([]string, 0, len(files))
	for name := range files {
		if _, err := splitName(name); err != nil {
			return "", err
		}
		names = append(names, name)
	}
	sort.Strings(names)
	if s.kind == KindGit {
		if strings.TrimSpace(message) == "" {
			return "", errors.New("memory: empty commit message; give Write a message")
		}
		if strings.IndexByte(message, 0) >= 0 {
			return "", errors.New("memory: commit message contains a NUL byte")
		}
	}

	mem, err := s.openMem(false)
	if err != nil {
		return "", err
	}
	defer mem.Close()
	if s.kind == KindGit {
		if err := s.checkRepo(ctx); err != nil {
			return "", err
		}
	}
	for _, name := range names {
		if err := writeFile(mem, s.dir, name, files[name]); err != nil {
			return "", err
		}
	}
	if s.kind == KindFile {
		return "", nil
	}

	if len(names) > 0 {
		if _, err := s.runGit(ctx, s.dir, append([]string{"add", "-f", "--"}, names...)...); err != nil {
			return "", err
		}
	}
	// --only commits exactly the named paths (none: an empty commit), not
	// whatever else the index may hold.
	args := []string{"commit", "-q", "--allow-empty", "--no-verify", "--cleanup=verbatim", "--only", "-m", message}
	if len(names) > 0 {
		args = append(append(args, "--"), names...)
	}
	if _, err := s.runGit(ctx, s.dir, args...); err != nil {
		return "", err
	}
	out, err := s.runGit(ctx, s.dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(out)
	if _, err := hex.DecodeString(id); err != nil || id == "" {
		return "", fmt.Errorf("memory: git rev-parse HEAD printed %q, not a commit id", id)
	}
	return id, nil
}

// Read returns the named file of the store. A name is a slash-separated
// path relative to the store: non-empty, no leading '/', no empty, '.' or
// '..' segment, no backslash, valid UTF-8 without control characters, and
// no segment starting with ".git" in any ASCII case (which keeps .git,
// .gitattributes and .gitmodules out of reach). A symlink anywhere on the
// path is refused with [ErrUnsafe], never followed. An absent file gives an
// error wrapping [os.ErrNotExist].
func (s *Store) Read(name string) ([]byte, error) {
	segs, err := splitName(name)
	if err != nil {
		return nil, err
	}
	mem, err := s.openMem(false)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	dir, err := walkDirs(mem, s.dir, segs[:len(segs)-1], false)
	if err != nil {
		return nil, err
	}
	defer closeIfNot(dir, mem)

	base := segs[len(segs)-1]
	full := filepath.Join(s.dir, filepath.FromSlash(name))
	fi, err := dir.Lstat(base)
	if err != nil {
		return nil, fmt.Errorf("memory: read %q: %w", full, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %q is %s, not a regular file; remove it", ErrUnsafe, full, describe(fi))
	}
	f, err := dir.Open(base)
	if err != nil {
		return nil, fmt.Errorf("memory: read %q: %w", full, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		return nil, fmt.Errorf("%w: %q changed while being opened; retry, and find what is writing to the store", ErrUnsafe, full)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("memory: read %q: %w", full, err)
	}
	return b, nil
}

// splitName checks a store-relative name and returns its segments.
func splitName(name string) ([]string, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: file name %q %s; use a clean relative path such as \"notes/today.md\"", ErrUnsafe, name, why)
	}
	switch {
	case name == "":
		return nil, bad("is empty")
	case name[0] == '/':
		return nil, bad("is absolute")
	case !utf8.ValidString(name):
		return nil, bad("is not valid UTF-8")
	case strings.ContainsRune(name, '\\'):
		return nil, bad("contains a backslash")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return nil, bad("contains a control character")
		}
	}
	segs := strings.Split(name, "/")
	for _, seg := range segs {
		switch {
		case seg == "":
			return nil, bad("has an empty segment")
		case seg == "." || seg == "..":
			return nil, bad("has a '.' or '..' segment")
		case len(seg) >= 4 && strings.EqualFold(seg[:4], ".git"):
			return nil, bad("has a segment starting with \".git\", which is reserved for git")
		}
	}
	return segs, nil
}

// openMem opens the store directory, refusing a .cordon or mem that is not
// a real directory; with create it makes them (0700) where absent.
func (s *Store) openMem(create bool) (*os.Root, error) {
	ws, err := os.OpenRoot(s.workspace)
	if err != nil {
		return nil, fmt.Errorf("memory: workspace: %w", err)
	}
	defer ws.Close()
	return walkDirs(ws, s.workspace, storeSegs, create)
}

// walkDirs opens the directory segs beneath root one segment at a time.
// Each segment must be a real directory (Lstat), and the directory opened
// must be the one Lstat saw, so no symlink is ever followed. With create,
// absent segments are made with mode 0700. base is root's path, for
// errors. The result is root itself when segs is empty.
func walkDirs(root *os.Root, base string, segs []string, create bool) (*os.Root, error) {
	cur := root
	for i, seg := range segs {
		full := filepath.Join(base, filepath.Join(segs[:i+1]...))
		fi, err := cur.Lstat(seg)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err = cur.Mkdir(seg, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
				fi, err = cur.Lstat(seg)
			}
		}
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%w: %q is %s, not a directory; remove it", ErrUnsafe, full, describe(fi))
		}
		var next *os.Root
		if err == nil {
			next, err = cur.OpenRoot(seg)
		}
		if err == nil {
			st, serr := next.Stat(".")
			if serr != nil || !os.SameFile(fi, st) {
				next.Close()
				err = fmt.Errorf("%w: %q changed while being opened; retry, and find what is writing to the workspace", ErrUnsafe, full)
			}
		}
		closeIfNot(cur, root)
		if err != nil {
			if errors.Is(err, ErrUnsafe) {
				return nil, err
			}
			return nil, fmt.Errorf("memory: %q: %w", full, err)
		}
		cur = next
	}
	return cur, nil
}

// writeFile writes data to name beneath mem by creating a new file and
// renaming it over name, so an existing file (or a link to one) is
// replaced, never written through.
func writeFile(mem *os.Root, memDir, name string, data []byte) error {
	segs, err := splitName(name)
	if err != nil {
		return err
	}
	dir, err := walkDirs(mem, memDir, segs[:len(segs)-1], true)
	if err != nil {
		return err
	}
	defer closeIfNot(dir, mem)

	base := segs[len(segs)-1]
	full := filepath.Join(memDir, filepath.FromSlash(name))
	if fi, err := dir.Lstat(base); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %q is %s, not a regular file; remove it", ErrUnsafe, full, describe(fi))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("memory: write %q: %w", full, err)
	}

	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".cordon-tmp-" + hex.EncodeToString(rnd[:])
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("memory: write %q: %w", full, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		dir.Remove(tmp)
		return fmt.Errorf("memory: write %q: %w", full, err)
	}
	if err := dir.Rename(tmp, base); err != nil {
		dir.Remove(tmp)
		return fmt.Errorf("memory: write %q: %w", full, err)
	}
	return nil
}

func closeIfNot(r, keep *os.Root) {
	if r != keep {
		r.Close()
	}
}

// describe names the type of a file for errors.
func describe(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	default:
		return "a special file (" + m.Type().String() + ")"
	}
}
