package analysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls"
)

// DefaultTimeout bounds a query when the spec sets no timeout.
const DefaultTimeout = 10 * time.Second

// MaxResponseBytes bounds the body of a Prometheus answer, which the client
// reads whole into memory: a check needs a few series, while a query
// selecting millions of them, or a proxy's endless answer, would take the
// leader's memory.
const MaxResponseBytes = 10 << 20

// errResponseTooLarge is the read error of an answer over MaxResponseBytes.
var errResponseTooLarge = fmt.Errorf("the answer is larger than the limit of %d MiB; select fewer series (aggregate with sum, max or topk)", MaxResponseBytes>>20)

// Querier runs instant queries.
type Querier interface {
	// Query runs an instant query evaluated at the given time and returns its
	// samples: the series of an instant vector, or one sample for a scalar.
	Query(ctx context.Context, query string, at time.Time) ([]Sample, error)
}

// PrometheusConfig says how to reach a Prometheus server.
type PrometheusConfig struct {
	// Address is the base URL of the HTTP API, without /api/v1.
	Address string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// Username and Password, when Username is set and BearerToken is not, are
	// sent as basic authentication.
	Username string
	Password string
	// CAPEM holds the PEM certificates of the authorities that sign the
	// server's certificate; the system's pool when empty.
	CAPEM              []byte
	InsecureSkipVerify bool
	ServerName         string
	// Timeout bounds each query (DefaultTimeout when zero); Prometheus is told
	// too, so it stops evaluating.
	Timeout time.Duration
}

// prometheusQuerier queries through client_golang's Prometheus API client.
type prometheusQuerier struct {
	address string
	api     promv1.API
	timeout time.Duration
}

// NewPrometheus returns a Querier for the server cfg describes. It keeps its
// connections open between queries.
func NewPrometheus(cfg PrometheusConfig) (Querier, error) {
	// The same verification as the tls blocks of http checks and hooks.
	tlsConfig, err := httptls.Config(&httptls.Material{Field: "spec.analysis.prometheus.tls", CAField: "spec.analysis.prometheus.tls.caSecretRef",
		CAPEM: cfg.CAPEM, ServerName: cfg.ServerName, InsecureSkipVerify: cfg.InsecureSkipVerify})
	if err != nil {
		return nil, err
	}
	return newPrometheus(cfg, httptls.NewTransport(tlsConfig), MaxResponseBytes)
}

// newPrometheus is NewPrometheus over transport, reading at most maxBody
// bytes of each answer.
func newPrometheus(cfg PrometheusConfig, transport http.RoundTripper, maxBody int64) (Querier, error) {
	var rt http.RoundTripper = limitRoundTripper{next: transport, max: maxBody}
	switch {
	case cfg.BearerToken != "":
		rt = authRoundTripper{next: rt, set: func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+cfg.BearerToken) }}
	case cfg.Username != "":
		rt = authRoundTripper{next: rt, set: func(r *http.Request) { r.SetBasicAuth(cfg.Username, cfg.Password) }}
	}
	client, err := api.NewClient(api.Config{Address: cfg.Address, Client: &http.Client{Transport: rt, CheckRedirect: egress.CheckRedirect}})
	if err != nil {
		return nil, fmt.Errorf("prometheus address %q: %w", cfg.Address, err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &prometheusQuerier{address: cfg.Address, api: promv1.NewAPI(client), timeout: timeout}, nil
}

// authRoundTripper sets the credentials on a copy of each request.
type authRoundTripper struct {
	next http.RoundTripper
	set  func(*http.Request)
}

func (a authRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	a.set(r)
	return a.next.RoundTrip(r)
}

// limitRoundTripper fails the reading of an answer's body past max bytes.
type limitRoundTripper struct {
	next http.RoundTripper
	max  int64
}

func (l limitRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: l.max}
	return resp, nil
}

// limitedBody reads at most left bytes, then fails with errResponseTooLarge
// if the body has more.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// Query runs an instant query, bounded by the configured timeout.
func (q *prometheusQuerier) Query(ctx context.Context, query string, at time.Time) ([]Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	value, _, _, err := q.api.Query(ctx, query, at, promv1.WithTimeout(q.timeout))
	if err != nil {
		return nil, q.explain(ctx, err)
	}
	return samplesOf(value)
}

// explain rewords client_golang's errors so that status says what went wrong.
func (q *prometheusQuerier) explain(ctx context.Context, err error) error {
	if errors.Is(err, errResponseTooLarge) {
		return fmt.Errorf("query to %s: %w", q.address, err)
	}
	if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("query to %s timed out after %s", q.address, q.timeout)
	}
	var apiErr *promv1.Error
	if errors.As(err, &apiErr) {
		switch {
		case apiErr.Type == promv1.ErrBadData:
			return fmt.Errorf("Prometheus refused the query (bad PromQL): %s", apiErr.Msg)
		case apiErr.Msg == "client error: 401":
			return fmt.Errorf("Prometheus at %s refused the credentials (HTTP 401 Unauthorized); check spec.analysis.prometheus.authSecretRef", q.address)
		case apiErr.Msg == "client error: 403":
			return fmt.Errorf("Prometheus at %s denied the query (HTTP 403 Forbidden); check spec.analysis.prometheus.authSecretRef", q.address)
		}
		detail := strings.TrimSpace(apiErr.Detail)
		if len(detail) > 200 {
			detail = detail[:200] + "..."
		}
		if detail != "" {
			return fmt.Errorf("Prometheus at %s: %s: %s (%s)", q.address, apiErr.Type, apiErr.Msg, detail)
		}
		return fmt.Errorf("Prometheus at %s: %s: %s", q.address, apiErr.Type, apiErr.Msg)
	}
	return fmt.Errorf("query Prometheus at %s: %w", q.address, err)
}

// samplesOf turns an instant query's result into samples. A range vector or a
// string is refused: a check needs numbers at one instant.
func samplesOf(v model.Value) ([]Sample, error) {
	switch r := v.(type) {
	case model.Vector:
		samples := make([]Sample, 0, len(r))
		for _, s := range r {
			switch {
			case s == nil:
				// A null entry (a proxy's answer, not Prometheus's) must not
				// panic the reconcile, whose retries would re-query at once.
				return nil, errors.New("Prometheus returned a series with no sample")
			case s.Histogram != nil:
				// A native histogram has no float value: reading its zero Value
				// would judge 0 against the threshold.
				return nil, fmt.Errorf("the query returns a native histogram at %s; a check needs a float (use histogram_quantile(), histogram_count() or histogram_sum())", s.Metric)
			}
			samples = append(samples, Sample{Metric: s.Metric.String(), Value: float64(s.Value)})
		}
		return samples, nil
	case *model.Scalar:
		return []Sample{{Value: float64(r.Value)}}, nil
	case model.Matrix:
		return nil, errors.New("the query returns a range vector; a check needs an instant vector or a scalar (drop the [range] selector or wrap it in a function such as rate())")
	case nil:
		return nil, errors.New("Prometheus returned no result")
	}
	return nil, fmt.Errorf("the query returns a %s; a check needs an instant vector or a scalar", v.Type())
}
