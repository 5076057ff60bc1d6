// Package options holds the command-line configuration of the echelon binary and
// its validation, apart from main so that tests and tools can build it too.
package options

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/echelon-operator/echelon/internal/egress"
)

// Pod address modes: how Echelon reaches a pod's HTTP endpoint.
const (
	PodAddressFQDN = "fqdn"
	PodAddressIP   = "ip"
)

// Options is the parsed command line.
type Options struct {
	// HTTPPort serves /metrics, /ready and /healthz over plain HTTP.
	HTTPPort int
	// HTTPBindHost restricts the HTTP listener to one host; empty means all.
	HTTPBindHost string

	LeaderElect              bool
	LeaderElectionNamespace  string
	LeaderElectionID         string
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration

	// Namespaces to watch; empty means all namespaces.
	Namespaces    []string
	ClusterDomain string
	PodAddress    string

	KubeAPIQPS   float64
	KubeAPIBurst int

	LogFormat string
	LogLevel  string

	// Webhook is the HTTPS admission webhook server, served by every replica.
	Webhook WebhookOptions

	// GrafanaCompat acts on the Grafana rollout-operator's labels and
	// annotations as on the resources `echelon migrate` would write.
	GrafanaCompat bool
	// GrafanaCompatService is the Service the Grafana operator's webhook
	// configurations name (in the operator's namespace): with GrafanaCompat,
	// the self-signed serving certificate names it too, and its CA is
	// injected into the configurations labelled for the Grafana operator.
	GrafanaCompatService string

	// EgressAllow lists the CIDRs, addresses and host names the URLs of
	// specs may reach although the egress guard refuses their class
	// (loopback, link-local, metadata, the operator's own addresses).
	EgressAllow []string

	// PprofBindAddress serves Go's /debug/pprof endpoints on host:port; empty
	// (the default) serves none. For measuring where memory and CPU go.
	PprofBindAddress string
	// CacheTransforms strips from cached pods and StatefulSets what no
	// controller or webhook reads (lookup.CacheOptions). On by default; off
	// only to measure what the stripping saves.
	CacheTransforms bool
}

// WebhookOptions configure the admission webhook server and its certificate.
type WebhookOptions struct {
	// Port of the HTTPS webhook server; 0 disables it.
	Port int
	// BindHost restricts the listener to one host; empty means all.
	BindHost string
	// CertFile and KeyFile, set together, are served and reloaded when they
	// change (as cert-manager rotates them). Unset, a self-signed CA and
	// serving certificate are kept in CertSecret.
	CertFile string
	KeyFile  string
	// CertSecret is the Secret, in the operator's namespace, that holds the
	// self-signed CA and serving certificate shared by every replica.
	CertSecret string
	// Service is the Service in front of the webhook: the serving
	// certificate names it. ExtraSANs adds DNS names or IPs (e.g. 127.0.0.1
	// when the API server calls a loopback URL in tests).
	Service   string
	ExtraSANs []string
	// CertValidity and CAValidity are the lifetimes of self-signed
	// certificates; each is renewed once two thirds of it has passed.
	CertValidity time.Duration
	CAValidity   time.Duration
	// ValidateFailurePolicy is the failurePolicy of the validation webhook's
	// configuration, Ignore or Fail: what the webhook answers when it cannot
	// judge a request (a failed cache read, a panic).
	ValidateFailurePolicy string
	// KubeAPIQPS and KubeAPIBurst limit the webhooks' own requests to the
	// Kubernetes API (the live reads that confirm a decision, the intents
	// they record), apart from the controllers' --kube-api-qps: an admission
	// waits neither behind a reconcile nor starves one.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// DownscaleBudgetFailurePolicy is the failurePolicy of the
	// downscale-budget webhook's configuration, Ignore or Fail: what the
	// webhook answers when it cannot judge a downscale (the budget's live
	// read or its record failed).
	DownscaleBudgetFailurePolicy string
}

