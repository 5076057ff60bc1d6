package rolloutgroup

import (
	"strings"
	"testing"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/test/controlplane"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// validAnalysis is a complete spec.analysis, as the docs show it.
const validAnalysis = `
prometheus:
  address: https://prometheus.monitoring.svc:9090
  authSecretRef: {name: prometheus-token}
  tls: {caSecretRef: {name: prometheus-ca}, serverName: prometheus.monitoring.svc}
  timeout: 5s
soakTime: 10m
checks:
- name: error-rate
  query: 'sum(rate(errors_total{namespace="{{ .Namespace }}",pod=~"{{ .Member }}-.*"}[1m]))'
  condition: {compare: {operator: "<", threshold: "0.05"}}
  initialDelay: 30s
  interval: 15s
  successThreshold: 3
  failureThreshold: 2
  errorThreshold: 5
  gate: AfterBatch
- name: no-alerts
  query: 'ALERTS{alertstate="firing",namespace="{{ .Namespace }}"}'
  condition: {hasData: false}
`

// The API server refuses bad analysis specs at admission, naming the field;
// the CEL rules on the CRD compile and hold.
func TestAnalysisValidation(t *testing.T) {
	cp := controllertest.APIServer(t)
	ns, err := cp.CreateNamespace(t.Context(), "validation")
	if err != nil {
		t.Fatal(err)
	}
	check := func(extra string) string {
		return "prometheus: {address: http://127.0.0.1:9090}\nchecks:\n- name: c\n  query: up\n" + extra
	}
	tests := []struct {
		name     string
		analysis string
		want     string // "" accepts
	}{
		{name: "the documented example", analysis: validAnalysis},
		{name: "a minimal check", analysis: check("  condition: {hasData: true}\n")},
		{name: "both conditions", analysis: check("  condition: {hasData: true, compare: {operator: '<', threshold: '1'}}\n"),
			want: "must set exactly one of hasData, compare or equals"},
		{name: "no condition", analysis: check("  condition: {}\n"), want: "must set exactly one of hasData, compare or equals"},
		{name: "a threshold that is no number", analysis: check("  condition: {compare: {operator: '<', threshold: 'five'}}\n"),
			want: "spec.analysis.checks[0].condition.compare.threshold"},
		{name: "an unknown operator", analysis: check("  condition: {compare: {operator: '=~', threshold: '1'}}\n"),
			want: "spec.analysis.checks[0].condition.compare.operator"},
		{name: "successThreshold 0", analysis: check("  condition: {hasData: true}\n  successThreshold: 0\n"),
			want: "spec.analysis.checks[0].successThreshold"},
		{name: "errorThreshold 0", analysis: check("  condition: {hasData: true}\n  errorThreshold: 0\n"),
			want: "spec.analysis.checks[0].errorThreshold"},
		{name: "an interval under 1s", analysis: check("  condition: {hasData: true}\n  interval: 500ms\n"),
			want: "interval must be at least 1s"},
		{name: "an unknown gate", analysis: check("  condition: {hasData: true}\n  gate: AfterPod\n"), want: "spec.analysis.checks[0].gate"},
		{name: "a check name that is no DNS label", analysis: strings.Replace(check("  condition: {hasData: true}\n"), "name: c", "name: Error_Rate", 1),
			want: "spec.analysis.checks[0].name"},
		{name: "two checks of the same name", analysis: check("  condition: {hasData: true}\n- name: c\n  query: up\n  condition: {hasData: true}\n"),
			want: "spec.analysis.checks[1]"},
		{name: "no checks", analysis: "prometheus: {address: http://127.0.0.1:9090}\nchecks: []\n", want: "spec.analysis.checks"},
		{name: "an address without scheme", analysis: strings.Replace(check("  condition: {hasData: true}\n"), "http://127.0.0.1:9090", "prometheus:9090", 1),
			want: "spec.analysis.prometheus.address must be an http:// or https:// URL"},
		{name: "a zero timeout", analysis: strings.Replace(check("  condition: {hasData: true}\n"), "9090}", "9090, timeout: 0s}", 1),
			want: "timeout must be more than 0s"},
		{name: "an http check needs no prometheus", analysis: "checks:\n- name: consul\n  http: {url: 'http://consul:8500/v1/health/service/{{ .Member }}?passing', jsonPath: '#'}\n  condition: {compare: {operator: '>=', threshold: '3'}}\n"},
		{name: "an http check with equals", analysis: "checks:\n- name: lb\n  http: {url: 'https://lb/targets', jsonPath: 'targets.0.health'}\n  condition: {equals: healthy}\n"},
		{name: "a query check needs prometheus", analysis: "checks:\n- name: c\n  query: up\n  condition: {hasData: true}\n",
			want: "spec.analysis.prometheus is required when a check has a query"},
		{name: "both query and http", analysis: check("  http: {url: 'http://x'}\n  condition: {hasData: true}\n"),
			want: "set exactly one of query (PromQL) or http"},
		{name: "neither query nor http", analysis: "checks:\n- name: c\n  condition: {hasData: true}\n", want: "set exactly one of query (PromQL) or http"},
		{name: "equals on a query", analysis: check("  condition: {equals: '1'}\n"), want: "condition.equals applies to http checks only"},
		{name: "an http url without scheme", analysis: "checks:\n- name: c\n  http: {url: 'consul:8500'}\n  condition: {hasData: true}\n",
			want: "http.url must start with http:// or https://"},
		{name: "an http status out of range", analysis: "checks:\n- name: c\n  http: {url: 'http://x', expectedStatus: 99}\n  condition: {hasData: true}\n",
			want: "spec.analysis.checks[0].http.expectedStatus"},
		{name: "an http timeout over 1m", analysis: "checks:\n- name: c\n  http: {url: 'http://x', timeout: 2m}\n  condition: {hasData: true}\n",
			want: "http.timeout must be more than 0s and at most 1m"},
		{name: "a json path with an empty segment", analysis: "checks:\n- name: c\n  http: {url: 'http://x', jsonPath: 'a..b'}\n  condition: {hasData: true}\n",
			want: "spec.analysis.checks[0].http.jsonPath"},
		{name: "an https check with a private CA, a server name and a client certificate",
			analysis: "checks:\n- name: c\n  http: {url: 'https://consul:8501/v1/health', tls: {caSecretRef: {name: consul-ca}, serverName: consul.service, clientCertSecretRef: {name: echelon-client}}}\n  condition: {hasData: true}\n"},
		{name: "an https check trusting the cluster CA from a ConfigMap",
			analysis: "checks:\n- name: c\n  http: {url: 'https://svc.ns.svc/health', tls: {caConfigMapRef: {name: kube-root-ca.crt}}}\n  condition: {hasData: true}\n"},
		{name: "tls on an http:// url", analysis: "checks:\n- name: c\n  http: {url: 'http://x', tls: {serverName: x}}\n  condition: {hasData: true}\n",
			want: "spec.analysis.checks[].http.tls applies to an https:// url only"},
		{name: "insecureSkipVerify with a CA", analysis: "checks:\n- name: c\n  http: {url: 'https://x', tls: {insecureSkipVerify: true, caSecretRef: {name: ca}}}\n  condition: {hasData: true}\n",
			want: "spec.analysis.checks[0].http.tls: Invalid value: tls.insecureSkipVerify verifies nothing"},
		{name: "insecureSkipVerify alone", analysis: "checks:\n- name: c\n  http: {url: 'https://x', tls: {insecureSkipVerify: true}}\n  condition: {hasData: true}\n"},
		{name: "a CA from both a Secret and a ConfigMap", analysis: "checks:\n- name: c\n  http: {url: 'https://x', tls: {caSecretRef: {name: a}, caConfigMapRef: {name: b}}}\n  condition: {hasData: true}\n",
			want: "spec.analysis.checks[0].http.tls: Invalid value: set at most one of tls.caSecretRef and tls.caConfigMapRef"},
		{name: "a soakTime that is no duration", analysis: check("  condition: {hasData: true}\n") + "soakTime: 1 hour\n", want: "spec.analysis.soakTime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var analysis map[string]any
			if err := yaml.Unmarshal([]byte(tt.analysis), &analysis); err != nil {
				t.Fatal(err)
			}
			expectAdmission(t, cp, ns, map[string]any{"analysis": analysis, "onFailure": "Rollback"}, tt.want)
		})
	}
	// onFailure is Pause or Rollback.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "echelon.dev/v1alpha1", "kind": "RolloutGroup",
		"metadata": map[string]any{"name": "g", "namespace": ns},
		"spec":     map[string]any{"statefulSets": []any{map[string]any{"name": "a"}}, "onFailure": "Retry"},
	}}
	if err := cp.Client().Create(t.Context(), bad, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.onFailure") {
		t.Errorf("onFailure Retry: %v, want an error naming spec.onFailure", err)
	}
}

