package framework

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// These tests run the real Prometheus that the metric-gated e2e specs use,
// against an Exporter, so that what those specs rely on (a set value becomes
// visible, a stopped server refuses connections, bad credentials get 401) is
// proved here once. Each test has its own exporter and server, so they run in
// parallel: they spend their time waiting for scrapes.

// prometheusForTest returns the installed binary, or skips the test when it is
// not installed, saying how to install it. Under CI (CI set, as .ci/run has
// it) a missing binary fails instead: `make test-e2e` installs it, so a
// missing one is a broken build, not a reason to pass quietly.
func prometheusForTest(t *testing.T) string {
	t.Helper()
	binary, err := PrometheusBinary()
	if errors.Is(err, ErrPrometheusMissing) && os.Getenv("CI") == "" {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return binary
}

// startScraped starts an exporter and a Prometheus scraping it every second,
// stopped when the test ends.
func startScraped(t *testing.T, ctx context.Context, options ...PrometheusOption) (*Exporter, *Prometheus) {
	t.Helper()
	binary := prometheusForTest(t)
	exporter, err := NewExporter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exporter.Close() })
	prom, err := StartPrometheus(ctx, binary, t.TempDir(), []string{exporter.Address()}, time.Second, options...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			t.Error(err)
		}
	})
	return exporter, prom
}

func TestPrometheusSeesWhatTheExporterSets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exporter, prom := startScraped(t, ctx)
	const query = `echelon_test_error_rate{zone="a"}`

	// Nothing set yet: the query has no data, so the waits below can fail.
	if err := prom.WaitTargetsUp(ctx, []string{exporter.Address()}); err != nil {
		t.Fatal(err)
	}
	if v, err := prom.Query(ctx, query); err != nil || len(v) != 0 {
		t.Fatalf("before any Set: %v, %v; want no data", v, err)
	}

	if err := exporter.Set("echelon_test_error_rate", map[string]string{"zone": "a"}, 0.5); err != nil {
		t.Fatal(err)
	}
	if err := prom.WaitForValue(ctx, query, 0.5); err != nil {
		t.Fatalf("%v\n%s", err, prom.LogTail(20))
	}

	// A flip shows within a few scrape intervals. The bound is loose for a
	// loaded machine; the time taken is logged, not asserted.
	if err := exporter.Set("echelon_test_error_rate", map[string]string{"zone": "a"}, 3); err != nil {
		t.Fatal(err)
	}
	flipped := time.Now()
	flipCtx, flipCancel := context.WithTimeout(ctx, 15*time.Second)
	defer flipCancel()
	if err := prom.WaitForValue(flipCtx, query, 3); err != nil {
		t.Fatal(err)
	}
	t.Logf("the flipped value was visible after %s (scrape interval 1s)", time.Since(flipped).Round(time.Millisecond))

	// A deleted series goes stale: queries return no data again.
	if !exporter.Delete("echelon_test_error_rate", map[string]string{"zone": "a"}) {
		t.Fatal("Delete found no series")
	}
	if err := prom.WaitForNoData(ctx, query); err != nil {
		t.Fatal(err)
	}

	// Bad PromQL is the server's bad_data error, distinct from a connection error.
	_, err := prom.Query(ctx, "sum(")
	var apiErr *promv1.Error
	if !errors.As(err, &apiErr) || apiErr.Type != promv1.ErrBadData {
		t.Fatalf("bad PromQL: got %v, want a %s error", err, promv1.ErrBadData)
	}
	if exporter.Scrapes() == 0 {
		t.Fatal("the exporter counted no scrapes")
	}
}

func TestPrometheusStopRefusesQueriesAndStartResumes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exporter, prom := startScraped(t, ctx)
	const query = `echelon_test_gate`
	if err := exporter.Set("echelon_test_gate", nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := prom.WaitForValue(ctx, query, 1); err != nil {
		t.Fatal(err)
	}
	port := prom.Port()

	if err := prom.Stop(); err != nil {
		t.Fatal(err)
	}
	if prom.Running() {
		t.Fatal("Running after Stop")
	}
	_, err := prom.Query(ctx, query)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("query of a stopped Prometheus: got %v, want a refused connection", err)
	}

	// The metric changes while the server is down; after Start the same
	// address answers, scrapes resume and the new value shows.
	if err := exporter.Set("echelon_test_gate", nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := prom.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if prom.Port() != port || !prom.Running() {
		t.Fatalf("after Start: port %d (was %d), running %v", prom.Port(), port, prom.Running())
	}
	if err := prom.Start(ctx); err == nil {
		t.Fatal("a second Start of a running server succeeded")
	}
	if err := prom.WaitForValue(ctx, query, 0); err != nil {
		t.Fatal(err)
	}
	// The TSDB survived the restart: the value from before the stop is still
	// there over the last five minutes.
	if v, err := prom.QueryValue(ctx, `max_over_time(echelon_test_gate[5m])`); err != nil || v != 1 {
		t.Fatalf("max_over_time after restart: %v, %v; want 1 from before the stop", v, err)
	}
}

func TestPrometheusBasicAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exporter, prom := startScraped(t, ctx, WithBasicAuth())
	if err := exporter.Set("echelon_test_gate", nil, 7); err != nil {
		t.Fatal(err)
	}
	// The right password (checked against the precomputed hash) is let in.
	if err := prom.WaitForValue(ctx, "echelon_test_gate", 7); err != nil {
		t.Fatal(err)
	}

	for name, password := range map[string]string{"wrong password": "not-the-password", "no credentials": ""} {
		user := PrometheusUser
		if password == "" {
			user = ""
		}
		client, err := PrometheusAPI(prom.Address(), user, password)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = client.Query(ctx, "echelon_test_gate", time.Now())
		var apiErr *promv1.Error
		if !errors.As(err, &apiErr) || apiErr.Type != promv1.ErrClient || !strings.Contains(apiErr.Msg, "401") {
			t.Errorf("%s: got %v, want client error 401", name, err)
		}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, prom.Address()+"/api/v1/query?query=up", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(PrometheusUser, "not-the-password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password over plain HTTP: %d, want 401", resp.StatusCode)
	}
}

// The test helper and the install script must agree on where the binary is;
// this holds whether or not it is installed.
func TestPrometheusBinaryPathMatchesInstallScript(t *testing.T) {
	t.Setenv(PrometheusEnv, "")
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "prometheus.sh"), "--print-binary").Output()
	if err != nil {
		t.Fatal(err)
	}
	script := strings.TrimSpace(string(out))
	binary, err := PrometheusBinary()
	if errors.Is(err, ErrPrometheusMissing) {
		if !strings.Contains(err.Error(), script) {
			t.Fatalf("PrometheusBinary looked elsewhere than the script installs (%s): %v", script, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if binary != script {
		t.Fatalf("PrometheusBinary = %s, the script installs %s", binary, script)
	}
}

func TestPrometheusBinaryMissing(t *testing.T) {
	t.Setenv(PrometheusEnv, filepath.Join(t.TempDir(), "prometheus"))
	if _, err := PrometheusBinary(); !errors.Is(err, ErrPrometheusMissing) || !strings.Contains(err.Error(), "make prometheus") {
		t.Fatalf("got %v, want ErrPrometheusMissing naming make prometheus", err)
	}
}

func TestExporterServesWhatIsSet(t *testing.T) {
	exporter, err := NewExporter()
	if err != nil {
		t.Fatal(err)
	}
	defer exporter.Close()

	if err := exporter.Set("echelon_test_latency", map[string]string{"zone": "a", "check": "p99"}, 0.25); err != nil {
		t.Fatal(err)
	}
	if err := exporter.Set("echelon_test_latency", map[string]string{"zone": "a"}, 1); err == nil {
		t.Fatal("Set with other label names succeeded")
	}
	body := scrape(t, exporter)
	if !strings.Contains(body, `echelon_test_latency{check="p99",zone="a"} 0.25`) {
		t.Fatalf("the set series is not served:\n%s", body)
	}
	if exporter.Delete("echelon_test_latency", map[string]string{"zone": "b", "check": "p99"}) {
		t.Fatal("Delete of a series never set reported success")
	}
	if !exporter.Delete("echelon_test_latency", map[string]string{"zone": "a", "check": "p99"}) {
		t.Fatal("Delete of a set series reported nothing deleted")
	}
	if body := scrape(t, exporter); strings.Contains(body, "echelon_test_latency{") {
		t.Fatalf("the deleted series is still served:\n%s", body)
	}
	if exporter.Scrapes() != 2 {
		t.Fatalf("Scrapes = %d, want 2", exporter.Scrapes())
	}
}

func scrape(t *testing.T, e *Exporter) string {
	t.Helper()
	resp, err := http.Get("http://" + e.Address() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
