// Package pool keeps warm sandboxes: slots prepared ahead of their runs
// (sandbox.Prepare) and claimed by runs whose environment and policy
// match (docs/sandbox.md, "Warm pools"; SPEC §12; conformance class C9).
//
// A slot is keyed by the environment address its runtime has and by the
// policy it was prepared under: the ContentId of the grant set, the tier,
// the tenant and the limits. A claim whose key differs in either is
// refused; a slot runs one program and is never reused; a slot is checked
// (init alive, cgroup intact) before it is handed out, and discarded if
// the check fails.
//
// Every slot accrues idle energy while it is parked. A claim attributes
// the slot's idle energy to the run; an evicted slot records its idle
// energy as overhead. The Ledger keeps the books: its total idle energy
// is always claimed + overhead + pending (what parked slots hold), and
// no slot leaves it with zero idle energy.
package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cordon-dev/cordon/energy"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/entry"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/sandbox/pool/books"
)

// The books' types and errors (package books), as the pool uses them.
type (
	Key    = books.Key
	Totals = books.Totals
	Ledger = books.Ledger
)

var (
	ErrMismatch = books.ErrMismatch
	ErrGone     = books.ErrGone
	ErrZeroIdle = books.ErrZeroIdle
	ErrEmpty    = books.ErrEmpty
	ErrClosed   = books.ErrClosed
)

// PolicyID is the policy part of a slot's key: the ContentId of the JSON
// of the grant set's ContentId, the tier, the tenant and the limits but
// the wall clock (a launch may shorten it; none may lengthen it). Two
// specs with the same PolicyID are decided and bounded alike.
func PolicyID(s *sandbox.Spec) string {
	l := s.Limits
	l.Wall = 0
	doc := struct {
		Grants string         `json:"grants"`
		Tier   string         `json:"tier"`
		Tenant string         `json:"tenant"`
		Limits sandbox.Limits `json:"limits"`
	}{s.Grants.ID().String(), s.Tier.String(), s.Tenant, l}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // strings and integers
	}
	return canon.Sum(b).String()
}

// EnvAddress is the environment part of a slot's key: the image's
// manifest (or config) digest for an image runtime, or the ContentId of
// this host's runtime identity (its kernel release and os-release).
func EnvAddress(s *sandbox.Spec) string {
	if s.Image != nil {
		d := s.Image.Manifest
		if d == "" {
			d = s.Image.Config
		}
		return canon.Sum([]byte("cordon.pool.image\x00" + d)).String()
	}
	osr, _ := os.ReadFile("/etc/os-release")
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return canon.Sum([]byte("cordon.pool.host\x00" + string(rel) + "\x00" + string(osr))).String()
}

// KeyFor is the key of a slot prepared for s in environment env.
func KeyFor(s *sandbox.Spec, env string) Key { return Key{Env: env, Policy: PolicyID(s)} }

// IdleModel estimates a parked slot's idle energy (provenance
// Estimator): IdlePerCoreUW × Cores × parked time, rounded up to a whole
// µJ, so that a slot that was parked at all is never charged zero.
type IdleModel struct {
	IdlePerCoreUW uint64
	Cores         uint64
}

// DefaultIdle is energy.DefaultCoefficients' idle power for the cores
// the limits allot: CPUMillis / 1000 rounded up, at least one (a slot
// allotted 1.5 CPUs is charged two cores' idle power, never one).
func DefaultIdle(l sandbox.Limits) IdleModel {
	cores := l.CPUMillis / 1000
	if l.CPUMillis%1000 > 0 {
		cores++
	}
	cores = max(cores, 1)
	return IdleModel{IdlePerCoreUW: energy.DefaultCoefficients.IdlePerCoreUW, Cores: uint64(cores)}
}

