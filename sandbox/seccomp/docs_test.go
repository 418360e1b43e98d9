package seccomp

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

const sandboxDoc = "../../docs/sandbox.md"

// allowRows are the rows of docs/sandbox.md's table of allowed calls: one
// per group and GOARCH, in Allowed's order.
func allowRows() []string {
	var rows []string
	for _, g := range allowlist {
		name := g.group
		if g.goarch != "" {
			name += " (" + g.goarch + " only)"
		}
		rows = append(rows, "| "+name+" | `"+strings.Join(g.calls, "`, `")+"` |")
	}
	return rows
}

// TestDocsListAllowed keeps the table of allowed calls in
// docs/sandbox.md, between its markers, exactly in step with Allowed.
func TestDocsListAllowed(t *testing.T) {
	b, err := os.ReadFile(sandboxDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const begin, end = "<!-- seccomp allowlist -->\n", "<!-- end seccomp allowlist -->\n"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", sandboxDoc, begin, end)
	}
	var got []string
	for _, line := range strings.Split(doc[i+len(begin):j], "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| group ") {
			got = append(got, line)
		}
	}
	want := allowRows()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: the allowed table is\n%s\nwant\n%s", sandboxDoc, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDocsReachable checks the figures docs/sandbox.md gives for the
// number of system calls the filter can let through.
func TestDocsReachable(t *testing.T) {
	b, err := os.ReadFile(sandboxDoc)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, goarch := range []string{"amd64", "arm64"} {
		n, err := Reachable(goarch)
		if err != nil {
			t.Fatal(err)
		}
		known := len(arches[goarch].SyscallNumbers)
		want = append(want, fmt.Sprintf("%d of the %d system calls go-seccomp-bpf knows on %s", n, known, goarch))
	}
	re := regexp.MustCompile(`\d+ of the \d+ system calls go-seccomp-bpf knows on (amd64|arm64)`)
	got := re.FindAllString(string(b), -1)
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("%s gives %q, want %q", sandboxDoc, got, want)
	}
}
