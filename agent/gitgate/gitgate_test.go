package gitgate

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// checkCases are shared by TestCheck and the fuzz seed corpus. refuse is
// the index of the refused argument, or -1 for an allowed invocation.
var checkCases = []struct {
	name   string
	argv   []string
	refuse int
}{
	// argv[0] and the subcommand.
	{"empty argv", nil, 0},
	{"git alone", []string{"git"}, 1},
	{"gitx", []string{"gitx", "log"}, 0},
	{"absolute binary", []string{"/usr/bin/git", "log"}, 0},
	{"relative binary", []string{"./git", "log"}, 0},
	{"git.exe", []string{"git.exe", "log"}, 0},
	{"uppercase argv0", []string{"GIT", "log"}, 0},
	{"clone", []string{"git", "clone", "https://example.com/r"}, 1},
	{"fetch upload-pack", []string{"git", "fetch", "--upload-pack=touch /tmp/pwn", "origin"}, 1},
	{"push", []string{"git", "push"}, 1},
	{"remote", []string{"git", "remote", "add", "o", "x"}, 1},
	{"config subcommand", []string{"git", "config", "core.pager", "sh"}, 1},
	{"submodule", []string{"git", "submodule", "update"}, 1},
	{"archive", []string{"git", "archive", "--remote=x"}, 1},
	{"difftool", []string{"git", "difftool"}, 1},
	{"uppercase LOG", []string{"git", "LOG"}, 1},
	{"alias st", []string{"git", "st"}, 1},
	{"abbreviation stat", []string{"git", "stat"}, 1},
	{"empty subcommand", []string{"git", ""}, 1},
	{"subcommand with space", []string{"git", "log "}, 1},

	// Global options before the subcommand.
	{"-c pager", []string{"git", "-c", "core.pager=sh", "log"}, 1},
	{"-c attached", []string{"git", "-ccore.pager=sh", "log"}, 1},
	{"exec-path=", []string{"git", "--exec-path=/tmp", "log"}, 1},
	{"exec-path query", []string{"git", "--exec-path"}, 1},
	{"config-env", []string{"git", "--config-env=core.pager=X", "log"}, 1},
	{"git-dir", []string{"git", "--git-dir=/x/.git", "log"}, 1},
	{"work-tree", []string{"git", "--work-tree=/", "status"}, 1},
	{"-C", []string{"git", "-C", "/", "status"}, 1},
	{"namespace", []string{"git", "--namespace=x", "log"}, 1},
	{"super-prefix", []string{"git", "--super-prefix=x/", "log"}, 1},
	{"bare", []string{"git", "--bare", "log"}, 1},
	{"-p paginate", []string{"git", "-p", "log"}, 1},
	{"paginate", []string{"git", "--paginate", "log"}, 1},
	{"no-pager", []string{"git", "--no-pager", "log"}, 1},
	{"no-replace-objects", []string{"git", "--no-replace-objects", "log"}, 1},
	{"literal-pathspecs", []string{"git", "--literal-pathspecs", "log"}, 1},
	{"version", []string{"git", "--version"}, 1},
	{"help", []string{"git", "--help"}, 1},

	// Allowed invocations.
	{"status", []string{"git", "status"}, -1},
	{"status porcelain", []string{"git", "status", "--porcelain=v2", "-uall"}, -1},
	{"init", []string{"git", "init"}, -1},
	{"init branch", []string{"git", "init", "-b", "main", "--object-format=sha256", "repo"}, -1},
	{"init bare", []string{"git", "init", "--bare", "r.git"}, -1},
	{"add all", []string{"git", "add", "-A"}, -1},
	{"add paths", []string{"git", "add", "--", "src/main.go", "README.md"}, -1},
	{"add update", []string{"git", "add", "-u"}, -1},
	{"commit -m", []string{"git", "commit", "-m", "fix: parser"}, -1},
	{"commit no-verify", []string{"git", "commit", "--no-verify", "--no-gpg-sign", "-m", "x"}, -1},
	{"commit amend no-edit", []string{"git", "commit", "--amend", "--no-edit"}, -1},
	{"commit -F stdin", []string{"git", "commit", "-F", "-"}, -1},
	{"commit -F file", []string{"git", "commit", "-F", "msg.txt"}, -1},
	{"commit --file=", []string{"git", "commit", "--file=.git/MSG"}, -1},
	{"commit author", []string{"git", "commit", "--author=A <a@example.com>", "-m", "x"}, -1},
	{"commit -C", []string{"git", "commit", "-C", "HEAD"}, -1},
	{"commit message with dots", []string{"git", "commit", "-m", "see a..b and ../ not a path"}, -1},
	{"cat-file", []string{"git", "cat-file", "-p", "HEAD"}, -1},
	{"cat-file batch", []string{"git", "cat-file", "--batch-check"}, -1},
	{"rev-parse HEAD", []string{"git", "rev-parse", "--verify", "HEAD"}, -1},
	{"rev-parse git-dir", []string{"git", "rev-parse", "--git-dir"}, -1},
	{"rev-parse absolute-git-dir", []string{"git", "rev-parse", "--absolute-git-dir"}, -1},
	{"rev-parse git-common-dir", []string{"git", "rev-parse", "--git-common-dir"}, -1},
	{"rev-parse show-toplevel", []string{"git", "rev-parse", "--show-toplevel"}, -1},
	{"rev-list", []string{"git", "rev-list", "--count", "main..feature"}, -1},
	{"log oneline", []string{"git", "log", "--oneline", "-n", "5"}, -1},
	{"log -5", []string{"git", "log", "-5", "--stat"}, -1},
	{"log pickaxe", []string{"git", "log", "-Sneedle", "-p"}, -1},
	{"log pretty", []string{"git", "log", "--pretty=format:%H %an %s"}, -1},
	{"log format ref", []string{"git", "log", "--format=%(trailers:key=Fixes)"}, -1},
	{"log no-ext-diff", []string{"git", "log", "-p", "--no-ext-diff", "--no-textconv"}, -1},
	{"log patch", []string{"git", "log", "--patch"}, -1},
	{"log -- top", []string{"git", "log", "--", ":/"}, -1},
	{"log -- top magic", []string{"git", "log", "--", ":(top,icase)src"}, -1},
	{"log exclude magic", []string{"git", "log", "--", ":!vendor", ":^docs"}, -1},
	{"log range", []string{"git", "log", "HEAD~3..HEAD"}, -1},
	{"show", []string{"git", "show", "HEAD:src/main.go"}, -1},
	{"show message search", []string{"git", "show", ":/fix parser"}, -1},
	{"diff", []string{"git", "diff", "--cached", "--stat"}, -1},
	{"diff no-textconv", []string{"git", "diff", "--no-textconv"}, -1},
	{"diff no-ext-diff", []string{"git", "diff", "--no-ext-diff", "HEAD"}, -1},
	{"diff -C", []string{"git", "diff", "-C", "-M"}, -1},
	{"grep", []string{"git", "grep", "-n", "-i", "foo"}, -1},
	{"grep -e", []string{"git", "grep", "-e", "foo", "--and", "-e", "bar"}, -1},
	{"grep -o", []string{"git", "grep", "-o", "foo"}, -1},
	{"grep include pathspec", []string{"git", "grep", "foo", "--", "*.go"}, -1},
	{"grep untracked", []string{"git", "grep", "--untracked", "foo"}, -1},
	{"notes list", []string{"git", "notes"}, -1},
	{"notes add", []string{"git", "notes", "add", "-m", "note", "HEAD"}, -1},
	{"notes ref", []string{"git", "notes", "--ref=review", "show", "HEAD"}, -1},
	{"gc", []string{"git", "gc"}, -1},
	{"gc prune", []string{"git", "gc", "--prune=now", "--aggressive"}, -1},
	{"end-of-options", []string{"git", "log", "--end-of-options", "main"}, -1},

	// Options after the subcommand.
	{"log ext-diff", []string{"git", "log", "--ext-diff"}, 2},
	{"log ext", []string{"git", "log", "--ext"}, 2},
	{"log e abbreviation", []string{"git", "log", "--e"}, 2},
	{"log Ext-Diff case", []string{"git", "log", "--Ext-Diff"}, 2},
	{"diff textconv", []string{"git", "diff", "--textconv"}, 2},
	{"diff text", []string{"git", "diff", "--text"}, 2},
	{"show textconv", []string{"git", "show", "--textconv", "HEAD:x"}, 2},
	{"cat-file textconv", []string{"git", "cat-file", "--textconv", "HEAD:x"}, 2},
	{"cat-file filters", []string{"git", "cat-file", "--filters", "HEAD:x"}, 2},
	{"grep -O less", []string{"git", "grep", "-O", "less", "foo"}, 2},
	{"grep -Oless", []string{"git", "grep", "-Oless", "foo"}, 2},
	{"grep -iO", []string{"git", "grep", "-iO", "foo"}, 2},
	{"grep -nOless later", []string{"git", "grep", "-n", "-nOsh", "foo"}, 3},
	{"grep open-files-in-pager=sh", []string{"git", "grep", "--open-files-in-pager=sh", "foo"}, 2},
	{"grep open", []string{"git", "grep", "--open", "foo"}, 2},
	{"grep op", []string{"git", "grep", "--op", "foo"}, 2},
	{"grep no-index", []string{"git", "grep", "--no-index", "foo"}, 2},
	{"grep no-i", []string{"git", "grep", "--no-i", "foo"}, 2},
	{"grep ext-grep", []string{"git", "grep", "--ext-grep", "foo"}, 2},
	{"diff no-index", []string{"git", "diff", "--no-index", "a", "b"}, 2},
	{"log output", []string{"git", "log", "--output=/etc/passwd"}, 2},
	{"diff output relative", []string{"git", "diff", "--output=out.patch"}, 2},
	{"diff outp", []string{"git", "diff", "--outp", "x"}, 2},
	{"diff output-indicator", []string{"git", "diff", "--output-indicator-new=>"}, 2},
	{"log upload-pack", []string{"git", "log", "--upload-pack=sh"}, 2},
	{"log upload-p", []string{"git", "log", "--upload-p=sh"}, 2},
	{"log receive-pack", []string{"git", "log", "--receive-pack", "sh"}, 2},
	{"log exec", []string{"git", "log", "--exec=sh"}, 2},
	{"log exec-path", []string{"git", "log", "--exec-path=/tmp"}, 2},
	{"log git-dir", []string{"git", "log", "--git-dir=/x"}, 2},
	{"status work-tree", []string{"git", "status", "--work-tree=/"}, 2},
	{"log config", []string{"git", "log", "--config=core.pager=sh"}, 2},
	{"log -c", []string{"git", "log", "-c"}, 2},
	{"status -c later", []string{"git", "status", "-s", "-c", "x"}, 3},
	{"log show-signature", []string{"git", "log", "--show-signature"}, 2},
	{"log format %G?", []string{"git", "log", "--format=%H %G?"}, 2},
	{"log format %+GS", []string{"git", "log", "--pretty=tformat:%+GS"}, 2},
	{"log pager", []string{"git", "log", "--pager=sh"}, 2},
	{"commit -S", []string{"git", "commit", "-S", "-m", "x"}, 2},
	{"commit -Skey", []string{"git", "commit", "-SKEYID", "-m", "x"}, 2},
	{"commit -aS", []string{"git", "commit", "-aS", "-m", "x"}, 2},
	{"commit gpg-sign", []string{"git", "commit", "--gpg-sign=KEY", "-m", "x"}, 2},
	{"commit gpg", []string{"git", "commit", "--gpg", "-m", "x"}, 2},
	{"commit -e", []string{"git", "commit", "-e", "-m", "x"}, 2},
	{"commit edit", []string{"git", "commit", "--edit"}, 2},
	{"commit -c reedit", []string{"git", "commit", "-c", "HEAD"}, 2},
	{"commit template", []string{"git", "commit", "--template=t.txt"}, 2},
	{"commit -t", []string{"git", "commit", "-t", "t.txt"}, 2},
	{"commit trailer", []string{"git", "commit", "-m", "x", "--trailer=Fixes: 1"}, 4},
	{"commit patch", []string{"git", "commit", "--patch"}, 2},
	{"commit -p", []string{"git", "commit", "-p"}, 2},
	{"commit interactive", []string{"git", "commit", "--interactive"}, 2},
	{"commit message dash c", []string{"git", "commit", "-m", "-c is bad"}, 3},
	{"commit message %G", []string{"git", "commit", "-m", "100%Good"}, 3},
	{"add -p", []string{"git", "add", "-p"}, 2},
	{"add -i", []string{"git", "add", "-i"}, 2},
	{"add -e", []string{"git", "add", "-e"}, 2},
	{"add patch", []string{"git", "add", "--patch"}, 2},
	{"init template", []string{"git", "init", "--template=/tmp/t"}, 2},
	{"init template relative", []string{"git", "init", "--template=t"}, 2},
	{"init separate-git-dir", []string{"git", "init", "--separate-git-dir=/x"}, 2},
	{"init shared", []string{"git", "init", "--shared=0777"}, 2},
	{"gc auto", []string{"git", "gc", "--auto"}, 2},
	{"malformed long", []string{"git", "log", "---exec"}, 2},
	{"empty long name", []string{"git", "log", "--=x"}, 2},
	{"long name with path", []string{"git", "status", "--/.."}, 2},
	{"long name with underscore", []string{"git", "log", "--ext_diff"}, 2},

	// Paths.
	{"show ../../etc/passwd", []string{"git", "show", "../../etc/passwd"}, 2},
	{"add /etc/passwd", []string{"git", "add", "/etc/passwd"}, 2},
	{"add home", []string{"git", "add", "~/.ssh/id_rsa"}, 2},
	{"status -- ../x", []string{"git", "status", "--", "../x"}, 3},
	{"diff dotdot in middle", []string{"git", "diff", "src/../../x"}, 2},
	{"diff backslash dotdot", []string{"git", "diff", `src\..\..\x`}, 2},
	{"diff windows drive", []string{"git", "diff", `C:\Windows`}, 2},
	{"diff unc", []string{"git", "diff", `\\server\share`}, 2},
	{"log -- top absolute", []string{"git", "log", "--", ":(top)/etc"}, 3},
	{"log -- magic dotdot", []string{"git", "log", "--", ":(icase)../x"}, 3},
	{"commit -F absolute", []string{"git", "commit", "-F", "/etc/shadow"}, 3},
	{"commit -F attached absolute", []string{"git", "commit", "-F/etc/shadow"}, 2},
	{"commit -F attached dotdot", []string{"git", "commit", "-F../x"}, 2},
	{"commit file= absolute", []string{"git", "commit", "--file=/etc/shadow"}, 2},
	{"add pathspec-from-file", []string{"git", "add", "--pathspec-from-file=/etc/list"}, 2},
	{"grep -f absolute", []string{"git", "grep", "-f", "/etc/patterns"}, 3},
	{"init dotdot", []string{"git", "init", "../elsewhere"}, 2},
	{"rev-parse resolve-git-dir", []string{"git", "rev-parse", "--resolve-git-dir", "/x"}, 3},
	{"after -- dash O", []string{"git", "log", "--", "-O"}, 3},

	// notes.
	{"notes edit", []string{"git", "notes", "edit"}, 2},
	{"notes merge", []string{"git", "notes", "merge", "x"}, 2},
	{"notes ref separate", []string{"git", "notes", "--ref", "x", "add"}, 2},
	{"notes add -e", []string{"git", "notes", "add", "-e"}, 3},
	{"notes unknown", []string{"git", "notes", "frobnicate"}, 2},

	// Control characters.
	{"NUL", []string{"git", "log", "a\x00b"}, 2},
	{"newline", []string{"git", "commit", "-m", "a\nb"}, 3},
	{"CR", []string{"git", "status\r"}, 1},
	{"NUL in argv0", []string{"git\x00", "log"}, 0},
}

