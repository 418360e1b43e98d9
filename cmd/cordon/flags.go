package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"
)

// durationFlag is a time.Duration flag that, given a bare number such as
// "5", says which duration was likely meant ("did you mean 5s?") instead
// of only "missing unit". Define one with durationVar.
type durationFlag struct{ d *time.Duration }

// durationVar defines a duration flag on fs, as fs.Duration does.
func durationVar(fs *flag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	d := new(time.Duration)
	*d = value
	fs.Var(durationFlag{d}, name, usage)
	return d
}

func (f durationFlag) String() string {
	if f.d == nil {
		return "0s"
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("missing unit in duration %q (ns, us, ms, s, m or h); did you mean %ss?", s, s)
		}
		return fmt.Errorf("invalid duration %q: write a number and a unit, such as 90s, 1m30s or 500ms", s)
	}
	*f.d = d
	return nil
}
