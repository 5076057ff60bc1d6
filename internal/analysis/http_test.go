package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
)

// consulPassing is what Consul's /v1/health/service/<svc>?passing answers:
// one entry per passing instance.
const consulPassing = `[
 {"Node": {"Node": "a"}, "Service": {"ID": "ingester-zone-a-0"}, "Checks": [{"Status": "passing"}]},
 {"Node": {"Node": "b"}, "Service": {"ID": "ingester-zone-a-1"}, "Checks": [{"Status": "passing"}]}
]`

func TestJSONField(t *testing.T) {
	body := []byte(`{"status": "healthy", "ready": true, "count": 3, "ratio": "0.25", "none": null,
		"targets": [{"health": "healthy", "port": 80}, {"health": "unhealthy"}], "empty": [], "labels": {"a": "1", "b": "2"}}`)
	tests := []struct {
		path      string
		want      string // scalarString of the field
		wantFound bool
		wantErr   string
	}{
		{path: "status", want: "healthy", wantFound: true},
		{path: "$.status", want: "healthy", wantFound: true},
		{path: "ready", want: "true", wantFound: true},
		{path: "count", want: "3", wantFound: true},
		{path: "targets.0.health", want: "healthy", wantFound: true},
		{path: "targets.1.health", want: "unhealthy", wantFound: true},
		{path: "targets.#", want: "2", wantFound: true},
		{path: "labels.#", want: "2", wantFound: true},
		{path: "empty.#", want: "0", wantFound: true},
		{path: "targets.2.health", wantFound: false},
		{path: "missing", wantFound: false},
		{path: "none.deeper", wantFound: false},
		{path: "none", want: "null", wantFound: true},
		{path: "targets.first", wantErr: `targets.first: "first" is not an index of a list`},
		{path: "status.length", wantErr: `status.length: cannot select "length" in a string`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			v, found, err := JSONField(body, tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if found != tt.wantFound {
				t.Fatalf("found %v, want %v", found, tt.wantFound)
			}
			if found && scalarString(v) != tt.want {
				t.Errorf("field %s, want %s", scalarString(v), tt.want)
			}
		})
	}
	if _, _, err := JSONField([]byte("<html>"), "a"); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("an HTML answer: %v, want a not-JSON error", err)
	}
	if v, found, err := JSONField([]byte(consulPassing), "#"); err != nil || !found || scalarString(v) != "2" {
		t.Errorf("# of a top-level list: %v %v %v, want 2", v, found, err)
	}
}

func TestJudgeHTTP(t *testing.T) {
	hasData := v1alpha1.CheckCondition{HasData: ptr.To(true)}
	noData := v1alpha1.CheckCondition{HasData: ptr.To(false)}
	atLeast := func(n string) v1alpha1.CheckCondition {
		return v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorGreaterOrEqual, Threshold: n}}
	}
	equals := func(s string) v1alpha1.CheckCondition { return v1alpha1.CheckCondition{Equals: &s} }
	ok := func(body string) HTTPAnswer { return HTTPAnswer{Status: 200, Body: []byte(body)} }
	tests := []struct {
		name      string
		check     v1alpha1.HTTPCheck
		cond      v1alpha1.CheckCondition
		answer    HTTPAnswer
		want      bool
		wantValue string
		wantErr   string
	}{
		{name: "status alone, 200 expected by default", cond: hasData, answer: ok(""), want: true, wantValue: "200"},
		{name: "a 503 fails, it is no error", cond: hasData, answer: HTTPAnswer{Status: 503}, want: false, wantValue: "HTTP 503 (want 200)"},
		{name: "an expected 204", check: v1alpha1.HTTPCheck{ExpectedStatus: 204}, cond: hasData, answer: HTTPAnswer{Status: 204}, want: true},
		{name: "200 when 204 is expected fails", check: v1alpha1.HTTPCheck{ExpectedStatus: 204}, cond: hasData, answer: ok(""), want: false},
		{name: "equals on the status code", cond: equals("200"), answer: ok(""), want: true, wantValue: "HTTP 200"},
		{name: "Consul: two passing instances, at least 2", check: v1alpha1.HTTPCheck{JSONPath: "#"}, cond: atLeast("2"), answer: ok(consulPassing), want: true, wantValue: "2"},
		{name: "Consul: two passing instances, at least 3", check: v1alpha1.HTTPCheck{JSONPath: "#"}, cond: atLeast("3"), answer: ok(consulPassing), want: false, wantValue: "2"},
		{name: "Consul: no instance passing, at least 1", check: v1alpha1.HTTPCheck{JSONPath: "#"}, cond: atLeast("1"), answer: ok("[]"), want: false, wantValue: "0"},
		{name: "Consul: some instance passing", check: v1alpha1.HTTPCheck{JSONPath: "$"}, cond: hasData, answer: ok(consulPassing), want: true},
		{name: "Consul: an empty list is no data", check: v1alpha1.HTTPCheck{JSONPath: "$"}, cond: hasData, answer: ok("[]"), want: false, wantValue: "no data"},
		{name: "Consul: none critical", check: v1alpha1.HTTPCheck{JSONPath: "$"}, cond: noData, answer: ok("[]"), want: true},
		{name: "a string field equals", check: v1alpha1.HTTPCheck{JSONPath: "targets.0.health"}, cond: equals("healthy"),
			answer: ok(`{"targets": [{"health": "healthy"}]}`), want: true, wantValue: `"healthy"`},
		{name: "a string field differs", check: v1alpha1.HTTPCheck{JSONPath: "targets.0.health"}, cond: equals("healthy"),
			answer: ok(`{"targets": [{"health": "draining"}]}`), want: false, wantValue: `"draining"`},
		{name: "a boolean equals true", check: v1alpha1.HTTPCheck{JSONPath: "ready"}, cond: equals("true"), answer: ok(`{"ready": true}`), want: true},
		{name: "a boolean compares as 1", check: v1alpha1.HTTPCheck{JSONPath: "ready"}, cond: atLeast("1"), answer: ok(`{"ready": true}`), want: true},
		{name: "a number held in a string compares", check: v1alpha1.HTTPCheck{JSONPath: "ratio"},
			cond:   v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorLess, Threshold: "0.5"}},
			answer: ok(`{"ratio": "0.25"}`), want: true, wantValue: "0.25"},
		{name: "a missing field fails equals", check: v1alpha1.HTTPCheck{JSONPath: "status"}, cond: equals("ok"), answer: ok(`{}`), want: false, wantValue: "no data"},
		{name: "a missing field fails compare", check: v1alpha1.HTTPCheck{JSONPath: "n"}, cond: atLeast("1"), answer: ok(`{}`), want: false, wantValue: "no data"},
		{name: "a word cannot be compared", check: v1alpha1.HTTPCheck{JSONPath: "status"}, cond: atLeast("1"), answer: ok(`{"status": "up"}`),
			wantErr: "the field at status is a string, not a number"},
		{name: "an answer that is no JSON", check: v1alpha1.HTTPCheck{JSONPath: "status"}, cond: hasData, answer: ok(`OK`), wantErr: "not JSON"},
		{name: "a wrong status wins over a bad body", check: v1alpha1.HTTPCheck{JSONPath: "status"}, cond: hasData, answer: HTTPAnswer{Status: 500, Body: []byte("oops")},
			want: false, wantValue: "HTTP 500 (want 200)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := JudgeHTTP(tt.check, tt.cond, tt.answer)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Success != tt.want {
				t.Errorf("success %v (value %s), want %v", v.Success, v.Value, tt.want)
			}
			if tt.wantValue != "" && v.Value != tt.wantValue {
				t.Errorf("value %q, want %q", v.Value, tt.wantValue)
			}
		})
	}
}

