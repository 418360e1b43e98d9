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
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"iter"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/text/unicode/norm"

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
	// MaxChangeLines caps the lines one classification reads, old and
	// new content of every file together (content decoded from UTF-16
	// counts again): a larger change cannot be reviewed.
	MaxChangeLines = 16 << 20
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
	// The prefilter: a line runs the rules' own added-line patterns only
	// when it holds one of lits, the literal prefixes every match of a
	// pattern begins with (searched directly: faster than the pattern,
	// and than an alternation, which loses them), or matches one of any,
	// the patterns without such a prefix as alternations (one, unless
	// they are too large to compile as one). hasLines is whether the
	// policy has any added-line pattern; anyEmpty, whether one matches
	// an empty line.
	lits     [][]byte
	any      []*regexp.Regexp
	hasLines bool
	anyEmpty bool
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
	// folded holds each glob of paths case-folded and in NFC, "" where
	// folding made it invalid: a path matches a glob as written, or
	// folded against the folded path.
	folded []string
	lines  []*regexp.Regexp
	// lits holds, for each of lines that is a plain literal, its bytes
	// (searched directly: RE2 runs a long literal as an automaton when
	// the line starts like it); nil for the others.
	lits [][]byte
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
	var alt []altPattern
	seen := map[string]bool{}
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
			f := fold(g)
			if !doublestar.ValidatePattern(f) {
				f = ""
			}
			cr.folded = append(cr.folded, f)
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
			p.hasLines = true
			pre, complete := re.LiteralPrefix()
			var lit []byte
			if complete && regexp.QuoteMeta(pre) == e {
				lit = []byte(pre) // not "^x$": complete, but anchored
			}
			cr.lits = append(cr.lits, lit)
			if pre != "" {
				if !seen[pre] {
					seen[pre] = true
					p.lits = append(p.lits, []byte(pre))
				}
				p.anyEmpty = p.anyEmpty || re.Match(nil)
				continue
			}
			// The parsed form, printed, has no \Q…\E left to swallow
			// the alternation around it.
			sy, err := syntax.Parse(e, syntax.Perl)
			if err != nil {
				return nil, fmt.Errorf("risk policy: %s.added_lines[%d]: %v", at, j, err)
			}
			alt = append(alt, altPattern{"(?:" + sy.String() + ")", re})
		}
		p.rules = append(p.rules, cr)
	}
	p.any = alternations(alt)
	for _, a := range p.any {
		p.anyEmpty = p.anyEmpty || a.Match(nil)
	}
	return &p, nil
}

// altPattern is an added-line pattern: its parsed form printed (no
// \Q…\E left to swallow an alternation around it), in a group that keeps
// its flags to itself, and the pattern compiled alone.
type altPattern struct {
	src string
	re  *regexp.Regexp
}

// altBytes is the most source one alternation is built from at first.
const altBytes = 32 << 10