func TestCheck(t *testing.T) {
	if len(checkCases) < 80 {
		t.Fatalf("only %d cases", len(checkCases))
	}
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.argv)
			if tc.refuse < 0 {
				if err != nil {
					t.Errorf("Check(%q) = %v, want nil", tc.argv, err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Check(%q) = %v, want ErrRefused", tc.argv, err)
			}
			var re *RefusalError
			if !errors.As(err, &re) {
				t.Fatalf("Check(%q) = %T, want *RefusalError", tc.argv, err)
			}
			if re.Index != tc.refuse {
				t.Errorf("Check(%q) refused index %d (%v), want %d", tc.argv, re.Index, err, tc.refuse)
			}
			if re.Index < len(tc.argv) && re.Arg != tc.argv[re.Index] {
				t.Errorf("Check(%q): Arg = %q, want argv[%d] = %q", tc.argv, re.Arg, re.Index, tc.argv[re.Index])
			}
			if re.Reason == "" {
				t.Errorf("Check(%q): empty Reason", tc.argv)
			}
		})
	}
}

func TestRefusalErrorMessage(t *testing.T) {
	err := Check([]string{"git", "grep", "-Oless", "foo"})
	const want = `gitgate: git argv[2] "-Oless" refused: -O: `
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Check(grep -Oless) = %v, want prefix %q", err, want)
	}
	err = Check([]string{"git", "log", "a\nb"})
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("Check with newline = %q, want an error on one line", err)
	}
}

