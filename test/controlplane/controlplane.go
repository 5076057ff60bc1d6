/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/echelon-operator/echelon/internal/kube"
)

const (
	// CRDBasesDir holds the operator's generated CRDs, relative to the repository
	// root; pass it in Options.CRDDirs to install them.
	CRDBasesDir = "config/crd/bases"

	// KeepEnv, set to 1, keeps the run directory (logs, kubeconfigs) after Stop.
	KeepEnv = "ECHELON_CONTROLPLANE_KEEP"

	// startTimeout bounds every wait in Start; a cold start takes a few seconds.
	startTimeout = 2 * time.Minute

	defaultNodes = 3
)

// DefaultZones are the zones the fake nodes are spread over.
var DefaultZones = []string{"zone-a", "zone-b", "zone-c"}

// Options configure a control plane. The zero value is a working default.
type Options struct {
	// Nodes is the number of fake nodes; 0 means 3.
	Nodes int
	// Zones label node i with topology.kubernetes.io/zone=Zones[i%len(Zones)];
	// nil means DefaultZones.
	Zones []string
	// PodStartDelay is how long kwok waits after a pod is scheduled before it
	// gets its IP (Pending, ContainerCreating), and PodReadyDelay how long after
	// that before it is Running and Ready. Both zero (the default) means kwok's
	// fast stages: Ready right away.
	PodStartDelay time.Duration
	PodReadyDelay time.Duration
	// PodCIDR is where pod IPs come from; empty means DefaultPodCIDR. Control
	// planes that run at the same time and serve pod IPs from test servers need
	// different ranges.
	PodCIDR string
	// CRDDirs are installed before Start returns, e.g. CRDBasesDir. Relative paths
	// are taken from the repository root.
	CRDDirs []string
	// Scheme is the scheme of Client() and of CRD installation; nil means
	// client-go's scheme. Add the operator's API types to use them with Client().
	Scheme *runtime.Scheme
	// APIServerOnly starts etcd and kube-apiserver and nothing else: no
	// controllers, scheduler, kwok or nodes. It starts in a few seconds, for
	// controller tests that play the StatefulSet controller and kubelet
	// themselves, so that they decide exactly what each pod does.
	APIServerOnly bool
	// RealNodes, when set, prepares the control plane for real kubelets
	// (test/nodetier) instead of starting kwok and fake nodes.
	RealNodes *RealNodes
}

// ControlPlane is a running control plane. Its methods may be used from several
// goroutines.
type ControlPlane struct {
	opts   Options
	assets *Assets
	dir    string // run directory: logs, kubeconfigs, configs, launchers
	env    *envtest.Environment
	// envLogs are the log files of the processes envtest runs, closed by Stop.
	envLogs []*os.File
	admin   *User
	client  client.Client
	procs   []*process
	nodes   []string

	mu    sync.Mutex
	users int // numbers kubeconfig files
	// apiServerRestarts numbers the restarted kube-apiservers' logs.
	apiServerRestarts int
	// extraLogs name the components StartComponent started, whose log tails
	// LogTails prints after the control plane's.
	extraLogs []string

	stopOnce sync.Once
	stopErr  error

	// attached is set on a ControlPlane that Attach made: another process owns
	// the components and stops them.
	attached bool
}

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok, creates the fake nodes and returns once a canary pod has been scheduled
// and become Ready, so the first test does not pay for start-up. On failure
// everything started is stopped and the error carries the tail of each log.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	assets, err := FindAssets()
	if err != nil {
		return nil, err
	}
	if opts.Nodes == 0 {
		opts.Nodes = defaultNodes
	}
	if opts.Zones == nil {
		opts.Zones = DefaultZones
	}
	if opts.PodCIDR == "" {
		opts.PodCIDR = DefaultPodCIDR
	}
	if opts.Scheme == nil {
		opts.Scheme = clientgoscheme.Scheme
	}
	dir, err := os.MkdirTemp("", "echelon-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	cp := &ControlPlane{opts: opts, assets: assets, dir: dir}
	if err := cp.start(ctx); err != nil {
		err = fmt.Errorf("start control plane: %w\n%s", err, cp.LogTails(30))
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return cp, nil
}

// StartForTest starts a control plane for one Go test and stops it when the test
// ends, printing the component logs if the test failed. Missing binaries fail
// the test with the command that builds them, or skip it if ECHELON_SKIP_CONTROLPLANE=1.
func StartForTest(t TB, opts Options) *ControlPlane {
	t.Helper()
	cp, err := Start(context.Background(), opts)
	if err != nil {
		if errors.Is(err, ErrAssetsMissing) && os.Getenv(SkipEnv) == "1" {
			t.Skipf("skipping: %v (%s=1)", err, SkipEnv)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Logf("stop control plane: %v", err)
		}
	})
	cp.DumpLogsOnFailure(t, 50)
	return cp
}