// Energy is the model's figure for d parked, in µJ: at least 1 for any
// d > 0.
func (m IdleModel) Energy(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(m.IdlePerCoreUW, m.Cores)
	if hi != 0 {
		return canon.MaxInt
	}
	hi, lo = bits.Mul64(lo, uint64(d))
	if hi >= 1e9 {
		return canon.MaxInt
	}
	q, r := bits.Div64(hi, lo, 1e9)
	if r != 0 {
		q++
	}
	return max(q, 1)
}

// Config configures a pool.
type Config struct {
	// Spec is what every slot is prepared with (sandbox.Prepare): the
	// grant set, tier, tenant, state directory, limits and runtime.
	Spec *sandbox.Spec
	// Env is the environment address of the spec's runtime (EnvAddress).
	Env string
	// Size is how many slots the pool keeps ready.
	Size int
	// MaxIdle, if positive, evicts a slot parked longer.
	MaxIdle time.Duration
	// Idle models the slots' idle energy; zero: DefaultIdle.
	Idle IdleModel
}

// Pool keeps Config.Size prepared slots ready for claims. Its methods
// are safe for concurrent use.
type Pool struct {
	cfg    Config
	key    Key
	ctx    context.Context // the slots' lives (an exception to "no contexts in structs", as Sandbox's)
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	ledger  *Ledger          // guarded by mu
	ready   []*slot          // guarded by mu: parked, oldest first
	closed  bool             // guarded by mu
	lastErr error            // guarded by mu: the last failed preparation
	next    int              // guarded by mu
	live    map[*slot]bool   // guarded by mu: parked or claimed, not yet destroyed
	parked  chan struct{}    // guarded by mu: closed (and replaced) when a slot is parked
	dying   sync.WaitGroup   // slots being destroyed in the background
	now     func() time.Time // tests
}

type slot struct {
	id       string
	p        *sandbox.Prepared
	parkedAt time.Time
}

// New starts a pool that prepares slots in the background until Stop.
func New(ctx context.Context, cfg Config) (*Pool, error) {
	if cfg.Spec == nil || cfg.Spec.Grants == nil {
		return nil, errors.New("pool: no spec or grant set to prepare slots with")
	}
	if cfg.Env == "" {
		return nil, errors.New("pool: no environment address")
	}
	if cfg.Size < 1 || cfg.Size > 256 {
		return nil, fmt.Errorf("pool: size %d, want 1 to 256", cfg.Size)
	}
	if cfg.Idle == (IdleModel{}) {
		cfg.Idle = DefaultIdle(cfg.Spec.Limits)
	}
	if cfg.Idle.IdlePerCoreUW == 0 || cfg.Idle.Cores == 0 {
		return nil, errors.New("pool: an idle model of zero power: a parked slot's energy is never zero")
	}
	spec := *cfg.Spec
	cfg.Spec = &spec
	ctx, cancel := context.WithCancel(ctx)
	p := &Pool{cfg: cfg, key: KeyFor(&spec, cfg.Env), ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1),
		done: make(chan struct{}), ledger: books.NewLedger(), live: map[*slot]bool{}, parked: make(chan struct{}), now: time.Now}
	go p.fill()
	return p, nil
}

// Key is the key of the pool's slots.
func (p *Pool) Key() Key { return p.key }

