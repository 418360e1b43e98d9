package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/exechash"
	"github.com/cordon-dev/cordon/tier"
)

var (
	helloOnce sync.Once
	helloBin  []byte
	helloErr  error
)

// staticHello builds, once per test binary, a static program that prints
// "hello from the image" and the contents of each file its arguments
// name, and writes it into a directory of the test's.
func staticHello(t *testing.T) string {
	t.Helper()
	helloOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cordon-hello-")
		if err != nil {
			helloErr = err
			return
		}
		defer os.RemoveAll(dir)
		src := `package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello from the image")
	for _, f := range os.Args[1:] {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		os.Stdout.Write(b)
	}
}
`
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			helloErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", "hello", "main.go")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			helloErr = fmt.Errorf("building the static hello: %v\n%s", err, out)
			return
		}
		helloBin, helloErr = os.ReadFile(filepath.Join(dir, "hello"))
	})
	if helloErr != nil {
		t.Fatal(helloErr)
	}
	p := filepath.Join(t.TempDir(), "hello")
	if err := os.WriteFile(p, helloBin, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// imageRootfs makes an unpacked image: /usr/bin/hello (static), bin ->
// usr/bin, /usr/bin/true -> /usr/bin/hello (an absolute link whose host
// target is the host's true), /usr/share/msg, /etc/os-release, and the
// adversarial links.
func imageRootfs(t *testing.T) (string, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	hello := staticHello(t)
	for _, d := range []string{"usr/bin", "usr/share", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, hello, root+"/usr/bin/hello", 0o755)
	copyFile(t, hello, root+"/usr/bin/other", 0o755) // not allowed by name
	writeFile(t, root+"/usr/share/msg", "image message\n", 0o644)
	writeFile(t, root+"/etc/os-release", "ID=imagetest\n", 0o644)
	links := map[string]string{
		"bin":             "usr/bin",
		"usr/bin/true":    "/usr/bin/hello",           // absolute: resolves in the image
		"usr/bin/escape":  "/../../etc/passwd",        // climbs: stops at the image's root
		"usr/bin/hostcat": "/usr/bin/cat",             // a host-only path
		"usr/bin/etcfile": "/etc/os-release",          // in the image, outside the runtime
		"usr/bin/dotdot":  "../../../../../../bin/sh", // relative climb
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, hello
}

func withImage(root string) option {
	return func(s *Spec) { s.Image = &ImageRuntime{Root: root, Manifest: "sha256:m", Config: "sha256:c"} }
}

const imageGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"hello"},{"name":"true"},{"name":"cat"},{"name":"sh"},{"name":"escape"},{"name":"hostcat"},{"name":"etcfile"},{"name":"dotdot"}%s]%s}}`

// TestImageRuntime: with Spec.Image the program, its hash and the
// runtime inside are the image's, never the host's.
func TestImageRuntime(t *testing.T) {
	root, hello := imageRootfs(t)
	gs := withGrants(t, fmt.Sprintf(imageGrants, "", ""))
	id, err := exechash.New(1).Sum(hello)
	if err != nil {
		t.Fatal(err)
	}

	r := sandboxed(t, []string{"hello", "/usr/share/msg"}, gs, withImage(root))
	r.mustExit(t, 0)
	if r.stdout != "hello from the image\nimage message\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	// /etc is cordon's, as without an image: not the image's, but for
	// the loader cache, which is the image's (the host's is not copied).
	r2 := sandboxed(t, []string{"hello", "/etc/os-release"}, gs, withImage(root))
	r2.mustExit(t, 3)
	r2 = sandboxed(t, []string{"hello", "/etc/ld.so.cache"}, gs, withImage(root))
	r2.mustExit(t, 3)
	writeFile(t, root+"/etc/ld.so.cache", "the image's loader cache\n", 0o644)
	r2 = sandboxed(t, []string{"hello", "/etc/ld.so.cache"}, gs, withImage(root))
	r2.mustExit(t, 0)
	if r2.stdout != "hello from the image\nthe image's loader cache\n" {
		t.Errorf("ld.so.cache: %q", r2.stdout)
	}
	if r.res.Program.Path != "/usr/bin/hello" || r.res.Program.B3 != id {
		t.Errorf("program %s %s, want /usr/bin/hello %s", r.res.Program.Path, r.res.Program.B3, id)
	}

	// Through the image's relative link bin -> usr/bin.
	r = sandboxed(t, []string{"/bin/hello"}, gs, withImage(root))
	r.mustExit(t, 0)
	if r.stdout != "hello from the image\n" {
		t.Errorf("/bin/hello: stdout %q", r.stdout)
	}

	// An absolute link resolves in the image: the host's /usr/bin/true
	// exists and differs, and is neither run nor hashed.
	r = sandboxed(t, []string{"true"}, gs, withImage(root))
	r.mustExit(t, 0)
	if r.stdout != "hello from the image\n" || r.res.Program.B3 != id || r.res.Program.Path != "/usr/bin/true" {
		t.Errorf("true: stdout %q, program %s %s", r.stdout, r.res.Program.Path, r.res.Program.B3)
	}

	// The host has cat and sh; the image does not.
	for _, name := range []string{"cat", "sh", "/usr/bin/cat"} {
		r = sandboxed(t, []string{name}, gs, withImage(root))
		if !errors.Is(r.err, ErrNotFound) || r.stdout != "" {
			t.Errorf("%s: Run = %v, stdout %q; want not found", name, r.err, r.stdout)
		}
	}
	// Without the image, the same grants run the host's.
	r = sandboxed(t, []string{"true"}, gs)
	r.mustExit(t, 0)
	if r.stdout != "" {
		t.Errorf("the host's true printed %q", r.stdout)
	}
}

// TestImageRuntimeLinksStayInside: links out of the image, absolute,
// climbing or naming a host-only file, never reach a host file.
func TestImageRuntimeLinksStayInside(t *testing.T) {
	root, _ := imageRootfs(t)
	gs := withGrants(t, fmt.Sprintf(imageGrants, "", ""))
	for _, c := range []struct {
		name string
		want error
	}{
		{"escape", ErrNotFound},    // the image has no /etc/passwd
		{"hostcat", ErrNotFound},   // /usr/bin/cat is the host's only
		{"dotdot", ErrNotFound},    // ../.. stops at the root: /bin/sh, absent
		{"etcfile", ErrCannotExec}, // the image's /etc/os-release: outside the runtime
		{"/usr/bin/escape", ErrNotFound},
	} {
		r := sandboxed(t, []string{c.name}, gs, withImage(root))
		if !errors.Is(r.err, c.want) || r.stdout != "" {
			t.Errorf("%s: Run = %v, stdout %q; want %v", c.name, r.err, r.stdout, c.want)
		}
	}
	// With /etc/passwd in the image the link resolves to it, which is
	// outside the runtime: refused, never the host's /etc/passwd.
	writeFile(t, root+"/etc/passwd", "root:x:0:0::/:/bin/hello\n", 0o755)
	r := sandboxed(t, []string{"escape"}, gs, withImage(root))
	if !errors.Is(r.err, ErrCannotExec) || !strings.Contains(r.err.Error(), "resolves to /etc/passwd, outside the runtime") {
		t.Errorf("escape with the image's /etc/passwd: %v", r.err)
	}
}

// TestImageRuntimeExecRules: exec.allow and exec.deny, by name and by
// hash, apply to the image's files.
func TestImageRuntimeExecRules(t *testing.T) {
	root, hello := imageRootfs(t)
	id, err := exechash.New(1).Sum(hello)
	if err != nil {
		t.Fatal(err)
	}
	// Not allowed by name.
	r := sandboxed(t, []string{"other"}, withGrants(t, fmt.Sprintf(imageGrants, "", "")), withImage(root))
	r.refused(t, "exec /usr/bin/other: no exec rule allows other")
	// Allowed by the image file's hash, under any name.
	r = sandboxed(t, []string{"other"}, withGrants(t, fmt.Sprintf(imageGrants, `,{"b3":"`+id.String()+`"}`, "")), withImage(root))
	r.mustExit(t, 0)
	if r.stdout != "hello from the image\n" {
		t.Errorf("other: stdout %q", r.stdout)
	}
	// Denied by hash: the name, and the absolute link to it.
	deny := `,"deny":["` + id.String() + `"]`
	for _, name := range []string{"hello", "true"} {
		r = sandboxed(t, []string{name}, withGrants(t, fmt.Sprintf(imageGrants, "", deny)), withImage(root))
		r.refused(t, "exec")
	}
	// The host's true has another hash: allowed by it, the image's is not.
	hostTrue, err := exechash.New(1).Sum("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	only := `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"true","b3":"` + hostTrue.String() + `"}]}}`
	r = sandboxed(t, []string{"true"}, withGrants(t, only), withImage(root))
	r.refused(t, "exec")
	r = sandboxed(t, []string{"true"}, withGrants(t, only))
	r.mustExit(t, 0)
}

// TestImageRuntimeRefusals: S4 and a root that is not there are refused
// before anything runs.
func TestImageRuntimeRefusals(t *testing.T) {
	gs, err := grant.Parse([]byte(s4Grants))
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{Argv: []string{"true"}, Grants: gs, Tier: tier.S4, StateDir: t.TempDir(), Limits: DefaultLimits(),
		Image: &ImageRuntime{Root: t.TempDir()}}
	err = s.check()
	if err == nil || !strings.Contains(err.Error(), "image runtime is not available at S4") {
		t.Errorf("S4 with an image: %v", err)
	}
	r := sandboxed(t, []string{"true"}, withImage(filepath.Join(t.TempDir(), "absent")))
	r.refused(t, "image runtime: opening its root")
	r = sandboxed(t, []string{"true"}, withImage("relative/rootfs"))
	r.refused(t, "not an absolute path")
}

// TestImageRuntimeFSGrants: fs grants of host paths on an image run.
func TestImageRuntimeFSGrants(t *testing.T) {
	requireRoot(t, "fs grants clone host mount trees with open_tree, which a rootless caller may not (EPERM), as TestFSGrantPath")
	// A host path granted beneath the runtime, which is the image's.
	root, _ := imageRootfs(t)
	js := `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"fs":[{"path":"/usr/share","access":"rx"}],"exec":{"allow":[{"name":"hello"}]}}`
	r := sandboxed(t, []string{"hello"}, withGrants(t, js), withImage(root))
	r.refused(t, "fs[0]: the host path /usr/share lies in the runtime")
	// Beneath a granted host path outside the runtime, programs are the
	// host's, found on PATH before the image's.
	d := hostDir(t)
	copyFile(t, staticHello(t), d+"/tool/bin/hello", 0o755)
	copyFile(t, "/usr/bin/true", d+"/tool/bin/dyn", 0o755)
	js = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"fs":[` + rule(d+"/tool", "rx") + `],"exec":{"allow":[{"name":"hello"}]}}`
	r = sandboxed(t, []string{"hello"}, withGrants(t, js), withImage(root))
	r.mustExit(t, 0)
	if r.res.Program.Path != d+"/tool/bin/hello" || r.stdout != "hello from the image\n" {
		t.Errorf("program %s, stdout %q", r.res.Program.Path, r.stdout)
	}
	// A dynamic host program there needs its interpreter in the image,
	// where this image has none: not found, never the host's.
	r = sandboxed(t, []string{d + "/tool/bin/dyn"}, withGrants(t, strings.Replace(js, `"hello"`, `"dyn"`, 1)), withImage(root))
	if !errors.Is(r.err, ErrNotFound) {
		t.Errorf("dyn: %v", r.err)
	}
}

