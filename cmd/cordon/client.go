package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// The client verbs talk to a control plane (`cordon serve`). The server
// is --server or $CORDON_SERVER; the key is read from the file
// --key-file or $CORDON_SERVER_KEY_FILE names, or from $CORDON_SERVER_KEY
// itself — never from a flag value that lands in shell history.
const (
	clientConfigEnv = "CORDON_CLIENT_CONFIG"
	serverEnv       = "CORDON_SERVER"
	serverKeyEnv    = "CORDON_SERVER_KEY"
	serverKeyFile   = "CORDON_SERVER_KEY_FILE"
	clientEnvNotes  = `environment:
  CORDON_SERVER           the server's URL (--server wins)
  CORDON_SERVER_KEY       the key itself (a cdn_… key, or the admin key)
  CORDON_SERVER_KEY_FILE  the path of a file holding the key (--key-file wins over both)
  CORDON_CLIENT_CONFIG    a JSON file {"server": URL, "key_file": PATH} used for
                          what neither flags nor the variables above set
                          (default: the user config directory's cordon/client.json)`
)

type client struct {
	base, key string
	asJSON    bool
	hc        *http.Client
}

type clientFlags struct {
	server, keyFile      *string
	asJSON, insecureHTTP *bool
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		server:  fs.String("server", "", "the control plane's URL (default: $"+serverEnv+", else http://"+defaultListen+")"),
		keyFile: fs.String("key-file", "", "the file holding the key (default: $"+serverKeyFile+", else $"+serverKeyEnv+")"),
		asJSON:  fs.Bool("json", false, "print the server's answer as one JSON object for machines"),
		insecureHTTP: fs.Bool("insecure-http", false,
			"send the key over plain http to a host that is not loopback (it can be read on the way: use https)"),
	}
}

// clientConfig is the client's config file.
type clientConfig struct {
	Server  string `json:"server"`
	KeyFile string `json:"key_file"`
}

// loadClientConfig reads the config file: $CORDON_CLIENT_CONFIG, else
// cordon/client.json in the user's config directory; a missing default
// file is no config, a missing named one an error.
func loadClientConfig() (clientConfig, error) {
	var c clientConfig
	name, named := os.LookupEnv(clientConfigEnv)
	if !named {
		dir, err := os.UserConfigDir()
		if err != nil {
			return c, nil
		}
		name = filepath.Join(dir, "cordon", "client.json")
	}
	b, err := readLimited(name, 64<<10)
	if errors.Is(err, fs.ErrNotExist) && !named {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("client config: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, withHint(fmt.Errorf("client config %s: %w", name, err), `it holds {"server": "http://…", "key_file": "/path/to/key"}`)
	}
	return c, nil
}

func (f clientFlags) client() (*client, error) {
	cfg, err := loadClientConfig()
	if err != nil {
		return nil, err
	}
	base := *f.server
	if base == "" {
		base = os.Getenv(serverEnv)
	}
	if base == "" {
		base = cfg.Server
	}
	if base == "" {
		base = "http://" + defaultListen
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &usageError{msg: fmt.Sprintf("--server %q: want http://HOST:PORT or https://…", base)}
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) && !*f.insecureHTTP {
		return nil, &usageError{msg: fmt.Sprintf("server %q: plain http to a host that is not loopback would send your key in the clear", base),
			hint: "use https://… (cordon serve --tls-cert/--tls-key), or pass --insecure-http if the network between you is trusted"}
	}
	key := ""
	file := *f.keyFile
	if file == "" {
		file = os.Getenv(serverKeyFile)
	}
	if file == "" && os.Getenv(serverKeyEnv) == "" {
		file = cfg.KeyFile
	}
	switch {
	case file != "":
		b, err := readLimited(file, 4096)
		if err != nil {
			return nil, fmt.Errorf("key file: %w", err)
		}
		key = strings.TrimSpace(string(b))
	default:
		key = strings.TrimSpace(os.Getenv(serverKeyEnv))
	}
	hc := &http.Client{Timeout: 5 * time.Minute, CheckRedirect: refuseRedirect}
	return &client{base: strings.TrimRight(base, "/"), key: key, asJSON: *f.asJSON, hc: hc}, nil
}

// loopbackHost reports whether a URL's host is this machine's loopback:
// "localhost" or a loopback address. Only there may a key go over plain
// http without --insecure-http.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// refuseRedirect stops the client following a redirect: the server's API
// never redirects, and following one could carry the key to another
// scheme or host (https to http on the same host keeps the header).
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("the server redirected to %s: cordon does not follow redirects with your key; check --server", req.URL.Redacted())
}

