package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.HistogramVec
	runs      *prometheus.CounterVec
	execution *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cordon_http_request_duration_seconds", Help: "API request latency by route and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "code"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cordon_runs_total", Help: "Run events: submitted, approved, rejected, and each outcome.",
		}, []string{"event"}),
		execution: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cordon_run_execution_seconds", Help: "Wall time of executed runs by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}, []string{"state"}),
	}
	reg.MustRegister(m.requests, m.runs, m.execution)
	return m
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

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	return w.ResponseWriter.Write(b)
}

// instrument records each request's latency under its route pattern
// (never the raw path, whose ids are unbounded).
func (s *Server) instrument(rt Route, h http.Handler) http.Handler {
	label := rt.Method + " " + rt.Path
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = 200
		}
		s.metrics.requests.WithLabelValues(label, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