// fill prepares slots until the pool is full, and again after each claim
// or eviction, until Stop.
func (p *Pool) fill() {
	defer close(p.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		p.mu.Lock()
		need := !p.closed && len(p.ready) < p.cfg.Size
		p.mu.Unlock()
		if need {
			if err := p.prepareOne(); err != nil {
				p.mu.Lock()
				p.lastErr = err
				p.mu.Unlock()
				select { // a failing host is not hammered
				case <-p.ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			continue
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-tick.C:
			p.evictStale()
		}
	}
}

func (p *Pool) prepareOne() error {
	sp := *p.cfg.Spec
	// A slot outlives Stop once claimed: its run is its claimer's.
	pr, err := sandbox.Prepare(context.WithoutCancel(p.ctx), &sp)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.destroyLocked(&slot{p: pr})
		return nil
	}
	p.next++
	s := &slot{id: strconv.Itoa(p.next), p: pr, parkedAt: p.now()}
	if err := p.ledger.Park(s.id, p.key); err != nil {
		p.destroyLocked(s)
		return err
	}
	p.live[s] = true
	p.ready = append(p.ready, s)
	p.lastErr = nil
	close(p.parked)
	p.parked = make(chan struct{})
	return nil
}

// accrueLocked brings slot s's idle energy up to the model's figure for
// its time parked until now, and at least 1 µJ.
func (p *Pool) accrueLocked(s *slot, now time.Time) error {
	want := p.cfg.Idle.Energy(max(now.Sub(s.parkedAt), 1))
	have, err := p.ledger.Idle(s.id)
	if err != nil {
		return err
	}
	if want > have {
		return p.ledger.Accrue(s.id, want-have)
	}
	return nil
}

// destroyLocked destroys s in the background.
func (p *Pool) destroyLocked(s *slot) {
	delete(p.live, s)
	p.dying.Add(1)
	go func() {
		defer p.dying.Done()
		_ = s.p.Destroy()
	}()
}

// evictLocked closes the books of parked slot s as overhead and destroys
// it.
func (p *Pool) evictLocked(s *slot, now time.Time) {
	_ = p.accrueLocked(s, now)
	_, _ = p.ledger.Evict(s.id)
	p.destroyLocked(s)
}

func (p *Pool) evictStale() {
	if p.cfg.MaxIdle <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	keep := p.ready[:0]
	for _, s := range p.ready {
		if now.Sub(s.parkedAt) > p.cfg.MaxIdle {
			p.evictLocked(s, now)
			continue
		}
		keep = append(keep, s)
	}
	p.ready = keep
}

// Evict evicts the oldest parked slot, if any, recording its idle energy
// as overhead, and returns its id ("" if none was parked).
func (p *Pool) Evict() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		return ""
	}
	s := p.ready[0]
	p.ready = p.ready[1:]
	p.evictLocked(s, p.now())
	p.wake()
	return s.id
}

func (p *Pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Charge is the idle energy a claim attributes to its run.
type Charge struct {
	UJ         uint64
	Provenance string // energy.Estimator
	Parked     time.Duration
	Model      IdleModel
}

// Claim is a claimed slot: one run's sandbox.
type Claim struct {
	Slot   string
	Key    Key
	Charge Charge

	mu      sync.Mutex
	p       *sandbox.Prepared
	started bool
	pool    *Pool
	s       *slot
}

// Claim takes the oldest ready slot for a run with key, checking it
// first (a slot that fails the check is evicted, its idle energy
// recorded as overhead, and the next one tried). A key that is not the
// pool's is refused (ErrMismatch), and no slot is taken; an empty pool
// is ErrEmpty, a stopped one ErrClosed.
func (p *Pool) Claim(key Key) (*Claim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if err := key.Check(p.key); err != nil {
		return nil, err
	}
	for len(p.ready) > 0 {
		s := p.ready[0]
		p.ready = p.ready[1:]
		now := p.now()
		if err := s.p.Check(); err != nil {
			p.evictLocked(s, now) // a broken slot is never handed out
			p.wake()
			continue
		}
		if err := p.accrueLocked(s, now); err != nil {
			p.evictLocked(s, now)
			return nil, err
		}
		uj, err := p.ledger.Claim(s.id, key)
		if err != nil {
			p.evictLocked(s, now)
			return nil, err
		}
		return &Claim{Slot: s.id, Key: key, p: s.p, pool: p, s: s, Charge: Charge{
			UJ: uj, Provenance: energy.Estimator, Parked: now.Sub(s.parkedAt), Model: p.cfg.Idle,
		}}, nil
	}
	if p.lastErr != nil {
		return nil, fmt.Errorf("%w (the last preparation failed: %v)", ErrEmpty, p.lastErr)
	}
	return nil, ErrEmpty
}

// ClaimWait is Claim, but when no slot is ready it has the pool prepare
// one at once and waits for it until ctx ends (then ErrEmpty, naming the
// last failed preparation if any). A key that is not the pool's is
// refused at once, and a stopped pool at once, or as soon as it stops.
func (p *Pool) ClaimWait(ctx context.Context, key Key) (*Claim, error) {
	for {
		p.mu.Lock()
		parked := p.parked
		p.mu.Unlock()
		c, err := p.Claim(key)
		if !errors.Is(err, ErrEmpty) {
			return c, err
		}
		p.wake() // a claimed run's successor is otherwise prepared only after refillDelay
		select {
		case <-parked:
		case <-p.ctx.Done(): // stopped: Claim says so
		case <-ctx.Done():
			return p.Claim(key) // a last try, whose error names the last failed preparation
		}
	}
}

// Start starts the run in the claimed slot. A claim starts once: a
// second Start is refused (one slot, one run).
func (c *Claim) Start(ctx context.Context, l *sandbox.Launch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("%w: slot %s already ran its program (one slot, one run)", ErrGone, c.Slot)
	}
	c.started = true
	// The pool prepares the slot's successor when this run ends, or
	// refillDelay after it started, whichever is first: preparing a slot
	// costs a cold start's CPU, which would otherwise compete with the
	// start the claim pays for.
	time.AfterFunc(refillDelay, c.pool.wake)
	return c.p.Start(ctx, l)
}

