// Package environment turns a devcontainer.json into a cordon environment
// manifest (`cordon.env.v1`, docs/SPEC.md §7, conformance class C7): a
// canonical, content-addressed description of where a run executes — an
// image pinned to its digest, environment variables, users and the
// workspace folder — and nothing that executes or widens the sandbox.
//
// The devcontainer format is JSON with comments and trailing commas. Ingest
// removes those (github.com/tailscale/hujson), parses the result strictly
// (no duplicate names, no floats, valid UTF-8: evidence/canon), and reads
// every member against a closed table: a member that runs commands or
// widens the container is refused with its name and the reason, an unknown
// member is refused, never dropped. The manifest's address is the
// ContentId of its JCS form, so it does not depend on member order,
// whitespace or comments.
//
// The package is pure: no file, process or network access.
package environment

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tailscale/hujson"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// Type is the manifest's type member and the name of its schema.
const Type = "cordon.env.v1"

// PayloadType is the DSSE payload type of a signed manifest.
const PayloadType = "application/vnd.cordon.env.v1+json"

// MaxSize bounds a devcontainer.json and a manifest.
const MaxSize = 1 << 20

var (
	// ErrInvalid is wrapped by errors about a malformed devcontainer.json
	// or manifest: syntax, an unknown member, a wrong type, an unpinned
	// image, a variable substitution.
	ErrInvalid = errors.New("invalid environment")
	// ErrRefused is wrapped by errors about a member cordon will not
	// honour because it runs commands or widens the sandbox.
	ErrRefused = errors.New("refused environment member")
)

// Manifest is a cordon.env.v1 environment manifest.
type Manifest struct {
	Name            string            // optional, display only
	Image           string            // registry/repository[:tag]@sha256:… (always pinned)
	ContainerEnv    map[string]string // variables of every process in the environment
	RemoteEnv       map[string]string // variables of the tool's processes
	ContainerUser   string            // optional user name or numeric id inside the image
	RemoteUser      string            // optional
	WorkspaceFolder string            // optional absolute path inside the image
	// CustomizationsIgnored is the ContentId of the devcontainer's
	// customizations (editor settings, extensions, terminal profiles) in
	// canonical form, when it had any. They are not carried: they can make
	// an editor run code, and a signed manifest must not endorse that. The
	// digest records that they were there and were left out.
	CustomizationsIgnored canon.ID
}

// refusal says why a devcontainer member is refused.
type refusal struct{ why, instead string }

// refused are the devcontainer members cordon does not honour. Members that
// run commands on the host or in the container, or build an image, would
// execute outside any grant; members that widen the container would undo
// the sandbox. Keep docs/environments.md in step.
var refused = map[string]refusal{
	// Lifecycle commands and builds execute.
	"initializeCommand":           {"runs a command on the host", "run it yourself before cordon, outside the manifest"},
	"onCreateCommand":             {"runs a command when the container is created", "run it as a granted command with 'cordon exec'"},
	"updateContentCommand":        {"runs a command when content changes", "run it as a granted command with 'cordon exec'"},
	"postCreateCommand":           {"runs a command after creation", "run it as a granted command with 'cordon exec'"},
	"postStartCommand":            {"runs a command at every start", "run it as a granted command with 'cordon exec'"},
	"postAttachCommand":           {"runs a command at every attach", "run it as a granted command with 'cordon exec'"},
	"waitFor":                     {"orders lifecycle commands, which cordon does not run", "remove it"},
	"userEnvProbe":                {"runs the user's login shell to read its environment", "write the variables in containerEnv or remoteEnv"},
	"overrideCommand":             {"chooses the container's command", "remove it; cordon chooses what runs from the grants"},
	"build":                       {"builds an image, which executes its build steps", "build and push the image, then name it by digest in image"},
	"dockerFile":                  {"builds an image, which executes its build steps", "build and push the image, then name it by digest in image"},
	"context":                     {"is a build context", "build and push the image, then name it by digest in image"},
	"dockerComposeFile":           {"starts containers through Docker Compose", "name one image by digest in image"},
	"service":                     {"selects a Docker Compose service", "name one image by digest in image"},
	"runServices":                 {"starts Docker Compose services", "name one image by digest in image"},
	"features":                    {"installs features by running their install scripts", "bake them into the image, then name it by digest"},
	"overrideFeatureInstallOrder": {"orders feature installs, which run scripts", "bake the features into the image"},
	// Members that widen the container.
	"runArgs":              {"passes raw arguments to the container engine", "express what you need as grants"},
	"privileged":           {"runs the container privileged", "remove it; grants name what a run may do"},
	"capAdd":               {"adds Linux capabilities", "remove it; the sandbox grants none"},
	"securityOpt":          {"changes the container's security options", "remove it"},
	"mounts":               {"mounts host paths or volumes", "grant host paths with fs rules in a grant set"},
	"workspaceMount":       {"mounts a host path as the workspace", "cordon stages the workspace; grant other paths with fs rules"},
	"init":                 {"adds an init process chosen by the engine", "remove it; cordon runs its own init"},
	"forwardPorts":         {"forwards container ports to the host", "remove it; cordon grants egress, not ingress"},
	"appPort":              {"publishes container ports on the host", "remove it; cordon grants egress, not ingress"},
	"portsAttributes":      {"configures forwarded ports", "remove it"},
	"otherPortsAttributes": {"configures forwarded ports", "remove it"},
	"hostRequirements":     {"asks for host resources and devices", "grant limits and devices in a grant set"},
	"updateRemoteUserUID":  {"changes a user id inside the image to the host's", "remove it; cordon maps ids itself"},
	"shutdownAction":       {"controls the host's container engine", "remove it"},
}

