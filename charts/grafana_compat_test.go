/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// compatRules are config/rbac/grafana_compat_role.yaml's: what only compat
// mode needs.
func compatRules(t testing.TB) []rbacv1.PolicyRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "grafana_compat_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// grantedPermissions are every permission the operator's Roles and
// ClusterRoles grant, with the namespace of each Role's ("" cluster-wide).
func grantedPermissions(m manifest) map[string][]string {
	out := map[string][]string{}
	for _, cr := range operatorClusterRoles(m) {
		out[""] = append(out[""], permissions(cr.Rules)...)
	}
	for _, r := range all[rbacv1.Role](m, "Role") {
		out[r.Namespace] = append(out[r.Namespace], permissions(r.Rules)...)
	}
	return out
}

// grafanaConfigs names the Grafana operator's webhook configurations, as
// an install with compat mode and webhooks must.
var grafanaConfigs = []string{
	"--set", "grafanaCompatWebhookConfigurations.validating={no-downscale-mimir,pod-eviction-mimir}",
	"--set", "grafanaCompatWebhookConfigurations.mutating={prepare-downscale-mimir}",
}

// grafanaConfigPermissions are the patches grafanaConfigs grants: by name.
var grafanaConfigPermissions = []string{
	`"admissionregistration.k8s.io" validatingwebhookconfigurations patch no-downscale-mimir`,
	`"admissionregistration.k8s.io" validatingwebhookconfigurations patch pod-eviction-mimir`,
	`"admissionregistration.k8s.io" mutatingwebhookconfigurations patch prepare-downscale-mimir`,
}

// TestGrafanaCompatRBAC: the permissions only compat mode needs (reading
// ZoneAwarePodDisruptionBudgets, keeping ZoneDisruptionBudgets, patching the
// caBundle of the webhook configurations grafanaCompatWebhookConfigurations
// names, and no other) are granted with grafanaCompat and only then; per
// watched namespace when there are some; and the arguments name the
// Grafana Service.
func TestGrafanaCompatRBAC(t *testing.T) {
	t.Parallel()
	compat := permissions(compatRules(t))
	for _, tc := range []struct {
		name       string
		args       []string
		compat     bool
		namespaces []string
		noWebhooks bool
	}{
		{name: "off", args: nil},
		{name: "on", args: append([]string{"--set", "grafanaCompat=true"}, grafanaConfigs...), compat: true, namespaces: []string{""}},
		{name: "on, some namespaces", args: append([]string{"--set", "grafanaCompat=true", "--set", "watchNamespaces={a,b}"}, grafanaConfigs...), compat: true, namespaces: []string{"a", "b"}},
		{name: "on, some namespaces, no webhooks", args: []string{"--set", "grafanaCompat=true", "--set", "watchNamespaces={a}", "--set", "webhooks.enabled=false"},
			compat: true, namespaces: []string{"a"}, noWebhooks: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, tc.args...)
			granted := grantedPermissions(m)
			for ns, perms := range granted {
				for _, p := range perms {
					// The operator's own configurations are patched by their
					// names too; none of any name.
					unrestricted := strings.Contains(p, "webhookconfigurations patch *")
					grafanas := slices.Contains(grafanaConfigPermissions, p)
					if unrestricted || grafanas && (!tc.compat || tc.noWebhooks || ns != "") {
						t.Errorf("%s granted in namespace %q, want only %q cluster-wide with compat and webhooks", p, ns, grafanaConfigPermissions)
					}
				}
				if tc.compat && !tc.noWebhooks && ns == "" {
					for _, p := range grafanaConfigPermissions {
						if !slices.Contains(perms, p) {
							t.Errorf("%s not granted", p)
						}
					}
				}
			}
			for _, p := range compat {
				clusterScoped := strings.Contains(p, "webhookconfigurations")
				if clusterScoped {
					continue // by name, above
				}
				for ns, perms := range granted {
					want := tc.compat && (clusterScoped && ns == "" && !tc.noWebhooks || !clusterScoped && slices.Contains(tc.namespaces, ns))
					if has := slices.Contains(perms, p); has != want {
						t.Errorf("grafanaCompat=%v: %s granted in namespace %q: %v, want %v", tc.compat, p, ns, has, want)
					}
				}
			}
			for _, ns := range tc.namespaces {
				if _, ok := granted[ns]; !ok {
					t.Errorf("no Role in namespace %q", ns)
				}
			}
			for _, cr := range operatorClusterRoles(m) {
				if len(cr.Rules) == 0 {
					t.Errorf("ClusterRole %s grants nothing", cr.Name)
				}
			}
			sa := one[corev1.ServiceAccount](m, "ServiceAccount")
			for _, rb := range all[rbacv1.RoleBinding](m, "RoleBinding") {
				if strings.HasSuffix(rb.RoleRef.Name, "-grafana-compat") {
					assertBinding(t, rb.RoleRef, rb.Subjects, "Role", rb.RoleRef.Name, sa)
				}
			}
			for _, crb := range all[rbacv1.ClusterRoleBinding](m, "ClusterRoleBinding") {
				if strings.HasSuffix(crb.RoleRef.Name, "-grafana-compat") {
					assertBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", crb.RoleRef.Name, sa)
				}
			}
			args := one[appsv1.Deployment](m, "Deployment").Spec.Template.Spec.Containers[0].Args
			opts := parseArgs(t, args)
			if opts.GrafanaCompat != tc.compat || (tc.compat && opts.GrafanaCompatService != "rollout-operator") {
				t.Errorf("args %v: want --grafana-compat=%v, and the Service rollout-operator when on", args, tc.compat)
			}
		})
	}
}

