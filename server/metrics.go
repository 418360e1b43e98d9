package server

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the server's Prometheus metrics, written in the text
// exposition format (version 0.0.4). They are kept here rather than with
// prometheus/client_golang: that library brings google.golang.org/protobuf,
// whose package initialization opens the running executable, which
// starts Go's network poller in every process of the binary — including
// the sandbox's init, which closes every inherited descriptor and so the
// poller's (docs/DEPENDENCIES.md, "Decided against").
type metrics struct {
	// reqMu is read-locked by every request, to find its histogram,
	// and locked only to add a route and status not seen before; the
	// histograms count atomically. A request whose thread the kernel
	// preempts holds up no other request.
	reqMu    sync.RWMutex
	requests map[[2]string]*histogram // guarded by reqMu: route, code

	mu        sync.Mutex
	runs      map[string]float64    // guarded by mu: event
	execution map[string]*histogram // guarded by mu: state
}

// histogram counts observations per bucket atomically. Its count is the
// sum of its buckets when written, so the +Inf bucket and _count always
// agree; _sum is added before the bucket's count, and may include an
// observation still being counted.
type histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, the last one +Inf's
	sum    atomic.Uint64   // math.Float64bits of the sum
}

var (
	requestBuckets   = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	executionBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
)

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]*histogram{}, runs: map[string]float64{}, execution: map[string]*histogram{}}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	h.counts[i].Add(1)
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (m *metrics) request(route, code string, d time.Duration) {
	k := [2]string{route, code}
	m.reqMu.RLock()
	h := m.requests[k]
	m.reqMu.RUnlock()
	if h == nil {
		m.reqMu.Lock()
		if h = m.requests[k]; h == nil {
			h = newHistogram(requestBuckets)
			m.requests[k] = h
		}
		m.reqMu.Unlock()
	}
	h.observe(d.Seconds())
}

// run counts a run event: submitted, approved, rejected, interrupted, or
// an outcome.
func (m *metrics) run(event string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[event]++
}

func (m *metrics) executed(state string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.execution[state]
	if h == nil {
		h = newHistogram(executionBuckets)
		m.execution[state] = h
	}
	h.observe(d.Seconds())
}

// label quotes a label value as the exposition format requires.
func label(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

func num(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func writeHistogram(b *strings.Builder, name, labels string, h *histogram) {
	var cum uint64
	for i, bound := range h.bounds {
		cum += h.counts[i].Load()
		fmt.Fprintf(b, "%s_bucket{%sle=%q} %d\n", name, labels, num(bound), cum)
	}
	cum += h.counts[len(h.bounds)].Load()
	fmt.Fprintf(b, "%s_bucket{%sle=\"+Inf\"} %d\n", name, labels, cum)
	fmt.Fprintf(b, "%s_sum{%s} %s\n", name, strings.TrimSuffix(labels, ","), num(math.Float64frombits(h.sum.Load())))
	fmt.Fprintf(b, "%s_count{%s} %d\n", name, strings.TrimSuffix(labels, ","), cum)
}

// text is the exposition, series sorted.
func (m *metrics) text() string {
	m.reqMu.RLock()
	defer m.reqMu.RUnlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	b.WriteString("# HELP cordon_http_request_duration_seconds API request latency by route and status.\n# TYPE cordon_http_request_duration_seconds histogram\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		writeHistogram(&b, "cordon_http_request_duration_seconds", "route="+label(k[0])+",code="+label(k[1])+",", m.requests[k])
	}
	b.WriteString("# HELP cordon_runs_total Run events: submitted, approved, rejected, interrupted, and each outcome.\n# TYPE cordon_runs_total counter\n")
	events := make([]string, 0, len(m.runs))
	for k := range m.runs {
		events = append(events, k)
	}
	slices.Sort(events)
	for _, e := range events {
		fmt.Fprintf(&b, "cordon_runs_total{event=%s} %s\n", label(e), num(m.runs[e]))
	}
	b.WriteString("# HELP cordon_run_execution_seconds Wall time of executed runs by outcome.\n# TYPE cordon_run_execution_seconds histogram\n")
	states := make([]string, 0, len(m.execution))
	for k := range m.execution {
		states = append(states, k)
	}
	slices.Sort(states)
	for _, st := range states {
		writeHistogram(&b, "cordon_run_execution_seconds", "state="+label(st)+",", m.execution[st])
	}
	return b.String()
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the
// console's server-sent events flush through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	return w.ResponseWriter.Write(b)
}

// instrument records each request's latency under its route pattern
// (never the raw path, whose ids are unbounded).
func (s *Server) instrument(rt Route, h http.Handler) http.Handler {
	name := rt.Method + " " + rt.Path
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = 200
		}
		s.metrics.request(name, strconv.Itoa(sw.code), time.Since(start))
	})
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(s.metrics.text()))
}
