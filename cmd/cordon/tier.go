package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// runTier prints the tier a grant set requires and whether the host offers
// it; exit status 1 when it does not.
func runTier(e *env, args []string) error {
	fs := flag.NewFlagSet("tier", flag.ContinueOnError)
	offers := fs.String("offers", "", "judge against a host that offers these tiers (e.g. S0,S1,S2) instead of this one")
	asJSON := fs.Bool("json", false, "print one JSON object for machines: required, requirements, offers, selected")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("tier", pos, "GRANTS.json"); err != nil {
		return err
	}
	s, err := loadGrants(e, pos[0])
	if err != nil {
		return err
	}
	sandbox.Probe(tier.S4) // the host's offers name S4 only once a program ran under gVisor
	host := selection.Host{Offers: sandbox.Offers()}
	if *offers != "" {
		host = selection.Host{}
		for _, name := range strings.Split(*offers, ",") {
			t, err := tier.Parse(strings.TrimSpace(name))
			if err != nil {
				return usageErrorf("tier: --offers: %v", err)
			}
			host.Offers = append(host.Offers, t)
		}
	}
	req := selection.Required(s)
	if *asJSON {
		return tierJSON(e, s, host)
	}
	fmt.Fprintf(e.stdout, "required: %s\n", req)
	for _, r := range selection.Requirements(s) {
		fmt.Fprintf(e.stdout, "  %s  %s\n", r.Tier, r.Why)
	}
	fmt.Fprintf(e.stdout, "host offers: %s\n", tier.FormatList(host.Offers))
	if *offers == "" {
		if why := sandbox.CgroupLimits(); why != nil {
			// Rootless without a delegated cgroup: say what is not enforced.
			what := "memory and CPU are not limited"
			if s.Limits.MemoryBytes != nil || s.Limits.CPUMS != nil {
				what = "this grant set limits memory or CPU, so its runs are refused"
			}
			fmt.Fprintf(e.stdout, "cgroup limits: none rootless (%v): %s\n", why, what)
		}
	}
	if _, err := host.Select(s); err != nil {
		if errors.Is(err, selection.ErrNotOffered) && *offers == "" {
			if perr := sandbox.Probe(selection.Required(s)); perr != nil && (selection.Required(s) == tier.S2 || selection.Required(s) == tier.S3) {
				return withHint(err, perr.Error())
			}
			return withHint(err, "this host runs S2 and S3 (cordon's sandbox) when its kernel allows; a run is refused rather than run at another tier")
		}
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "selected: %s\n", req)
	return err
}

// tierJSON prints 'cordon tier --json'; exit status 1 when the host does
// not offer the required tier.
func tierJSON(e *env, s *grant.Set, host selection.Host) error {
	type requirement struct {
		Tier string `json:"tier"`
		Why  string `json:"why"`
	}
	out := struct {
		Required     string        `json:"required"`
		Requirements []requirement `json:"requirements"`
		Offers       []string      `json:"offers"`
		Selected     *string       `json:"selected"`
		Error        string        `json:"error,omitempty"`
	}{Required: selection.Required(s).String(), Requirements: []requirement{}, Offers: []string{}}
	for _, r := range selection.Requirements(s) {
		out.Requirements = append(out.Requirements, requirement{r.Tier.String(), r.Why})
	}
	for _, t := range host.Offers {
		out.Offers = append(out.Offers, t.String())
	}
	t, err := host.Select(s)
	if err == nil {
		name := t.String()
		out.Selected = &name
	} else {
		out.Error = err.Error()
	}
	if werr := writeJSON(e, out); werr != nil {
		return werr
	}
	if err != nil {
		return errCheckFailed
	}
	return nil
}
