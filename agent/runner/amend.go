package runner

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/agent/manifest"
	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/amend"
	"github.com/cordon-dev/cordon/internal/nofollow"
)

// Checkpoints and amendments (docs/SPEC.md §3.7). A run has an agent key,
// generated for the run, which signs a checkpoint at every turn
// boundary, and an issuer (Config.Issuer), who alone may tighten the run
// by putting signed amendments in WORKSPACE/.cordon/amend/RUN/N.dsse,
// numbered from 1. The runner applies them in order at every turn
// boundary and, while a command runs, within AmendPoll: an accepted one
// replaces the grant set and budgets in force from the next action on,
// and the running command's egress policy at once.
const (
	AmendDir     = "amend"     // under the state directory
	LiveFile     = "live.json" // the live run's authority, for `cordon amend`; removed when the run ends
	LiveType     = "cordon.live.v1"
	AmendPoll    = 100 * time.Millisecond
	maxAmendment = 4 << 20 // bytes of one amendment file
)

// Live is what LiveFile holds: the live run's id and principals, the
// authority in force and the next amendment file's number.
type Live struct {
	Type    string          `json:"type"`
	Run     string          `json:"run"`
	Agent   string          `json:"agent"`
	Issuer  string          `json:"issuer,omitempty"`
	Seq     int64           `json:"seq"`  // the last amendment applied, 0 when none
	Next    int64           `json:"next"` // the next amendment file to be read
	Grants  json.RawMessage `json:"grants"`
	Budgets amend.Budgets   `json:"budgets"`
	Park    bool            `json:"park,omitempty"` // the run may park (Config.Park): `cordon park` asks it to
}

// authority is the run's principals and the authority in force.
type authority struct {
	mu       sync.Mutex
	run      string
	agent    *sign.PrivateKey
	issuer   sign.PublicKey // zero when the run has no issuer
	state    amend.State
	next     int64  // the next amendment file
	dir      string // WORKSPACE/.cordon/amend/RUN
	inflight *egress.Policy
	inTask   *task
}

// startAuthority draws the run's id and agent key, journals the
// principals and makes the run's amendment directory. A resumed run
// (resume) keeps its id and the authority in force, restored from its
// state, and journals a fresh agent key marked as a resume's.
func (r *run) startAuthority(resume bool) error {
	agent, err := sign.Generate()
	if err != nil {
		return fmt.Errorf("runner: agent key: %w", err)
	}
	a := &r.auth
	if resume {
		a.agent = agent
		a.state.Agent = agent.Public()
	} else {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("runner: run id: %w", err)
		}
		m := r.cfg.Manifest
		a.run, a.agent, a.next = hex.EncodeToString(id[:]), agent, 1
		a.state = amend.State{Run: a.run, Agent: agent.Public(), Grants: m.Grants, Budgets: manifestBudgets(m)}
	}
	p := entry.RunPrincipals{Run: a.run, Agent: agent.Public().ID().String(), AgentKey: base64.RawURLEncoding.EncodeToString(agent.Public().Bytes()), Resume: resume}
	switch {
	case r.cfg.Issuer != nil:
		a.issuer = *r.cfg.Issuer
	case r.cfg.Key != nil:
		a.issuer = r.cfg.Key.Public()
	}
	if len(a.issuer.Bytes()) > 0 {
		if a.issuer.ID() == agent.Public().ID() {
			return errors.New("runner: the issuer's key is the agent's") // unreachable: the agent key is fresh
		}
		p.Issuer = a.issuer.ID().String()
	}
	if _, err := r.record(p); err != nil {
		return err
	}
	root := filepath.Join(r.state, AmendDir)
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("runner: %w", err)
	}
	if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
		return fmt.Errorf("runner: %s is not a directory; remove it (amendments are put there)", root)
	}
	a.dir = filepath.Join(root, a.run)
	if err := os.Mkdir(a.dir, 0o700); err != nil && !(resume && errors.Is(err, os.ErrExist)) {
		return fmt.Errorf("runner: %w", err)
	}
	if fi, err := os.Lstat(a.dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("runner: %s is not a directory; remove it (amendments are put there)", a.dir)
	}
	return r.writeLive()
}

