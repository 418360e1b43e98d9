package runner

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/gitgate"
)

// FuzzCheckArgv: an accepted argv runs a declared command's basename
// with no shell metacharacter or control character in any token, and
// git only through the gate.
func FuzzCheckArgv(f *testing.F) {
	m := baseManifest(f, nil)
	for _, s := range []string{"python3\x00-V", "/usr/bin/python3\x00x", "git\x00log", "git\x00-c\x00a=b\x00log", "sh\x00-c\x00id", "python3\x00$(id)", "..", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		out, err := checkArgv(m, argv)
		if err != nil {
			return
		}
		if out[0] != path.Base(argv[0]) || !slices.Contains(m.Commands, out[0]) {
			t.Fatalf("%q runs %q", argv, out[0])
		}
		for _, a := range argv {
			if strings.ContainsAny(a, ShellMetacharacters) || strings.ContainsFunc(a, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
				t.Fatalf("accepted token %q", a)
			}
		}
		if out[0] == "git" {
			if err := gitgate.Check(append([]string{"git"}, argv[1:]...)); err != nil {
				t.Fatalf("git argv %q passed the runner but not the gate: %v", argv, err)
			}
			if !slices.Equal(out[1:1+len(gitPrefix)], gitPrefix) {
				t.Fatalf("git ran without the pinned configuration: %q", out)
			}
		}
	})
}
