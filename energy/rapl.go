package energy

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cordon-dev/cordon/internal/nofollow"
)

// DefaultPowercap is where Linux exposes RAPL.
const DefaultPowercap = "/sys/class/powercap"

// RAPL reads the package and DRAM domains of the powercap tree. Core and
// uncore domains are parts of their package and are not added again.
type RAPL struct {
	root    string
	domains []raplDomain
}

type raplDomain struct {
	name     string // "package-0", "dram"
	energy   string // path of energy_uj
	maxRange uint64 // max_energy_range_uj: the counter wraps after it
}

// NewRAPL finds the RAPL domains under root (DefaultPowercap when empty).
// It fails with ErrUnavailable when there are none or they cannot be read
// (since CVE-2020-8694 only root may read energy_uj).
func NewRAPL(root string) (*RAPL, error) {
	if root == "" {
		root = DefaultPowercap
	}
	zones, err := filepath.Glob(filepath.Join(root, "intel-rapl:*"))
	if err != nil {
		return nil, err
	}
	r := &RAPL{root: root}
	for _, z := range zones {
		nameB, err := nofollow.Read(filepath.Join(z, "name"), 256)
		if err != nil {
			return nil, fmt.Errorf("%w: RAPL %s: %v", ErrUnavailable, z, err)
		}
		name := strings.TrimSpace(string(nameB))
		sub := strings.Count(filepath.Base(z), ":") == 2
		switch {
		case !sub && strings.HasPrefix(name, "package-"):
		case sub && name == "dram":
		default:
			continue // core, uncore, psys: inside a package, or a platform total
		}
		max, err := readUint(filepath.Join(z, "max_energy_range_uj"))
		if err != nil {
			return nil, fmt.Errorf("%w: RAPL %s: %v", ErrUnavailable, name, err)
		}
		if max == 0 {
			return nil, fmt.Errorf("%w: RAPL %s: max_energy_range_uj is 0", ErrUnavailable, name)
		}
		d := raplDomain{name: name, energy: filepath.Join(z, "energy_uj"), maxRange: max}
		if _, err := readUint(d.energy); err != nil {
			return nil, fmt.Errorf("%w: RAPL %s: %v (energy_uj is readable by root only)", ErrUnavailable, name, err)
		}
		r.domains = append(r.domains, d)
	}
	if len(r.domains) == 0 {
		return nil, fmt.Errorf("%w: no RAPL package domains under %s", ErrUnavailable, root)
	}
	return r, nil
}

// readUint reads a counter file: a regular file (sysfs attributes are),
// never through a symbolic link at its name and never blocking on a FIFO
// planted in its place.
func readUint(path string) (uint64, error) {
	b, err := nofollow.Read(path, 64)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a counter", path, s)
	}
	return n, nil
}

// Class implements Meter.
func (r *RAPL) Class() string { return "cpu" }

// Root is the powercap tree read.
func (r *RAPL) Root() string { return r.root }

// Domains names the domains read, in order.
func (r *RAPL) Domains() []string {
	var out []string
	for _, d := range r.domains {
		out = append(out, d.name)
	}
	return out
}

// Read implements Meter.
func (r *RAPL) Read() (Counter, error) {
	c := Counter{Values: make([]uint64, len(r.domains))}
	for i, d := range r.domains {
		v, err := readUint(d.energy)
		if err != nil {
			return Counter{}, fmt.Errorf("%w: RAPL %s: %v", ErrUnavailable, d.name, err)
		}
		if v > d.maxRange {
			return Counter{}, fmt.Errorf("RAPL %s: counter %d above its range %d", d.name, v, d.maxRange)
		}
		c.Values[i] = v
	}
	return c, nil
}

// Delta implements Meter: per domain end − start, or, when the counter
// wrapped, (max − start) + end.
func (r *RAPL) Delta(start, end Counter) (uint64, error) {
	if len(start.Values) != len(r.domains) || len(end.Values) != len(r.domains) {
		return 0, errors.New("RAPL: readings of another set of domains")
	}
	var total uint64
	for i, d := range r.domains {
		s, e := start.Values[i], end.Values[i]
		if e >= s {
			total += e - s
		} else {
			total += d.maxRange - s + e
		}
	}
	return total, nil
}
