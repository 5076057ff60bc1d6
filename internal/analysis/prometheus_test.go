package analysis

import (
	"context"
	"encoding/pem"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func nan() float64 { return math.NaN() }

// fakePrometheus answers /api/v1/query as Prometheus's HTTP API does, with the
// result a test chooses; it checks the credentials when want* is set.
type fakePrometheus struct {
	wantBearer string
	wantUser   string
	wantPass   string
	// respond writes the answer to a query.
	respond func(w http.ResponseWriter, query string)
	queries atomic.Int32
}

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	f.queries.Add(1)
	if f.wantBearer != "" && r.Header.Get("Authorization") != "Bearer "+f.wantBearer {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if f.wantUser != "" {
		if u, p, ok := r.BasicAuth(); !ok || u != f.wantUser || p != f.wantPass {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.respond(w, r.Form.Get("query"))
}

func vectorAnswer(samples ...string) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, _ string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, strings.Join(samples, ","))
	}
}

func sample(labels string, value string) string {
	return fmt.Sprintf(`{"metric":{%s},"value":[1717243200,"%s"]}`, labels, value)
}

func TestPrometheusQuerier(t *testing.T) {
	tests := []struct {
		name    string
		fake    *fakePrometheus
		cfg     PrometheusConfig
		want    []Sample
		wantErr string
	}{
		{name: "a vector", fake: &fakePrometheus{respond: vectorAnswer(sample(`"zone":"a"`, "0.5"), sample(`"zone":"b"`, "1"))},
			want: []Sample{{Metric: `{zone="a"}`, Value: 0.5}, {Metric: `{zone="b"}`, Value: 1}}},
		{name: "an empty vector", fake: &fakePrometheus{respond: vectorAnswer()}, want: []Sample{}},
		{name: "a scalar", fake: &fakePrometheus{respond: func(w http.ResponseWriter, _ string) {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1717243200,"42"]}}`)
		}}, want: []Sample{{Value: 42}}},
		{name: "a range vector is refused", fake: &fakePrometheus{respond: func(w http.ResponseWriter, _ string) {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1717243200,"1"]]}]}}`)
		}}, wantErr: "range vector"},
		{name: "a null series is refused, not a panic", fake: &fakePrometheus{respond: vectorAnswer("null")}, wantErr: "no sample"},
		{name: "a native histogram is refused, not read as 0", fake: &fakePrometheus{respond: vectorAnswer(
			`{"metric":{"__name__":"latency"},"histogram":[1717243200,{"count":"3","sum":"9","buckets":[[0,"1","2","3"]]}]}`)},
			wantErr: "native histogram"},
		{name: "bad PromQL", fake: &fakePrometheus{respond: func(w http.ResponseWriter, _ string) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected end of input"}`)
		}}, wantErr: "Prometheus refused the query (bad PromQL): 1:5: parse error"},
		{name: "a server error", fake: &fakePrometheus{respond: func(w http.ResponseWriter, _ string) {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}}, wantErr: "server error: 503 (overloaded)"},
		{name: "bearer token accepted", fake: &fakePrometheus{wantBearer: "s3cret", respond: vectorAnswer(sample("", "1"))},
			cfg: PrometheusConfig{BearerToken: "s3cret"}, want: []Sample{{Metric: "{}", Value: 1}}},
		{name: "bearer token refused", fake: &fakePrometheus{wantBearer: "s3cret", respond: vectorAnswer()},
			cfg: PrometheusConfig{BearerToken: "wrong"}, wantErr: "refused the credentials (HTTP 401 Unauthorized)"},
		{name: "basic auth accepted", fake: &fakePrometheus{wantUser: "u", wantPass: "p", respond: vectorAnswer()},
			cfg: PrometheusConfig{Username: "u", Password: "p"}, want: []Sample{}},
		{name: "no credentials refused", fake: &fakePrometheus{wantUser: "u", wantPass: "p", respond: vectorAnswer()},
			wantErr: "HTTP 401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.fake)
			defer srv.Close()
			cfg := tt.cfg
			cfg.Address = srv.URL
			q, err := NewPrometheus(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := q.Query(context.Background(), "up", now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("samples %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPrometheusQuerierSendsTheExpandedQuery(t *testing.T) {
	var seen atomic.Value
	srv := httptest.NewServer(&fakePrometheus{respond: func(w http.ResponseWriter, q string) {
		seen.Store(q)
		vectorAnswer()(w, q)
	}})
	defer srv.Close()
	q, err := NewPrometheus(PrometheusConfig{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	query, err := ExpandQuery(`up{pod=~"{{ .Member }}-.*"}`, Vars{Member: "zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Query(context.Background(), query, now); err != nil {
		t.Fatal(err)
	}
	if got := seen.Load(); got != `up{pod=~"zone-a-.*"}` {
		t.Errorf("Prometheus received %q", got)
	}
}

func TestPrometheusQuerierTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(&fakePrometheus{respond: func(w http.ResponseWriter, q string) {
		<-release
		vectorAnswer()(w, q)
	}})
	defer srv.Close()
	defer close(release)
	q, err := NewPrometheus(PrometheusConfig{Address: srv.URL, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Query(context.Background(), "up", now)
	if err == nil || !strings.Contains(err.Error(), "timed out after 100ms") {
		t.Fatalf("error %v, want a timeout", err)
	}
}

func TestPrometheusQuerierUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	q, err := NewPrometheus(PrometheusConfig{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Query(context.Background(), "up", now); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want connection refused", err)
	}
}

func TestPrometheusQuerierTLS(t *testing.T) {
	srv := httptest.NewTLSServer(&fakePrometheus{respond: vectorAnswer(sample("", "1"))})
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	tests := []struct {
		name    string
		cfg     PrometheusConfig
		wantErr string
	}{
		{name: "the system pool does not know the test CA", wantErr: "certificate"},
		{name: "the CA from the Secret verifies the server", cfg: PrometheusConfig{CAPEM: caPEM}},
		{name: "a server name the certificate lacks is refused", cfg: PrometheusConfig{CAPEM: caPEM, ServerName: "prometheus.other"}, wantErr: "certificate"},
		{name: "the certificate's name is accepted", cfg: PrometheusConfig{CAPEM: caPEM, ServerName: "example.com"}},
		{name: "insecureSkipVerify accepts it", cfg: PrometheusConfig{InsecureSkipVerify: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Address = srv.URL
			q, err := NewPrometheus(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = q.Query(context.Background(), "up", now)
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := NewPrometheus(PrometheusConfig{Address: srv.URL, CAPEM: []byte("not PEM")}); err == nil {
		t.Error("a CA Secret without a certificate is accepted")
	}
}

func TestPrometheusQuerierBoundsTheResponse(t *testing.T) {
	// A valid answer just over the limit: a proxy or a query selecting
	// millions of series must not take the leader's memory.
	series := sample(`"pod":"`+strings.Repeat("p", 1000)+`"`, "1")
	n := MaxResponseBytes/len(series) + 1
	answers := make([]string, n)
	for i := range answers {
		answers[i] = series
	}
	srv := httptest.NewServer(&fakePrometheus{respond: vectorAnswer(answers...)})
	defer srv.Close()
	q, err := NewPrometheus(PrometheusConfig{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Query(context.Background(), "up", now)
	if want := "larger than the limit of 10 MiB"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	// Just under the limit is read.
	srv2 := httptest.NewServer(&fakePrometheus{respond: vectorAnswer(answers[:n-200]...)})
	defer srv2.Close()
	q2, err := NewPrometheus(PrometheusConfig{Address: srv2.URL})
	if err != nil {
		t.Fatal(err)
	}
	if samples, err := q2.Query(context.Background(), "up", now); err != nil || len(samples) != n-200 {
		t.Fatalf("an answer under the limit: %d samples, %v", len(samples), err)
	}
}