// manifestBudgets are the budgets an amendment may lower, as the
// manifest sets them.
func manifestBudgets(m *manifest.Manifest) amend.Budgets {
	return amend.Budgets{"max_turns": m.Budgets.MaxTurns, "max_model_calls": m.Budgets.MaxModelCalls, "max_input_tokens": m.Budgets.MaxInputTokens,
		"max_output_tokens": m.Budgets.MaxOutputTokens, "wall_ms": m.Budgets.WallMS}
}

// writeLive writes LiveFile (under the authority's lock, or before any
// command runs).
func (r *run) writeLive() error {
	a := &r.auth
	l := Live{Type: LiveType, Run: a.run, Agent: a.agent.Public().ID().String(), Seq: a.state.Seq, Next: a.next,
		Grants: a.state.Grants.JCS(), Budgets: a.state.Budgets, Park: r.mayPark()}
	if len(a.issuer.Bytes()) > 0 {
		l.Issuer = a.issuer.ID().String()
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	tmp := filepath.Join(r.state, LiveFile+".tmp")
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(r.state, LiveFile))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("runner: %w", err)
	}
	return nil
}

// endAuthority removes LiveFile: the run no longer takes amendments.
func (r *run) endAuthority() {
	if r.auth.agent != nil {
		os.Remove(filepath.Join(r.state, LiveFile))
	}
}

// boundary is a turn boundary of task t: apply the amendments waiting,
// then checkpoint.
func (r *run) boundary(t *task) error {
	if err := r.applyAmendments(); err != nil {
		return err
	}
	return r.checkpoint(t)
}

// applyAmendments reads the amendment files waiting, in order, and
// applies or refuses each, journalling which. An error means the journal
// could not be written.
func (r *run) applyAmendments() error {
	a := &r.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		n := a.next
		name := filepath.Join(a.dir, strconv.FormatInt(n, 10)+".dsse")
		b, err := nofollow.Read(name, maxAmendment)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		a.next++
		var ch *amend.Change
		next := a.state
		if err == nil {
			next, ch, err = amend.Apply(a.state, a.issuer, b)
		}
		if err == nil && ch.Amendment.Seq != n {
			err = fmt.Errorf("%w: %s holds sequence %d", amend.ErrReplay, filepath.Base(name), ch.Amendment.Seq)
		}
		if err != nil {
			e := entry.AmendRefused{Seq: n, File: canon.Sum(b).String()}
			e.Reason = quoteText(&e.Quoted, "reason", clip(oneLine(err.Error()), 1024))
			if _, jerr := r.record(e); jerr != nil {
				return jerr
			}
			r.logf("amendment %d refused; the run goes on under the grants in force: %s", n, oneLine(err.Error()))
			if werr := r.writeLive(); werr != nil {
				return werr
			}
			continue
		}
		if _, err := r.record(entry.Amend{Seq: n, Amendment: canon.Sum(ch.Amendment.JCS()).String(), Issuer: ch.Amendment.Issuer.String(),
			Before: ch.Before.String(), After: ch.After.String(), GrantsBefore: ch.GrantsBefore.String(), GrantsAfter: ch.GrantsAfter.String(),
			Budgets: ch.Amendment.Budgets}); err != nil {
			return err
		}
		a.state = next
		if a.inflight != nil {
			cut := a.inflight.Set(r.egressEnforcer(a.inTask))
			if cut > 0 {
				r.logf("amendment %d: %d connections of the running command closed", n, cut)
			}
		}
		r.logf("amendment %d applied: grants %s, authority %s → %s", n, ch.GrantsAfter, ch.Before, ch.After)
		if err := r.writeLive(); err != nil {
			return err
		}
	}
}

func quoteText(quoted *[]string, member, s string) string {
	t, q := entry.Text(s)
	if q {
		*quoted = append(*quoted, member)
	}
	return t
}

// grantsFor is the grant set task t acts under: its manifest's until an
// amendment is applied; after one, the root task's is the amended set,
// and a sub-task keeps its own only if the amended set covers it, else
// it may not act (the amended set does not narrow it, and nothing here
// computes the intersection).
func (r *run) grantsFor(t *task) (*grant.Set, error) {
	a := &r.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	return r.grantsForLocked(t)
}