// Default returns the options a flag-less start uses.
func Default() Options {
	return Options{
		HTTPPort:                 8001,
		LeaderElect:              false,
		LeaderElectionID:         "echelon-leader",
		LeaderElectLeaseDuration: 15 * time.Second,
		LeaderElectRenewDeadline: 10 * time.Second,
		LeaderElectRetryPeriod:   2 * time.Second,
		ClusterDomain:            "cluster.local",
		PodAddress:               PodAddressFQDN,
		KubeAPIQPS:               50,
		KubeAPIBurst:             100,
		LogFormat:                "json",
		LogLevel:                 "info",
		GrafanaCompatService:     "rollout-operator",
		CacheTransforms:          true,
		Webhook: WebhookOptions{
			Port:         8443,
			CertSecret:   "echelon-webhook-tls",
			Service:      "echelon-webhook",
			CertValidity: 365 * 24 * time.Hour,
			CAValidity:   10 * 365 * 24 * time.Hour,
			// As markers.go and the chart's default configure it.
			ValidateFailurePolicy: "Ignore",
			// An eviction the cache allows costs about 2 requests (its
			// zone's pods, the intent): 100 evictions a second stay well
			// within the sustained rate.
			KubeAPIQPS:                   300,
			KubeAPIBurst:                 600,
			DownscaleBudgetFailurePolicy: "Fail",
		},
	}
}