// alternations compiles pats into as few alternations as compile: runs
// of at most altBytes of source, each halved while it is too large to
// compile; a pattern that does not compile in an alternation at all
// stands alone, as compiled.
func alternations(pats []altPattern) []*regexp.Regexp {
	var out []*regexp.Regexp
	var build func(ps []altPattern)
	build = func(ps []altPattern) {
		if len(ps) == 1 {
			out = append(out, ps[0].re)
			return
		}
		src := make([]string, len(ps))
		for i, a := range ps {
			src[i] = a.src
		}
		if re, err := regexp.Compile(strings.Join(src, "|")); err == nil {
			out = append(out, re)
			return
		}
		build(ps[:len(ps)/2])
		build(ps[len(ps)/2:])
	}
	for start, n := 0, 0; start < len(pats); {
		end := start
		for n = 0; end < len(pats) && (end == start || n+len(pats[end].src) <= altBytes); end++ {
			n += len(pats[end].src) + 1
		}
		build(pats[start:end])
		start = end
	}
	return out
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
	// Encoding names the UTF-16 encoding a line was decoded from ("utf-16le",
	// "utf-16be"; Line then counts lines of the decoded text), "" when
	// the line was matched as written.
	Encoding string `json:"encoding,omitempty"`
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

// Classify is ClassifyContext without a deadline.
func (p *Policy) Classify(change []File) (*Classification, error) {
	return p.classify(change, func() error { return nil })
}

// ClassifyContext tiers a change. A change with no files is still low
// risk and still needs its tier's approvers: accepting nothing is a
// decision too.
//
// The work is linear in the change's size: each file's lines are hashed
// and streamed, never collected, and each candidate line runs a
// prefilter built from every added-line pattern (their literal prefixes
// searched as bytes, one alternation of the rest) and the rules' own
// patterns only when it passes. A change of over
// MaxChangeLines lines is an error, and ctx is checked every few
// thousand lines (or MiB): a classification ctx ends is an error too.
func (p *Policy) ClassifyContext(ctx context.Context, change []File) (*Classification, error) {
	return p.classify(change, ctx.Err)
}

func (p *Policy) classify(change []File, stop func() error) (*Classification, error) {
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
	w := &work{stop: stop, seed: maphash.MakeSeed()}
	for _, f := range files {
		folded := fold(f.Path)
		for ri, r := range p.rules {
			for gi, g := range r.paths {
				if doublestar.MatchUnvalidated(g, f.Path) || r.folded[gi] != "" && doublestar.MatchUnvalidated(r.folded[gi], folded) {
					raise(Match{Rule: ri, Tier: r.tier, Kind: "path", Pattern: g, Path: f.Path})
				}
			}
		}
		if !p.hasLines || f.New == nil {
			continue
		}
		if err := p.scan(w, f.Path, "", f.Old, f.New, raise); err != nil {
			return nil, err
		}
		// UTF-16 content is matched as it is written and as its text,
		// decoded: another view can only add matches.
		if enc, nw := decodeUTF16(f.New); enc != "" {
			old := f.Old
			if e, o := decodeUTF16(f.Old); e != "" {
				old = o
			}
			if err := p.scan(w, f.Path, enc, old, nw, raise); err != nil {
				return nil, err
			}
		}
	}
	c.Approvals = p.Approvals[c.Tier]
	return c, nil
}

// work is one classification's bounds: the lines it has read, and when
// it last asked whether to stop.
type work struct {
	stop  func() error
	seed  maphash.Seed
	lines int
	since int // lines and KiB since the last stop check
}

// tick counts one line of n bytes, and checks the bounds.
func (w *work) tick(n int) error {
	w.lines++
	if w.lines > MaxChangeLines {
		return fmt.Errorf("risk: the change is too large to review: over %d lines, old and new content together", MaxChangeLines)
	}
	if w.since += 1 + n>>10; w.since >= 4096 {
		w.since = 0
		if err := w.stop(); err != nil {
			return fmt.Errorf("risk: classifying the change: %w", err)
		}
	}
	return nil
}

// count adds the hash of each line of b to have, and returns how many
// lines b holds.
func (w *work) count(b []byte, have map[uint64]int32) (int, error) {
	n := 0
	for l := range lines(b) {
		n++
		if err := w.tick(len(l)); err != nil {
			return 0, err
		}
		have[maphash.Bytes(w.seed, l)]++
	}
	return n, nil
}

// scan matches the added-line patterns against the candidate lines of
// new: the lines new holds more often than old (an old line accounts for
// the first equal new line), or every line of new when old holds some
// line more often than new — a removal can make a line that was there
// all along live, and tiering only raises. When old is nil (the run
// created the file), every line is added. Lines are compared by a
// 64-bit hash under a seed chosen per classification.
func (p *Policy) scan(w *work, path, enc string, old, new []byte, raise func(Match)) error {
	all := old == nil
	var have map[uint64]int32
	if !all {
		have = map[uint64]int32{}
		n, err := w.count(old, have)
		if err != nil {
			return err
		}
		kept := 0
		for l := range lines(new) {
			if h := maphash.Bytes(w.seed, l); have[h] > 0 {
				have[h]--
				kept++
			}
		}
		if kept < n {
			all = true
		} else {
			clear(have)
			w.lines -= n // the same lines again
			if _, err := w.count(old, have); err != nil {
				return err
			}
		}
	}
	ln := 0
	for l := range lines(new) {
		ln++
		if err := w.tick(len(l)); err != nil {
			return err
		}
		if !all {
			if h := maphash.Bytes(w.seed, l); have[h] > 0 {
				have[h]--
				continue
			}
		}
		if !p.prefilter(l) {
			continue
		}
		for ri, r := range p.rules {
			for i, re := range r.lines {
				if lit := r.lits[i]; lit != nil && bytes.Contains(l, lit) || lit == nil && re.Match(l) {
					raise(Match{Rule: ri, Tier: r.tier, Kind: "added_line", Pattern: re.String(), Path: path, Line: ln, Encoding: enc})
				}
			}
		}
	}
	return nil
}

// prefilter reports whether one of the policy's added-line patterns
// might match l: whether one of its alternations does.
func (p *Policy) prefilter(l []byte) bool {
	if len(l) == 0 {
		return p.anyEmpty
	}
	for _, lit := range p.lits {
		if len(l) >= len(lit) && bytes.Contains(l, lit) {
			return true
		}
	}
	for _, a := range p.any {
		if a.Match(l) {
			return true
		}
	}
	return false
}

// lines yields the lines of b, split at every line ending: "\r\n", "\n"
// or a lone "\r". The piece after the last ending is a line too, empty
// when b ends with one.
func lines(b []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for {
			// Both searches are SIMD; the second looks only before the
			// first's hit, so each byte is looked at at most twice.
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				i = bytes.IndexByte(b, '\r')
			} else if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
				i = j
			}
			if i < 0 {
				yield(b)
				return
			}
			l := b[:i]
			if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
				b = b[i+2:]
			} else {
				b = b[i+1:]
			}
			if !yield(l) {
				return
			}
		}
	}
}

