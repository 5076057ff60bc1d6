package options

import (
	"flag"
	"strings"
	"testing"
)

func TestParseAndValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o Options)
	}{
		{name: "defaults are valid", check: func(t *testing.T, o Options) {
			if o.HTTPPort != 8001 || o.ClusterDomain != "cluster.local" || o.PodAddress != PodAddressFQDN || o.LeaderElect {
				t.Errorf("unexpected defaults: %+v", o)
			}
		}},
		{name: "namespaces are split and trimmed", args: []string{"--namespaces= a, b ,,c"}, check: func(t *testing.T, o Options) {
			if strings.Join(o.Namespaces, "|") != "a|b|c" {
				t.Errorf("namespaces = %q", o.Namespaces)
			}
		}},
		{name: "empty namespaces watch all", args: []string{"--namespaces="}, check: func(t *testing.T, o Options) {
			if len(o.Namespaces) != 0 {
				t.Errorf("namespaces = %q", o.Namespaces)
			}
		}},
		{name: "pod address ip", args: []string{"--pod-address=ip"}},
		{name: "pprof off and cache transforms on by default", check: func(t *testing.T, o Options) {
			if o.PprofBindAddress != "" || !o.CacheTransforms {
				t.Errorf("pprof = %q, cache transforms = %v", o.PprofBindAddress, o.CacheTransforms)
			}
		}},
		{name: "pprof address", args: []string{"--pprof-bind-address=127.0.0.1:6060", "--cache-transforms=false"}, check: func(t *testing.T, o Options) {
			if o.PprofBindAddress != "127.0.0.1:6060" || o.CacheTransforms {
				t.Errorf("pprof = %q, cache transforms = %v", o.PprofBindAddress, o.CacheTransforms)
			}
		}},
		{name: "egress allowlist split", args: []string{"--egress-allow=127.0.0.0/8, ::1,prometheus.monitoring.svc"}, check: func(t *testing.T, o Options) {
			if strings.Join(o.EgressAllow, "|") != "127.0.0.0/8|::1|prometheus.monitoring.svc" {
				t.Errorf("egress allow = %q", o.EgressAllow)
			}
		}},
		{name: "egress allows nothing by default", check: func(t *testing.T, o Options) {
			if len(o.EgressAllow) != 0 {
				t.Errorf("egress allow = %q", o.EgressAllow)
			}
		}},
		{name: "bad egress allow entry", args: []string{"--egress-allow=10.0.0.0/33"}, wantErr: `--egress-allow: "10.0.0.0/33"`},
		{name: "bad pprof address", args: []string{"--pprof-bind-address=6060"}, wantErr: `--pprof-bind-address="6060"`},
		{name: "bad pod address", args: []string{"--pod-address=dns"}, wantErr: `--pod-address="dns"`},
		{name: "bad namespace", args: []string{"--namespaces=ok,Not_OK"}, wantErr: `--namespaces: "Not_OK"`},
		{name: "bad cluster domain", args: []string{"--cluster-domain=-bad-"}, wantErr: `--cluster-domain="-bad-"`},
		{name: "bad qps", args: []string{"--kube-api-qps=0"}, wantErr: "--kube-api-qps=0"},
		{name: "bad burst", args: []string{"--kube-api-burst=0"}, wantErr: "--kube-api-burst=0"},
		{name: "webhooks limited apart", args: []string{"--kube-api-qps=5", "--webhook-kube-api-qps=150", "--webhook-kube-api-burst=300"}, check: func(t *testing.T, o Options) {
			if o.KubeAPIQPS != 5 || o.Webhook.KubeAPIQPS != 150 || o.Webhook.KubeAPIBurst != 300 {
				t.Errorf("controllers qps %v, webhooks qps %v burst %d", o.KubeAPIQPS, o.Webhook.KubeAPIQPS, o.Webhook.KubeAPIBurst)
			}
		}},
		{name: "bad webhook qps", args: []string{"--webhook-kube-api-qps=0"}, wantErr: "--webhook-kube-api-qps=0"},
		{name: "bad webhook burst", args: []string{"--webhook-kube-api-burst=0"}, wantErr: "--webhook-kube-api-burst=0"},
		{name: "bad log level", args: []string{"--log-level=trace"}, wantErr: `--log-level="trace"`},
		{name: "lease shorter than renew deadline", args: []string{"--leader-elect", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"},
			wantErr: "--leader-elect-lease-duration=5s"},
		{name: "lease timings ignored without leader election", args: []string{"--leader-elect-lease-duration=1s"}},
		{name: "webhook disabled", args: []string{"--webhook-port=0"}},
		{name: "bad webhook port", args: []string{"--webhook-port=70000"}, wantErr: "--webhook-port=70000"},
		{name: "cert file without key", args: []string{"--tls-cert-file=/tls/tls.crt"}, wantErr: "--tls-cert-file and --tls-key-file"},
		{name: "cert and key files", args: []string{"--tls-cert-file=/tls/tls.crt", "--tls-key-file=/tls/tls.key"}},
		{name: "bad cert secret", args: []string{"--webhook-cert-secret=Bad_Name"}, wantErr: `--webhook-cert-secret="Bad_Name"`},
		{name: "validate webhook fails closed", args: []string{"--validate-webhook-failure-policy=Fail"}, check: func(t *testing.T, o Options) {
			if o.Webhook.ValidateFailurePolicy != "Fail" {
				t.Errorf("validate failure policy %q, want Fail", o.Webhook.ValidateFailurePolicy)
			}
		}},
		{name: "bad validate failure policy", args: []string{"--validate-webhook-failure-policy=fail"}, wantErr: `--validate-webhook-failure-policy="fail"`},
		{name: "downscale-budget webhook fails open", args: []string{"--downscale-budget-webhook-failure-policy=Ignore"}, check: func(t *testing.T, o Options) {
			if o.Webhook.DownscaleBudgetFailurePolicy != "Ignore" {
				t.Errorf("downscale-budget failure policy %q, want Ignore", o.Webhook.DownscaleBudgetFailurePolicy)
			}
		}},
		{name: "bad downscale-budget failure policy", args: []string{"--downscale-budget-webhook-failure-policy=ignore"}, wantErr: `--downscale-budget-webhook-failure-policy="ignore"`},
		{name: "CA shorter than cert", args: []string{"--webhook-cert-validity=2h", "--webhook-ca-validity=1h"}, wantErr: "--webhook-ca-validity=1h0m0s"},
		{name: "extra SANs split", args: []string{"--webhook-cert-extra-sans=127.0.0.1, localhost"}, check: func(t *testing.T, o Options) {
			if strings.Join(o.Webhook.ExtraSANs, "|") != "127.0.0.1|localhost" || o.Webhook.Port != 8443 {
				t.Errorf("webhook = %+v", o.Webhook)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Default()
			fs := flag.NewFlagSet("echelon", flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

func TestResolvedLeaderElectionNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	o := Default()
	if got := o.ResolvedLeaderElectionNamespace(); got != "default" {
		t.Errorf("no hints: got %q, want default", got)
	}
	o.Namespaces = []string{"mimir", "loki"}
	if got := o.ResolvedLeaderElectionNamespace(); got != "mimir" {
		t.Errorf("watched namespaces: got %q, want mimir", got)
	}
	t.Setenv("POD_NAMESPACE", "echelon-system")
	if got := o.ResolvedLeaderElectionNamespace(); got != "echelon-system" {
		t.Errorf("POD_NAMESPACE: got %q, want echelon-system", got)
	}
	o.LeaderElectionNamespace = "explicit"
	if got := o.ResolvedLeaderElectionNamespace(); got != "explicit" {
		t.Errorf("flag: got %q, want explicit", got)
	}
}