// BindFlags registers every option on fs, with o's values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.HTTPPort, "http-port", o.HTTPPort, "Port of the plain HTTP server for /metrics, /ready and /healthz.")
	fs.StringVar(&o.HTTPBindHost, "http-bind-host", o.HTTPBindHost, "Host or IP the HTTP server listens on; empty listens on all interfaces.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader through a Lease so that only one of several replicas acts.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader election Lease. Defaults to $POD_NAMESPACE, else the first of --namespaces, else \"default\".")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration, "How long a standby waits before taking over a Lease that is not renewed.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline, "How long the leader retries renewing the Lease before it steps down.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod, "How often candidates try to acquire or renew the Lease.")
	fs.BoolVar(&o.GrafanaCompat, "grafana-compat", o.GrafanaCompat, "Act on the Grafana rollout-operator's labels and annotations: keep the RolloutGroups, ScalingPolicies and DelayedDownscales they translate to (labelled echelon.dev/grafana-compat) in the watched namespaces. A resource of your own that claims the same StatefulSet wins.")
	fs.StringVar(&o.GrafanaCompatService, "grafana-compat-service", o.GrafanaCompatService, "With --grafana-compat: the Service, in the operator's namespace, that the Grafana rollout-operator's webhook configurations name. The self-signed serving certificate names it, and its CA is injected into the webhook configurations labelled grafana.com/inject-rollout-operator-ca=true and grafana.com/namespace=<operator namespace>.")
	fs.Func("namespaces", "Comma-separated namespaces to watch; empty watches all namespaces.", func(v string) error {
		o.Namespaces = splitList(v)
		return nil
	})
	fs.Func("egress-allow", "Comma-separated CIDRs, IP addresses and host names that the URLs in specs (http checks, hooks, notification receivers, the Prometheus address, pod endpoints) may reach although the egress guard refuses them by default: loopback, link-local and cloud metadata addresses, unspecified addresses and the operator's own addresses. Host names match exactly. Empty allows none of those.", func(v string) error {
		o.EgressAllow = splitList(v)
		return nil
	})
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "DNS domain of the cluster, used to build pod addresses in fqdn mode.")
	fs.StringVar(&o.PodAddress, "pod-address", o.PodAddress, "How pods are addressed: fqdn (<pod>.<service>.<namespace>.svc.<cluster-domain>) or ip (the pod IP).")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Sustained requests per second to the Kubernetes API.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of requests to the Kubernetes API.")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "Log format: json or text.")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "Log level: debug, info, warn or error.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress, "host:port to serve Go's /debug/pprof profiles on (heap, CPU, goroutines); empty serves none. Do not expose it outside the pod.")
	fs.BoolVar(&o.CacheTransforms, "cache-transforms", o.CacheTransforms, "Strip from cached pods and StatefulSets the fields Echelon never reads. Turn off only to measure what it saves: the cache then holds whole objects.")
	w := &o.Webhook
	fs.IntVar(&w.Port, "webhook-port", w.Port, "Port of the HTTPS admission webhook server, served by every replica; 0 disables it.")
	fs.StringVar(&w.BindHost, "webhook-bind-host", w.BindHost, "Host or IP the webhook server listens on; empty listens on all interfaces.")
	fs.StringVar(&w.CertFile, "tls-cert-file", w.CertFile, "PEM certificate the webhook server serves, reloaded when it changes. With --tls-key-file; unset, a self-signed certificate is kept in --webhook-cert-secret.")
	fs.StringVar(&w.KeyFile, "tls-key-file", w.KeyFile, "PEM private key of --tls-cert-file, reloaded when it changes.")
	fs.StringVar(&w.CertSecret, "webhook-cert-secret", w.CertSecret, "Secret in the operator's namespace holding the self-signed CA and serving certificate, shared by every replica.")
	fs.StringVar(&w.Service, "webhook-service", w.Service, "Service in front of the webhook server; the self-signed serving certificate names it.")
	fs.Func("webhook-cert-extra-sans", "Comma-separated extra DNS names or IPs for the self-signed serving certificate.", func(v string) error {
		w.ExtraSANs = splitList(v)
		return nil
	})
	fs.DurationVar(&w.CertValidity, "webhook-cert-validity", w.CertValidity, "Lifetime of the self-signed serving certificate; renewed after two thirds of it.")
	fs.DurationVar(&w.CAValidity, "webhook-ca-validity", w.CAValidity, "Lifetime of the self-signed CA; renewed after two thirds of it.")
	fs.Float64Var(&w.KubeAPIQPS, "webhook-kube-api-qps", w.KubeAPIQPS, "Sustained requests per second of the webhooks to the Kubernetes API (an eviction's live reads and its recorded intent), limited apart from --kube-api-qps so that admissions and reconciles never wait for each other.")
	fs.IntVar(&w.KubeAPIBurst, "webhook-kube-api-burst", w.KubeAPIBurst, "Burst of the webhooks' requests to the Kubernetes API.")
	fs.StringVar(&w.ValidateFailurePolicy, "validate-webhook-failure-policy", w.ValidateFailurePolicy, "failurePolicy of the validation webhook's configuration, Ignore or Fail: what it answers to a request it cannot judge (a failed cache read): Ignore allows it with a warning, Fail refuses it.")
	fs.StringVar(&w.DownscaleBudgetFailurePolicy, "downscale-budget-webhook-failure-policy", w.DownscaleBudgetFailurePolicy, "failurePolicy of the downscale-budget webhook's configuration, Ignore or Fail: what it answers to a downscale of a RolloutGroup's member it cannot judge (the budget's live read or record failed): Ignore allows it with a warning, Fail refuses it.")
}

