package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMetricsConcurrentRequests: requests counted from many goroutines
// at once, on routes first seen concurrently, are all counted, in the
// right bucket, and a scrape while they are counted keeps each
// histogram's +Inf bucket equal to its count, its buckets cumulative,
// and its count never below an earlier scrape's.
func TestMetricsConcurrentRequests(t *testing.T) {
	m := newMetrics()
	const goroutines, each = 16, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		defer close(scraped)
		counts := map[string]uint64{} // the last scrape's count, per series
		for {
			select {
			case <-stop:
				return
			default:
			}
			text := m.text()
			if err := infEqualsCount(text); err != nil {
				scraped <- err
				return
			}
			if err := cumulative(text, counts); err != nil {
				scraped <- err
				return
			}
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// 3 ms: the 0.005 bucket; two routes, two codes.
				m.request(fmt.Sprintf("GET /r%d", i%2), fmt.Sprint(200+g%2), 3*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-scraped; err != nil {
		t.Fatal(err)
	}
	text := m.text()
	if err := infEqualsCount(text); err != nil {
		t.Fatal(err)
	}
	want := goroutines * each / 4
	for _, series := range []string{`route="GET /r0",code="200"`, `route="GET /r1",code="201"`} {
		for _, line := range []string{
			fmt.Sprintf(`cordon_http_request_duration_seconds_bucket{%s,le="0.0025"} 0`, series),
			fmt.Sprintf(`cordon_http_request_duration_seconds_bucket{%s,le="0.005"} %d`, series, want),
			fmt.Sprintf(`cordon_http_request_duration_seconds_count{%s} %d`, series, want),
		} {
			if !strings.Contains(text, line+"\n") {
				t.Errorf("the exposition lacks %q:\n%s", line, text)
			}
		}
		// The sum, within the float additions' rounding.
		_, rest, _ := strings.Cut(text, "cordon_http_request_duration_seconds_sum{"+series+"} ")
		line, _, _ := strings.Cut(rest, "\n")
		if sum, err := strconv.ParseFloat(line, 64); err != nil || math.Abs(sum-float64(want)*0.003) > 1e-9 {
			t.Errorf("%s: sum %q, want %g", series, line, float64(want)*0.003)
		}
	}
}

// infEqualsCount checks that every histogram's +Inf bucket equals its
// count.
func infEqualsCount(text string) error {
	inf := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, `,le="+Inf"} `); i >= 0 {
			inf[l[:i]] = l[i+len(`,le="+Inf"} `):]
		}
	}
	for _, l := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(l, "_count{")
		if !ok {
			continue
		}
		labels, n, _ := strings.Cut(rest, "} ")
		if got := inf[name+"_bucket{"+labels]; got != n {
			return fmt.Errorf("%s{%s}: +Inf bucket %q, count %q", name, labels, got, n)
		}
	}
	return nil
}

// cumulative checks that each histogram's buckets never decrease from
// one bound to the next, and that each count is at least the one in
// counts (the last scrape's), which it updates.
func cumulative(text string, counts map[string]uint64) error {
	last := map[string]uint64{}
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, `,le="`); i >= 0 && strings.Contains(l, "_bucket{") {
			_, v, _ := strings.Cut(l[i:], "} ")
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%q: %v", l, err)
			}
			if n < last[l[:i]] {
				return fmt.Errorf("%q: below the bucket before it (%d)", l, last[l[:i]])
			}
			last[l[:i]] = n
		}
		if name, rest, ok := strings.Cut(l, "_count{"); ok {
			labels, v, _ := strings.Cut(rest, "} ")
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%q: %v", l, err)
			}
			if k := name + labels; n < counts[k] {
				return fmt.Errorf("%q: below the last scrape's count %d", l, counts[k])
			} else {
				counts[k] = n
			}
		}
	}
	return nil
}