// TestRefusedLongTable checks every entry of refusedLong in every form git
// would accept: exact, with a value, and abbreviated; and that the
// negation is allowed for every entry but no-index.
func TestRefusedLongTable(t *testing.T) {
	for _, o := range refusedLong {
		if o.why == "" || o.name != strings.ToLower(o.name) || strings.HasPrefix(o.name, "-") {
			t.Errorf("refusedLong entry %q: malformed", o.name)
		}
		sub := "log"
		if o.only != nil {
			sub = o.only[0]
		}
		for _, form := range []string{
			"--" + o.name,
			"--" + o.name + "=x",
			"--" + o.name[:1],
			"--" + o.name[:len(o.name)-1],
		} {
			if slices.Contains(exemptLong[sub], strings.TrimPrefix(form, "--")) {
				continue
			}
			if err := Check([]string{"git", sub, form}); !errors.Is(err, ErrRefused) {
				t.Errorf("Check(git %s %s) = %v, want ErrRefused", sub, form, err)
			}
		}
		if o.name == "no-index" {
			continue
		}
		neg := []string{"git", sub, "--no-" + o.name}
		if err := Check(neg); err != nil {
			t.Errorf("Check(%q) = %v, want nil", neg, err)
		}
	}
}

func TestRefusedShortTable(t *testing.T) {
	for _, o := range refusedShort {
		subs := o.only
		if subs == nil {
			subs = allowedList()
		}
		for _, sub := range subs {
			for _, form := range []string{"-" + string(o.letter), "-q" + string(o.letter), "-" + string(o.letter) + "x"} {
				argv := []string{"git", sub, form}
				if sub == "notes" {
					argv = []string{"git", "notes", "add", form}
				}
				if err := Check(argv); !errors.Is(err, ErrRefused) {
					t.Errorf("Check(%q) = %v, want ErrRefused", argv, err)
				}
			}
		}
	}
}

