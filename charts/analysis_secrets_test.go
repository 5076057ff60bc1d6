/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// analysisSecretsName is the name of the chart's Roles (and ClusterRole) on
// the analysis Secrets for the test release.
const analysisSecretsName = releaseName + "-analysis-secrets"

// readsEverySecret is the permission the operator must not hold unless the
// installer opts in: get on any Secret.
const readsEverySecret = `"" secrets get *`

// The operator reads the Secrets of RolloutGroups' analysis only where the
// values grant it: by default nowhere; in each namespace of
// rbac.analysisSecretNamespaces, through a Role with the rules of
// config/rbac/analysis_secrets_role.yaml; everywhere with
// rbac.analysisSecretsClusterWide, through a ClusterRole with the same rules.
func TestAnalysisSecretsRBAC(t *testing.T) {
	t.Parallel()
	want := permissions(configRoleRules(t, "analysis_secrets_role.yaml"))
	// ConfigMaps: the CA of a tls block may come from one (caConfigMapRef).
	if !slices.Equal(want, []string{`"" configmaps get *`, readsEverySecret}) {
		t.Fatalf("config/rbac/analysis_secrets_role.yaml grants %v, want get on Secrets and ConfigMaps only", want)
	}

	t.Run("defaults grant no Secret", func(t *testing.T) {
		t.Parallel()
		m := render(t)
		for _, cr := range operatorClusterRoles(m) {
			if slices.Contains(permissions(cr.Rules), readsEverySecret) {
				t.Errorf("ClusterRole %s grants %s by default", cr.Name, readsEverySecret)
			}
		}
		for _, r := range all[rbacv1.Role](m, "Role") {
			if slices.Contains(permissions(r.Rules), readsEverySecret) {
				t.Errorf("Role %s/%s grants %s by default", r.Namespace, r.Name, readsEverySecret)
			}
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "rbac.analysisSecretNamespaces={mimir,loki}")
		sa := one[corev1.ServiceAccount](m, "ServiceAccount")
		var namespaces []string
		for _, r := range all[rbacv1.Role](m, "Role") {
			if r.Name != analysisSecretsName {
				continue
			}
			namespaces = append(namespaces, r.Namespace)
			if got := permissions(r.Rules); !reflect.DeepEqual(got, want) {
				t.Errorf("Role %s/%s grants %v, want %v (config/rbac/analysis_secrets_role.yaml)", r.Namespace, r.Name, got, want)
			}
			assertBoundInNamespace(t, m, r, sa)
		}
		if slices.Sort(namespaces); !slices.Equal(namespaces, []string{"loki", "mimir"}) {
			t.Errorf("analysis Secrets Roles in %v, want [loki mimir]", namespaces)
		}
		for _, cr := range operatorClusterRoles(m) {
			if slices.Contains(permissions(cr.Rules), readsEverySecret) {
				t.Errorf("ClusterRole %s grants %s although only namespaces were asked for", cr.Name, readsEverySecret)
			}
		}
		// The operator's own rules are unchanged: the grant is apart.
		if cr := operatorClusterRoles(m); len(cr) != 1 || !reflect.DeepEqual(cr[0].Rules, generatedRules(t)) {
			t.Errorf("operator ClusterRoles %v, want only config/rbac/role.yaml's", cr)
		}
	})

	t.Run("cluster-wide", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "rbac.analysisSecretsClusterWide=true")
		sa := one[corev1.ServiceAccount](m, "ServiceAccount")
		var found bool
		for _, cr := range operatorClusterRoles(m) {
			if cr.Name != analysisSecretsName {
				continue
			}
			found = true
			if got := permissions(cr.Rules); !reflect.DeepEqual(got, want) {
				t.Errorf("ClusterRole %s grants %v, want %v (config/rbac/analysis_secrets_role.yaml)", cr.Name, got, want)
			}
		}
		if !found {
			t.Fatalf("no ClusterRole %s with rbac.analysisSecretsClusterWide", analysisSecretsName)
		}
		bound := false
		for _, crb := range all[rbacv1.ClusterRoleBinding](m, "ClusterRoleBinding") {
			if crb.RoleRef.Name == analysisSecretsName {
				assertBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", analysisSecretsName, sa)
				bound = true
			}
		}
		if !bound {
			t.Errorf("ClusterRole %s is not bound", analysisSecretsName)
		}
		for _, r := range all[rbacv1.Role](m, "Role") {
			if r.Name == analysisSecretsName {
				t.Errorf("Role %s/%s besides the ClusterRole", r.Namespace, r.Name)
			}
		}
	})

	t.Run("watched namespaces", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "watchNamespaces={team-a,team-b}", "--set", "rbac.analysisSecretNamespaces={team-a}")
		if got := permissions(rolesIn(m, "team-a")); !slices.Contains(got, readsEverySecret) {
			t.Errorf("team-a grants %v, missing %s", got, readsEverySecret)
		}
		if got := permissions(rolesIn(m, "team-b")); slices.Contains(got, readsEverySecret) {
			t.Errorf("team-b grants %s, not in rbac.analysisSecretNamespaces", readsEverySecret)
		}
	})

	t.Run("without rbac.create", func(t *testing.T) {
		t.Parallel()
		m := render(t, "--set", "rbac.create=false", "--set", "rbac.analysisSecretNamespaces={mimir}", "--set", "rbac.analysisSecretsClusterWide=false")
		if n := m.count("Role") + m.count("ClusterRole"); n != 0 {
			t.Errorf("rbac.create=false rendered %d roles", n)
		}
	})

	for _, tc := range []struct {
		name        string
		set         []string
		wantInError string
	}{
		{"cluster-wide and namespaces", []string{"rbac.analysisSecretsClusterWide=true", "rbac.analysisSecretNamespaces={mimir}"}, "leave rbac.analysisSecretNamespaces empty"},
		{"a namespace the operator does not watch", []string{"watchNamespaces={team-a}", "rbac.analysisSecretNamespaces={team-a,team-b}"}, "names team-b, which watchNamespaces leaves out"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"template", releaseName, chartDir}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			if _, stderr, err := runHelm(t, args...); err == nil || !strings.Contains(stderr, tc.wantInError) {
				t.Errorf("--set %v: err=%v, want an error saying %q\n%s", tc.set, err, tc.wantInError, stderr)
			}
		})
	}
}

