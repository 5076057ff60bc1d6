package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/echelon-operator/echelon/test/controlplane"
)

const (
	// PrometheusEnv names a prometheus binary to use instead of the one
	// `make prometheus` installs under bin/.
	PrometheusEnv = "ECHELON_PROMETHEUS"

	// PrometheusUser and PrometheusPassword are the credentials a Prometheus
	// started WithBasicAuth accepts. The password is fixed because Prometheus
	// wants its bcrypt hash (prometheusPasswordHash), which is computed once
	// rather than at run time, to keep a bcrypt library out of go.mod.
	PrometheusUser     = "echelon"
	PrometheusPassword = "echelon-e2e-password"

	// prometheusPasswordHash is bcrypt(PrometheusPassword) at the lowest cost,
	// so that checking it costs the tests nothing. The basic-auth test proves
	// it matches.
	prometheusPasswordHash = "$2a$04$tS9MdjFQvLA.CsoLAmtV7eK6FPacXgiyXlLqaUS0TwthPLK0aOONC"

	// DefaultScrapeInterval is what StartPrometheus uses for a zero interval:
	// short, so that a test sees a metric change within a second or two.
	DefaultScrapeInterval = time.Second

	// prometheusStartTimeout bounds a start, until /-/ready: Prometheus is
	// ready in well under a second here, even after replaying its WAL on a
	// restart; the margin is for a loaded two-core machine.
	prometheusStartTimeout = 60 * time.Second
	// prometheusStopTimeout is how long Prometheus may take to exit after
	// SIGTERM (it writes its head block's WAL and closes the TSDB).
	prometheusStopTimeout = 30 * time.Second
	// pollInterval paces the Wait* helpers.
	pollInterval = 100 * time.Millisecond
)

// ErrPrometheusMissing is wrapped by PrometheusBinary's error when the binary
// has not been installed.
var ErrPrometheusMissing = errors.New("prometheus is not installed: run `make prometheus`")

// PrometheusBinary locates the prometheus binary: the one named by
// ECHELON_PROMETHEUS if set, otherwise bin/prometheus-<version>/prometheus of the
// repository, with the version read from hack/prometheus.sh, which installs it,
// so that a version bump is never served a stale binary. A binary that is not
// there gives an error wrapping ErrPrometheusMissing.
func PrometheusBinary() (string, error) {
	path := os.Getenv(PrometheusEnv)
	if path == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return "", err
		}
		version, err := pinnedPrometheusVersion(filepath.Join(root, "hack", "prometheus.sh"))
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, "bin", "prometheus-"+version, "prometheus")
	}
	if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w; not found: %s", ErrPrometheusMissing, path)
	}
	return path, nil
}

var versionLine = regexp.MustCompile(`^PROMETHEUS_VERSION="?([^"\s]+)"?\s*$`)

// pinnedPrometheusVersion reads the PROMETHEUS_VERSION assignment of the install
// script at path.
func pinnedPrometheusVersion(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read pinned prometheus version: %w", err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if m := versionLine.FindStringSubmatch(scanner.Text()); m != nil {
			return m[1], nil
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("read pinned prometheus version: %w", err)
	}
	return "", fmt.Errorf("%s sets no PROMETHEUS_VERSION", path)
}

// PrometheusOption changes how StartPrometheus configures the server.
type PrometheusOption func(*prometheusOptions)

type prometheusOptions struct {
	basicAuth bool
}

// WithBasicAuth makes every HTTP request to the server, the API included, need
// basic auth as PrometheusUser with PrometheusPassword (a web config file, as a
// user would protect Prometheus). API then sends those credentials.
func WithBasicAuth() PrometheusOption {
	return func(o *prometheusOptions) { o.basicAuth = true }
}

// Prometheus is a real Prometheus server on loopback, scraping the targets it
// was started with. It can be stopped and started again on the same port and
// with the same TSDB, so a test can make queries fail for a while.
type Prometheus struct {
	binary string
	dir    string
	port   int
	args   []string
	opts   prometheusOptions

	mu   sync.Mutex
	proc *Operator // nil while stopped
}