// hostRuntimeImage makes an image of the host's own files for progs:
// each program, its ELF interpreter and libraries at their host paths
// (the links on the way, such as lib64 -> usr/lib64, copied as links),
// and the host's loader cache.
func hostRuntimeImage(tb testing.TB, progs ...string) string {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "rootfs")
	for _, r := range runtimeRoots {
		if target, err := os.Readlink(r); err == nil {
			if err := os.MkdirAll(root, 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.Symlink(target, root+r); err != nil {
				tb.Fatal(err)
			}
		}
	}
	var files []string
	for _, p := range progs {
		files = append(files, p)
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			tb.Fatalf("ldd %s: %v", p, err)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	files = append(files, "/etc/ld.so.cache")
	for _, p := range files {
		for range 16 {
			dir, err := filepath.EvalSymlinks(filepath.Dir(p))
			if err != nil {
				tb.Fatal(err)
			}
			hp := filepath.Join(dir, filepath.Base(p))
			if err := os.MkdirAll(root+dir, 0o755); err != nil {
				tb.Fatal(err)
			}
			target, err := os.Readlink(hp)
			if err != nil { // a file
				if _, err := os.Lstat(root + hp); err != nil {
					b, err := os.ReadFile(hp)
					if err != nil {
						tb.Fatal(err)
					}
					if err := os.WriteFile(root+hp, b, 0o755); err != nil {
						tb.Fatal(err)
					}
				}
				break
			}
			if _, err := os.Lstat(root + hp); err != nil {
				if err := os.Symlink(target, root+hp); err != nil {
					tb.Fatal(err)
				}
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			p = target
		}
	}
	return root
}

// TestImageRuntimeDynamic: a dynamically linked program of an image runs
// with the image's ELF interpreter, libraries and loader cache; its hash
// is that of the image's bytes (here the host's own, copied).
func TestImageRuntimeDynamic(t *testing.T) {
	root := hostRuntimeImage(t, "/usr/bin/true", "/usr/bin/dash")
	if err := os.Symlink("dash", root+"/usr/bin/sh"); err != nil {
		t.Fatal(err)
	}
	hostTrue, err := exechash.New(1).Sum("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	r := sandboxed(t, []string{"true"}, withImage(root))
	r.mustExit(t, 0)
	if r.res.Program.B3 != hostTrue {
		t.Errorf("true: %s, want %s", r.res.Program.B3, hostTrue)
	}
	// sh is the image's dash; echo is a builtin, ls is not in the image.
	r = sandboxed(t, []string{"sh", "-c", "echo in the image; ls / || echo no ls"}, withImage(root))
	r.mustExit(t, 0)
	if !strings.HasPrefix(r.stdout, "in the image\n") || !strings.HasSuffix(r.stdout, "no ls\n") {
		t.Errorf("sh: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	// An interpreter link that leaves the image: the program cannot run.
	interp, err := interpreter("/usr/bin/true")
	if err != nil || interp == "" {
		t.Fatalf("interpreter of true: %q, %v", interp, err)
	}
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(root + real); err != nil {
		t.Fatal(err)
	}
	// On the host this names the host's interpreter; in the image there
	// is no /proc, and ".." stops at the image's root.
	if err := os.Symlink("/../../../proc/self/root"+real, root+real); err != nil {
		t.Fatal(err)
	}
	r = sandboxed(t, []string{"true"}, withImage(root))
	if !errors.Is(r.err, ErrNotFound) {
		t.Errorf("true with its interpreter linked out of the image: %v", r.err)
	}
}

// BenchmarkRunTrueImage is BenchmarkRunTrue on the host's runtime and
// on an image runtime holding the same true, interpreter, libraries and
// loader cache, interleaved (host, image, image, host, …) so that a busy
// machine weighs on both alike: the image's cost to a run's cold start.
// It reports the median of each and their difference.
func BenchmarkRunTrueImage(b *testing.B) {
	root := hostRuntimeImage(b, "/usr/bin/true")
	// The same program directories as the host's, so that init does the
	// same mounts (noexecProgramDirs) on both.
	for _, d := range existingDirs(programDirs) {
		if err := os.MkdirAll(root+d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	host := benchSpec(b, "true")
	img := benchSpec(b, "true")
	img.Image = &ImageRuntime{Root: root}
	var th, ti []time.Duration
	run := func(s *Spec) time.Duration {
		start := time.Now()
		res, err := Run(context.Background(), s)
		if err != nil {
			b.Fatal(err)
		}
		if res.ExitCode != 0 {
			b.Fatalf("exit %d", res.ExitCode)
		}
		return time.Since(start)
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			th = append(th, run(host))
			ti = append(ti, run(img))
		} else {
			ti = append(ti, run(img))
			th = append(th, run(host))
		}
		i++
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	mh, mi := median(th), median(ti)
	b.ReportMetric(mh, "host-us")
	b.ReportMetric(mi, "image-us")
	b.ReportMetric(mi-mh, "delta-us")
}
