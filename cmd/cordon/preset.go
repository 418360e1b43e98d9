package main

// cordon grant preset: grant sets for common toolchains
// (docs/sandbox.md, "Toolchain presets").

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/grant"
)

// presetNames are the toolchains 'cordon grant preset' knows.
var presetNames = []string{"go", "c", "rust", "python", "node"}

// presetSet is a grant set as a preset prints it: members in a fixed,
// readable order.
type presetSet struct {
	Type         string         `json:"type"`
	Code         string         `json:"code"`
	Tenancy      string         `json:"tenancy"`
	Confidential bool           `json:"confidential"`
	Exec         presetExec     `json:"exec"`
	FS           []presetFS     `json:"fs,omitempty"`
	Env          []string       `json:"env,omitempty"`
	Limits       map[string]int `json:"limits"`
}

type presetExec struct {
	Allow []presetName `json:"allow"`
}

type presetName struct {
	Name string `json:"name"`
}

type presetFS struct {
	Path   string `json:"path"`
	Access string `json:"access"`
}

// preset is one toolchain's grant set under construction, with notes
// for the user.
type preset struct {
	set   presetSet
	notes []string
}

func newPreset(names ...string) *preset {
	p := &preset{set: presetSet{Type: grant.Type, Code: "untrusted", Tenancy: "single",
		Limits: map[string]int{"wall_ms": 600000, "memory_bytes": 2 << 30, "pids": 256, "file_size_bytes": 1 << 30}}}
	for _, n := range names {
		p.set.Exec.Allow = append(p.set.Exec.Allow, presetName{n})
	}
	return p
}

// fs adds a rule, once; a path beneath the host's /tmp cannot be
// granted (the sandbox's /tmp is its own), so it becomes a note.
func (p *preset) fs(path, access string) {
	if path == "" {
		return
	}
	if path != "/tmp" && strings.HasPrefix(path, "/tmp/") {
		p.note("%s is beneath /tmp, which the sandbox does not take from the host: not granted", path)
		return
	}
	for _, r := range p.set.FS {
		if r.Path == path && r.Access == access {
			return
		}
	}
	p.set.FS = append(p.set.FS, presetFS{path, access})
}

func (p *preset) env(names ...string) { p.set.Env = append(p.set.Env, names...) }

func (p *preset) note(format string, args ...any) {
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

// hostTools runs the host's tools to find where a toolchain lives. Its
// commands run on the host, unsandboxed, as the user who runs cordon:
// they are the user's own toolchain, asked where it is.
type hostTools struct {
	ctx context.Context
}

// out runs name with args and returns its first line of output.
func (h hostTools) out(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// From "/", never the caller's directory: rustup honours a
	// rust-toolchain.toml there (and in its parents), whose path names a
	// checkout's own rustc, and go a go.mod's toolchain line; cordon runs
	// as root (red team F8). And without the variables that pick another
	// toolchain or inject code.
	cmd.Dir = "/"
	cmd.Env = append(hostToolEnv(os.Environ()), "GOTOOLCHAIN=local") // never download a Go toolchain to answer
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line, nil
}

// hostToolOverrides are the variables hostToolEnv drops: each makes a
// toolchain's command run or report another toolchain, or run code, so
// that an environment a checkout set up (direnv, say) cannot pick what
// cordon grants.
var hostToolOverrides = []string{
	"RUSTUP_TOOLCHAIN", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTFLAGS", "CARGO",
	"CARGO_BUILD_RUSTC", "CARGO_BUILD_RUSTC_WRAPPER", "GOFLAGS", "GOENV", "GOWORK", "GOTOOLCHAIN", "GOROOT",
	"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "PYENV_VERSION", "NODE_OPTIONS",
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "CC", "CXX", "GCC_EXEC_PREFIX", "COMPILER_PATH",
}

// hostToolEnv is env without hostToolOverrides.
func hostToolEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(hostToolOverrides, name) {
			out = append(out, kv)
		}
	}
	return out
}

