package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
)

// Project configuration limits.
const (
	maxTasks      = 64
	maxFiles      = 256
	maxFilesBytes = 4 << 20
)

// ProjectConfig is a project: declarative configuration only. Each task
// is an agent manifest (docs/SPEC.md §5) and the files its workspace
// starts with (the inputs, and the replay script).
type ProjectConfig struct {
	Tasks map[string]TaskConfig `json:"tasks"`
}

// TaskConfig is one task of a project.
type TaskConfig struct {
	Manifest json.RawMessage   `json:"manifest"`
	Files    map[string]string `json:"files"`
	// Secrets and Repository deliver the tenant's credentials into the
	// run and name its git repository (delivery.go).
	Secrets    []SecretUse `json:"secrets,omitempty"`
	Repository *RepoConfig `json:"repository,omitempty"`
}

// task is a validated task.
type task struct {
	Manifest *manifest.Manifest
	Files    map[string]string
	Secrets  bool // the task names secrets (its own or its repository's token)
}

// decodeStrict decodes one JSON value into v, refusing unknown members
// and trailing data.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

// parseProject validates a project against the tenant's ceiling and the
// operator's maximum wall time. Everything in it is hostile input: every
// rule is a check, and a rule broken is an error naming the member.
func parseProject(b []byte, ceiling *grant.Set, maxWall time.Duration) (map[string]*task, error) {
	// canon's strict parser first: it refuses a duplicate member (which
	// encoding/json would resolve silently, last one wins), so that what
	// a reviewer's JSON tool shows is what is stored.
	if _, err := canon.Parse(b); err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	var pc ProjectConfig
	if err := decodeStrict(b, &pc); err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	if len(pc.Tasks) == 0 {
		return nil, fmt.Errorf("project: tasks: at least one task is needed")
	}
	if len(pc.Tasks) > maxTasks {
		return nil, fmt.Errorf("project: tasks: %d tasks, at most %d", len(pc.Tasks), maxTasks)
	}
	out := map[string]*task{}
	names := make([]string, 0, len(pc.Tasks))
	for n := range pc.Tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if !validName(name) {
			return nil, fmt.Errorf("project: tasks: name %q: use 1 to 64 of a-z, 0-9, '-' and '_'", name)
		}
		t, err := parseTask(pc.Tasks[name], ceiling, maxWall)
		if err != nil {
			return nil, fmt.Errorf("project: tasks.%s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

func parseTask(tc TaskConfig, ceiling *grant.Set, maxWall time.Duration) (*task, error) {
	if len(tc.Manifest) == 0 {
		return nil, fmt.Errorf("manifest: missing")
	}
	m, err := manifest.Parse(tc.Manifest)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Provider != "replay" {
		// A live model needs its credential handed to the run, which is
		// the credential broker's job (not built yet): refuse rather
		// than hand over the operator's own key.
		return nil, fmt.Errorf("manifest: model.provider %q: the control plane runs only replay manifests until the credential broker exists", m.Provider)
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(tc.Manifest, &top) // parsed above: an object
	if _, pinned := top["env"]; pinned || !m.Env.IsZero() {
		// (the member, not only the parsed ID: an all-zero digest parses
		// to the zero ID, which means "no pin")
		// cordon run refuses a pinned manifest without --env/--image; the
		// control plane supplies no environment yet, so running it on the
		// host's runtime would ignore the pin.
		return nil, fmt.Errorf("manifest: env %s: the manifest is pinned to an environment, and the control plane cannot supply environments yet; remove \"env\" or run it with cordon run --env --image", m.Env)
	}
	if err := grant.Covers(ceiling, m.Grants); err != nil {
		return nil, fmt.Errorf("manifest: grants are not covered by the tenant's ceiling: %w", err)
	}
	if wall := time.Duration(m.Budgets.WallMS) * time.Millisecond; wall > maxWall {
		return nil, fmt.Errorf("manifest: budgets.wall_ms %d exceeds the operator's maximum of %s", m.Budgets.WallMS, maxWall)
	}
	if len(tc.Files) > maxFiles {
		return nil, fmt.Errorf("files: %d files, at most %d", len(tc.Files), maxFiles)
	}
	total := 0
	for p, c := range tc.Files {
		if err := checkPath(p); err != nil {
			return nil, fmt.Errorf("files: %q: %w", p, err)
		}
		total += len(c)
	}
	if total > maxFilesBytes {
		return nil, fmt.Errorf("files: %d bytes, at most %d", total, maxFilesBytes)
	}
	if _, ok := tc.Files[m.Replay]; !ok {
		return nil, fmt.Errorf("files: the manifest's replay script %q is not among them", m.Replay)
	}
	if err := checkDelivery(tc, m); err != nil {
		return nil, err
	}
	return &task{Manifest: m, Files: tc.Files, Secrets: len(tc.Secrets) > 0 || tc.Repository != nil && tc.Repository.Token != ""}, nil
}

// checkPath admits a clean relative path outside the run record and
// memory: the manifest's own rules (manifest.CheckPath: canonical,
// relative, NFC, no control characters, and .cordon refused whatever its
// case or trailing dots and spaces), and mem refused the same way.
func checkPath(p string) error {
	if len(p) > 255 {
		return fmt.Errorf("a path of 1 to 255 bytes")
	}
	if err := manifest.CheckPath(p); err != nil {
		return err
	}
	first, _, _ := strings.Cut(p, "/")
	if strings.EqualFold(strings.TrimRight(first, ". "), "mem") {
		return fmt.Errorf("inside the run's memory (mem)")
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// executionMembers are the request members that would configure
// execution: a run body naming one is refused with a message saying so,
// because caller input is not configuration.
var executionMembers = map[string]bool{
	"command": true, "commands": true, "argv": true, "args": true, "cmd": true, "script": true, "exec": true,
	"manifest": true, "grants": true, "grant": true, "model": true, "provider": true, "model_endpoint": true,
	"endpoint": true, "base_url": true, "env": true, "environment": true, "image": true, "files": true,
	"verify": true, "budgets": true, "limits": true, "tier": true, "workspace": true, "tenant": true,
}

// RunRequest is the body of POST /v1/projects/{project}/runs: which of
// the project's tasks to run, and nothing else.
type RunRequest struct {
	Task string `json:"task"`
}

// parseRunRequest decodes a run request strictly: a member that
// configures execution, or any unknown member, is an error naming it.
func parseRunRequest(b []byte) (*RunRequest, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %v", err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if executionMembers[strings.ToLower(k)] {
			return nil, fmt.Errorf("member %q configures execution; a run request names only a task of the project, whose configuration is the project's (PUT /v1/projects/{project})", k)
		}
	}
	var rr RunRequest
	if err := decodeStrict(b, &rr); err != nil {
		return nil, fmt.Errorf("%v (a run request has only the member \"task\")", err)
	}
	if !validName(rr.Task) {
		return nil, fmt.Errorf("task %q: name one of the project's tasks", rr.Task)
	}
	return &rr, nil
}
