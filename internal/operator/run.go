// Package operator assembles the Echelon manager: caches, controllers, the HTTP
// endpoints and leader election. main.go only parses flags and calls Run.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	echelonv1alpha1 "github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers"
	"github.com/echelon-operator/echelon/controllers/grafanacompat"
	"github.com/echelon-operator/echelon/internal/certs"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/options"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/webhooks"
)

// apiServerCheckTimeout bounds the start-up probe of the API server, so that an
// unreachable server is a clear error instead of a hang.
const apiServerCheckTimeout = 15 * time.Second

// NewScheme returns the scheme holding every type Echelon reads or writes.
func NewScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(echelonv1alpha1.AddToScheme(scheme))
	return scheme
}

// Run starts the operator and blocks until ctx is cancelled or it fails.
func Run(ctx context.Context, cfg *rest.Config, opts options.Options) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = float32(opts.KubeAPIQPS)
	cfg.Burst = opts.KubeAPIBurst
	cfg.UserAgent = "echelon"

	if err := checkAPIServer(cfg); err != nil {
		return err
	}

	guard, err := egress.New(egress.Config{Allow: opts.EgressAllow})
	if err != nil {
		return err
	}
	egress.SetDefault(guard)

	ready := &atomic.Bool{}
	// The webhook server's check joins both maps once it exists (before the
	// manager starts): /healthz fails while it does not serve, and /ready
	// takes a replica that cannot serve out of the webhook Service.
	healthChecks := map[string]healthz.Checker{"ping": healthz.Ping}
	readyChecks := map[string]healthz.Checker{"caches": cachesSynced(ready)}
	cacheOpts := lookup.CacheOptions(opts.Namespaces)
	if !opts.CacheTransforms {
		cacheOpts = lookup.WithoutTransforms(cacheOpts)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: NewScheme(),
		Cache:  cacheOpts,
		Metrics: metricsserver.Options{
			BindAddress: net.JoinHostPort(opts.HTTPBindHost, strconv.Itoa(opts.HTTPPort)),
			ExtraHandlers: map[string]http.Handler{
				// healthz.Handler resolves the path below its mount point to a check
				// name, so the prefix is stripped: /ready runs every check, /ready/caches one.
				"/healthz": http.StripPrefix("/healthz", &healthz.Handler{Checks: healthChecks}),
				"/ready":   http.StripPrefix("/ready", &healthz.Handler{Checks: readyChecks}),
			},
		},
		HealthProbeBindAddress:        "0",
		PprofBindAddress:              opts.PprofBindAddress, // "" serves none
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.ResolvedLeaderElectionNamespace(),
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaderElectLeaseDuration,
		RenewDeadline:                 &opts.LeaderElectRenewDeadline,
		RetryPeriod:                   &opts.LeaderElectRetryPeriod,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := lookup.WarmCaches(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if err := mgr.Add(&cacheSyncWatcher{cache: mgr.GetCache(), ready: ready}); err != nil {
		return fmt.Errorf("add cache sync watcher: %w", err)
	}
	addressing := podcall.Addressing{PodAddressIP: opts.PodAddress == options.PodAddressIP, ClusterDomain: opts.ClusterDomain}
	// One watch per Secret or ConfigMap a tls block names, shared by the
	// controllers and the webhooks.
	tlsObjects, err := httptls.NewObjectsFor(mgr)
	if err != nil {
		return err
	}
	if err := controllers.Setup(mgr, addressing, tlsObjects); err != nil {
		return err
	}
	if opts.GrafanaCompat {
		if err := grafanacompat.New(mgr).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up Grafana compat mode: %w", err)
		}
	}
	if opts.Webhook.Port != 0 {
		check, err := setupWebhooks(ctx, cfg, mgr, opts, addressing, tlsObjects)
		if err != nil {
			return err
		}
		healthChecks["webhook"], readyChecks["webhook"] = check, check
	}
	ctrl.Log.Info("starting echelon", "httpPort", opts.HTTPPort, "webhookPort", opts.Webhook.Port, "leaderElect", opts.LeaderElect,
		"namespaces", opts.Namespaces, "podAddress", opts.PodAddress, "pprofBindAddress", opts.PprofBindAddress, "cacheTransforms", opts.CacheTransforms, "egressAllow", opts.EgressAllow)
	return mgr.Start(ctx)
}

// setupWebhooks adds the admission webhooks to the manager: the serving
// certificate (loaded, or created in self-signed mode, before the manager
// starts, so the server never listens without one), the operator's own user
// name (to tell its ScalingPolicy controller's downscales apart) and the
// HTTPS server. It returns the server's health check.
func setupWebhooks(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, opts options.Options, addressing podcall.Addressing, tlsObjects client.Reader) (healthz.Checker, error) {
	provider, err := certs.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := provider.Bootstrap(ctx); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if err := mgr.Add(provider); err != nil {
		return nil, fmt.Errorf("add the webhook certificate provider: %w", err)
	}
	identity, err := webhooks.LearnIdentity(ctx, mgr.GetClient())
	if err != nil {
		return nil, err
	}
	ctrl.Log.Info("webhooks: the operator's own downscales are those of user with field manager",
		"user", identity.Username, "fieldManager", lookup.ScalingPolicyFieldManager)
	return webhooks.Setup(mgr, webhooks.Config{
		Host:                         opts.Webhook.BindHost,
		Port:                         opts.Webhook.Port,
		Certificates:                 provider,
		Identity:                     identity,
		Addressing:                   addressing,
		Namespaces:                   opts.Namespaces,
		GrafanaCompat:                opts.GrafanaCompat,
		ValidateFailurePolicy:        admissionregistrationv1.FailurePolicyType(opts.Webhook.ValidateFailurePolicy),
		TLSObjects:                   tlsObjects,
		KubeAPIQPS:                   float32(opts.Webhook.KubeAPIQPS),
		KubeAPIBurst:                 opts.Webhook.KubeAPIBurst,
		DownscaleBudgetFailurePolicy: admissionregistrationv1.FailurePolicyType(opts.Webhook.DownscaleBudgetFailurePolicy),
	})
}

// checkAPIServer fails fast, with the server address, when the API server cannot
// be reached or refuses the credentials.
func checkAPIServer(cfg *rest.Config) error {
	probe := rest.CopyConfig(cfg)
	probe.Timeout = apiServerCheckTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return fmt.Errorf("kubernetes API server %s: %w", cfg.Host, err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		return fmt.Errorf("cannot reach the kubernetes API server at %s: %w", cfg.Host, err)
	}
	return nil
}

// cacheSyncWatcher marks the process ready once the informers have synced. It
// runs on every replica, leader or not, and lookup.WarmCaches has registered every
// informer the controllers use before the manager starts, so a standby that
// reports ready holds a warm cache and can lead at once.
type cacheSyncWatcher struct {
	cache interface {
		WaitForCacheSync(ctx context.Context) bool
	}
	ready *atomic.Bool
}

func (w *cacheSyncWatcher) Start(ctx context.Context) error {
	if w.cache.WaitForCacheSync(ctx) {
		w.ready.Store(true)
	}
	<-ctx.Done()
	return nil
}

func (w *cacheSyncWatcher) NeedLeaderElection() bool { return false }

var _ manager.LeaderElectionRunnable = &cacheSyncWatcher{}

func cachesSynced(ready *atomic.Bool) healthz.Checker {
	return func(*http.Request) error {
		if !ready.Load() {
			return errors.New("caches are not synced yet")
		}
		return nil
	}
}
