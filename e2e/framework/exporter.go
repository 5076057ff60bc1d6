package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Exporter is a metrics endpoint that a test controls: it serves /metrics on a
// loopback port with the gauges the test sets, for a Prometheus started by
// StartPrometheus to scrape. It runs in the test process, with its own
// registry, so it shows only what the test set.
type Exporter struct {
	registry *prometheus.Registry
	server   *http.Server
	address  string
	scrapes  atomic.Int64

	mu     sync.Mutex
	gauges map[string]*exportedGauge
}

// exportedGauge is one metric name: its label names are fixed by the first Set,
// as Prometheus wants one set of label names per metric.
type exportedGauge struct {
	labelNames []string
	vec        *prometheus.GaugeVec
}

// NewExporter starts an exporter on a free loopback port. Close it when done.
func NewExporter() (*Exporter, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("exporter listen: %w", err)
	}
	e := &Exporter{
		registry: prometheus.NewRegistry(),
		address:  listener.Addr().String(),
		gauges:   map[string]*exportedGauge{},
	}
	metrics := promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		e.scrapes.Add(1)
		metrics.ServeHTTP(w, r)
	})
	e.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = e.server.Serve(listener) }()
	return e, nil
}

// Address is the exporter's host:port, a scrape target for StartPrometheus.
func (e *Exporter) Address() string { return e.address }

// Scrapes counts the requests for /metrics served so far.
func (e *Exporter) Scrapes() int64 { return e.scrapes.Load() }

// Set sets the gauge name with labels to value, creating it if needed. Every
// series of one name must have the same label names; another set is an error.
func (e *Exporter) Set(name string, labels map[string]string, value float64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.gauges[name]
	if !ok {
		names := labelNames(labels)
		vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Set by an Echelon e2e test."}, names)
		if err := e.registry.Register(vec); err != nil {
			return fmt.Errorf("exporter: register %s: %w", name, err)
		}
		g = &exportedGauge{labelNames: names, vec: vec}
		e.gauges[name] = g
	}
	if names := labelNames(labels); !slices.Equal(names, g.labelNames) {
		return fmt.Errorf("exporter: %s has labels [%s], not [%s]", name,
			strings.Join(g.labelNames, ", "), strings.Join(names, ", "))
	}
	gauge, err := g.vec.GetMetricWith(labels)
	if err != nil {
		return fmt.Errorf("exporter: %s: %w", name, err)
	}
	gauge.Set(value)
	return nil
}

// Delete removes the series of name with exactly labels, reporting whether it
// existed. Prometheus then marks the series stale at its next scrape, and
// queries for it return no data, as when a real exporter stops exporting it.
func (e *Exporter) Delete(name string, labels map[string]string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.gauges[name]
	if !ok {
		return false
	}
	return g.vec.Delete(labels)
}

// Close stops serving; scrapes then fail (up == 0).
func (e *Exporter) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.server.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("exporter: %w", err)
	}
	return nil
}

func labelNames(labels map[string]string) []string {
	names := make([]string, 0, len(labels))
	for name := range labels {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
