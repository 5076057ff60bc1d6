/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const (
	scopeNamespaced = "Namespaced"
	scopeCluster    = "Cluster"
)

// builtinScopes lists the built-in resources the operator may be granted, by API
// group. A Role cannot grant a cluster-scoped resource, so the chart must know the
// scope of every resource in the generated ClusterRole; an unknown one stops the
// generation (add it here) rather than silently landing in the wrong place.
var builtinScopes = map[string]map[string]string{
	"": {
		"pods": scopeNamespaced, "events": scopeNamespaced, "configmaps": scopeNamespaced,
		"secrets": scopeNamespaced, "services": scopeNamespaced, "endpoints": scopeNamespaced,
		"serviceaccounts": scopeNamespaced, "persistentvolumeclaims": scopeNamespaced,
		"replicationcontrollers": scopeNamespaced,
		"nodes":                  scopeCluster, "namespaces": scopeCluster, "persistentvolumes": scopeCluster,
	},
	"apps": {
		"statefulsets": scopeNamespaced, "deployments": scopeNamespaced, "replicasets": scopeNamespaced,
		"daemonsets": scopeNamespaced, "controllerrevisions": scopeNamespaced,
	},
	"autoscaling":           {"horizontalpodautoscalers": scopeNamespaced},
	"policy":                {"poddisruptionbudgets": scopeNamespaced},
	"coordination.k8s.io":   {"leases": scopeNamespaced},
	"events.k8s.io":         {"events": scopeNamespaced},
	"discovery.k8s.io":      {"endpointslices": scopeNamespaced},
	"batch":                 {"jobs": scopeNamespaced, "cronjobs": scopeNamespaced},
	"monitoring.coreos.com": {"servicemonitors": scopeNamespaced, "podmonitors": scopeNamespaced},
	"admissionregistration.k8s.io": {
		"mutatingwebhookconfigurations": scopeCluster, "validatingwebhookconfigurations": scopeCluster,
	},
	"apiextensions.k8s.io":      {"customresourcedefinitions": scopeCluster},
	"storage.k8s.io":            {"storageclasses": scopeCluster},
	"authentication.k8s.io":     {"tokenreviews": scopeCluster},
	"authorization.k8s.io":      {"subjectaccessreviews": scopeCluster},
	"certificates.k8s.io":       {"certificatesigningrequests": scopeCluster},
	"rbac.authorization.k8s.io": {"roles": scopeNamespaced, "rolebindings": scopeNamespaced, "clusterroles": scopeCluster, "clusterrolebindings": scopeCluster},
}

// scopeOf says whether group/resource is namespaced. Wildcards count as namespaced:
// a rule such as "*/scale" (scale any workload) is meant for the workloads in the
// watched namespaces, and granting it cluster-wide would undo the namespace scope.
func scopeOf(group, resource string, crds map[string]string) (string, error) {
	base, _, _ := strings.Cut(resource, "/") // pods/eviction is scoped like pods
	if group == rbacv1.APIGroupAll || base == rbacv1.ResourceAll {
		return scopeNamespaced, nil
	}
	if s, ok := crds[group+"/"+base]; ok {
		return s, nil
	}
	if s, ok := builtinScopes[group][base]; ok {
		return s, nil
	}
	return "", fmt.Errorf("unknown scope of resource %q in API group %q: add it to builtinScopes in hack/chartsync/rbac.go", base, group)
}

// splitRules divides rules into those a namespaced Role can hold and those that
// need a ClusterRole. A rule over several groups is split per group so that each
// part keeps the verbs and resource names of the original.
func splitRules(rules []rbacv1.PolicyRule, crds map[string]string) (namespaced, cluster []rbacv1.PolicyRule, err error) {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			cluster = append(cluster, r)
			continue
		}
		for _, g := range r.APIGroups {
			var ns, cl []string
			for _, res := range r.Resources {
				scope, err := scopeOf(g, res, crds)
				if err != nil {
					return nil, nil, err
				}
				if scope == scopeCluster {
					cl = append(cl, res)
				} else {
					ns = append(ns, res)
				}
			}
			if len(ns) > 0 {
				namespaced = append(namespaced, subRule(r, g, ns))
			}
			if len(cl) > 0 {
				cluster = append(cluster, subRule(r, g, cl))
			}
		}
	}
	return namespaced, cluster, nil
}