// utf16Sniff is how much of content without a byte-order mark is looked
// at to tell UTF-16.
const utf16Sniff = 4 << 10

// decodeUTF16 decodes b to UTF-8 when it is UTF-16: it starts with a
// byte-order mark (FF FE little-endian, FE FF big-endian), or most of
// the odd (little-endian) or even (big-endian) bytes of its first 4 KiB
// are NUL. It returns the encoding's name ("utf-16le", "utf-16be"), or
// "" and nil for other content. An unpaired surrogate, and a last odd
// byte, decode to U+FFFD.
func decodeUTF16(b []byte) (string, []byte) {
	var order binary.ByteOrder
	var enc string
	switch {
	case len(b) >= 2 && b[0] == 0xff && b[1] == 0xfe:
		order, enc, b = binary.LittleEndian, "utf-16le", b[2:]
	case len(b) >= 2 && b[0] == 0xfe && b[1] == 0xff:
		order, enc, b = binary.BigEndian, "utf-16be", b[2:]
	default:
		head := b[:min(len(b), utf16Sniff)]
		if len(head) < 4 {
			return "", nil
		}
		even, odd := 0, 0
		for i, c := range head {
			if c == 0 {
				if i%2 == 0 {
					even++
				} else {
					odd++
				}
			}
		}
		switch {
		case 2*odd > len(head)/2 && odd >= even:
			order, enc = binary.LittleEndian, "utf-16le"
		case 2*even > (len(head)+1)/2:
			order, enc = binary.BigEndian, "utf-16be"
		default:
			return "", nil
		}
	}
	out := make([]byte, 0, len(b)+len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		r := rune(order.Uint16(b[i:]))
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			if r < 0xdc00 && i+3 < len(b) {
				r2 = utf16.DecodeRune(r, rune(order.Uint16(b[i+2:])))
			}
			if r2 != utf8.RuneError {
				i += 2
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
	}
	if len(b)%2 == 1 {
		out = utf8.AppendRune(out, utf8.RuneError)
	}
	return enc, out
}

// fold is s in NFC with every letter replaced by the least rune of its
// simple case-folding orbit, so that spellings a case-insensitive file
// system aliases fold alike (K, k and the Kelvin sign all fold to K).
func fold(s string) string {
	s = norm.NFC.String(s)
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}
