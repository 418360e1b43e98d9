// Package risk tiers a finished run's change — its declared outputs, as
// a diff against its inputs — by the operator's path and added-line
// patterns, and says how many approvers must accept it.
//
// Tiering only ever raises risk: a change starts at the lowest tier and
// every rule that matches can only raise it; no rule, pattern or tenant
// input can lower it. A higher tier never needs fewer approvals than a
// lower one (Parse refuses such a policy).
package risk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// Tiers, lowest first.
const (
	Low    = "low"
	Medium = "medium"
	High   = "high"
)

var tiers = []string{Low, Medium, High}

// rank orders tiers; -1 for a name that is not one.
func rank(t string) int { return slices.Index(tiers, t) }

// Limits on a policy, so that classifying a change stays cheap.
const (
	MaxRules       = 256
	MaxPatterns    = 64   // per rule, paths and added lines each
	MaxPatternLen  = 512  // bytes
	MaxApprovals   = 16   // per tier
	MaxMatches     = 200  // recorded per classification; the count is exact
	MaxChangeFiles = 1024 // files in one change
)

// Policy is the operator's risk policy.
type Policy struct {
	// Approvals is how many distinct approvers, none of them the
	// run's submitter, each tier needs. Every tier is named, each needs
	// at least one, and a higher tier needs at least as many as a
	// lower one.
	Approvals map[string]int `json:"approvals"`
	// Rules raise a change's tier when one of their patterns matches.
	Rules []Rule `json:"rules"`

	id    canon.ID
	rules []rule
}

// Rule raises a change to Tier when a changed path matches one of Paths
// (doublestar globs over slash-separated workspace paths: `**` spans
// directories) or a line the change adds matches one of AddedLines
// (RE2 regular expressions, linear in the line's length).
type Rule struct {
	Tier       string   `json:"tier"`
	Paths      []string `json:"paths,omitempty"`
	AddedLines []string `json:"added_lines,omitempty"`
}

type rule struct {
	tier  string
	paths []string
	lines []*regexp.Regexp
}

// Default is the policy in force when the operator has set none: every
// change is low risk and needs one approver.
func Default() *Policy {
	p, err := Parse([]byte(`{"approvals":{"low":1,"medium":1,"high":2},"rules":[]}`))
	if err != nil {
		panic(err) // a constant
	}
	return p
}

// Parse decodes and checks a policy strictly: unknown or duplicate
// members, unknown tiers, bad patterns and non-monotonic approval counts
// are errors naming the member.
func Parse(b []byte) (*Policy, error) {
	cv, err := canon.Parse(b) // refuses duplicate members
	if err != nil {
		return nil, fmt.Errorf("risk policy: %w", err)
	}
	id, err := cv.ID()
	if err != nil {
		return nil, fmt.Errorf("risk policy: %w", err)
	}
	var p Policy
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("risk policy: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("risk policy: data after the JSON value")
	}
	p.id = id
	for name := range p.Approvals {
		if rank(name) < 0 {
			return nil, fmt.Errorf("risk policy: approvals: unknown tier %q (want %s)", name, strings.Join(tiers, ", "))
		}
	}
	prev := 0
	for _, t := range tiers {
		n, ok := p.Approvals[t]
		switch {
		case !ok:
			return nil, fmt.Errorf("risk policy: approvals: tier %q is missing: name the approvals every tier needs", t)
		case n < 1 || n > MaxApprovals:
			return nil, fmt.Errorf("risk policy: approvals.%s: %d, want 1 to %d: every change needs an approver", t, n, MaxApprovals)
		case n < prev:
			return nil, fmt.Errorf("risk policy: approvals.%s: %d is fewer than a lower tier's %d: a higher tier never needs fewer approvals", t, n, prev)
		}
		prev = n
	}
	if p.Rules == nil {
		return nil, fmt.Errorf("risk policy: rules: missing (an empty list says every change is %s)", Low)
	}
	if len(p.Rules) > MaxRules {
		return nil, fmt.Errorf("risk policy: rules: %d, at most %d", len(p.Rules), MaxRules)
	}
	for i, r := range p.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		if rank(r.Tier) < 0 {
			return nil, fmt.Errorf("risk policy: %s.tier: %q, want one of %s", at, r.Tier, strings.Join(tiers, ", "))
		}
		if len(r.Paths) == 0 && len(r.AddedLines) == 0 {
			return nil, fmt.Errorf("risk policy: %s: no paths and no added_lines: a rule must match something", at)
		}
		if len(r.Paths) > MaxPatterns || len(r.AddedLines) > MaxPatterns {
			return nil, fmt.Errorf("risk policy: %s: at most %d patterns of each kind", at, MaxPatterns)
		}
		cr := rule{tier: r.Tier}
		for j, g := range r.Paths {
			if g == "" || len(g) > MaxPatternLen || !doublestar.ValidatePattern(g) || strings.HasPrefix(g, "/") {
				return nil, fmt.Errorf("risk policy: %s.paths[%d]: %q is not a relative glob of at most %d bytes", at, j, g, MaxPatternLen)
			}
			cr.paths = append(cr.paths, g)
		}
		for j, e := range r.AddedLines {
			if e == "" || len(e) > MaxPatternLen {
				return nil, fmt.Errorf("risk policy: %s.added_lines[%d]: want a regular expression of 1 to %d bytes", at, j, MaxPatternLen)
			}
			re, err := regexp.Compile(e)
			if err != nil {
				return nil, fmt.Errorf("risk policy: %s.added_lines[%d]: %v", at, j, err)
			}
			cr.lines = append(cr.lines, re)
		}
		p.rules = append(p.rules, cr)
	}
	return &p, nil
}

