/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// How each component is configured and started. Each runs as its own user in
// system:masters: distinct names show who did what in the API server's logs and
// in managedFields, without maintaining the roles of a real cluster.

const (
	// controllers are the kube-controller-manager loops the operator's objects
	// rely on: StatefulSets and their pods, garbage collection of owned objects,
	// Deployments (the operator's own, in e2e), PodDisruptionBudgets, the node
	// lifecycle controller that lifts the not-ready taint from kwok's nodes, pod
	// GC, and the namespace controller, without which a test's namespace would
	// stay Terminating with its StatefulSets still being reconciled.
	controllers = "statefulset,garbagecollector,replicaset,deployment,disruption,nodelifecycle,podgc,namespace"

	// nodeMonitorGracePeriod is how long a node may go without a heartbeat before
	// it is NotReady and its pods are marked not ready. kwok's heartbeat stage
	// beats every 20-45 s; the default 50 s leaves no margin on a busy two-core
	// machine, and a node flapping mid-test would fail unrelated assertions.
	nodeMonitorGracePeriod = "5m"

	// clientQPS and clientBurst lift client-go's default rate limits (5/10, and
	// 20/30 in the controller manager), which would otherwise dominate the
	// duration of a rollout test.
	clientQPS   = 1000
	clientBurst = 2000
)

// startAPIServer starts etcd and kube-apiserver through envtest, which also
// issues the client certificates of NewUser and installs the CRDs.
func (cp *ControlPlane) startAPIServer() error {
	bin := filepath.Join(cp.dir, "bin")
	// Launchers arm the parent-death signal for the processes envtest starts.
	etcdPath, apiServerPath := filepath.Join(bin, "etcd"), filepath.Join(bin, "kube-apiserver")
	if err := parentDeathLauncher(etcdPath, cp.assets.Etcd); err != nil {
		return err
	}
	if err := parentDeathLauncher(apiServerPath, cp.assets.KubeAPIServer); err != nil {
		return err
	}
	etcdLog, err := os.Create(cp.logPath("etcd"))
	if err != nil {
		return err
	}
	cp.envLogs = append(cp.envLogs, etcdLog)
	apiServerLog, err := os.Create(cp.logPath("kube-apiserver"))
	if err != nil {
		return err
	}
	cp.envLogs = append(cp.envLogs, apiServerLog)
	crdDirs := make([]string, 0, len(cp.opts.CRDDirs))
	for _, d := range cp.opts.CRDDirs {
		p, err := cp.repoPath(d)
		if err != nil {
			return err
		}
		crdDirs = append(crdDirs, p)
	}

	apiServer := &envtest.APIServer{Path: apiServerPath, Out: apiServerLog, Err: apiServerLog}
	// envtest defaults to RBAC already; say so, because NewUser and the e2e
	// tests' least-privilege operator user depend on it.
	apiServer.Configure().Set("authorization-mode", "RBAC")
	if cp.opts.RealNodes != nil {
		if err := cp.configureRealNodeAPIServer(apiServer); err != nil {
			return err
		}
	}
	cp.env = &envtest.Environment{
		// The paths are set one by one rather than through BinaryAssetsDirectory
		// alone, which KUBEBUILDER_ASSETS in a developer's shell would override.
		BinaryAssetsDirectory: bin,
		ControlPlane: envtest.ControlPlane{
			Etcd:        &envtest.Etcd{Path: etcdPath, Out: etcdLog, Err: etcdLog},
			APIServer:   apiServer,
			KubectlPath: cp.assets.Kubectl,
		},
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   cp.opts.Scheme,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopGracePeriod,
	}
	if _, err := cp.env.Start(); err != nil {
		return fmt.Errorf("start etcd and kube-apiserver: %w", err)
	}
	return nil
}

func (cp *ControlPlane) startControllerManager() error {
	user, err := cp.NewUser("system:kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + user.Kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		// No serving: nothing scrapes it, and it would need a port and certificates.
		"--secure-port=0",
		// One identity for all loops; per-controller service accounts would need
		// the token controller and a signing key for nothing the tests look at.
		"--use-service-account-credentials=false",
		"--node-monitor-grace-period=" + nodeMonitorGracePeriod,
		fmt.Sprintf("--kube-api-qps=%d", clientQPS),
		fmt.Sprintf("--kube-api-burst=%d", clientBurst),
	}
	if cp.opts.RealNodes != nil {
		// Later flags win: the controllers flag is replaced.
		args = append(args, cp.realNodeControllerManagerArgs()...)
	}
	return cp.startProcess("kube-controller-manager", cp.assets.KubeControllerManager, args...)
}

func (cp *ControlPlane) startScheduler() error {
	user, err := cp.NewUser("system:kube-scheduler", "system:masters")
	if err != nil {
		return err
	}
	// The client rate limits can only be raised through a config file, which
	// then has to carry the kubeconfig and leader election too: the scheduler
	// ignores those flags when --config is given.
	config := filepath.Join(cp.dir, "config", "kube-scheduler.yaml")
	data := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, user.Kubeconfig, clientQPS, clientBurst)
	if err := os.WriteFile(config, []byte(data), 0o644); err != nil {
		return fmt.Errorf("write scheduler config: %w", err)
	}
	// kube-scheduler exits by design when its cache disagrees with a pod's
	// binding (it happened in the soak during an API server restart under
	// load); a kubelet would start it again.
	return cp.startRestartedProcess("kube-scheduler", cp.assets.KubeScheduler,
		"--config="+config,
		"--secure-port=0",
	)
}

func (cp *ControlPlane) startKwok() error {
	user, err := cp.NewUser("kwok", "system:masters")
	if err != nil {
		return err
	}
	config := filepath.Join(cp.dir, "config", "kwok.yaml")
	if err := writeKwokConfig(config, cp.opts.PodStartDelay, cp.opts.PodReadyDelay); err != nil {
		return err
	}
	// kwok also loads ~/.kwok/kwok.yaml unless its work directory is elsewhere:
	// keep the developer's own configuration out.
	env := []string{"KWOK_WORKDIR=" + filepath.Join(cp.dir, "kwok")}
	return cp.startProcessWithEnv("kwok", cp.assets.Kwok, env, kwokArgs(user.Kubeconfig, config, cp.opts.PodCIDR)...)
}

func (cp *ControlPlane) startProcess(name, path string, args ...string) error {
	return cp.startProcessWithEnv(name, path, nil, args...)
}

func (cp *ControlPlane) startProcessWithEnv(name, path string, env []string, args ...string) error {
	p, err := startProcess(name, path, args, env, cp.logPath(name))
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}

// startRestartedProcess starts a component that is started again when it
// exits on its own (startSupervised), as a kubelet restarts the control
// plane's static pods.
func (cp *ControlPlane) startRestartedProcess(name, path string, args ...string) error {
	p, err := startSupervised(name, path, args, nil, cp.logPath(name), maxRestarts)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}
