package session

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/tier"
)

// SealInput is what the caller knows that the session does not.
type SealInput struct {
	// Unit is the ContentId of the unit of work (a manifest, an exec
	// unit document).
	Unit canon.ID
	// Exit is the unit's exit status (0 for success).
	Exit int64
	// Outputs, if not nil, replaces the outputs the session's commands
	// returned (path → ContentId).
	Outputs map[string]string
	// JournalRoot, if not zero, is the entry the receipt binds to;
	// otherwise the journal's head after the meter entries (none without
	// a journal).
	JournalRoot canon.ID
	// Kernel, if not "", replaces this host's kernel in the attestation
	// (the demo's synthetic evidence says so there).
	Kernel string
	// Charges are energy records the run is charged with beyond what
	// the session metered: the idle energy of the warm pool slot it
	// started in (receipt.PoolIdleClass). Each class must be one the
	// meters do not record.
	Charges []receipt.Device
	// Start, if not zero, is the unit's start in place of the session's
	// opening, and Prior the device records of the unit's earlier
	// sessions: a parked and resumed run (docs/SPEC.md §9.4) seals one
	// receipt for the whole run, its segments' energy summed per class
	// (MergeDevices).
	Start time.Time
	Prior []receipt.Device
}

// MergeDevices adds the device records b to a, per class: estimated
// energy and busy time are summed; measured energy only where every
// record of the class was measured (and attributed alike), else the
// class is an Estimator's. The result is sorted by class.
func MergeDevices(a, b []receipt.Device) []receipt.Device {
	by := map[string]receipt.Device{}
	var classes []string
	for _, d := range append(append([]receipt.Device(nil), a...), b...) {
		have, ok := by[d.Class]
		if !ok {
			if d.MeasuredUJ != nil {
				m := *d.MeasuredUJ
				d.MeasuredUJ = &m
			}
			by[d.Class] = d
			classes = append(classes, d.Class)
			continue
		}
		have.EstimatedUJ += d.EstimatedUJ
		have.BusyNS += d.BusyNS
		sameAttr := (have.Attribution == nil) == (d.Attribution == nil) &&
			(have.Attribution == nil || *have.Attribution == *d.Attribution)
		if have.MeasuredUJ != nil && d.MeasuredUJ != nil && have.Provenance == d.Provenance && sameAttr {
			m := *have.MeasuredUJ + *d.MeasuredUJ
			have.MeasuredUJ = &m
		} else {
			have.MeasuredUJ, have.Attribution, have.Provenance = nil, nil, receipt.Estimator
		}
		by[d.Class] = have
	}
	sort.Strings(classes)
	out := make([]receipt.Device, 0, len(classes))
	for _, c := range classes {
		out = append(out, by[c])
	}
	return out
}

// Sealed is a session's evidence.
type Sealed struct {
	Core        *receipt.Core
	ID          canon.ID // the receipt's ContentId
	Receipt     []byte   // the signed JCR-1 envelope
	Attestation []byte   // the signed attestation
	Energy      *Energy
}

// Seal stops the meters (journalling the meter entries, if StopMeters
// did not), builds the receipt core — the tier commands ran at, or the
// required tier when none ran; energy per device class, measured or
// estimated — and signs the receipt and the attestation with k. Nothing
// can run in the session afterwards.
func (s *Session) Seal(k *sign.PrivateKey, in SealInput) (*Sealed, error) {
	if k == nil {
		return nil, errors.New("session: sealing needs a key")
	}
	if in.Unit.IsZero() {
		return nil, errors.New("session: sealing needs the unit of work's ContentId")
	}
	if s.cfg.Version == "" {
		return nil, errors.New("session: sealing needs Config.Version, which the attestation names")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return nil, ErrSealed
	}
	e, err := s.stopMeters()
	if err != nil {
		return nil, err
	}
	s.sealed = true
	t := s.plan.Required
	if s.ran {
		t = s.tier
	}
	outs := in.Outputs
	if outs == nil {
		outs = maps.Clone(s.outs)
	}
	root := ""
	switch {
	case !in.JournalRoot.IsZero():
		root = in.JournalRoot.String()
	case s.rec != nil && s.rec.Head().Count > 0:
		root = s.rec.Head().ID.String()
	}
	end := time.Now()
	start, devices := s.opened, slices.Clone(e.Devices)
	if !in.Start.IsZero() {
		if in.Start.After(s.opened) {
			return nil, errors.New("session: the unit's start is after the session's")
		}
		start = in.Start
	}
	if len(in.Prior) > 0 {
		devices = MergeDevices(in.Prior, e.Devices)
	}
	for _, d := range in.Charges {
		if slices.ContainsFunc(devices, func(m receipt.Device) bool { return m.Class == d.Class }) {
			return nil, fmt.Errorf("session: a charge of class %q, which the meters record already", d.Class)
		}
		devices = append(devices, d)
	}
	slices.SortFunc(devices, func(a, b receipt.Device) int { return strings.Compare(a.Class, b.Class) })
	rc := &receipt.Core{
		Type: receipt.Type, Unit: in.Unit.String(), Grants: s.cfg.Grants.ID().String(), Tier: t.String(),
		StartNS: uint64(start.UnixNano()), EndNS: uint64(end.UnixNano()), Exit: in.Exit, Outputs: outs,
		Devices: devices, JournalRoot: root,
	}
	rc.Finish()
	env, id, err := receipt.Seal(k, rc)
	if err != nil {
		return nil, err
	}
	host := attest.Host{Kernel: kernel(), Cordon: s.cfg.Version, Tiers: tierNames(s.plan.Offers, t)}
	if in.Kernel != "" {
		host.Kernel = in.Kernel
		host.Tiers = []string{t.String()}
	}
	att, err := attest.Sign(k, attest.For(rc, host))
	if err != nil {
		return nil, err
	}
	return &Sealed{Core: rc, ID: id, Receipt: env, Attestation: att, Energy: e}, nil
}

func tierNames(offers []tier.Tier, used tier.Tier) []string {
	var out []string
	for _, t := range offers {
		out = append(out, t.String())
	}
	if len(out) == 0 {
		out = []string{used.String()}
	}
	return out
}
