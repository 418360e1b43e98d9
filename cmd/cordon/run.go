package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/agent/memory"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/internal/flock"
	"github.com/cordon-dev/cordon/sandbox"
)

// auditKeyEnv holds a PEM private key that signs a run's result when no
// --key is given.
const auditKeyEnv = "CORDON_AUDIT_PRIVATE_KEY"

// maxManifestBytes caps a manifest file.
const maxManifestBytes = 16 << 20

const runUsage = "usage: cordon run [--workspace DIR] [--apply] [--key FILE] [--key-env NAME] [--state DIR] [--tenant T] [--no-git] [--json] MANIFEST.json\n" +
	"       cordon run --resume --manifest FILE [--apply] [--key FILE] [--key-env NAME] [--state DIR] [--env FILE --image REF] [--issuer PEM] [--tenant T] [--json] WORKSPACE"

// ExitParked is the exit status of a run that parked: it is not over,
// and 'cordon run --resume WORKSPACE' continues it (EX_TEMPFAIL).
const ExitParked = 75

func runRun(e *env, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	workspace := fs.String("workspace", "", "the workspace the agent works in (default: the manifest's directory)")
	apply := fs.Bool("apply", false, "apply writes and commands (default: a dry run that records them as planned)")
	keyFile := fs.String("key", "", "sign the result and seal a receipt and attestation with this steward key (default: $"+auditKeyEnv+", a PEM value, else $CORDON_KEY or $CORDON_KEY_FILE)")
	keyEnv := fs.String("key-env", "", "the environment variable holding the provider's API key (default: ANTHROPIC_API_KEY for anthropic, OPENAI_API_KEY for openai when set)")
	stateDir := fs.String("state", "", "the sandbox's state directory (default: $CORDON_STATE, /var/lib/cordon as root, else $XDG_STATE_HOME/cordon or ~/.local/state/cordon)")
	noGit := fs.Bool("no-git", false, "keep memory in plain files even when git is installed")
	tenant := fs.String("tenant", "", "the tenant commands run as when the manifest's grant set is multi-tenant (S3)")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object for machines")
	envFile := fs.String("env", "", "run every command in this environment manifest (its address must be the manifest's env member, when it has one); needs --image")
	envPub := fs.String("env-pubkey", "", "the public key (PEM) a signed --env manifest must verify under")
	imageRef := fs.String("image", "", "run every command on this OCI image's runtime (an OCI layout DIR or DIR@sha256:…, or a docker save tarball)")
	issuerFile := fs.String("issuer", "", "the public key (PEM) of the run's issuer, who alone may amend it with 'cordon amend' (default: --key's)")
	recordFile := fs.String("record", "", "write every model response to this new file in the replay format (docs/SPEC.md §6.7), to replay the session later")
	resume := fs.Bool("resume", false, "continue the run parked in WORKSPACE (the argument) from its snapshot, with its manifest (--manifest) and the same --apply, --key, --issuer, --tenant, --env and --image")
	manifestFile := fs.String("manifest", "", "with --resume (required): your copy of the manifest the parked run was started with; the run's model and grants come from it, never from the workspace")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	var m *manifest.Manifest
	var ws string
	switch {
	case len(pos) != 1 && *resume:
		return &usageError{msg: "run: --resume wants exactly one workspace", hint: runUsage}
	case len(pos) != 1:
		return &usageError{msg: "run: want exactly one manifest", hint: runUsage}
	case *resume && *workspace != "":
		return &usageError{msg: "run: --resume takes the workspace as its argument, not --workspace", hint: runUsage}
	case !*resume && *manifestFile != "":
		return &usageError{msg: "run: --manifest is for --resume; a new run takes the manifest as its argument", hint: runUsage}
	case *resume:
		if ws, err = filepath.Abs(pos[0]); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		// The run's manifest is the operator's copy, never the one the
		// parked workspace holds: whoever could write the workspace
		// while it was parked chose that one (its model endpoint, which
		// gets the operator's API key, and its grants). The runner checks
		// that it is the one the run's record started with.
		if *manifestFile == "" {
			return &usageError{msg: "run: --resume needs --manifest FILE, the manifest the run was started with (your copy: the parked workspace's is not trusted)", hint: runUsage}
		}
		mb, err := readLimited(*manifestFile, maxManifestBytes)
		if err != nil {
			return fmt.Errorf("run: --manifest: %w", err)
		}
		if m, err = manifest.Parse(mb); err != nil {
			return withHint(fmt.Errorf("run: --manifest %s: %w", *manifestFile, err), "the manifest format is docs/SPEC.md §5")
		}
	default:
		mb, err := readLimited(pos[0], maxManifestBytes)
		if err != nil {
			return fmt.Errorf("run: manifest: %w", err)
		}
		if m, err = manifest.Parse(mb); err != nil {
			return withHint(fmt.Errorf("run: %s: %w", pos[0], err), "the manifest format is docs/SPEC.md §5")
		}
		ws = *workspace
		if ws == "" {
			ws = filepath.Dir(pos[0])
		}
		if ws, err = filepath.Abs(ws); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	p, err := newProvider(m, ws, *keyEnv)
	if err != nil {
		if m.Provider == "replay" {
			return fmt.Errorf("run: %w", err)
		}
		return withHint(fmt.Errorf("run: %w", err), "API keys are read only from the environment")
	}
	if m.Provider != "replay" {
		// The key goes wherever the manifest says: say where.
		fmt.Fprintf(e.stderr, "cordon: model %s: %v\n", m.Model, p)
	}
	if *recordFile != "" {
		f, err := os.OpenFile(*recordFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return withHint(fmt.Errorf("run: --record: %w", err), "a recording is never written over; name a new file")
		}
		defer f.Close()
		p = provider.Record(p, f)
	}
	key, err := auditKey(*keyFile)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	var issuer *sign.PublicKey
	if *issuerFile != "" {
		pub, err := loadPublic(e, *issuerFile)
		if err != nil {
			return fmt.Errorf("run: --issuer: %w", err)
		}
		issuer = &pub
	}
	state := ""
	if *apply {
		// Commands need the sandbox's state directory; a dry run runs none.
		if state, err = execStateDir(*stateDir); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	// Commands receive the operator's values of the variables the
	// manifest's grant set names, as 'cordon exec' passes them.
	vars := map[string]string{}
	for _, name := range m.Grants.Env {
		if v, ok := os.LookupEnv(name); ok {
			vars[name] = v
		}
	}
	// The environment: an image runtime, and an environment manifest
	// whose address the run manifest may pin.
	var img *sandbox.ImageRuntime
	var envID canon.ID
	if *imageRef != "" {
		ist, err := execStateDir(*stateDir)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if img, err = execImage(ist, *imageRef); err != nil {
			return fmt.Errorf("run: --image: %w", err)
		}
	}
	switch {
	case *envFile != "":
		renv, err := loadRunEnv(e, *envFile, *envPub, img, m.Grants)
		if err != nil {
			return fmt.Errorf("run: --env: %w", err)
		}
		if !m.Env.IsZero() && renv.ID != m.Env {
			return withHint(fmt.Errorf("run: --env: environment %s is not the manifest's environment %s", renv.ID, m.Env),
				"the manifest pins its environment by address: ingest the devcontainer.json it names, or change the manifest")
		}
		envID = renv.ID
		for k, v := range renv.Vars { // the environment's values win over the operator's
			vars[k] = v
		}
	case !m.Env.IsZero():
		return withHint(fmt.Errorf("run: the manifest runs in environment %s: pass it with --env and its image with --image", m.Env),
			"'cordon env ingest' makes the environment manifest from the devcontainer.json")
	case *envPub != "":
		return &usageError{msg: "run: --env-pubkey given without --env"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, err := runner.Run(ctx, runner.Config{
		Workspace: ws, Manifest: m, Provider: p, Apply: *apply, Key: key, SandboxState: state, Tenant: *tenant,
		Memory: memory.Options{NoGit: *noGit}, Log: prefixWriter{w: e.stderr, prefix: "cordon: "}, Version: version,
		Env: vars, Image: img, EnvID: envID, Issuer: issuer, Park: true, Resume: *resume,
	})
	if errors.Is(err, journal.ErrTorn) {
		return withHint(fmt.Errorf("run: %w", err), fmt.Sprintf("a crash left a partial last entry; 'cordon journal repair %s' removes it",
			filepath.Join(ws, runner.StateDir, runner.JournalFile)))
	}
	if errors.Is(err, runner.ErrLocked) {
		return withHint(fmt.Errorf("run: %w", err), "another cordon run is using this workspace; run again when it has finished")
	}
	if errors.Is(err, runner.ErrParked) {
		return withHint(fmt.Errorf("run: %w", err), "a parked run continues with 'cordon run --resume --manifest MANIFEST WORKSPACE'")
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if out.Status == runner.StatusParked {
		mf := *manifestFile
		if !*resume {
			mf = pos[0]
		}
		if abs, err := filepath.Abs(mf); err == nil {
			mf = abs
		}
		return printParked(e, ws, mf, out, *asJSON)
	}
	res := filepath.Join(ws, runner.StateDir, runner.ResultFile)
	if *asJSON {
		if err := runSummaryJSON(e, ws, res, out, key); err != nil {
			return err
		}
	} else {
		printRunSummary(e, ws, res, out, key)
	}
	switch out.Status {
	case runner.StatusFinished, runner.StatusVerified:
		return nil
	}
	return &exitStatus{code: 1}
}

// printParked says that the run parked and how to resume it (with the
// operator's manifest file); the exit status is ExitParked.
func printParked(e *env, ws, manifestFile string, out *runner.Outcome, asJSON bool) error {
	resume := "cordon run --resume --manifest " + manifestFile + " " + ws
	if asJSON {
		if err := writeJSON(e, map[string]any{"status": out.Status, "run": out.Run, "reason": out.Reason, "workspace": ws,
			"turns": out.Body.Turns, "model_calls": out.Body.ModelCalls, "journal_entries": out.Head.Count,
			"journal_head": out.Head.ID.String(), "resume": resume}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "parked (%s): run %s, %d turns, %d model calls so far; journal %d entries\n",
			out.Reason, out.Run, out.Body.Turns, out.Body.ModelCalls, out.Head.Count)
		fmt.Fprintf(e.stdout, "resume: %s\n", resume)
	}
	return &exitStatus{code: ExitParked}
}

// printRunSummary prints the lines a run ends with.
func printRunSummary(e *env, ws, res string, out *runner.Outcome, key *sign.PrivateKey) {
	fmt.Fprintf(e.stdout, "%s: %d turns, %d model calls, %d writes, %d commands, %d refused\n",
		out.Status, out.Body.Turns, out.Body.ModelCalls, len(out.Body.Writes), len(out.Body.Runs), out.Body.Refused)
	signed := "unsigned"
	if key != nil {
		signed = "signed by " + key.Public().ID().String()
	}
	fmt.Fprintf(e.stdout, "result %s (%s), journal %d entries\n", res, signed, out.Head.Count)
	fmt.Fprintf(e.stdout, "verify: cordon verify run %s\n", ws)
}

// newProvider builds the manifest's model client. A replay script is
// read from the workspace without following links.
func newProvider(m *manifest.Manifest, ws, keyEnv string) (provider.Provider, error) {
	switch m.Provider {
	case "replay":
		if keyEnv != "" {
			return nil, errors.New("--key-env: the replay provider takes no key")
		}
		b, err := runner.ReadFile(ws, m.Replay, 64<<20)
		if err != nil {
			return nil, fmt.Errorf("replay script: %w", err)
		}
		return provider.NewReplayData(m.Replay, b)
	case "anthropic":
		if keyEnv == "" {
			keyEnv = provider.AnthropicKeyEnv
		}
		return provider.NewAnthropic(provider.Config{BaseURL: m.BaseURL, Model: m.Model, Key: envKey(keyEnv)})
	case "openai":
		if keyEnv == "" {
			if _, ok := os.LookupEnv("OPENAI_API_KEY"); ok {
				keyEnv = "OPENAI_API_KEY"
			}
		}
		var key provider.KeySource // none: a local server
		if keyEnv != "" {
			key = envKey(keyEnv)
		}
		return provider.NewOpenAI(provider.Config{BaseURL: m.BaseURL, Model: m.Model, Key: key})
	}
	return nil, fmt.Errorf("provider %q", m.Provider) // unreachable: manifest.Parse checks it
}

// envKey is the provider key held in the environment variable name: the
// CLI is where the environment is read (agent/provider reads none).
func envKey(name string) provider.KeySource {
	return provider.EnvKey{Name: name, Lookup: os.LookupEnv}
}

// auditKey is the key that signs a run: --key, else $CORDON_AUDIT_PRIVATE_KEY
// (PEM text), else $CORDON_KEY; nil when none is set.
func auditKey(file string) (*sign.PrivateKey, error) {
	if file != "" {
		return sign.LoadPrivate(file)
	}
	if v, ok := os.LookupEnv(auditKeyEnv); ok {
		return sign.LoadPrivateEnv(auditKeyEnv, v)
	}
	return stewardKey("")
}

// readLimited reads a regular file of at most limit bytes; a FIFO or
// device at name is refused without blocking.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|flock.NonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// prefixWriter writes each line with a prefix.
type prefixWriter struct {
	w      interface{ Write([]byte) (int, error) }
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := p.w.Write(append([]byte(p.prefix), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// verifyRun is `cordon verify run WORKSPACE [--pubkey PEM]`: every check
// and its outcome, exit 1 if any failed.
func verifyRun(e *env, args []string) error {
	fs := flag.NewFlagSet("verify run", flag.ContinueOnError)
	pubkey := fs.String("pubkey", "", "the steward's public key (PEM), from a trusted channel: a signed result must verify under it, and an unsigned one fails")
	asJSON := fs.Bool("json", false, "print one JSON object for machines: the checks, and whether the record is valid, signed and trusted")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("verify run", pos, "WORKSPACE"); err != nil {
		return err
	}
	var pub *sign.PublicKey
	if *pubkey != "" {
		b, err := readLimited(*pubkey, 1<<16)
		if err != nil {
			return fmt.Errorf("verify run: --pubkey: %w", err)
		}
		k, err := sign.ParsePublic(b)
		if err != nil {
			return fmt.Errorf("verify run: --pubkey %s: %w", *pubkey, err)
		}
		pub = &k
	}
	ws, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	rep := runrecord.Verify(ws, pub)
	if *asJSON {
		return verifyRunJSON(e, ws, rep)
	}
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(e.stdout, "%s %-12s %s\n", mark, c.Name, c.Detail)
	}
	if rep.Failed() {
		return fmt.Errorf("verify run: %s: the run's record does not verify", ws)
	}
	// How each task's verify command was judged: a verification on exit
	// status alone is a note, since code under test can exit 0 without
	// running a test.
	for _, t := range rep.Result.Body.Tasks {
		switch v := t.Verification; {
		case v == nil:
		case v.Mode == runrecord.VerifyExitStatusOnly:
			fmt.Fprintf(e.stdout, "note: task %q: verification %s\n", t.ID, v)
		default:
			fmt.Fprintf(e.stdout, "task %q: verification %s\n", t.ID, v)
		}
	}
	switch {
	case rep.Result.Signature == nil:
		fmt.Fprintf(e.stdout, "%s: valid run record, unsigned: anyone able to rewrite the journal and result could have; keep the journal head elsewhere or sign runs\n", ws)
	case !rep.Trusted:
		fmt.Fprintf(e.stdout, "%s: valid run record, signed by the key stored in the workspace; pass --pubkey to check who signed\n", ws)
	default:
		fmt.Fprintf(e.stdout, "%s: valid run record, signed by the trusted key\n", ws)
	}
	return nil
}