// TestGrafanaCompatService: grafanaCompatService.create makes the Service
// the Grafana configurations name, on port 443 to the webhook port of
// Echelon's pods, and only with grafanaCompat.
func TestGrafanaCompatService(t *testing.T) {
	t.Parallel()
	named := func(m manifest, name string) *corev1.Service {
		for _, s := range all[corev1.Service](m, "Service") {
			if s.Name == name {
				return s
			}
		}
		return nil
	}
	if s := named(render(t, "--set", "grafanaCompatService.create=true"), "rollout-operator"); s != nil {
		t.Error("a Service rollout-operator without grafanaCompat")
	}
	if s := named(render(t, append([]string{"--set", "grafanaCompat=true"}, grafanaConfigs...)...), "rollout-operator"); s != nil {
		t.Error("a Service rollout-operator without grafanaCompatService.create")
	}
	m := render(t, append([]string{"--set", "grafanaCompat=true", "--set", "grafanaCompatService.create=true", "--set", "grafanaCompatService.name=ro"}, grafanaConfigs...)...)
	s := named(m, "ro")
	if s == nil {
		t.Fatal("no Service ro with grafanaCompatService.create")
	}
	deploy := one[appsv1.Deployment](m, "Deployment")
	if !reflect.DeepEqual(s.Spec.Selector, deploy.Spec.Selector.MatchLabels) {
		t.Errorf("Service selector %v, want the operator's pods %v", s.Spec.Selector, deploy.Spec.Selector.MatchLabels)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 443 || s.Spec.Ports[0].TargetPort.StrVal != "webhook" {
		t.Errorf("Service ports %+v, want 443 to the webhook port", s.Spec.Ports)
	}
	if opts := parseArgs(t, deploy.Spec.Template.Spec.Containers[0].Args); opts.GrafanaCompatService != "ro" {
		t.Errorf("--grafana-compat-service=%q, want ro", opts.GrafanaCompatService)
	}
}

// TestGrafanaCompatAlert: the alert on unreadable ZoneAwarePodDisruptionBudgets
// exists with grafanaCompat only, and points at its runbook section.
func TestGrafanaCompatAlert(t *testing.T) {
	t.Parallel()
	const name = "EchelonGrafanaCompatZPDBsUnreadable"
	has := func(rules []alertRule) *alertRule {
		for i := range rules {
			if rules[i].Alert == name {
				return &rules[i]
			}
		}
		return nil
	}
	if has(renderedAlerts(t, "--set", "prometheusRule.enabled=true")) != nil {
		t.Errorf("%s without grafanaCompat", name)
	}
	r := has(renderedAlerts(t, append([]string{"--set", "prometheusRule.enabled=true", "--set", "grafanaCompat=true"}, grafanaConfigs...)...))
	if r == nil {
		t.Fatalf("no %s with grafanaCompat", name)
	}
	if _, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "#"); !runbookAnchors(t)[anchor] {
		t.Errorf("%s: runbook_url %q names no section of docs/runbooks.md", name, r.Annotations["runbook_url"])
	}
	if err := checkPromQL(r.Expr); err != nil || !strings.Contains(r.Expr, "echelon_grafana_compat_zpdbs_readable") {
		t.Errorf("%s: expr %q: %v", name, r.Expr, err)
	}
}

// TestGrafanaCompatNeedsConfigurationNames: compat mode with webhooks does
// not install without the names of the configurations it may patch, and
// says where to find them.
func TestGrafanaCompatNeedsConfigurationNames(t *testing.T) {
	t.Parallel()
	_, stderr, err := runHelm(t, "template", releaseName, chartDir, "--set", "grafanaCompat=true")
	if err == nil || !strings.Contains(stderr, "grafanaCompatWebhookConfigurations") || !strings.Contains(stderr, "grafana.com/inject-rollout-operator-ca=true") {
		t.Errorf("grafanaCompat=true without configuration names: err %v, stderr %s; want a failure naming the value and how to list the names", err, stderr)
	}
	render(t, "--set", "grafanaCompat=true", "--set", "webhooks.enabled=false")
}