// serverError is the server's refusal, with its message and hint.
type serverError struct {
	code      int
	msg, hint string
}

func (e *serverError) Error() string { return fmt.Sprintf("server: %d %s", e.code, e.msg) }

// call sends a request and returns the answer's body; a status of 400 or
// more is a *serverError (with the server's hint).
func (c *client) call(method, path string, body []byte, hdr ...string) ([]byte, error) {
	if c.key == "" && !strings.HasPrefix(path, "/healthz") {
		return nil, withHint(errors.New("no key"), "set $"+serverKeyFile+" to a file holding your key (or $"+serverKeyEnv+" to the key), or pass --key-file")
	}
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, withHint(err, "is 'cordon serve' running there? check --server or $"+serverEnv)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 400 {
		var m struct{ Error, Hint string }
		json.Unmarshal(b, &m)
		if m.Error == "" {
			m.Error = strings.TrimSpace(string(b))
		}
		var err error = &serverError{res.StatusCode, m.Error, m.Hint}
		return nil, withHint(err, m.Hint)
	}
	return b, nil
}

// print writes a JSON answer: canonical with --json, else the lines
// human gives (or the indented JSON when human is nil).
func (c *client) print(e *env, b []byte, human func(v any) string) error {
	if c.asJSON {
		j, err := canon.JCS(b)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", j)
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("server answer: %w", err)
	}
	if human != nil {
		_, err := io.WriteString(e.stdout, human(v))
		return err
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	_, err := fmt.Fprintf(e.stdout, "%s\n", out)
	return err
}

func str(v any, k string) string {
	m, _ := v.(map[string]any)
	s, _ := m[k].(string)
	return s
}

// clientVerb parses a client verb's flags and positional arguments.
func clientVerb(name string, args []string, want []string, extra func(fs *flag.FlagSet)) (*client, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cf := addClientFlags(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(pos) != len(want) {
		return nil, nil, &usageError{msg: fmt.Sprintf("%s: want %s, got %d arguments", name, strings.Join(want, " "), len(pos)),
			hint: fmt.Sprintf("usage: cordon %s [flags] %s", name, strings.Join(want, " "))}
	}
	c, err := cf.client()
	return c, pos, err
}

func runLine(v any) string {
	s := fmt.Sprintf("%s %s task %s", str(v, "id"), str(v, "state"), str(v, "task"))
	if r := str(v, "reason"); r != "" {
		s += " (" + r + ")"
	}
	return s + "\n"
}

func runTenant(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "tenant: missing subcommand", hint: "use 'cordon tenant create' or 'cordon tenant list'"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "create":
		var ceiling *string
		c, pos, err := clientVerb("tenant create", args, []string{"NAME"}, func(fs *flag.FlagSet) {
			ceiling = fs.String("ceiling", "", "the grant set (JSON file) every project of the tenant must stay within")
		})
		if err != nil {
			return err
		}
		if *ceiling == "" {
			return &usageError{msg: "tenant create: --ceiling GRANTS.json is required", hint: "'cordon grant default > ceiling.json' is a start"}
		}
		g, err := readLimited(*ceiling, 1<<20)
		if err != nil {
			return fmt.Errorf("tenant create: --ceiling: %w", err)
		}
		body, _ := json.Marshal(map[string]any{"name": pos[0], "ceiling": json.RawMessage(g)})
		b, err := c.call("POST", "/v1/tenants", body)
		if err != nil {
			return fmt.Errorf("tenant create: %w", err)
		}
		return c.print(e, b, func(v any) string { return fmt.Sprintf("tenant %s created: %s\n", str(v, "name"), str(v, "id")) })
	case "list":
		c, _, err := clientVerb("tenant list", args, nil, nil)
		if err != nil {
			return err
		}
		b, err := c.call("GET", "/v1/tenants", nil)
		if err != nil {
			return fmt.Errorf("tenant list: %w", err)
		}
		return c.print(e, b, func(v any) string {
			var s strings.Builder
			for _, t := range v.([]any) {
				fmt.Fprintf(&s, "%s %s\n", str(t, "id"), str(t, "name"))
			}
			return s.String()
		})
	}
	return &usageError{msg: fmt.Sprintf("tenant: unknown subcommand %q", args[0]), hint: "use create or list"}
}

func runUser(e *env, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return &usageError{msg: "user: want 'cordon user create --tenant ID --role member|approver NAME'"}
	}
	var tenant, role *string
	c, pos, err := clientVerb("user create", args[1:], []string{"NAME"}, func(fs *flag.FlagSet) {
		tenant = fs.String("tenant", "", "the tenant's id")
		role = fs.String("role", "member", "member or approver")
	})
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"name": pos[0], "role": *role})
	b, err := c.call("POST", "/v1/tenants/"+url.PathEscape(*tenant)+"/users", body)
	if err != nil {
		return fmt.Errorf("user create: %w", err)
	}
	return c.print(e, b, func(v any) string {
		return fmt.Sprintf("user %s (%s): %s\n", str(v, "name"), str(v, "role"), str(v, "id"))
	})
}

