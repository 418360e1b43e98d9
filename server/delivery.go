package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sync"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/broker"
	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/gitremote"
	"github.com/cordon-dev/cordon/grant"
)

// SecretUse delivers one of the tenant's secrets (a broker reference)
// into a task's run, in exactly one way:
//
//   - Env: by name into the sandbox's environment. The manifest's grant
//     set must list the variable (grants "env"); the value is handed only
//     to commands whose grant set names it.
//   - Header and URL: injected by the egress proxy as that header
//     (Prefix + value) into every plain HTTP request to exactly URL's
//     host and port, which the grant set must allow; the sandbox never
//     sees the value. URL is http://HOST[:PORT]: an https:// destination
//     is refused, because injecting into TLS needs a per-run certificate
//     authority that is not built (CLAIMS.md, Known limitations).
type SecretUse struct {
	Ref    string `json:"ref"`
	Env    string `json:"env,omitempty"`
	Header string `json:"header,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	URL    string `json:"url,omitempty"`
}

// RepoConfig is a task's git repository. Git runs inside the sandbox
// (the task's commands clone, fetch and push), never on the host; the
// task's grant set must reach exactly the repository's host and port and
// nothing else (gitremote.CheckGrants). Token, a broker reference, is
// injected by the egress proxy as HTTP Basic authorization (User and the
// token) into requests to that host and port only. The URL is handed to
// commands as CORDON_GIT_URL when the grant set lists that variable.
type RepoConfig struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
	User  string `json:"user,omitempty"` // default "x-access-token"
}

// GitURLEnv is the variable that carries a task's repository URL.
const GitURLEnv = "CORDON_GIT_URL"

// GitPushRefEnv is the variable that carries the run's review ref, the
// only ref a run may push to (ReviewRef).
const GitPushRefEnv = "CORDON_GIT_PUSH_REF"

// ReviewRef is the ref a run may push to in its task's repository, with
// the refs below it: a branch in a per-run review namespace. The egress
// proxy refuses a push to any other ref (egress.Repository); promoting
// an accepted review ref to a protected branch is the operator's (CI or
// a maintainer), not the platform's.
func ReviewRef(runID string) string { return "refs/heads/cordon/review/" + runID }

const maxSecretUses = 32

var basicUserRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) })

// checkDelivery checks a task's secrets and repository against its
// manifest's grant set. It asks no backend: references are checked by
// shape (broker.CheckRef), and resolved only when the run executes.
func checkDelivery(tc TaskConfig, m *manifest.Manifest) error {
	if len(tc.Secrets) > maxSecretUses {
		return fmt.Errorf("secrets: %d entries, at most %d", len(tc.Secrets), maxSecretUses)
	}
	e := grant.New(m.Grants)
	envs := map[string]bool{}
	dests := map[string]bool{}
	// byEnv and injected are the secrets (canonical references) delivered
	// by env and injected: a secret is delivered one way only, so that an
	// injected credential (the repository's token above all) never
	// enters the sandbox as a variable too.
	byEnv, injected := map[string]string{}, map[string]string{}
	for i, u := range tc.Secrets {
		at := fmt.Sprintf("secrets[%d]", i)
		canon, err := broker.CanonicalRef(u.Ref)
		if err != nil {
			return fmt.Errorf("%s.ref: %w", at, err)
		}
		if u.Env != "" {
			if _, ok := byEnv[canon]; !ok {
				byEnv[canon] = at
			}
		} else if _, ok := injected[canon]; !ok {
			injected[canon] = at
		}
		if a, b := byEnv[canon], injected[canon]; a != "" && b != "" {
			return fmt.Errorf("%s: secret %q is both delivered by env (%s) and injected (%s); an injected secret never enters the sandbox, so deliver it one way", at, u.Ref, a, b)
		}
		switch {
		case u.Env != "" && (u.Header != "" || u.URL != "" || u.Prefix != ""):
			return fmt.Errorf("%s: deliver a secret either by env or by header and url, not both", at)
		case u.Env != "":
			if !slices.Contains(m.Grants.Env, u.Env) {
				return fmt.Errorf("%s.env: the manifest's grant set does not list %q in \"env\"; a secret enters the sandbox's environment only under a granted name", at, u.Env)
			}
			if u.Env == GitURLEnv || u.Env == GitPushRefEnv || envs[u.Env] {
				return fmt.Errorf("%s.env: %q is delivered twice", at, u.Env)
			}
			envs[u.Env] = true
		case u.Header != "" && u.URL != "":
			in, err := injection(u.URL, u.Header, u.Prefix, e)
			if err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			k := fmt.Sprintf("%s|%d|%s", in.Host, in.Port, in.Header)
			if dests[k] {
				return fmt.Errorf("%s: %s for %s is injected twice", at, in.Header, u.URL)
			}
			dests[k] = true
		default:
			return fmt.Errorf("%s: say how the secret is delivered: \"env\" (a granted variable), or \"header\" and \"url\" (injected by the egress proxy)", at)
		}
	}
	if tc.Repository == nil {
		return nil
	}
	rc := tc.Repository
	r, err := gitremote.Parse(rc.URL)
	if err != nil {
		return fmt.Errorf("repository.url: %w", err)
	}
	if err := r.CheckGrants(m.Grants); err != nil {
		return fmt.Errorf("repository: %w", err)
	}
	if r.Scheme != "http" && len(envs) > 0 {
		// The grant set reaches only the repository, so a secret in the
		// environment could only serve to authenticate there: over TLS
		// the proxy cannot confine that push to the run's review ref.
		return fmt.Errorf("repository: a task with an https:// repository cannot receive a secret by env: the egress proxy cannot read a push over TLS to confine it to the run's review ref, and the secret could authorize one; use an http:// repository (its token is injected and its pushes confined) or no env secret")
	}
	if rc.Token == "" {
		if rc.User != "" {
			return fmt.Errorf("repository.user: given without a token")
		}
		return nil
	}
	canon, err := broker.CanonicalRef(rc.Token)
	if err != nil {
		return fmt.Errorf("repository.token: %w", err)
	}
	if at := byEnv[canon]; at != "" {
		return fmt.Errorf("repository.token: secret %q is the repository's token, and %s delivers it by env: the repository's token is only ever injected by the egress proxy, never put in the sandbox", rc.Token, at)
	}
	if rc.User != "" && !basicUserRE().MatchString(rc.User) {
		return fmt.Errorf("repository.user %q: 1 to 64 of A-Z a-z 0-9 . _ -", rc.User)
	}
	if r.Scheme != "http" {
		return fmt.Errorf("repository: a token for an https:// repository would have to be injected into TLS, which needs a per-run certificate authority that is not built; use an http:// repository (on a network you trust) or no token")
	}
	if dests[fmt.Sprintf("%s|%d|Authorization", r.HostString(), r.Port)] {
		return fmt.Errorf("repository.token: secrets inject Authorization for the repository's host already")
	}
	return nil
}

// injection checks one header delivery and returns its injection (with
// no value).
func injection(url, header, prefix string, e *grant.Enforcer) (egress.Injection, error) {
	o, err := gitremote.ParseOrigin(url)
	if err != nil {
		return egress.Injection{}, fmt.Errorf("url: %w", err)
	}
	if o.Scheme != "http" {
		return egress.Injection{}, fmt.Errorf("url %q: injecting a header into HTTPS needs a per-run certificate authority, which is not built; a secret for an https:// destination cannot be injected (deliver it by env, or use http://)", url)
	}
	in := egress.Injection{Host: o.HostString(), Port: o.Port, Header: header, Value: []byte(prefix + "x")}
	if err := egress.CheckInjection(in); err != nil {
		return egress.Injection{}, err
	}
	if len(prefix) > 64 {
		return egress.Injection{}, fmt.Errorf("prefix: at most 64 bytes")
	}
	if d := e.Decide(grant.Query{Kind: grant.KindEgress, Host: in.Host, Proto: "tcp", Port: in.Port}); !d.Allow {
		return egress.Injection{}, fmt.Errorf("url %q: the manifest's grant set does not allow egress to it (%s); a secret is injected only for a granted destination", url, d.Reason)
	}
	in.Value = nil
	return in, nil
}

// delivery is what a run gets from the broker: variables for the
// sandbox's environment and injections for the egress proxy. Destroy
// wipes every resolved value; the executor calls it when the run ends.
type delivery struct {
	Env     map[string]string
	Inject  []egress.Injection
	Repo    *egress.Repository // the repository's confinement; nil without an http:// repository
	secrets []*broker.Secret
	bufs    [][]byte
}

func (d *delivery) Destroy() {
	for _, s := range d.secrets {
		s.Destroy()
	}
	for _, b := range d.bufs {
		clear(b)
	}
	d.secrets, d.bufs = nil, nil
	clear(d.Env)
}

// errNoBroker is returned when a task names secrets and the server has
// no credential broker (no master key).
var errNoBroker = errors.New("the task names secrets, and this server has no credential broker: start cordon serve (or cordon worker) with --master-key-file")

// resolveDelivery resolves a task's secrets for its tenant, at execution
// time, on the host that runs it. tenant is the run's tenant as the
// store recorded it, never anything in the configuration. Log receives
// one line per delivery, naming the reference, never the value.
func resolveDelivery(ctx context.Context, b *broker.Broker, tenant, runID string, tc TaskConfig, m *manifest.Manifest, log io.Writer) (*delivery, error) {
	if err := checkDelivery(tc, m); err != nil { // checked at every write; again here
		return nil, err
	}
	d := &delivery{Env: map[string]string{}}
	if tc.Repository != nil {
		d.Env[GitURLEnv] = tc.Repository.URL
		d.Env[GitPushRefEnv] = ReviewRef(runID)
		r, _ := gitremote.Parse(tc.Repository.URL) // checked above
		if r.Scheme == "http" {
			// The proxy reads plain HTTP only: an https:// repository's
			// requests pass through a tunnel it cannot confine (CLAIMS.md,
			// Known limitations).
			d.Repo = &egress.Repository{Host: r.HostString(), Port: r.Port, Path: r.Path, PushRef: ReviewRef(runID)}
			if err := egress.CheckRepository(*d.Repo); err != nil {
				return nil, fmt.Errorf("repository: %w", err)
			}
		}
	}
	if len(tc.Secrets) == 0 && (tc.Repository == nil || tc.Repository.Token == "") {
		return d, nil
	}
	if b == nil {
		return nil, errNoBroker
	}
	ok := false
	defer func() {
		if !ok {
			d.Destroy()
		}
	}()
	resolve := func(ref string) (*broker.Secret, error) {
		s, err := b.Resolve(ctx, tenant, ref)
		switch {
		case errors.Is(err, broker.ErrRef), errors.Is(err, broker.ErrForbidden), errors.Is(err, broker.ErrNotFound):
			return nil, fmt.Errorf("secret %q: %w", ref, err)
		case err != nil:
			// An I/O or decryption failure may name the store's paths:
			// the detail goes to the run's log, not to the run's view.
			fmt.Fprintf(log, "secret %q: %v\n", ref, err)
			return nil, fmt.Errorf("secret %q could not be resolved (the run's log on its worker says why)", ref)
		}
		d.secrets = append(d.secrets, s)
		return s, nil
	}
	e := grant.New(m.Grants)
	for _, u := range tc.Secrets {
		s, err := resolve(u.Ref)
		if err != nil {
			return nil, err
		}
		if u.Env != "" {
			d.Env[u.Env] = string(s.Bytes())
			fmt.Fprintf(log, "secret %q delivered as the variable %s\n", u.Ref, u.Env)
			continue
		}
		in, err := injection(u.URL, u.Header, u.Prefix, e)
		if err != nil {
			return nil, err
		}
		v := append([]byte(u.Prefix), s.Bytes()...)
		d.bufs = append(d.bufs, v)
		in.Value, in.Label = v, fmt.Sprintf("%s from secret %q", in.Header, u.Ref)
		if err := egress.CheckInjection(in); err != nil {
			return nil, fmt.Errorf("secret %q: %w", u.Ref, err)
		}
		d.Inject = append(d.Inject, in)
		fmt.Fprintf(log, "secret %q injected as %s for %s:%d\n", u.Ref, in.Header, in.Host, in.Port)
	}
	if rc := tc.Repository; rc != nil && rc.Token != "" {
		s, err := resolve(rc.Token)
		if err != nil {
			return nil, err
		}
		r, _ := gitremote.Parse(rc.URL) // checked above
		user := rc.User
		if user == "" {
			user = "x-access-token"
		}
		raw := append([]byte(user+":"), s.Bytes()...)
		v := make([]byte, len("Basic ")+base64.StdEncoding.EncodedLen(len(raw)))
		copy(v, "Basic ")
		base64.StdEncoding.Encode(v[len("Basic "):], raw)
		clear(raw)
		d.bufs = append(d.bufs, v)
		in := egress.Injection{Host: r.HostString(), Port: r.Port, Path: r.Path, Header: "Authorization", Value: v,
			Label: fmt.Sprintf("Authorization from secret %q (the repository's token)", rc.Token)}
		if err := egress.CheckInjection(in); err != nil {
			return nil, fmt.Errorf("repository token %q: %w", rc.Token, err)
		}
		d.Inject = append(d.Inject, in)
		fmt.Fprintf(log, "secret %q injected as the repository's Authorization for %s:%d\n", rc.Token, in.Host, in.Port)
	}
	ok = true
	return d, nil
}

// secretRefs are the references a task resolves at execution, in order.
func (tc TaskConfig) secretRefs() []string {
	var refs []string
	for _, u := range tc.Secrets {
		refs = append(refs, u.Ref)
	}
	if rc := tc.Repository; rc != nil && rc.Token != "" {
		refs = append(refs, rc.Token)
	}
	return refs
}