// Validate returns an error naming the first bad flag, or nil.
func (o *Options) Validate() error {
	var errs []error
	if o.HTTPPort < 1 || o.HTTPPort > 65535 {
		errs = append(errs, fmt.Errorf("--http-port=%d: must be between 1 and 65535", o.HTTPPort))
	}
	for _, ns := range o.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespaces: %q is not a valid namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(o.ClusterDomain); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-domain=%q: %s", o.ClusterDomain, strings.Join(msgs, "; ")))
	}
	if o.PodAddress != PodAddressFQDN && o.PodAddress != PodAddressIP {
		errs = append(errs, fmt.Errorf("--pod-address=%q: must be %q or %q", o.PodAddress, PodAddressFQDN, PodAddressIP))
	}
	if _, err := egress.New(egress.Config{Allow: o.EgressAllow, OwnAddrs: []netip.Addr{}}); err != nil {
		errs = append(errs, err)
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps=%v: must be greater than 0", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst=%d: must be at least 1", o.KubeAPIBurst))
	}
	if o.PprofBindAddress != "" {
		if _, _, err := net.SplitHostPort(o.PprofBindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--pprof-bind-address=%q: must be host:port: %w", o.PprofBindAddress, err))
		}
	}
	if o.LogFormat != "json" && o.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format=%q: must be json or text", o.LogFormat))
	}
	if _, err := ParseLogLevel(o.LogLevel); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.Webhook.validate()...)
	if o.LeaderElect {
		if o.LeaderElectLeaseDuration <= o.LeaderElectRenewDeadline {
			errs = append(errs, fmt.Errorf("--leader-elect-lease-duration=%s: must be greater than --leader-elect-renew-deadline=%s", o.LeaderElectLeaseDuration, o.LeaderElectRenewDeadline))
		}
		if o.LeaderElectRetryPeriod <= 0 || o.LeaderElectRetryPeriod >= o.LeaderElectRenewDeadline {
			errs = append(errs, fmt.Errorf("--leader-elect-retry-period=%s: must be greater than 0 and less than --leader-elect-renew-deadline", o.LeaderElectRetryPeriod))
		}
	}
	if o.GrafanaCompat {
		if msgs := validation.IsDNS1123Label(o.GrafanaCompatService); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--grafana-compat-service=%q: %s", o.GrafanaCompatService, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

func (w *WebhookOptions) validate() []error {
	var errs []error
	if w.Port < 0 || w.Port > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port=%d: must be between 0 (disabled) and 65535", w.Port))
	}
	if (w.CertFile == "") != (w.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file: set both or neither"))
	}
	if w.CertFile == "" {
		if msgs := validation.IsDNS1123Subdomain(w.CertSecret); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--webhook-cert-secret=%q: %s", w.CertSecret, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsDNS1123Label(w.Service); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--webhook-service=%q: %s", w.Service, strings.Join(msgs, "; ")))
		}
	}
	if w.CertValidity < time.Minute {
		errs = append(errs, fmt.Errorf("--webhook-cert-validity=%s: must be at least 1m", w.CertValidity))
	}
	if w.CAValidity < w.CertValidity {
		errs = append(errs, fmt.Errorf("--webhook-ca-validity=%s: must be at least --webhook-cert-validity=%s", w.CAValidity, w.CertValidity))
	}
	if w.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--webhook-kube-api-qps=%v: must be greater than 0", w.KubeAPIQPS))
	}
	if w.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--webhook-kube-api-burst=%d: must be at least 1", w.KubeAPIBurst))
	}
	if w.ValidateFailurePolicy != "Ignore" && w.ValidateFailurePolicy != "Fail" {
		errs = append(errs, fmt.Errorf("--validate-webhook-failure-policy=%q: must be Ignore or Fail", w.ValidateFailurePolicy))
	}
	if w.DownscaleBudgetFailurePolicy != "Ignore" && w.DownscaleBudgetFailurePolicy != "Fail" {
		errs = append(errs, fmt.Errorf("--downscale-budget-webhook-failure-policy=%q: must be Ignore or Fail", w.DownscaleBudgetFailurePolicy))
	}
	return errs
}

// ResolvedLeaderElectionNamespace is where the Lease lives when none was given.
func (o *Options) ResolvedLeaderElectionNamespace() string {
	if o.LeaderElectionNamespace != "" {
		return o.LeaderElectionNamespace
	}
	return o.OperatorNamespace()
}

// OperatorNamespace is the namespace the operator runs in: $POD_NAMESPACE,
// else the first of --namespaces, else "default". The webhook certificate
// Secret lives there.
func (o *Options) OperatorNamespace() string {
	switch {
	case os.Getenv("POD_NAMESPACE") != "":
		return os.Getenv("POD_NAMESPACE")
	case len(o.Namespaces) > 0:
		return o.Namespaces[0]
	default:
		return "default"
	}
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