// The API server refuses a hook's tls block where no https call uses it,
// naming the field.
func TestHooksTLSValidation(t *testing.T) {
	cp := controllertest.APIServer(t)
	ns, err := cp.CreateNamespace(t.Context(), "validation")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		hooks string
		want  string // "" accepts
	}{
		{name: "an https member hook with a private CA",
			hooks: "beforeMember: {url: 'https://db-admin.db.svc/zones/{{ .Member }}', tls: {caSecretRef: {name: db-ca}, clientCertSecretRef: {name: echelon}}}\n"},
		{name: "an http member hook with tls", hooks: "afterMember: {url: 'http://db-admin/zones', tls: {caSecretRef: {name: db-ca}}}\n",
			want: "spec.hooks member hook tls applies to an https:// url only"},
		{name: "a pod endpoint on https with the cluster CA",
			hooks: "beforePodRemoval: {endpoint: {scheme: https, port: 8080, path: /prepare, tls: {caConfigMapRef: {name: kube-root-ca.crt}, serverName: '*.ingester.mimir.svc'}}}\n"},
		{name: "a pod endpoint on http with tls", hooks: "beforePodRemoval: {endpoint: {port: 8080, path: /prepare, tls: {serverName: x}}}\n",
			want: "spec.hooks.beforePodRemoval.endpoint: Invalid value: endpoint tls needs scheme https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooks map[string]any
			if err := yaml.Unmarshal([]byte(tt.hooks), &hooks); err != nil {
				t.Fatal(err)
			}
			expectAdmission(t, cp, ns, map[string]any{"hooks": hooks}, tt.want)
		})
	}
}

// expectAdmission creates, dry run, a one-member group with the spec fields
// given, and expects it accepted (want "") or refused with an error
// containing want.
func expectAdmission(t *testing.T, cp *controlplane.ControlPlane, ns string, spec map[string]any, want string) {
	t.Helper()
	spec["statefulSets"] = []any{map[string]any{"name": "a"}}
	rg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "echelon.dev/v1alpha1", "kind": "RolloutGroup",
		"metadata": map[string]any{"name": "g", "namespace": ns},
		"spec":     spec,
	}}
	err := cp.Client().Create(t.Context(), rg, client.DryRunAll)
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted, want an error naming %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}