// refillDelay is how long after a claimed slot's start its successor is
// prepared, if its run has not ended before.
const refillDelay = 20 * time.Millisecond

// Wait waits for the run (sandbox.Prepared.Wait).
func (c *Claim) Wait() (*sandbox.Result, error) {
	defer c.pool.wake()
	return c.p.Wait()
}

// Destroy destroys the claimed slot's sandbox; call it whatever happens.
func (c *Claim) Destroy() error {
	err := c.p.Destroy()
	c.pool.wake() // a claim that never started
	c.pool.mu.Lock()
	delete(c.pool.live, c.s)
	c.pool.mu.Unlock()
	return err
}

// Entry is the journal entry that records the claim's charge.
func (c *Claim) Entry() entry.PoolClaim {
	return entry.PoolClaim{
		Slot: c.Slot, Env: c.Key.Env, Policy: c.Key.Policy,
		IdleUJ: int64(c.Charge.UJ), IdleProvenance: c.Charge.Provenance, ParkedNS: int64(c.Charge.Parked),
		IdlePerCoreUW: int64(c.Charge.Model.IdlePerCoreUW), Cores: int64(c.Charge.Model.Cores),
	}
}

// Status is a pool's state.
type Status struct {
	Key     Key    `json:"key"`
	Size    int    `json:"size"`
	Ready   int    `json:"ready"`
	Totals  Totals `json:"idle"`
	LastErr string `json:"last_error,omitempty"`
}

// Status returns the pool's state, with the parked slots' idle energy
// brought up to now.
func (p *Pool) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for _, s := range p.ready {
		_ = p.accrueLocked(s, now)
	}
	st := Status{Key: p.key, Size: p.cfg.Size, Ready: len(p.ready), Totals: p.ledger.Totals()}
	if p.lastErr != nil {
		st.LastErr = p.lastErr.Error()
	}
	return st
}

// Stop evicts every parked slot, stops preparing, waits for the slots
// it destroys, and returns the final books. Claimed slots are their
// claimers' to destroy. Stop may be called again.
func (p *Pool) Stop() Totals {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		now := p.now()
		for _, s := range p.ready {
			p.evictLocked(s, now)
		}
		p.ready = nil
	}
	p.mu.Unlock()
	p.cancel()
	<-p.done
	p.dying.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ledger.Totals()
}