// realPath returns p with every symbolic link resolved (grants name real
// paths: the sandbox refuses a granted path that passes through a link),
// or "" when it does not exist.
func realPath(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// inRuntime reports whether p is in the runtime the sandbox shows
// read-only (where an executable still needs an rx rule or an allowed
// name to run).
func inRuntime(p string) bool {
	for _, r := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// gccLibexec returns the directory holding cc1 and collect2.
func (h hostTools) gccLibexec() (string, error) {
	cc1, err := h.out("gcc", "-print-prog-name=cc1")
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(cc1) {
		return "", fmt.Errorf("gcc -print-prog-name=cc1 printed %q, not a path: is gcc's cc1 installed?", cc1)
	}
	return realPath(filepath.Dir(cc1)), nil
}

// buildPreset makes the named preset; host resolves paths on this host,
// else the Debian packages' fixed locations are used.
func buildPreset(ctx context.Context, name string, host bool) (*preset, error) {
	h := hostTools{ctx: ctx}
	switch name {
	case "go":
		p := newPreset("go", "gofmt")
		p.env("GOCACHE", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY", "CGO_ENABLED")
		if !host {
			p.fs("/usr/lib/go", "rx")
			p.fs("/tmp", "rwx")
			p.note("GOROOT is Debian's (/usr/lib/go); --host resolves this host's, with its build and module caches")
			return p, nil
		}
		goroot, err := h.out("go", "env", "GOROOT")
		if err != nil {
			return nil, err
		}
		p.fs(realPath(goroot), "rx")
		p.fs("/tmp", "rwx")
		if c, _ := h.out("go", "env", "GOCACHE"); realPath(c) != "" {
			p.fs(realPath(c), "ro")
			p.note("GOCACHE %s is granted ro: set GOCACHE=%s for the run, and go reuses what it holds and writes nothing back; grant it rw (a directory the run's host uid may write) to keep new results", realPath(c), realPath(c))
		}
		if m, _ := h.out("go", "env", "GOMODCACHE"); realPath(m) != "" {
			p.fs(realPath(m), "ro")
			p.note("GOMODCACHE %s is granted ro: set GOMODCACHE=%s and GOFLAGS=-mod=mod GOPROXY=off for an offline build from it", realPath(m), realPath(m))
		}
		return p, nil
	case "c":
		p := newPreset("gcc", "cc", "cpp", "as", "ld", "ar", "make", "sh")
		p.fs("/work", "rwx")
		if !host {
			p.fs("/usr/lib/gcc", "rx")
			p.note("gcc's programs (cc1, collect2) are granted under Debian's /usr/lib/gcc; --host names this gcc's own directory")
			return p, nil
		}
		dir, err := h.gccLibexec()
		if err != nil {
			return nil, err
		}
		p.fs(dir, "rx")
		p.note("/work is rwx so that what the run builds there (a.out, test binaries) runs")
		return p, nil
	case "rust":
		p := newPreset("cargo", "rustc", "rustdoc", "cc", "ld", "sh")
		p.env("CARGO_HOME", "CARGO_NET_OFFLINE", "CARGO_TARGET_DIR", "RUSTFLAGS")
		p.fs("/work", "rwx")
		if !host {
			p.fs("/usr/lib/gcc", "rx") // rustc links through cc
			p.note("Debian's rustc and cargo (/usr/bin) with their libraries in the runtime; --host resolves this host's toolchain and cargo home")
			return p, nil
		}
		if dir, err := h.gccLibexec(); err == nil {
			p.fs(dir, "rx")
		} else {
			p.note("no gcc found (%v): rustc links through cc, so tests will not link", err)
		}
		sysroot, err := h.out("rustc", "--print", "sysroot")
		if err != nil {
			return nil, err
		}
		if s := realPath(sysroot); s != "" && !inRuntime(s) {
			p.fs(s, "rx")
		}
		home := os.Getenv("CARGO_HOME")
		if home == "" {
			if u, err := os.UserHomeDir(); err == nil {
				home = filepath.Join(u, ".cargo")
			}
		}
		if r := realPath(home); r != "" {
			p.fs(r, "ro")
			p.note("cargo home %s is granted ro (the registry it caches); set CARGO_HOME to a directory under /work for what cargo writes, and CARGO_NET_OFFLINE=true", r)
			if cargo := realPath(filepath.Join(r, "bin")); cargo != "" {
				p.fs(cargo, "rx")
			}
		}
		if rh := os.Getenv("RUSTUP_HOME"); rh != "" || realPath(filepath.Join(filepath.Dir(home), ".rustup")) != "" {
			p.note("this host's rustc and cargo are rustup's proxies: grant RUSTUP_HOME rx and pass RUSTUP_HOME and RUSTUP_TOOLCHAIN, or use Debian's rustc and cargo")
		}
		return p, nil
	case "python":
		p := newPreset("python3", "sh")
		p.fs("/work", "rwx")
		p.note("a virtualenv staged as an input must be made with 'python3 -m venv --copies' (its links to the host's python leave the staged tree and are refused); /work is rwx so that its interpreter runs")
		if !host {
			return p, nil
		}
		py, err := exec.LookPath("python3")
		if err != nil {
			return nil, fmt.Errorf("python3: %w", err)
		}
		if r := realPath(py); r != "" && !inRuntime(r) {
			// A python outside the runtime (pyenv, a prefix): its prefix.
			p.fs(filepath.Dir(filepath.Dir(r)), "rx")
		}
		if v := os.Getenv("VIRTUAL_ENV"); v != "" {
			if r := realPath(v); r != "" {
				p.fs(r, "rx")
				p.note("the active virtualenv %s is granted rx: its bin directory leads the sandbox's PATH", r)
			}
		}
		return p, nil
	case "node":
		p := newPreset("node", "npm", "npx", "env", "sh") // npm and npx start with #!/usr/bin/env node
		p.fs("/work", "rwx")
		p.note("/work is rwx so that node_modules/.bin scripts run")
		if !host {
			return p, nil
		}
		n, err := exec.LookPath("node")
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		if r := realPath(n); r != "" && !inRuntime(r) {
			p.fs(filepath.Dir(filepath.Dir(r)), "rx")
		}
		return p, nil
	}
	return nil, usageErrorf("grant preset: unknown toolchain %q (want one of %s)", name, strings.Join(presetNames, ", "))
}

// grantPreset prints a preset's grant set, to be narrowed by the user.
func grantPreset(e *env, args []string) error {
	fs := flag.NewFlagSet("grant preset", flag.ContinueOnError)
	host := fs.Bool("host", false, "resolve the toolchain as installed on this host (runs its tools: go env, gcc -print-prog-name, rustc --print sysroot)")
	args, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 1 || !slices.Contains(presetNames, args[0]) {
		return usageErrorf("grant preset: want one toolchain of %s", strings.Join(presetNames, ", "))
	}
	p, err := buildPreset(context.Background(), args[0], *host)
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			return withHint(fmt.Errorf("grant preset %s: %w", args[0], err), "install the toolchain, or omit --host for Debian's fixed locations")
		}
		return fmt.Errorf("grant preset %s: %w", args[0], err)
	}
	b, err := json.MarshalIndent(p.set, "", "  ")
	if err != nil {
		return err
	}
	if _, err := grant.Parse(b); err != nil {
		return fmt.Errorf("grant preset %s: the grant set made is invalid: %w", args[0], err)
	}
	for _, n := range p.notes {
		fmt.Fprintf(e.stderr, "cordon: note: %s\n", n)
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}
