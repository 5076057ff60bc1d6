package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
)

// Paths of the webhooks on the HTTPS server. The webhook configurations
// (config/webhook, the chart) name them.
const (
	PathNoDownscale      = "/admission/" + metrics.WebhookNoDownscale
	PathPrepareDownscale = "/admission/" + metrics.WebhookPrepareDownscale
	PathValidate         = "/admission/" + metrics.WebhookValidate
	PathEviction         = "/admission/" + metrics.WebhookEviction
	PathDownscaleBudget  = "/admission/" + metrics.WebhookDownscaleBudget
	PathHoldPartition    = "/admission/" + metrics.WebhookHoldPartition
)

// Certificates is the source of the serving certificate (internal/certs: from
// files, or self-signed and kept in a Secret).
type Certificates interface {
	// GetCertificate is tls.Config.GetCertificate: called at every handshake,
	// so a renewed certificate is served at once, with no restart.
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Check fails when there is no certificate to serve or it has expired.
	Check(*http.Request) error
}

// Config is what the webhooks need from the operator.
type Config struct {
	// Host and Port the HTTPS server listens on (Port > 0).
	Host string
	Port int
	// Certificates serves the TLS certificate.
	Certificates Certificates
	// Identity tells the ScalingPolicy controller's own writes apart.
	Identity Identity
	// Addressing says how the prepare-downscale webhook reaches pods.
	Addressing podcall.Addressing
	// Namespaces are the watched ones; empty means all.
	Namespaces []string
	// ValidateFailurePolicy is the failurePolicy of the validation
	// webhook's configuration (the chart's webhooks.validation.failurePolicy):
	// Ignore allows what the webhook cannot judge, Fail refuses it. Empty
	// means DefaultFailurePolicy. The other webhooks always refuse it.
	ValidateFailurePolicy admissionregistrationv1.FailurePolicyType
	// DownscaleBudgetFailurePolicy is the failurePolicy of the
	// downscale-budget webhook's configuration (the chart's
	// webhooks.downscaleBudget.failurePolicy): what the webhook answers
	// when it cannot judge a downscale (the budget's live read or record
	// failed). Empty means DefaultFailurePolicy.
	DownscaleBudgetFailurePolicy admissionregistrationv1.FailurePolicyType
	// GrafanaCompat also answers the Grafana rollout-operator's paths that
	// are not Echelon's (PathGrafanaPodEviction, PathGrafanaZPDBValidation).
	GrafanaCompat bool
	// TLSObjects reads the Secrets and ConfigMaps of tls blocks (the
	// process's httptls.Objects); nil reads them live.
	TLSObjects client.Reader
	// KubeAPIQPS and KubeAPIBurst limit the webhooks' own client: their
	// live reads and writes go to the API server through it, apart from the
	// manager's client and its limiter, so that an admission never waits
	// behind the controllers' requests (nor they behind a drain's). Both
	// must be positive.
	KubeAPIQPS   float32
	KubeAPIBurst int
}