// accepted are the devcontainer members read into a Manifest.
var accepted = []string{"name", "image", "containerEnv", "remoteEnv", "containerUser", "remoteUser", "workspaceFolder", "customizations"}

// Ingest reads a devcontainer.json (JSON with comments and trailing
// commas) into a Manifest, refusing every member it cannot honour exactly.
func Ingest(data []byte) (*Manifest, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrInvalid, len(data), MaxSize)
	}
	if err := checkLineBreaks(data); err != nil {
		return nil, err
	}
	// hujson replaces comments and trailing commas with spaces, so byte
	// offsets in later errors still point into the original text.
	std, err := hujson.Standardize(slices.Clone(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	v, err := canon.Parse(std)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if v.Kind() != canon.KindObject {
		return nil, fmt.Errorf("%w: the document is a %s, not an object", ErrInvalid, v.Kind())
	}
	// Refusals first, in canonical member order, so the message names the
	// member that runs or widens, even if something else is also wrong.
	for name := range v.Members() {
		if r, ok := refused[name]; ok {
			return nil, fmt.Errorf("%w %q: it %s; %s", ErrRefused, name, r.why, r.instead)
		}
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	m := &Manifest{}
	m.Name, _ = o.Str("name", false)
	m.Image, _ = o.Str("image", true)
	m.ContainerEnv = envMap(r, o, "containerEnv")
	m.RemoteEnv = envMap(r, o, "remoteEnv")
	m.ContainerUser, _ = o.Str("containerUser", false)
	m.RemoteUser, _ = o.Str("remoteUser", false)
	m.WorkspaceFolder, _ = o.Str("workspaceFolder", false)
	if c, ok := v.Get("customizations"); ok {
		o.Use("customizations")
		if c.Kind() != canon.KindObject {
			r.Fail("customizations", "want an object, got %s", c.Kind())
		} else if c.Len() > 0 {
			m.CustomizationsIgnored = canon.Sum(c.AppendJCS(nil))
		}
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// checkLineBreaks refuses line breaks that JSON-with-comments readers
// disagree about. tailscale/hujson ends a // comment only at LF; the
// devcontainer tools' parser (jsonc-parser) also at a lone CR, and
// JavaScript at U+2028 and U+2029: a member behind such a break is a
// member to one reader and a comment to another. Inside strings these
// are refused by JSON itself (CR) or harmless (U+2028, U+2029).
func checkLineBreaks(data []byte) error {
	const (
		normal = iota
		inString
		lineComment
		blockComment
	)
	state, escaped, depth := normal, false, 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if state == inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				state = normal
			}
			continue
		}
		switch {
		case c == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			return fmt.Errorf("%w: a carriage return not followed by a line feed at offset %d: readers disagree whether it ends a // comment; save the file with LF or CRLF line ends", ErrInvalid, i)
		case c == '\v' || c == '\f':
			return fmt.Errorf("%w: a vertical tab or form feed at offset %d outside a string", ErrInvalid, i)
		case c == 0xe2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xa8 || data[i+2] == 0xa9):
			return fmt.Errorf("%w: a Unicode line or paragraph separator at offset %d outside a string: readers disagree whether it ends a // comment", ErrInvalid, i)
		}
		switch state {
		case lineComment:
			if c == '\n' {
				state = normal
			}
		case blockComment:
			if c == '*' && i+1 < len(data) && data[i+1] == '/' {
				state, i = normal, i+1
			}
		default:
			switch {
			case c == '"':
				state = inString
			case c == '/' && i+1 < len(data) && data[i+1] == '/':
				state, i = lineComment, i+1
			case c == '/' && i+1 < len(data) && data[i+1] == '*':
				state, i = blockComment, i+1
			case c == '[' || c == '{':
				// Bounded before the JSON-with-comments parser, which
				// recurses once per level.
				if depth++; depth > maxDepth {
					return fmt.Errorf("%w: nesting deeper than %d levels at offset %d", ErrInvalid, maxDepth, i)
				}
			case c == ']' || c == '}':
				depth--
			}
		}
	}
	return nil
}

