/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package command

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/migrate"
)

// grafanaNamespaceLabel names, on a webhook configuration, the namespace of
// the Grafana operator that injects its CA.
const grafanaNamespaceLabel = "grafana.com/namespace"

// clusterKinds are the lists migrate reads from a cluster; optional ones may
// be absent (no CRD) or forbidden (a namespaced Role) without failing.
var clusterKinds = []struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	optional   bool
}{
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSetList"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSetList"}, namespaced: true},
	{gvk: schema.GroupVersionKind{Group: migrate.ZoneAwarePDBGroup, Version: "v1", Kind: "ZoneAwarePodDisruptionBudgetList"}, namespaced: true, optional: true},
	{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfigurationList"}, optional: true},
	{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfigurationList"}, optional: true},
}

// newClient connects to the cluster of kubeconfig (or of the default
// loading rules: $KUBECONFIG, then ~/.kube/config).
func newClient(kubeconfig string) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	return c, nil
}

// readCluster lists what migrate reads in namespace. It only lists.
func readCluster(ctx context.Context, c client.Client, in *migrate.Input, namespace string, stderr io.Writer) error {
	for _, k := range clusterKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk)
		var opts []client.ListOption
		if k.namespaced {
			opts = append(opts, client.InNamespace(namespace))
		}
		err := c.List(ctx, list, opts...)
		switch {
		case err == nil:
		case k.optional && (meta.IsNoMatchError(err) || apierrors.IsNotFound(err)):
			continue // the Grafana operator's CRD is not installed
		case k.optional && apierrors.IsForbidden(err):
			fmt.Fprintf(stderr, "echelon migrate: cannot list %s (%v): skipped\n", k.gvk.Kind, err)
			continue
		default:
			return fmt.Errorf("list %s: %w", k.gvk.Kind, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			if ns, ok := item.GetLabels()[grafanaNamespaceLabel]; !k.namespaced && ok && ns != namespace {
				continue // another namespace's Grafana operator's webhooks
			}
			item.SetAPIVersion(k.gvk.GroupVersion().String())
			item.SetKind(k.gvk.Kind[:len(k.gvk.Kind)-len("List")])
			if err := in.AddObject(item); err != nil {
				return err
			}
		}
	}
	return nil
}
