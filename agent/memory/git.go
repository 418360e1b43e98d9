package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// gitTimeout bounds every git invocation.
const gitTimeout = 30 * time.Second

// pinnedArgs lead every git invocation. Command-line config overrides the
// repository's, so these hold even if a planted key slipped through.
var pinnedArgs = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "commit.gpgsign=false",
	"-c", "core.pager=cat",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// gitEnv is the whole environment of a git invocation; nothing is
// inherited from the process.
func gitEnv(home string) []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + home,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_AUTHOR_NAME=cordon",
		"GIT_AUTHOR_EMAIL=cordon@localhost",
		"GIT_COMMITTER_NAME=cordon",
		"GIT_COMMITTER_EMAIL=cordon@localhost",
	}
}

// runGit runs git with args in dir and returns its stdout. HOME is a fresh
// empty directory removed afterwards. dir "" runs git in that directory,
// with discovery stopped there, for commands that must see no repository.
// git is killed when ctx ends or after gitTimeout, whichever comes first.
func (s *Store) runGit(ctx context.Context, dir string, args ...string) (string, error) {
	home, err := os.MkdirTemp("", "cordon-mem-home-")
	if err != nil {
		return "", fmt.Errorf("memory: git home: %w", err)
	}
	defer os.RemoveAll(home)
	env := gitEnv(home)
	where := " in " + strconv.Quote(dir)
	if dir == "" {
		dir, where = home, ""
		env = append(env, "GIT_CEILING_DIRECTORIES="+filepath.Dir(home))
	}

	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("memory: git %s%s: %w", args[0], where, context.Cause(ctx))
	}
	tctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, s.git, append(append([]string{}, pinnedArgs...), args...)...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("memory: git %s%s: %w", args[0], where, context.Cause(ctx))
	}
	if tctx.Err() != nil {
		return "", fmt.Errorf("memory: git %s%s: timed out after %v", args[0], where, gitTimeout)
	}
	if err != nil {
		return "", fmt.Errorf("memory: git %s%s: %v: %q", args[0], where, err, firstLine(stderr.String()))
	}
	return stdout.String(), nil
}

// firstLine returns the first non-empty line of s, trimmed to 200 bytes.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "..."
	}
	return s
}

// configAllowed lists the keys git init writes (core.symlinks, ignorecase
// and precomposeunicode only on some file systems) and the values each may
// take. Anything else in mem/.git/config is refused.
var configAllowed = map[string][]string{
	"core.repositoryformatversion": {"0", "1"},
	"core.filemode":                {"true", "false"},
	"core.bare":                    {"false"},
	"core.logallrefupdates":        {"true", "false"},
	"core.symlinks":                {"true", "false"},
	"core.ignorecase":              {"true", "false"},
	"core.precomposeunicode":       {"true", "false"},
	"extensions.objectformat":      {"sha1", "sha256"},
}

// refusedGitFiles are paths beneath mem/.git (lower case, slash-separated)
// that make git read attributes, objects or config from elsewhere.
var refusedGitFiles = map[string]string{
	"info/attributes":              "attributes can name filter and diff drivers",
	"commondir":                    "it points git at another repository's config and refs",
	"config.worktree":              "it is a second config file",
	"objects/info/alternates":      "it makes git read objects from elsewhere",
	"objects/info/http-alternates": "it makes git read objects from elsewhere",
}

// checkRepo enforces the repository rules on mem/.git: a real directory of
// directories and regular files only, no hooks but samples, no attributes,
// alternates or commondir, only the config git init writes, and git's own
// discovery from mem must land on mem/.git.
func (s *Store) checkRepo(ctx context.Context) error {
	gitDir := filepath.Join(s.dir, ".git")
	fi, err := os.Lstat(gitDir)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %q is a symlink, which would point git at another repository; remove it", ErrUnsafe, gitDir)
	case m.IsRegular():
		return fmt.Errorf("%w: %q is a file (a gitdir: pointer to another repository); remove it", ErrUnsafe, gitDir)
	case !m.IsDir():
		return fmt.Errorf("%w: %q is %s, not a directory; remove it", ErrUnsafe, gitDir, describe(fi))
	}

	// .gitattributes in any case: a case-insensitive file system serves
	// .GITATTRIBUTES to git as .gitattributes.
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	for _, e := range ents {
		if strings.EqualFold(e.Name(), ".gitattributes") {
			return fmt.Errorf("%w: %q exists (attributes can name filter and diff drivers); remove it", ErrUnsafe, filepath.Join(s.dir, e.Name()))
		}
	}

	haveConfig := false
	err = filepath.WalkDir(gitDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == gitDir {
			return nil
		}
		rel, err := filepath.Rel(gitDir, path)
		if err != nil {
			return err
		}
		lower := strings.ToLower(filepath.ToSlash(rel))
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: %q is a symlink (git would read or write through it); remove the store %q", ErrUnsafe, path, s.dir)
		case !t.IsDir() && !t.IsRegular():
			return fmt.Errorf("%w: %q is a special file (%v); remove the store %q", ErrUnsafe, path, t, s.dir)
		}
		if why, ok := refusedGitFiles[lower]; ok {
			return fmt.Errorf("%w: %q exists (%s); remove it", ErrUnsafe, path, why)
		}
		if strings.HasPrefix(lower, "hooks/") && !strings.HasSuffix(lower, ".sample") {
			return fmt.Errorf("%w: %q is a hook, which git would run; remove it", ErrUnsafe, path)
		}
		if lower == "config" {
			haveConfig = true
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrUnsafe) {
			return err
		}
		return fmt.Errorf("memory: checking %q: %w", gitDir, err)
	}
	if haveConfig {
		if err := s.checkConfig(ctx, filepath.Join(gitDir, "config")); err != nil {
			return err
		}
	}

	// Discovery exactly as git does it: no GIT_DIR, run in mem.
	out, err := s.runGit(ctx, s.dir, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return err
	}
	got := strings.TrimSuffix(out, "\n")
	want, err := filepath.EvalSymlinks(gitDir)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if got != want {
		return fmt.Errorf("%w: git run in %q uses the repository %q, not %q (an empty or broken .git makes git use an enclosing repository); remove %q", ErrUnsafe, s.dir, got, want, gitDir)
	}
	return nil
}

// checkConfig refuses any key in the config file at path that git init
// would not have written. `git config --file` reads only that file (it
// follows no include) and runs nothing.
func (s *Store) checkConfig(ctx context.Context, path string) error {
	out, err := s.runGit(ctx, "", "config", "--file", path, "--no-includes", "--null", "--list")
	if err != nil && ctx.Err() != nil {
		return err // cancelled, not unsafe
	}
	if err != nil {
		return fmt.Errorf("%w: %q cannot be read as git config (%v); remove the store %q", ErrUnsafe, path, err, s.dir)
	}
	for _, item := range strings.Split(out, "\x00") {
		if item == "" {
			continue
		}
		key, value, hasValue := strings.Cut(item, "\n")
		if !hasValue {
			value = "true" // "[core] bare" with no "=" means true
		}
		allowed, ok := configAllowed[key]
		if !ok {
			return fmt.Errorf("%w: %q sets %q, which git init never writes (it can make git run programs or use other files); remove the store %q", ErrUnsafe, path, key, s.dir)
		}
		if !slices.Contains(allowed, value) {
			return fmt.Errorf("%w: %q sets %q to a value git init never writes (want one of %q); remove the store %q", ErrUnsafe, path, key, allowed, s.dir)
		}
	}
	return nil
}
