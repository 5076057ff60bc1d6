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

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/internal/options"
)

func assertSecure(t *testing.T, pod *corev1.PodSecurityContext, c *corev1.SecurityContext) {
	t.Helper()
	if c == nil {
		t.Fatal("container has no securityContext")
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	if !isTrue(c.RunAsNonRoot) && (pod == nil || !isTrue(pod.RunAsNonRoot)) {
		t.Error("runAsNonRoot is not set")
	}
	if !isTrue(c.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if c.Capabilities == nil || !reflect.DeepEqual(c.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(c.Capabilities.Add) > 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", c.Capabilities)
	}
	seccomp := c.SeccompProfile
	if seccomp == nil && pod != nil {
		seccomp = pod.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", seccomp)
	}
}

func assertProbe(t *testing.T, kind string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("no HTTP %s probe", kind)
		return
	}
	if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
		t.Errorf("%s probe = GET %s on port %s, want %s on the http port", kind, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
	}
}

func assertBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, roleName string, sa *corev1.ServiceAccount) {
	t.Helper()
	if ref.Kind != kind || ref.Name != roleName {
		t.Errorf("binding refers to %s %s, want %s %s", ref.Kind, ref.Name, kind, roleName)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}
	if !reflect.DeepEqual(subjects, want) {
		t.Errorf("binding subjects = %+v, want the operator's ServiceAccount %+v", subjects, want)
	}
}

// assertLeaderElectionRBAC checks that the operator may take and renew its Lease
// in the release namespace, where the Deployment's POD_NAMESPACE points it.
// assertLeaderElectionRBAC checks that the release namespace grants exactly the
// leader-election rules of config/rbac/leader_election_role.yaml (the file the
// tests' operator user is bound to), for the chart's Lease name, and no other
// Lease rights.
func assertLeaderElectionRBAC(t *testing.T, m manifest, sa *corev1.ServiceAccount, leaseName string) {
	t.Helper()
	perms := permissions(rolesIn(m, releaseNamespace))
	var want []string
	for _, p := range permissions(leaderElectionRules(t)) {
		want = append(want, strings.Replace(p, " "+configLeaseName, " "+leaseName, 1))
	}
	for _, w := range want {
		if !slices.Contains(perms, w) {
			t.Errorf("release namespace grants %v, missing %s (config/rbac/leader_election_role.yaml)", perms, w)
		}
	}
	for _, p := range perms {
		if strings.HasPrefix(p, `"coordination.k8s.io" leases `) && !slices.Contains(want, p) {
			t.Errorf("release namespace grants %s, beyond config/rbac/leader_election_role.yaml", p)
		}
	}
	for _, rb := range all[rbacv1.RoleBinding](m, "RoleBinding") {
		if rb.Namespace == releaseNamespace {
			assertBinding(t, rb.RoleRef, rb.Subjects, "Role", rb.RoleRef.Name, sa)
		}
	}
}

// configLeaseName is the Lease name config/rbac/leader_election_role.yaml
// grants: the binary's default --leader-election-id.
const configLeaseName = "echelon-leader"

func leaderElectionRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	if id := options.Default().LeaderElectionID; id != configLeaseName {
		t.Fatalf("config/rbac/leader_election_role.yaml names Lease %s, but the binary's default --leader-election-id is %s", configLeaseName, id)
	}
	return configRoleRules(t, "leader_election_role.yaml")
}

// configRoleRules reads the rules of a Role written by hand in config/rbac,
// the file the tests' operator user is bound to.
func configRoleRules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// assertCRDs checks that the chart holds every CRD controller-gen generated,
// unchanged apart from the chart's labels and, when kept, the keep policy.
func assertCRDs(t *testing.T, m manifest, keep bool) {
	t.Helper()
	sources, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no generated CRDs in config/crd/bases: %v", err)
	}
	rendered := map[string]map[string]any{}
	for _, obj := range m.objs {
		if obj["kind"] == "CustomResourceDefinition" {
			rendered[name(obj)] = obj
		}
	}
	if len(rendered) != len(sources) {
		t.Errorf("chart renders %d CRDs, config/crd/bases has %d (run `make manifests`)", len(rendered), len(sources))
	}
	for _, src := range sources {
		raw, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := rendered[name(want)]
		if !ok {
			t.Errorf("CRD %s from %s is not in the chart (run `make manifests`)", name(want), src)
			continue
		}
		meta := got["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		if policy := annotations["helm.sh/resource-policy"]; keep != (policy == "keep") {
			t.Errorf("CRD %s: helm.sh/resource-policy = %v, want keep=%v", name(want), policy, keep)
		}
		if labels, _ := meta["labels"].(map[string]any); labels["app.kubernetes.io/instance"] != releaseName {
			t.Errorf("CRD %s labels %v do not name the release", name(want), labels)
		}
		// Remove what the chart adds; the rest must be the generated CRD.
		got = deepCopy(t, got)
		meta = got["metadata"].(map[string]any)
		delete(meta, "labels")
		if annotations, _ := meta["annotations"].(map[string]any); annotations != nil {
			delete(annotations, "helm.sh/resource-policy")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("CRD %s in the chart differs from %s (run `make manifests`)", name(want), src)
		}
	}
}

func deepCopy(t *testing.T, in map[string]any) map[string]any {
	t.Helper()
	raw, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func hasEnvFromField(env []corev1.EnvVar, name, fieldPath string) bool {
	for _, e := range env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == fieldPath {
			return true
		}
	}
	return false
}

// selects reports whether a label selector's matchLabels match labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

type chartYAML struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func chartMeta(t *testing.T) chartYAML {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c chartYAML
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