// The getter sends the headers and credentials, bounds the wait and the
// answer, and reports what it could not get as errors.
func TestHTTPGetter(t *testing.T) {
	var gotAuth, gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotHeader = r.Header.Get("Authorization"), r.Header.Get("X-Consul-Namespace")
		switch r.URL.Path {
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/large":
			_, _ = w.Write([]byte(strings.Repeat("x", MaxHTTPBodyBytes+1)))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(consulPassing))
		}
	}))
	defer srv.Close()
	g := NewHTTPGetter(srv.Client())
	ctx := context.Background()

	ans, err := g.Get(ctx, HTTPRequest{URL: srv.URL + "/v1/health", Headers: map[string]string{"X-Consul-Namespace": "team"}, BearerToken: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Status != http.StatusServiceUnavailable || string(ans.Body) != consulPassing {
		t.Errorf("answer %d %q", ans.Status, ans.Body)
	}
	if gotAuth != "Bearer s3cret" || gotHeader != "team" {
		t.Errorf("sent Authorization %q, header %q", gotAuth, gotHeader)
	}
	if _, err := g.Get(ctx, HTTPRequest{URL: srv.URL, Username: "u", Password: "p"}); err != nil || !strings.HasPrefix(gotAuth, "Basic ") {
		t.Errorf("basic auth: %v, sent %q", err, gotAuth)
	}
	if _, err := g.Get(ctx, HTTPRequest{URL: srv.URL + "/slow", Timeout: 50 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "no answer within the timeout of 50ms") {
		t.Errorf("a hanging endpoint: %v, want a timeout error", err)
	}
	if _, err := g.Get(ctx, HTTPRequest{URL: srv.URL + "/large"}); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Errorf("a huge answer: %v, want a limit error", err)
	}
	if _, err := g.Get(ctx, HTTPRequest{URL: "http://127.0.0.1:1/"}); err == nil {
		t.Error("a closed port: no error")
	}
}

// FuzzJSONField: any body and path give a field, "not found" or an error,
// never a panic; JudgeHTTP on the same never panics either.
func FuzzJSONField(f *testing.F) {
	f.Add([]byte(consulPassing), "#")
	f.Add([]byte(`{"a": [1, {"b": null}]}`), "a.1.b")
	f.Add([]byte(`[]`), "0.x")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		_, _, _ = JSONField(body, path)
		cond := v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorGreaterOrEqual, Threshold: "1"}}
		_, _ = JudgeHTTP(v1alpha1.HTTPCheck{JSONPath: path}, cond, HTTPAnswer{Status: 200, Body: body})
	})
}

// The request's tls block reaches the GET: a server that requires a client
// certificate of a private CA answers only the request that carries it.
func TestHTTPGetterTLS(t *testing.T) {
	srv, err := httptlstest.NewMutualTLS(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(consulPassing)) }))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	g := NewHTTPGetter(&http.Client{})
	ans, err := g.Get(context.Background(), HTTPRequest{URL: srv.URL, TLS: srv.Material})
	if err != nil || ans.Status != http.StatusOK {
		t.Errorf("with the tls block: %d, %v", ans.Status, err)
	}
	if _, err := g.Get(context.Background(), HTTPRequest{URL: srv.URL}); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("without it: %v, want a verification error", err)
	}
}