// assertBoundInNamespace checks that a RoleBinding in the Role's namespace
// binds it to the operator's ServiceAccount.
func assertBoundInNamespace(t *testing.T, m manifest, r *rbacv1.Role, sa *corev1.ServiceAccount) {
	t.Helper()
	for _, rb := range all[rbacv1.RoleBinding](m, "RoleBinding") {
		if rb.Namespace == r.Namespace && rb.RoleRef.Name == r.Name {
			assertBinding(t, rb.RoleRef, rb.Subjects, "Role", r.Name, sa)
			return
		}
	}
	t.Errorf("Role %s/%s is not bound", r.Namespace, r.Name)
}

// assertAnalysisSecretsGranted checks that the chart rendered with a values
// file grants get on Secrets exactly as its rbac.analysisSecretNamespaces and
// rbac.analysisSecretsClusterWide say, and returns those namespaces.
func assertAnalysisSecretsGranted(t *testing.T, m manifest, valuesFile string) []string {
	t.Helper()
	raw, err := os.ReadFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		RBAC struct {
			AnalysisSecretNamespaces   []string `json:"analysisSecretNamespaces"`
			AnalysisSecretsClusterWide bool     `json:"analysisSecretsClusterWide"`
		} `json:"rbac"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	var namespaces []string
	for _, r := range all[rbacv1.Role](m, "Role") {
		if slices.Contains(permissions(r.Rules), readsEverySecret) {
			namespaces = append(namespaces, r.Namespace)
		}
	}
	slices.Sort(namespaces)
	want := slices.Sorted(slices.Values(values.RBAC.AnalysisSecretNamespaces))
	if !slices.Equal(namespaces, want) {
		t.Errorf("Roles grant %s in %v, want in rbac.analysisSecretNamespaces %v", readsEverySecret, namespaces, want)
	}
	clusterWide := false
	for _, cr := range operatorClusterRoles(m) {
		clusterWide = clusterWide || slices.Contains(permissions(cr.Rules), readsEverySecret)
	}
	if clusterWide != values.RBAC.AnalysisSecretsClusterWide {
		t.Errorf("a ClusterRole grants %s: %v, rbac.analysisSecretsClusterWide is %v", readsEverySecret, clusterWide, values.RBAC.AnalysisSecretsClusterWide)
	}
	return namespaces
}
