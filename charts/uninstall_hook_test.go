/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// hookManifest is m's Helm hooks, as a manifest of their own.
func (m manifest) hookManifest() manifest { return manifest{t: m.t, objs: m.hooks} }

// flagValue is the value of --name=value in args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestUninstallHook checks the post-delete hook that runs `echelon uninstall`
// (docs/uninstall.md): it names what the operator created (its Lease, its
// self-signed certificates' Secret), waits for the operator's pods and not
// its own, runs the operator's image as securely, and may do what it does
// and no more, where the operator watched. The node tier runs it for real.
func TestUninstallHook(t *testing.T) {
	t.Parallel()
	m := render(t)
	hooks := m.hookManifest()
	deploy := one[appsv1.Deployment](m, "Deployment")
	opts := parseArgs(t, deploy.Spec.Template.Spec.Containers[0].Args)
	job := one[batchv1.Job](hooks, "Job")
	for _, obj := range m.hooks {
		meta, _ := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if ann["helm.sh/hook"] != "post-delete" || !strings.Contains(ann["helm.sh/hook-delete-policy"].(string), "hook-succeeded") {
			t.Errorf("%s %s: annotations %v, want a post-delete hook deleted once it succeeded", obj["kind"], name(obj), ann)
		}
		if obj["kind"] != "Job" && ann["helm.sh/hook-weight"] != "-10" {
			t.Errorf("%s %s: hook weight %v, want -10: the Job's rights exist before it runs", obj["kind"], name(obj), ann["helm.sh/hook-weight"])
		}
	}

	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != deploy.Spec.Template.Spec.Containers[0].Image || len(c.Args) == 0 || c.Args[0] != "uninstall" {
		t.Errorf("the Job runs %s %v, want the operator's image with `uninstall`", c.Image, c.Args)
	}
	assertSecure(t, pod.SecurityContext, c.SecurityContext)
	if v, _ := flagValue(c.Args, "release-namespace"); v != releaseNamespace {
		t.Errorf("--release-namespace=%q, want %q", v, releaseNamespace)
	}
	sel, err := labels.Parse(func() string { v, _ := flagValue(c.Args, "operator-pods"); return v }())
	if err != nil || !sel.Matches(labels.Set(deploy.Spec.Template.Labels)) || sel.Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("--operator-pods=%v (%v): want a selector of the operator's pods and not of the Job's", sel, err)
	}
	if v, _ := flagValue(c.Args, "lease"); v != opts.LeaderElectionID {
		t.Errorf("--lease=%q, want the operator's Lease %q", v, opts.LeaderElectionID)
	}
	if v, _ := flagValue(c.Args, "certificate-secret"); v != opts.Webhook.CertSecret || v == "" {
		t.Errorf("--certificate-secret=%q, want the operator's self-signed certificates' Secret %q", v, opts.Webhook.CertSecret)
	}
	if _, ok := flagValue(c.Args, "namespaces"); ok {
		t.Errorf("args %v: --namespaces, want every namespace, as the operator watches", c.Args)
	}
	sa := one[corev1.ServiceAccount](hooks, "ServiceAccount")
	if pod.ServiceAccountName != sa.Name || sa.Name == deploy.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("the Job runs as %q, want its own ServiceAccount %q", pod.ServiceAccountName, sa.Name)
	}
	workload := []string{perm("apps", "statefulsets", "get", "*"), perm("apps", "statefulsets", "list", "*"), perm("apps", "statefulsets", "patch", "*"),
		perm("echelon.dev", "rolloutgroups", "get", "*"), perm("echelon.dev", "rolloutgroups", "list", "*"), perm("echelon.dev", "rolloutgroups", "patch", "*"),
		perm("", "events", "create", "*")}
	cr := one[rbacv1.ClusterRole](hooks, "ClusterRole")
	if got := permissions(cr.Rules); !slices.Equal(got, sorted(workload)) {
		t.Errorf("the hook's ClusterRole grants %v, want %v", got, sorted(workload))
	}
	crb := one[rbacv1.ClusterRoleBinding](hooks, "ClusterRoleBinding")
	assertBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", cr.Name, sa)
	role := one[rbacv1.Role](hooks, "Role")
	want := []string{perm("", "pods", "list", "*"), perm("coordination.k8s.io", "leases", "delete", opts.LeaderElectionID), perm("", "secrets", "delete", opts.Webhook.CertSecret)}
	if got := permissions(role.Rules); role.Namespace != releaseNamespace || !slices.Equal(got, sorted(want)) {
		t.Errorf("the hook's Role in %s grants %v, want in %s %v", role.Namespace, got, releaseNamespace, sorted(want))
	}

	t.Run("watchNamespaces", func(t *testing.T) {
		hooks := render(t, "--set", "watchNamespaces={a,b}").hookManifest()
		job := one[batchv1.Job](hooks, "Job")
		if v, _ := flagValue(job.Spec.Template.Spec.Containers[0].Args, "namespaces"); v != "a,b" {
			t.Errorf("--namespaces=%q, want a,b", v)
		}
		if n := hooks.count("ClusterRole"); n != 0 {
			t.Errorf("%d ClusterRoles, want none: the hook may touch only the watched namespaces", n)
		}
		var in []string
		for _, r := range all[rbacv1.Role](hooks, "Role") {
			if r.Namespace != releaseNamespace {
				in = append(in, r.Namespace)
				if got := permissions(r.Rules); !slices.Equal(got, sorted(workload)) {
					t.Errorf("Role in %s grants %v, want %v", r.Namespace, got, sorted(workload))
				}
			}
		}
		if !slices.Equal(in, []string{"a", "b"}) {
			t.Errorf("Roles in %v, want a and b", in)
		}
	})
	t.Run("a Secret the user provides is theirs", func(t *testing.T) {
		hooks := render(t, "--set", "webhooks.certificates.mode=secret", "--set", "webhooks.certificates.secret.name=mine",
			"--set", "webhooks.certificates.secret.caBundle=Y2E=").hookManifest()
		if v, ok := flagValue(one[batchv1.Job](hooks, "Job").Spec.Template.Spec.Containers[0].Args, "certificate-secret"); ok {
			t.Errorf("--certificate-secret=%s, want none", v)
		}
	})
	t.Run("cleanup off", func(t *testing.T) {
		if hooks := render(t, "--set", "uninstall.cleanup=false").hooks; len(hooks) != 0 {
			t.Errorf("%d hooks with uninstall.cleanup=false, want none", len(hooks))
		}
	})
}

// perm is a permission as permissions writes it.
func perm(group, resource, verb, name string) string {
	return fmt.Sprintf("%q %s %s %s", group, resource, verb, name)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