func runKey(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "key: missing subcommand", hint: "use create, list, revoke or rotate"}
	}
	var tenant, user *string
	tflag := func(fs *flag.FlagSet) { tenant = fs.String("tenant", "", "the tenant's id") }
	keyPrint := func(v any) string {
		return fmt.Sprintf("key %s\n%s\n(shown once: store it in a file and point $%s at it)\n", str(v, "id"), str(v, "secret"), serverKeyFile)
	}
	switch sub, args := args[0], args[1:]; sub {
	case "create":
		c, _, err := clientVerb("key create", args, nil, func(fs *flag.FlagSet) {
			tflag(fs)
			user = fs.String("user", "", "the user the key is for (default: a bare tenant key)")
		})
		if err != nil {
			return err
		}
		body := []byte{}
		if *user != "" {
			body, _ = json.Marshal(map[string]string{"user": *user})
		}
		b, err := c.call("POST", "/v1/tenants/"+url.PathEscape(*tenant)+"/keys", body)
		if err != nil {
			return fmt.Errorf("key create: %w", err)
		}
		return c.print(e, b, keyPrint)
	case "list":
		c, _, err := clientVerb("key list", args, nil, tflag)
		if err != nil {
			return err
		}
		b, err := c.call("GET", "/v1/tenants/"+url.PathEscape(*tenant)+"/keys", nil)
		if err != nil {
			return fmt.Errorf("key list: %w", err)
		}
		return c.print(e, b, func(v any) string {
			var s strings.Builder
			for _, k := range v.([]any) {
				state := "active"
				if str(k, "revoked_at") != "" {
					state = "revoked " + str(k, "revoked_at")
				}
				fmt.Fprintf(&s, "%s %s… user=%s %s\n", str(k, "id"), str(k, "hint"), str(k, "user"), state)
			}
			return s.String()
		})
	case "revoke", "rotate":
		c, pos, err := clientVerb("key "+sub, args, []string{"KEY-ID"}, tflag)
		if err != nil {
			return err
		}
		path := "/v1/tenants/" + url.PathEscape(*tenant) + "/keys/" + url.PathEscape(pos[0])
		method := "DELETE"
		if sub == "rotate" {
			method, path = "POST", path+"/rotate"
		}
		b, err := c.call(method, path, nil)
		if err != nil {
			return fmt.Errorf("key %s: %w", sub, err)
		}
		if sub == "rotate" {
			return c.print(e, b, keyPrint)
		}
		return c.print(e, b, func(v any) string { return "key " + str(v, "key") + " revoked\n" })
	}
	return &usageError{msg: fmt.Sprintf("key: unknown subcommand %q", args[0]), hint: "use create, list, revoke or rotate"}
}

