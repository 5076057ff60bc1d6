/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Handle describes a running control plane to another process, for example
// Ginkgo's parallel processes, which share the one that process 1 starts. It
// is plain data, to be passed as JSON.
type Handle struct {
	// Dir is the run directory: logs, kubeconfigs, configs.
	Dir string `json:"dir"`
	// Kubeconfig is the administrator's kubeconfig file.
	Kubeconfig string `json:"kubeconfig"`
	// Nodes are the fake nodes' names.
	Nodes []string `json:"nodes"`
}

// Share returns the Handle that Attach takes.
func (cp *ControlPlane) Share() Handle {
	return Handle{Dir: cp.dir, Kubeconfig: cp.admin.Kubeconfig, Nodes: cp.Nodes()}
}

// Attach returns a ControlPlane for one that another process started and still
// owns. Clients, namespaces, RBAC bindings, assets and log tails work as on
// the original. Stop stops nothing, since the owner stops it; NewUser must not be
// called, since the users' certificates come from the owner's envtest: share
// the users' kubeconfig files instead.
func Attach(h Handle, scheme *runtime.Scheme) (*ControlPlane, error) {
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	assets, err := FindAssets()
	if err != nil {
		return nil, fmt.Errorf("attach to control plane in %s: %w", h.Dir, err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", h.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("attach to control plane in %s: %w", h.Dir, err)
	}
	config.QPS, config.Burst = clientQPS, clientBurst
	cp := &ControlPlane{
		opts:     Options{Scheme: scheme},
		assets:   assets,
		dir:      h.Dir,
		admin:    &User{Name: "admin", Kubeconfig: h.Kubeconfig, Config: config},
		nodes:    append([]string(nil), h.Nodes...),
		attached: true,
	}
	if cp.client, err = client.New(config, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("attach to control plane in %s: admin client: %w", h.Dir, err)
	}
	return cp, nil
}
