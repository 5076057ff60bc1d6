// Package controllertest is the controller tier's harness: each reconciler
// package's tests run their reconciler against a real API server (etcd and
// kube-apiserver only, no controllers, no kubelets), where the test plays the
// StatefulSet controller and the kubelet so that it decides exactly when each
// pod is created, becomes Ready or goes away, and can make the operator's view
// of pods lag.
package controllertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/egress/egresstest"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/test/controlplane"
)

var (
	sharedOnce sync.Once
	sharedCP   *controlplane.ControlPlane
	sharedErr  error
)

// Main runs a package's tests, then stops the API server they shared, if one
// started. Call it from TestMain. The egress guard allows loopback, where
// the tests' receivers, hooks and checks listen, as --egress-allow would.
func Main(m *testing.M) {
	egresstest.AllowLoopback()
	code := m.Run()
	if sharedCP != nil {
		if err := sharedCP.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}
	os.Exit(code)
}

// APIServer starts etcd and kube-apiserver with the CRDs once per test binary;
// each test works in its own namespace.
func APIServer(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	sharedOnce.Do(func() {
		sharedCP, sharedErr = controlplane.Start(context.Background(), controlplane.Options{
			APIServerOnly: true,
			CRDDirs:       []string{controlplane.CRDBasesDir},
			Scheme:        Scheme(),
		})
	})
	if sharedErr != nil {
		if errors.Is(sharedErr, controlplane.ErrAssetsMissing) && os.Getenv(controlplane.SkipEnv) == "1" {
			t.Skipf("skipping: %v", sharedErr)
		}
		t.Fatalf("%v", sharedErr)
	}
	return sharedCP
}

// Scheme holds the built-in kinds and Echelon's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Env is one test's namespace, admin client and manager.
type Env struct {
	T     *testing.T
	Ctx   context.Context
	Admin client.Client
	NS    string
	// Manager has Echelon's cache indexes; the test registers its
	// reconcilers, then calls Start.
	Manager ctrl.Manager

	cancel context.CancelFunc
}

// Options shape the manager under test.
type Options struct {
	// PodLag delays every pod event reaching the cache by this long: a slow
	// watch, as after a handover or under load.
	PodLag time.Duration
}

// New makes a namespace and a manager scoped to it, with the operator's
// cache options and indexes. The manager starts with Start.
func New(t *testing.T, opts Options) *Env {
	t.Helper()
	cp := APIServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	ns, err := cp.CreateNamespace(ctx, "ctrl")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cacheOpts := lookup.CacheOptions([]string{ns})
	if opts.PodLag > 0 {
		cacheOpts.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			if _, ok := obj.(*corev1.Pod); ok {
				lw = laggingListerWatcher{ListerWatcher: lw, lag: opts.PodLag}
			}
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
	}
	mgr, err := ctrl.NewManager(cp.Config(), ctrl.Options{
		Scheme:                 Scheme(),
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test builds its own manager with a controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := lookup.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		cancel()
		t.Fatal(err)
	}
	return &Env{T: t, Ctx: ctx, Admin: cp.Client(), NS: ns, Manager: mgr, cancel: cancel}
}

// Start warms the caches, starts the manager until the test ends, and waits
// for the caches to sync.
func (e *Env) Start() {
	e.T.Helper()
	if err := lookup.WarmCaches(e.Ctx, e.Manager.GetCache()); err != nil {
		e.T.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Manager.Start(e.Ctx) }()
	e.T.Cleanup(func() {
		e.cancel()
		if err := <-done; err != nil {
			e.T.Errorf("manager: %v", err)
		}
	})
	if !e.Manager.GetCache().WaitForCacheSync(e.Ctx) {
		e.T.Fatal("caches did not sync")
	}
}

// Eventually polls cond until it holds or the timeout passes.
func (e *Env) Eventually(timeout time.Duration, what string, cond func() (bool, error)) {
	e.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			e.T.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