// StartPrometheus writes a configuration that scrapes targets (host:port of
// loopback exporters, at /metrics) every scrapeInterval, evaluating rules as
// often, and starts binary on a free loopback port with its configuration, log
// (prometheus.log) and TSDB in dir. It returns once /-/ready answers. A zero
// scrapeInterval means DefaultScrapeInterval. The process dies with the test
// binary; Stop it when done.
//
// The first scrape comes about 5 s after the start, not one interval: this
// Prometheus hands discovered targets to its scrapers at most every 5 s, and
// does so at startup too. Use WaitTargetsUp or WaitForValue, not the interval,
// to know that a value was scraped.
func StartPrometheus(ctx context.Context, binary, dir string, targets []string, scrapeInterval time.Duration, options ...PrometheusOption) (*Prometheus, error) {
	var opts prometheusOptions
	for _, o := range options {
		o(&opts)
	}
	if scrapeInterval == 0 {
		scrapeInterval = DefaultScrapeInterval
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(prometheusConfig(targets, scrapeInterval)), 0o644); err != nil {
		return nil, fmt.Errorf("write prometheus config: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--config.file=" + configFile,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
		// Debian's defaults point at /etc/prometheus and /usr/share/prometheus,
		// which an unpacked package does not have; the tests need neither.
		"--web.console.templates=" + dir,
		"--web.console.libraries=" + dir,
	}
	if opts.basicAuth {
		webConfig := filepath.Join(dir, "web.yml")
		content := fmt.Sprintf("basic_auth_users:\n  %s: %q\n", PrometheusUser, prometheusPasswordHash)
		if err := os.WriteFile(webConfig, []byte(content), 0o600); err != nil {
			return nil, fmt.Errorf("write prometheus web config: %w", err)
		}
		args = append(args, "--web.config.file="+webConfig)
	}
	p := &Prometheus{binary: binary, dir: dir, port: port, args: args, opts: opts}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// prometheusConfig is the server's configuration: one job, "exporter", whose
// instances are the targets. The scrape timeout equals the interval, which
// Prometheus requires to be no longer.
func prometheusConfig(targets []string, interval time.Duration) string {
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = strconv.Quote(t)
	}
	d := model.Duration(interval).String()
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: exporter
    static_configs:
      - targets: [%[2]s]
`, d, strings.Join(quoted, ", "))
}

// Address is the server's base URL, e.g. http://127.0.0.1:40123: what a
// RolloutGroup's analysis names as its Prometheus address.
func (p *Prometheus) Address() string { return fmt.Sprintf("http://127.0.0.1:%d", p.port) }

// Port is the server's loopback port; it stays the same across Stop and Start.
func (p *Prometheus) Port() int { return p.port }

// Dir holds the configuration, the TSDB and prometheus.log.
func (p *Prometheus) Dir() string { return p.dir }

// Running reports whether the process is started and has not exited.
func (p *Prometheus) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return false
	}
	select {
	case <-p.proc.Exited():
		return false
	default:
		return true
	}
}

// Start starts a stopped server again, on the same port and with the same
// TSDB, and waits until it is ready. Samples scraped before the stop are kept,
// and instant queries return the last of them (Prometheus looks back 5 min)
// until scraping resumes, about 5 s after the start: a test that needs a fresh
// value changes it while the server is down and waits for it. Starting a
// running server is an error.
func (p *Prometheus) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		select {
		case <-p.proc.Exited():
		default:
			return errors.New("prometheus is already running")
		}
	}
	proc, err := StartProcess(Process{Name: "prometheus", Binary: p.binary, Args: p.args, LogDir: p.dir, HTTPPort: p.port})
	if err != nil {
		return err
	}
	p.proc = proc
	ctx, cancel := context.WithTimeout(ctx, prometheusStartTimeout)
	defer cancel()
	if err := p.waitReady(ctx, proc); err != nil {
		proc.Kill()
		<-proc.Exited()
		p.proc = nil
		return err
	}
	return nil
}

// waitReady polls /-/ready, which answers 200 once the TSDB is open and the
// configuration loaded. With basic auth on, it needs the credentials too.
func (p *Prometheus) waitReady(ctx context.Context, proc *Operator) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Address()+"/-/ready", nil)
		if err != nil {
			return err
		}
		if p.opts.basicAuth {
			req.SetBasicAuth(PrometheusUser, PrometheusPassword)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-proc.Exited():
			return fmt.Errorf("prometheus exited before it was ready: %v\n%s", proc.ExitErr(), proc.LogTail(40))
		case <-ctx.Done():
			return fmt.Errorf("prometheus not ready: %w\n%s", ctx.Err(), proc.LogTail(40))
		case <-time.After(pollInterval):
		}
	}
}

// Stop ends the server with SIGTERM (SIGKILL if it takes too long) and waits
// for it to exit; queries then fail with a refused connection until Start.
// Stopping a stopped server does nothing.
func (p *Prometheus) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return nil
	}
	proc := p.proc
	p.proc = nil
	select {
	case <-proc.Exited():
		// It died on its own: report that, it was not meant to.
		if err := proc.ExitErr(); err != nil {
			return fmt.Errorf("prometheus had exited: %w\n%s", err, proc.LogTail(40))
		}
		return nil
	default:
	}
	if err := proc.Stop(prometheusStopTimeout); err != nil {
		return fmt.Errorf("stop prometheus: %w\n%s", err, proc.LogTail(40))
	}
	return nil
}

// LogTail returns the last lines of prometheus.log, for a failing test's
// message.
func (p *Prometheus) LogTail(lines int) string {
	proc := &Operator{Name: "prometheus", LogFile: filepath.Join(p.dir, "prometheus.log")}
	return proc.LogTail(lines)
}

// API is a client of the server's HTTP API (client_golang's, as the operator
// uses), with the server's credentials when it has basic auth on.
func (p *Prometheus) API() (promv1.API, error) {
	if p.opts.basicAuth {
		return PrometheusAPI(p.Address(), PrometheusUser, PrometheusPassword)
	}
	return PrometheusAPI(p.Address(), "", "")
}

// PrometheusAPI is a client of the Prometheus API at address that sends basic
// auth as user with password, unless user is empty: for tests that query with
// wrong credentials on purpose.
func PrometheusAPI(address, user, password string) (promv1.API, error) {
	cfg := api.Config{Address: address}
	if user != "" {
		cfg.RoundTripper = basicAuthRoundTripper{user: user, password: password, next: api.DefaultRoundTripper}
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %s: %w", address, err)
	}
	return promv1.NewAPI(client), nil
}

type basicAuthRoundTripper struct {
	user, password string
	next           http.RoundTripper
}

func (b basicAuthRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.SetBasicAuth(b.user, b.password)
	return b.next.RoundTrip(req)
}

// Query runs an instant query now and returns its result, which must be a
// vector (any PromQL expression over series is).
func (p *Prometheus) Query(ctx context.Context, query string) (model.Vector, error) {
	client, err := p.API()
	if err != nil {
		return nil, err
	}
	value, _, _, err := client.Query(ctx, query, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	vector, ok := value.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %q returned a %s, not a vector", query, value.Type())
	}
	return vector, nil
}

// QueryValue runs query and returns the value of its one sample; no sample, or
// more than one, is an error.
func (p *Prometheus) QueryValue(ctx context.Context, query string) (float64, error) {
	vector, err := p.Query(ctx, query)
	if err != nil {
		return 0, err
	}
	if len(vector) != 1 {
		return 0, fmt.Errorf("query %q returned %d samples, want 1: %v", query, len(vector), vector)
	}
	return float64(vector[0].Value), nil
}

// WaitForValue polls query until it returns exactly one sample equal to want,
// that is until Prometheus has scraped the value an exporter was set to. The
// error on timeout says what the query last returned.
func (p *Prometheus) WaitForValue(ctx context.Context, query string, want float64) error {
	var last string
	for {
		v, err := p.QueryValue(ctx, query)
		switch {
		case err == nil && v == want:
			return nil
		case err == nil:
			last = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("query %q never returned %g (last: %s): %w", query, want, last, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// WaitForNoData polls query until it returns no sample, e.g. after an exporter
// deleted a series and Prometheus marked it stale.
func (p *Prometheus) WaitForNoData(ctx context.Context, query string) error {
	var last string
	for {
		vector, err := p.Query(ctx, query)
		switch {
		case err == nil && len(vector) == 0:
			return nil
		case err == nil:
			last = vector.String()
		default:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("query %q still returned data (last: %s): %w", query, last, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// WaitTargetsUp waits until every target has been scraped successfully
// (up == 1 for each instance of the exporter job).
func (p *Prometheus) WaitTargetsUp(ctx context.Context, targets []string) error {
	for _, t := range targets {
		if err := p.WaitForValue(ctx, fmt.Sprintf(`up{job="exporter",instance=%q}`, t), 1); err != nil {
			return err
		}
	}
	return nil
}
