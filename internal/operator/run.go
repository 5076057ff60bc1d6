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

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	echelonv1alpha1 "github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers"
	"github.com/echelon-operator/echelon/internal/options"
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

	ready := &atomic.Bool{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: NewScheme(),
		Cache:  controllers.CacheOptions(opts.Namespaces),
		Metrics: metricsserver.Options{
			BindAddress: net.JoinHostPort(opts.HTTPBindHost, strconv.Itoa(opts.HTTPPort)),
			ExtraHandlers: map[string]http.Handler{
				// healthz.Handler resolves the path below its mount point to a check
				// name, so the prefix is stripped: /ready runs every check, /ready/caches one.
				"/healthz": http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}),
				"/ready":   http.StripPrefix("/ready", &healthz.Handler{Checks: map[string]healthz.Checker{"caches": cachesSynced(ready)}}),
			},
		},
		HealthProbeBindAddress:        "0",
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
	if err := controllers.WarmCaches(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if err := mgr.Add(&cacheSyncWatcher{cache: mgr.GetCache(), ready: ready}); err != nil {
		return fmt.Errorf("add cache sync watcher: %w", err)
	}
	addressing := controllers.PodAddressing{PodAddressIP: opts.PodAddress == options.PodAddressIP, ClusterDomain: opts.ClusterDomain}
	if err := controllers.Setup(mgr, addressing); err != nil {
		return err
	}
	ctrl.Log.Info("starting echelon", "httpPort", opts.HTTPPort, "leaderElect", opts.LeaderElect,
		"namespaces", opts.Namespaces, "podAddress", opts.PodAddress)
	return mgr.Start(ctx)
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
// runs on every replica, leader or not, and controllers.WarmCaches has registered every
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