func subRule(r rbacv1.PolicyRule, group string, resources []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups:     []string{group},
		Resources:     resources,
		ResourceNames: r.ResourceNames,
		Verbs:         r.Verbs,
	}
}

// webhookConfigurationName is the name config/webhook gives Echelon's webhook
// configurations, which the RBAC markers limit patch to; the chart names its
// configurations after the release instead.
const (
	webhookConfigurationName         = "echelon"
	webhookConfigurationNameTemplate = `{{ include "echelon.fullname" . }}`
)

// nameReleaseWebhooks puts the chart's name of the webhook configurations in
// place of config/webhook's in the rules limited to them. Any other name there
// stops the generation: the chart would grant it on no configuration it owns.
func nameReleaseWebhooks(rules []rbacv1.PolicyRule) ([]rbacv1.PolicyRule, error) {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for _, r := range rules {
		onWebhooks := slices.Contains(r.APIGroups, "admissionregistration.k8s.io") &&
			slices.ContainsFunc(r.Resources, func(res string) bool { return strings.HasSuffix(res, "webhookconfigurations") })
		if onWebhooks && len(r.ResourceNames) > 0 {
			if !slices.Equal(r.ResourceNames, []string{webhookConfigurationName}) {
				return nil, fmt.Errorf("a rule on %v names %v; the chart knows only its own webhook configurations, %q in config/webhook", r.Resources, r.ResourceNames, webhookConfigurationName)
			}
			r.ResourceNames = []string{webhookConfigurationNameTemplate}
		}
		out = append(out, r)
	}
	return out, nil
}

// rbacRulesTemplate renders the three named templates the chart's RBAC uses:
// echelon.rbac.rules (the generated ClusterRole's rules, unchanged),
// echelon.rbac.namespacedRules and echelon.rbac.clusterScopedRules.
func rbacRulesTemplate(roleYAML []byte, crds map[string]string) ([]byte, error) {
	rules, err := clusterRoleRules(roleYAML)
	if err != nil {
		return nil, err
	}
	if rules, err = nameReleaseWebhooks(rules); err != nil {
		return nil, err
	}
	namespaced, cluster, err := splitRules(rules, crds)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("{{- /* Generated by hack/sync-chart-crds.sh from config/rbac/role.yaml, which controller-gen\n" +
		"writes from the +kubebuilder:rbac markers. DO NOT EDIT: change the markers and run `make manifests`. */}}\n")
	for _, t := range []struct {
		name, doc string
		rules     []rbacv1.PolicyRule
	}{
		{"echelon.rbac.rules", "Every rule of the generated ClusterRole, for an operator that watches all namespaces.", rules},
		{"echelon.rbac.namespacedRules", "The rules a Role in each watched namespace grants.", namespaced},
		{"echelon.rbac.clusterScopedRules", "The rules on cluster-scoped resources, which only a ClusterRole can grant.", cluster},
	} {
		body := ""
		if len(t.rules) > 0 {
			out, err := yaml.Marshal(t.rules)
			if err != nil {
				return nil, err
			}
			body = strings.TrimRight(string(out), "\n") + "\n"
		}
		fmt.Fprintf(&b, "\n{{- /* %s */}}\n{{- define %q -}}\n%s{{- end }}\n", t.doc, t.name, body)
	}
	return b.Bytes(), nil
}

// clusterRoleRules returns the rules of the one ClusterRole in role.yaml. Markers
// with namespace= make controller-gen add Roles to the file; the chart decides the
// namespaces itself, so those are refused instead of being dropped.
func clusterRoleRules(roleYAML []byte) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	found := 0
	for _, doc := range strings.Split("\n"+string(roleYAML), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		// Strict, so that a PolicyRule field this code does not know stops the
		// generation instead of vanishing from the chart.
		var obj struct {
			APIVersion string              `json:"apiVersion"`
			Kind       string              `json:"kind"`
			Metadata   map[string]any      `json:"metadata"`
			Rules      []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil {
			return nil, err
		}
		if obj.Kind != "ClusterRole" {
			return nil, fmt.Errorf("holds a %s; namespace-specific +kubebuilder:rbac markers are not supported, the chart chooses the namespaces", obj.Kind)
		}
		found++
		rules = obj.Rules
	}
	if found != 1 {
		return nil, fmt.Errorf("want exactly one ClusterRole, found %d", found)
	}
	return rules, nil
}