func (cp *ControlPlane) start(ctx context.Context) error {
	for _, sub := range []string{"logs", "kubeconfigs", "bin", "config"} {
		if err := os.Mkdir(filepath.Join(cp.dir, sub), 0o755); err != nil {
			return err
		}
	}
	if err := cp.startAPIServer(); err != nil {
		return err
	}
	var err error
	if cp.admin, err = cp.NewUser("echelon-test-admin", "system:masters"); err != nil {
		return err
	}
	if cp.client, err = client.New(cp.admin.Config, client.Options{Scheme: cp.opts.Scheme}); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if cp.opts.APIServerOnly {
		return nil
	}
	if err := cp.startControllerManager(); err != nil {
		return err
	}
	if err := cp.startScheduler(); err != nil {
		return err
	}
	if cp.opts.RealNodes != nil {
		return nil
	}
	if err := cp.startKwok(); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if cp.nodes, err = createNodes(ctx, cp.client, cp.opts.Nodes, cp.opts.Zones); err != nil {
		return err
	}
	var waitingFor string
	if err := cp.waitFor(ctx, func(ctx context.Context) (bool, error) {
		var ok bool
		var err error
		ok, waitingFor, err = nodesSchedulable(ctx, cp.client, cp.nodes)
		return ok, err
	}); err != nil {
		return fmt.Errorf("wait for nodes: %s: %w", waitingFor, err)
	}
	return cp.runCanary(ctx)
}

// waitFor polls cond until it holds, failing early if a component has exited so
// that a bad flag reports as such rather than as a timeout.
func (cp *ControlPlane) waitFor(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range cp.procs {
			if done, err := p.exited(); done {
				return false, err
			}
		}
		return cond(ctx)
	})
}

// runCanary creates a pod and waits for it to be Ready with an IP, which proves
// the scheduler and kwok work end to end, then deletes it.
func (cp *ControlPlane) runCanary(ctx context.Context) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "controlplane-canary", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "canary", Image: "canary"}},
		},
	}
	if err := cp.client.Create(ctx, pod); err != nil {
		return fmt.Errorf("create canary pod: %w", err)
	}
	// With configured pod delays the canary is as slow as any pod; waiting for
	// it would only delay Start, so scheduling is proof enough.
	needReady := cp.opts.PodStartDelay == 0 && cp.opts.PodReadyDelay == 0
	state := "not scheduled (kube-scheduler)"
	err := cp.waitFor(ctx, func(ctx context.Context) (bool, error) {
		if err := cp.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		switch {
		case pod.Spec.NodeName == "":
			return false, nil
		case !needReady:
			return true, nil
		case pod.Status.PodIP == "" || !kube.PodReady(pod):
			state = fmt.Sprintf("on node %s but not Ready with an IP (kwok)", pod.Spec.NodeName)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("canary pod %s: %w", state, err)
	}
	// A graceful delete, so that kwok's pod-delete stage removes it like any pod.
	if err := cp.client.Delete(ctx, pod); err != nil {
		return fmt.Errorf("delete canary pod: %w", err)
	}
	return nil
}

// Stop stops every component (SIGTERM, then SIGKILL after a grace period),
// waits for them to exit and removes the run directory unless
// ECHELON_CONTROLPLANE_KEEP=1. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		if cp.attached {
			return
		}
		var errs []error
		// The API server's clients first, so that they do not log its shutdown as
		// errors; then etcd and the API server.
		for i := len(cp.procs) - 1; i >= 0; i-- {
			if err := cp.procs[i].stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if cp.env != nil {
			if err := cp.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop etcd and kube-apiserver: %w", err))
			}
		}
		for _, f := range cp.envLogs {
			_ = f.Close()
		}
		if os.Getenv(KeepEnv) == "1" {
			fmt.Fprintf(os.Stderr, "controlplane: kept %s (%s=1)\n", cp.dir, KeepEnv)
		} else if err := os.RemoveAll(cp.dir); err != nil {
			errs = append(errs, err)
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// Config returns the REST config of an administrator (system:masters).
func (cp *ControlPlane) Config() *rest.Config {
	return rest.CopyConfig(cp.admin.Config)
}

// Kubeconfig returns the path of the administrator's kubeconfig file.
func (cp *ControlPlane) Kubeconfig() string {
	return cp.admin.Kubeconfig
}

// Client returns an administrator's client using Options.Scheme.
func (cp *ControlPlane) Client() client.Client {
	return cp.client
}

// Nodes returns the names of the fake nodes.
func (cp *ControlPlane) Nodes() []string {
	return append([]string(nil), cp.nodes...)
}

// Assets returns the paths of the binaries in use, e.g. kubectl and helm.
func (cp *ControlPlane) Assets() Assets {
	return *cp.assets
}

// Dir returns the run directory: logs/, kubeconfigs/ and the component configs.
func (cp *ControlPlane) Dir() string {
	return cp.dir
}

// String describes the control plane for logs.
func (cp *ControlPlane) String() string {
	host := ""
	if cp.admin != nil {
		host = cp.admin.Config.Host
	}
	return fmt.Sprintf("control plane at %s with nodes %s (run directory %s)", host, strings.Join(cp.nodes, ","), cp.dir)
}
