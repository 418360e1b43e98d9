// Command benchratio reads `go test -bench` output and prints, for every
// benchmark that has an impl=cordon variant and a baseline variant
// (impl=<other>), the median ns/op of each and their ratio; and for every
// benchmark measured at several sizes (rules=N), the median at each size
// and its ratio to the smallest. Run it through scripts/bench, which
// measures the variants in one interleaved run.
package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	samples := map[string]map[string][]float64{} // benchmark → impl → ns/op
	var order []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // GOMAXPROCS suffix
		}
		base, impl, ok := strings.Cut(name, "/impl=")
		if !ok {
			if b, n, ok := strings.Cut(name, "/rules="); ok {
				base, impl = b+" (by rules)", n
			} else {
				continue
			}
		}
		var ns float64
		for i := 2; i+1 < len(f); i++ {
			if f[i+1] == "ns/op" {
				ns, _ = strconv.ParseFloat(f[i], 64)
			}
		}
		if samples[base] == nil {
			samples[base] = map[string][]float64{}
			order = append(order, base)
		}
		samples[base][impl] = append(samples[base][impl], ns)
	}
	if len(order) == 0 {
		fmt.Fprintln(os.Stderr, "benchratio: no impl= benchmarks in the input")
		os.Exit(1)
	}
	fmt.Printf("%-28s %-14s %14s %14s %8s %4s\n", "benchmark", "baseline", "cordon ns/op", "base ns/op", "ratio", "n")
	for _, base := range order {
		if strings.HasSuffix(base, " (by rules)") {
			continue
		}
		c := samples[base]["cordon"]
		for impl, b := range samples[base] {
			if impl == "cordon" || len(c) == 0 {
				continue
			}
			mc, mb := median(c), median(b)
			fmt.Printf("%-28s %-14s %14.0f %14.0f %7.2fx %4d\n", base, impl, mc, mb, mc/mb, min(len(c), len(b)))
		}
	}
	first := true
	for _, base := range order {
		name, ok := strings.CutSuffix(base, " (by rules)")
		if !ok {
			continue
		}
		if first {
			fmt.Printf("\n%-34s %8s %8s %8s %8s %12s\n", "benchmark (ns/op by rules)", "10", "100", "1000", "10000", "10000/10")
			first = false
		}
		m := map[string]float64{}
		for n, xs := range samples[base] {
			m[n] = median(xs)
		}
		fmt.Printf("%-34s %8.0f %8.0f %8.0f %8.0f %11.2fx\n", name, m["10"], m["100"], m["1000"], m["10000"], m["10000"]/m["10"])
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