func (r *run) grantsForLocked(t *task) (*grant.Set, error) {
	a := &r.auth
	if a.state.Seq == 0 || a.state.Grants == nil {
		return t.m.Grants, nil
	}
	if t.parent == nil {
		return a.state.Grants, nil
	}
	if err := grant.Covers(a.state.Grants, t.m.Grants); err != nil {
		return nil, refusef("the grant set in force was amended (%s) and no longer covers this sub-task's: %v", a.state.Grants.ID(), err)
	}
	return t.m.Grants, nil
}

// egressEnforcer is what the running command of task t may reach after
// an amendment: nil (nothing) when the task's grants are no longer
// covered. Called under the authority's lock.
func (r *run) egressEnforcer(t *task) *grant.Enforcer {
	gs, err := r.grantsForLocked(t)
	if err != nil {
		return nil
	}
	return grant.New(gs)
}

// commandAllowed refuses, after an amendment, a command whose name the
// grant set in force allows under no exec rule.
func (r *run) commandAllowed(t *task, name string) error {
	gs, err := r.grantsFor(t)
	if err != nil {
		return err
	}
	if gs == t.m.Grants && r.amendedSeq() == 0 {
		return nil
	}
	for _, e := range gs.Exec {
		if e.Name == name || e.Name == "" {
			return nil
		}
	}
	return refusef("%s is not allowed by the grant set in force (%s, amended by the issuer): no exec rule names it", name, gs.ID())
}

func (r *run) amendedSeq() int64 {
	r.auth.mu.Lock()
	defer r.auth.mu.Unlock()
	return r.auth.state.Seq
}

// watch applies amendments while task t's command runs, every AmendPoll,
// so that one that removes egress cuts it at once; pol is the command's
// egress policy. stop ends the watch and returns the first journal
// failure.
func (r *run) watch(t *task, pol *egress.Policy) (stop func() error) {
	a := &r.auth
	a.mu.Lock()
	a.inflight, a.inTask = pol, t
	a.mu.Unlock()
	done := make(chan struct{})
	var werr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(AmendPoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := r.applyAmendments(); err != nil {
					werr = err
					return
				}
			}
		}
	}()
	return func() error {
		close(done)
		wg.Wait()
		a.mu.Lock()
		a.inflight, a.inTask = nil, nil
		a.mu.Unlock()
		return werr
	}
}

// checkpoint journals the agent's signed checkpoint of the run's
// position.
func (r *run) checkpoint(t *task) error {
	root := t
	for root.parent != nil {
		root = root.parent
	}
	a := &r.auth
	a.mu.Lock()
	head := r.rec.Head()
	c := &amend.Checkpoint{Run: a.run, Agent: a.agent.Public().ID(), Turn: root.used.turns,
		Journal: amend.Head{Count: head.Count, ID: head.ID}, Grants: a.state.Grants.ID(), Budgets: a.state.Budgets,
		Spent: amend.Budgets{"max_turns": root.used.turns, "max_model_calls": root.used.calls, "max_input_tokens": root.used.inTokens,
			"max_output_tokens": root.used.outTokens, "wall_ms": time.Since(r.segStart).Milliseconds()},
		Seq: a.state.Seq}
	a.mu.Unlock()
	payload := c.JCS()
	sig := a.agent.Sign(amend.CheckpointPayloadType, payload)
	_, err := r.record(entry.Checkpoint{Task: t.id, Checkpoint: payload, Sig: base64.RawURLEncoding.EncodeToString(sig)})
	return err
}

// amendedBudget returns an amended budget's limit and what the run has
// used of it, when an amendment is in force.
func (r *run) amendedBudget(root *task, now time.Time) (name string, used, limit int64) {
	a := &r.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state.Seq == 0 {
		return "", 0, 0
	}
	b := a.state.Budgets
	for _, c := range []struct {
		name string
		used int64
	}{
		{"wall_ms", now.Sub(r.segStart).Milliseconds()}, {"max_turns", root.used.turns}, {"max_model_calls", root.used.calls},
		{"max_input_tokens", root.used.inTokens}, {"max_output_tokens", root.used.outTokens},
	} {
		if c.used >= b[c.name] {
			return c.name, c.used, b[c.name]
		}
	}
	return "", 0, 0
}

// budgetLeft is what an amended budget leaves (a large number when none
// is amended).
func (r *run) budgetLeft(name string, used int64) int64 {
	a := &r.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state.Seq == 0 {
		return 1 << 62
	}
	return a.state.Budgets[name] - used
}