func TestTables(t *testing.T) {
	for sub, why := range subcommands {
		if why == "" || strings.HasPrefix(sub, "-") || sub != strings.ToLower(sub) {
			t.Errorf("subcommand %q: malformed entry", sub)
		}
	}
	for sub := range exemptLong {
		if _, ok := subcommands[sub]; !ok {
			t.Errorf("exemptLong names %q, which is not an allowed subcommand", sub)
		}
	}
	for _, o := range refusedLong {
		for _, sub := range o.only {
			if _, ok := subcommands[sub]; !ok {
				t.Errorf("refusedLong %q names %q, which is not an allowed subcommand", o.name, sub)
			}
		}
	}
	for _, o := range refusedShort {
		for _, sub := range o.only {
			if _, ok := subcommands[sub]; !ok {
				t.Errorf("refusedShort %q names %q, which is not an allowed subcommand", o.letter, sub)
			}
		}
	}
}

// naiveRefused is an independent, deliberately simple reference for what
// must never be accepted: it does not share code with Check.
func naiveRefused(argv []string) string {
	if len(argv) < 2 || argv[0] != "git" {
		return "argv0"
	}
	allowed := []string{"init", "add", "commit", "cat-file", "rev-parse", "rev-list",
		"log", "grep", "show", "notes", "gc", "status", "diff"}
	if !slices.Contains(allowed, argv[1]) {
		return "subcommand"
	}
	bad := []string{"upload-pack", "receive-pack", "exec", "open-files-in-pager",
		"ext-diff", "textconv", "output", "config", "work-tree", "exec-path",
		"template", "separate-git-dir", "gpg-sign", "no-index", "filters",
		"show-signature", "edit", "trailer", "pager"}
	for _, a := range argv {
		if strings.ContainsAny(a, "\x00\n") {
			return "control"
		}
	}
	for _, a := range argv[2:] {
		if strings.HasPrefix(a, "/") {
			return "absolute"
		}
		for _, seg := range strings.Split(a, "/") {
			if seg == ".." {
				return "dotdot"
			}
		}
		if strings.Contains(a, "%G") {
			return "%G"
		}
		if strings.HasPrefix(a, "--") && a != "--" {
			name := strings.ToLower(strings.SplitN(a[2:], "=", 2)[0])
			for _, b := range bad {
				if name == b || strings.HasPrefix(name, b+"-") {
					return "long " + b
				}
				if len(name) >= 3 && strings.HasPrefix(b, name) {
					return "abbrev " + b
				}
			}
			if argv[1] != "rev-parse" && (name == "git-dir" || name == "git-common-dir") {
				return "git-dir"
			}
		} else if strings.HasPrefix(a, "-") {
			if strings.ContainsAny(a, "Oc") {
				return "short"
			}
			if argv[1] == "commit" && strings.ContainsAny(a, "S") {
				return "commit -S"
			}
		}
	}
	return ""
}

func FuzzCheck(f *testing.F) {
	for _, tc := range checkCases {
		f.Add(strings.Join(tc.argv, "\x1f"))
	}
	f.Fuzz(func(t *testing.T, joined string) {
		argv := strings.Split(joined, "\x1f")
		err := Check(argv)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Check(%q) = %v, not ErrRefused", argv, err)
			}
			var re *RefusalError
			if !errors.As(err, &re) || re.Index < 0 || re.Index > len(argv) {
				t.Fatalf("Check(%q) = %#v, bad RefusalError", argv, err)
			}
			return
		}
		if why := naiveRefused(argv); why != "" {
			t.Fatalf("Check(%q) = nil, but the naive check refuses it: %s", argv, why)
		}
	})
}