// ID is the policy's ContentId (of its JCS form): a classification
// names the policy it was made under.
func (p *Policy) ID() canon.ID { return p.id }

// File is one changed file of a run: its content before (the input;
// nil when the run created it) and after (nil when the run deleted it).
type File struct {
	Path string
	Old  []byte
	New  []byte
}

// Match is one pattern that matched.
type Match struct {
	Rule    int    `json:"rule"`
	Tier    string `json:"tier"`
	Kind    string `json:"kind"` // "path" or "added_line"
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"` // 1-based, in the new content
}

// Classification is what a change was tiered as, and why.
type Classification struct {
	Policy       string   `json:"policy"` // the policy's ContentId
	Tier         string   `json:"tier"`
	Approvals    int      `json:"approvals"` // distinct approvers needed
	Files        []string `json:"files"`     // changed paths, sorted
	Matches      []Match  `json:"matches"`   // the first MaxMatches
	MatchesTotal int      `json:"matches_total"`
}

// Classify tiers a change. A change with no files is still low risk and
// still needs its tier's approvers: accepting nothing is a decision too.
func (p *Policy) Classify(change []File) (*Classification, error) {
	if len(change) > MaxChangeFiles {
		return nil, fmt.Errorf("risk: %d changed files, at most %d", len(change), MaxChangeFiles)
	}
	files := make([]File, len(change))
	copy(files, change)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	c := &Classification{Policy: p.id.String(), Tier: Low, Files: []string{}, Matches: []Match{}}
	for i, f := range files {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || !utf8.ValidString(f.Path) {
			return nil, fmt.Errorf("risk: change path %q: want a relative slash-separated path", f.Path)
		}
		if i > 0 && files[i-1].Path == f.Path {
			return nil, fmt.Errorf("risk: change path %q appears twice", f.Path)
		}
		c.Files = append(c.Files, f.Path)
	}
	raise := func(m Match) {
		if rank(m.Tier) > rank(c.Tier) {
			c.Tier = m.Tier
		}
		c.MatchesTotal++
		if len(c.Matches) < MaxMatches {
			c.Matches = append(c.Matches, m)
		}
	}
	for ri, r := range p.rules {
		for _, f := range files {
			for _, g := range r.paths {
				if doublestar.MatchUnvalidated(g, f.Path) {
					raise(Match{Rule: ri, Tier: r.tier, Kind: "path", Pattern: g, Path: f.Path})
				}
			}
			if len(r.lines) == 0 || f.New == nil {
				continue
			}
			for _, al := range addedLines(f.Old, f.New) {
				for _, re := range r.lines {
					if re.Match(al.text) {
						raise(Match{Rule: ri, Tier: r.tier, Kind: "added_line", Pattern: re.String(), Path: f.Path, Line: al.n})
					}
				}
			}
		}
	}
	c.Approvals = p.Approvals[c.Tier]
	return c, nil
}

type line struct {
	n    int
	text []byte
}

// addedLines returns the lines of new that old does not account for: a
// line counts as added when new holds it more times than old does. A
// line that only moved is not added; a line duplicated is. Lines split
// on '\n' (a trailing '\r' stays, so a pattern sees the line as written).
func addedLines(old, new []byte) []line {
	have := map[string]int{}
	if old != nil {
		for l := range bytes.SplitSeq(old, []byte("\n")) {
			have[string(l)]++
		}
	}
	var out []line
	n := 0
	for l := range bytes.SplitSeq(new, []byte("\n")) {
		n++
		if have[string(l)] > 0 {
			have[string(l)]--
			continue
		}
		out = append(out, line{n: n, text: l})
	}
	return out
}