func runProject(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "project: missing subcommand", hint: "use put, get or list"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "put":
		c, pos, err := clientVerb("project put", args, []string{"NAME", "PROJECT.json"}, nil)
		if err != nil {
			return err
		}
		cfg, err := readLimited(pos[1], 8<<20)
		if err != nil {
			return fmt.Errorf("project put: %w", err)
		}
		b, err := c.call("PUT", "/v1/projects/"+url.PathEscape(pos[0]), cfg)
		if err != nil {
			return fmt.Errorf("project put: %w", err)
		}
		return c.print(e, b, func(v any) string { return fmt.Sprintf("project %s saved (%s)\n", str(v, "name"), str(v, "id")) })
	case "get":
		c, pos, err := clientVerb("project get", args, []string{"NAME"}, nil)
		if err != nil {
			return err
		}
		b, err := c.call("GET", "/v1/projects/"+url.PathEscape(pos[0]), nil)
		if err != nil {
			return fmt.Errorf("project get: %w", err)
		}
		return c.print(e, b, nil)
	case "list":
		c, _, err := clientVerb("project list", args, nil, nil)
		if err != nil {
			return err
		}
		b, err := c.call("GET", "/v1/projects", nil)
		if err != nil {
			return fmt.Errorf("project list: %w", err)
		}
		return c.print(e, b, func(v any) string {
			var s strings.Builder
			for _, p := range v.([]any) {
				fmt.Fprintf(&s, "%s %s\n", str(p, "name"), str(p, "id"))
			}
			return s.String()
		})
	}
	return &usageError{msg: fmt.Sprintf("project: unknown subcommand %q", args[0]), hint: "use put, get or list"}
}

func runSubmit(e *env, args []string) error {
	var plan *bool
	c, pos, err := clientVerb("submit", args, []string{"PROJECT", "TASK"}, func(fs *flag.FlagSet) {
		plan = fs.Bool("plan", false, "show what the run would execute, and submit nothing")
	})
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"task": pos[1]})
	path := "/v1/projects/" + url.PathEscape(pos[0]) + "/runs"
	if *plan {
		path = "/v1/projects/" + url.PathEscape(pos[0]) + "/plan"
	}
	b, err := c.call("POST", path, body)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	if *plan {
		return c.print(e, b, nil)
	}
	return c.print(e, b, func(v any) string {
		return runLine(v) + "it runs once an approver other than you runs 'cordon approve " + str(v, "id") + "'\n"
	})
}

// runDecision is approve, reject and cancel: a POST on a run.
func runDecision(name string) func(e *env, args []string) error {
	return func(e *env, args []string) error {
		c, pos, err := clientVerb(name, args, []string{"RUN"}, nil)
		if err != nil {
			return err
		}
		b, err := c.call("POST", "/v1/runs/"+url.PathEscape(pos[0])+"/"+name, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return c.print(e, b, runLine)
	}
}

func runRuns(e *env, args []string) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	cf := addClientFlags(fs)
	limit := fs.Int("limit", 100, "at most this many runs, newest first")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	id, err := oneArg(pos)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if id != "" {
		b, err := c.call("GET", "/v1/runs/"+url.PathEscape(id), nil)
		if err != nil {
			return fmt.Errorf("runs: %w", err)
		}
		return c.print(e, b, nil)
	}
	b, err := c.call("GET", fmt.Sprintf("/v1/runs?limit=%d", *limit), nil)
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	return c.print(e, b, func(v any) string {
		var s strings.Builder
		for _, r := range v.([]any) {
			s.WriteString(runLine(r))
		}
		return s.String()
	})
}

func runLogs(e *env, args []string) error {
	var out *string
	c, pos, err := clientVerb("logs", args, []string{"RUN"}, func(fs *flag.FlagSet) {
		out = fs.String("evidence", "", "also write the run's evidence (a tar.gz of its workspace and record) to this new file")
	})
	if err != nil {
		return err
	}
	b, err := c.call("GET", "/v1/runs/"+url.PathEscape(pos[0])+"/journal", nil)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if _, err := e.stdout.Write(b); err != nil {
		return err
	}
	if *out != "" {
		ev, err := c.call("GET", "/v1/runs/"+url.PathEscape(pos[0])+"/evidence", nil)
		if err != nil {
			return fmt.Errorf("logs: evidence: %w", err)
		}
		if err := writeNew(*out, ev); err != nil {
			return fmt.Errorf("logs: evidence: %w", err)
		}
		fmt.Fprintf(e.stderr, "cordon: evidence in %s: extract it and run 'cordon verify run --pubkey steward.pub DIR/%s' (GET /v1/steward.pub)\n", *out, pos[0])
	}
	return nil
}