// maxDepth bounds nesting, as the canonical parser does.
const maxDepth = 64

func envMap(r *jsonv.Reader, o *jsonv.Obj, name string) map[string]string {
	eo, ok := o.Object(name, false)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, k := range eo.Members() {
		s, _ := eo.Str(k, true)
		out[k] = s
	}
	eo.End()
	if r.Err() != nil {
		return nil
	}
	return out
}

var (
	envName  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	userName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10})$`) })
	// The image reference grammar of the OCI distribution specification,
	// restricted: the registry host is always written (nothing defaults
	// to a particular registry), and the digest is required.
	component = `[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*`
	host      = `(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?`
	imageRef  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(` + host + `)/(` + component + `(?:/` + component + `)*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?@(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`)
	})
)

// check validates a manifest's members, whether it came from a
// devcontainer.json or from a manifest file.
func (m *Manifest) check() error {
	bad := func(member, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, member, fmt.Sprintf(format, args...))
	}
	if err := checkImage(m.Image); err != nil {
		return bad("image", "%v", err)
	}
	if m.Name != "" {
		if err := checkText(m.Name, 200); err != nil {
			return bad("name", "%v", err)
		}
		if err := checkValue(m.Name); err != nil {
			return bad("name", "%v", err)
		}
	}
	for _, e := range []struct {
		member string
		vars   map[string]string
	}{{"containerEnv", m.ContainerEnv}, {"remoteEnv", m.RemoteEnv}} {
		for _, k := range sortedKeys(e.vars) {
			if !envName().MatchString(k) {
				return bad(e.member+"."+k, "not a variable name (letters, digits and _, not starting with a digit)")
			}
			if err := checkValue(e.vars[k]); err != nil {
				return bad(e.member+"."+k, "%v", err)
			}
		}
	}
	for _, u := range []struct{ member, v string }{{"containerUser", m.ContainerUser}, {"remoteUser", m.RemoteUser}} {
		if u.v != "" && !userName().MatchString(u.v) {
			return bad(u.member, "%q is not a user name (lower-case letters, digits, _ and -, at most 32) or a numeric id", u.v)
		}
	}
	if f := m.WorkspaceFolder; f != "" {
		if err := checkValue(f); err != nil {
			return bad("workspaceFolder", "%v", err)
		}
		if !strings.HasPrefix(f, "/") || f == "/" || cleanAbs(f) != f {
			return bad("workspaceFolder", "%q is not a clean absolute path below / (no '.', '..', '//' or trailing '/')", f)
		}
	}
	return nil
}

func checkImage(ref string) error {
	if ref == "" {
		return errors.New("required: the image every run of this environment uses, pinned by digest")
	}
	if err := checkText(ref, 512); err != nil {
		return err
	}
	if !strings.Contains(ref, "@") {
		return fmt.Errorf("%q is not pinned to a digest; append @sha256:… (the digest of the image's manifest) so the environment cannot change under the same name", ref)
	}
	name := ref[:strings.Index(ref, "@")]
	if first, _, _ := strings.Cut(name, "/"); !strings.ContainsAny(first, ".:[") && first != "localhost" {
		return fmt.Errorf("%q does not name its registry; write it in full (for example docker.io/library/NAME@sha256:…)", ref)
	}
	if !imageRef().MatchString(ref) {
		return fmt.Errorf("%q is not an image reference REGISTRY/REPOSITORY[:TAG]@sha256:HEX (64 lower-case hex digits)", ref)
	}
	return nil
}