// Setup adds the HTTPS webhook server to the manager, serving the six
// webhooks on every replica (leader or not: the API server calls any of them
// through the Service), and returns the health check of /healthz: the server
// answers TLS and its certificate is valid. The handlers read the manager's
// cache, whose indexes lookup.Register adds.
func Setup(mgr ctrl.Manager, cfg Config) (healthz.Checker, error) {
	if cfg.Port <= 0 {
		return nil, fmt.Errorf("webhook server port %d: must be positive", cfg.Port)
	}
	if cfg.Certificates == nil {
		return nil, errors.New("webhook server: no certificate source")
	}
	api, err := apiClient(mgr, cfg.KubeAPIQPS, cfg.KubeAPIBurst)
	if err != nil {
		return nil, err
	}
	srv := newDrainingServer(NewServer(cfg.Host, cfg.Port, cfg.Certificates))
	tlsObjects := cfg.TLSObjects
	if tlsObjects == nil {
		tlsObjects = mgr.GetAPIReader()
	}
	cluster := NewCluster(mgr.GetClient(), mgr.GetClient(), cfg.Namespaces)
	events := mgr.GetEventRecorder("echelon")
	log := ctrl.Log.WithName("webhooks")
	downscaleBudget := NewDownscaleBudget(api, api)
	prepare := &PrepareDownscale{Cluster: cluster, Budget: downscaleBudget,
		Identity: cfg.Identity, Pods: NewPodClient(), Addressing: cfg.Addressing, Secrets: tlsObjects, Now: time.Now}
	fresh, err := budget.NewFreshness(mgr.GetCache())
	if err != nil {
		return nil, err
	}
	eviction := &Eviction{Cluster: cluster, Budgets: NewEvictionBudgets(mgr.GetClient(), api, api, time.Now, fresh),
		Hooks: NewEvictionHooks(mgr.GetClient()), Caller: newHookCaller(), Addressing: cfg.Addressing, Secrets: tlsObjects}
	type handler struct {
		name string
		decider
		limiter *eventLimiter
	}
	evictionLimiter := newEventLimiter(evictionEventInterval)
	handlers := map[string]handler{
		PathNoDownscale:      {metrics.WebhookNoDownscale, &NoDownscale{Cluster: cluster, Identity: cfg.Identity}, nil},
		PathPrepareDownscale: {metrics.WebhookPrepareDownscale, prepare, nil},
		PathValidate:         {metrics.WebhookValidate, &Validate{Cluster: cluster}, nil},
		PathEviction:         {metrics.WebhookEviction, eviction, evictionLimiter},
		PathDownscaleBudget:  {metrics.WebhookDownscaleBudget, &BudgetDownscale{Cluster: cluster, Budget: downscaleBudget, Identity: cfg.Identity}, nil},
		PathHoldPartition:    {metrics.WebhookHoldPartition, HoldPartition{}, nil},
	}
	if cfg.GrafanaCompat {
		// The same eviction judge under its own metric label, so that calls
		// through the Grafana configurations can be told apart.
		handlers[PathGrafanaPodEviction] = handler{metrics.WebhookGrafanaPodEviction, eviction, evictionLimiter}
		handlers[PathGrafanaZPDBValidation] = handler{metrics.WebhookGrafanaZPDBValidation, ZPDBValidation{}, nil}
	}
	for path, d := range handlers {
		policy := DefaultFailurePolicy(d.name)
		if d.name == metrics.WebhookValidate && cfg.ValidateFailurePolicy != "" {
			policy = cfg.ValidateFailurePolicy
		}
		if d.name == metrics.WebhookDownscaleBudget && cfg.DownscaleBudgetFailurePolicy != "" {
			policy = cfg.DownscaleBudgetFailurePolicy
		}
		srv.Register(path, &reviewHandler{webhook: d.name, failurePolicy: policy, decider: d.decider, events: events, limiter: d.limiter, log: log})
	}
	if err := mgr.Add(srv); err != nil {
		return nil, fmt.Errorf("add the webhook server: %w", err)
	}
	pending := &pendingDownscales{client: mgr.GetClient(), live: mgr.GetAPIReader(), tlsObjects: tlsObjects, pods: prepare.Pods, events: events, now: time.Now}
	if err := setupPendingDownscales(mgr, pending); err != nil {
		return nil, fmt.Errorf("add the prepared-downscale controller: %w", err)
	}
	if err := mgr.Add(&cancelDrain{prepare: prepare}); err != nil {
		return nil, fmt.Errorf("add the webhook's cancel drain: %w", err)
	}
	return HealthCheck(srv, cfg.Certificates), nil
}

// apiClient is the webhooks' own client to the API server: uncached, with
// the manager's credentials and scheme and a rate limiter of its own.
func apiClient(mgr ctrl.Manager, qps float32, burst int) (client.Client, error) {
	if qps <= 0 || burst < 1 {
		return nil, fmt.Errorf("webhooks' client: kube API qps %v and burst %d must be positive", qps, burst)
	}
	rc := rest.CopyConfig(mgr.GetConfig())
	rc.QPS, rc.Burst = qps, burst
	c, err := client.New(rc, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("webhooks' client: %w", err)
	}
	return c, nil
}

// NewServer returns controller-runtime's webhook server on host:port, TLS 1.2
// or later, with the certificate from certs at every handshake.
func NewServer(host string, port int, certs Certificates) webhook.Server {
	return webhook.NewServer(webhook.Options{
		Host: host,
		Port: port,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			c.GetCertificate = certs.GetCertificate
			// HTTP/1.1 only, as kubebuilder's scaffold does: HTTP/2 exposes the
			// server to stream-reset floods (CVE-2023-44487) and buys little
			// for the API server's small requests.
			c.NextProtos = []string{"http/1.1"}
		}},
	})
}

// HealthCheck fails until the server answers TLS, and whenever the
// certificate source reports no valid certificate.
func HealthCheck(srv webhook.Server, certs Certificates) healthz.Checker {
	started := srv.StartedChecker()
	return func(r *http.Request) error {
		if err := started(r); err != nil {
			return err
		}
		if err := certs.Check(r); err != nil {
			return fmt.Errorf("webhook certificate: %w", err)
		}
		return nil
	}
}

// cancelDrain waits, at shutdown, for the cancel calls the prepare-downscale
// webhook still has in flight (each bounded by its per-call timeout).
type cancelDrain struct{ prepare *PrepareDownscale }

func (d *cancelDrain) Start(ctx context.Context) error {
	<-ctx.Done()
	d.prepare.cancels.Wait()
	return nil
}

func (d *cancelDrain) NeedLeaderElection() bool { return false }

var _ manager.LeaderElectionRunnable = &cancelDrain{}