// checkText refuses text that could mislead a reader of the manifest.
func checkText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return fmt.Errorf("contains the control character %U", r)
		}
	}
	return nil
}

// checkValue refuses what a variable value, a path or a user may not hold:
// NUL, which no process environment can carry, and ${…}, the devcontainer
// variable substitution (${localEnv:…}, ${localWorkspaceFolder}, …), whose
// result depends on the host that reads the file, so the same address
// could mean different environments.
func checkValue(s string) error {
	if strings.ContainsRune(s, 0) {
		return errors.New("contains NUL")
	}
	if i := strings.Index(s, "${"); i >= 0 {
		return fmt.Errorf("variable substitution %q is not supported: its value depends on the host reading the file; write the value itself", s[i:min(len(s), i+40)])
	}
	return nil
}

func cleanAbs(p string) string {
	parts := strings.Split(p[1:], "/")
	for _, s := range parts {
		if s == "" || s == "." || s == ".." {
			return ""
		}
	}
	return p
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// JCS returns the manifest's canonical form (RFC 8785), the bytes its
// address is taken over. Empty maps and unset members are left out.
func (m *Manifest) JCS() []byte {
	doc := map[string]any{"type": Type, "image": m.Image}
	str := func(name, v string) {
		if v != "" {
			doc[name] = v
		}
	}
	vars := func(name string, vs map[string]string) {
		if len(vs) > 0 {
			doc[name] = vs
		}
	}
	str("name", m.Name)
	vars("container_env", m.ContainerEnv)
	vars("remote_env", m.RemoteEnv)
	str("container_user", m.ContainerUser)
	str("remote_user", m.RemoteUser)
	str("workspace_folder", m.WorkspaceFolder)
	if !m.CustomizationsIgnored.IsZero() {
		doc["customizations_ignored"] = m.CustomizationsIgnored.String()
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // strings and canonical values only
	}
	c, err := canon.JCS(b)
	if err != nil {
		panic(err) // every member was checked or came from canon
	}
	return c
}

// ID is the manifest's address: the ContentId of its JCS form.
func (m *Manifest) ID() canon.ID { return canon.Sum(m.JCS()) }

// Parse reads a manifest in its JCS form, as JCS wrote it: any other
// spelling of the same content, an unknown member or a wrong type is
// refused, so one manifest has one address.
func Parse(data []byte) (*Manifest, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrInvalid, len(data), MaxSize)
	}
	v, err := canon.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	typ, _ := o.Str("type", true)
	m := &Manifest{}
	m.Image, _ = o.Str("image", true)
	m.Name, _ = o.Str("name", false)
	m.ContainerEnv = envMap(r, o, "container_env")
	m.RemoteEnv = envMap(r, o, "remote_env")
	m.ContainerUser, _ = o.Str("container_user", false)
	m.RemoteUser, _ = o.Str("remote_user", false)
	m.WorkspaceFolder, _ = o.Str("workspace_folder", false)
	if str, ok := o.Str("customizations_ignored", false); ok && r.Err() == nil {
		id, err := canon.ParseID(str)
		if err != nil {
			r.Fail("customizations_ignored", "%v", err)
		}
		m.CustomizationsIgnored = id
	}
	o.End()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if typ != Type {
		return nil, fmt.Errorf("%w: type %q, want %q", ErrInvalid, typ, Type)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	if string(m.JCS()) != string(data) {
		return nil, fmt.Errorf("%w: not the manifest's canonical form (JCS, no empty members); re-ingest it, or canonicalize it with 'cordon canon jcs'", ErrInvalid)
	}
	return m, nil
}

// Seal signs the manifest and returns a DSSE envelope of its JCS form.
func (m *Manifest) Seal(k *sign.PrivateKey) []byte {
	return sign.Seal(k, PayloadType, m.JCS())
}

// Open verifies a signed manifest (a DSSE envelope made by Seal) against
// pub and returns the manifest.
func Open(envelope []byte, pub sign.PublicKey) (*Manifest, error) {
	payload, err := sign.Open(envelope, pub, PayloadType)
	if err != nil {
		return nil, err
	}
	return Parse(payload)
}

// Accepted returns the devcontainer members Ingest reads.
func Accepted() []string { return slices.Clone(accepted) }

// Refused returns the devcontainer members Ingest refuses, sorted.
func Refused() []string {
	names := make([]string, 0, len(refused))
	for n := range refused {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
