/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/installed"
)

// TestInstall installs the chart into a real API server (the test control plane,
// whose kwok nodes run the operator pods without running the image). It proves
// what rendering cannot: the server accepts every object, the operator's
// ServiceAccount is really authorized for what the code declares (and no more
// when confined to namespaces), and uninstalling keeps the CRDs and the users'
// RolloutGroups.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("installs into a real control plane; skipped with -short")
	}
	cp := controlplane.StartForTest(t, controlplane.Options{Scheme: installed.Scheme()})
	ctx := context.Background()
	c := cp.Client()
	helm := func(args ...string) {
		t.Helper()
		args = append(args, "--kubeconfig", cp.Kubeconfig())
		if stdout, stderr, err := runHelm(t, args...); err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
	}
	// Kubernetes' role aggregation fills the built-in edit role with the
	// chart's aggregated ClusterRoles; the test control plane leaves it out.
	if err := installed.StartRoleAggregation(t, cp); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"apps", "team-a", "team-b"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	rules := generatedRules(t)

	// All namespaces, with the defaults.
	helm("install", "echelon", chartDir, "--namespace", "echelon-system", "--create-namespace", "--wait", "--timeout", "2m")
	var deploy appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "echelon-system", Name: "echelon"}, &deploy); err != nil {
		t.Fatal(err)
	}
	if deploy.Status.AvailableReplicas != 2 {
		t.Errorf("Deployment has %d available replicas, want 2", deploy.Status.AvailableReplicas)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "rolloutgroups.echelon.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	if !established(&crd) {
		t.Errorf("CRD %s is not Established: %+v", crd.Name, crd.Status.Conditions)
	}
	if err := c.Create(ctx, rolloutGroup("apps", "ingester")); err != nil {
		t.Fatalf("create a RolloutGroup through the chart's CRD: %v", err)
	}
	operator := serviceAccountUser("echelon-system", "echelon")
	for _, p := range requests(rules) {
		p.Namespace = "apps"
		if !allowed(t, c, operator, p) {
			t.Errorf("operator may not %s (declared in config/rbac/role.yaml)", describe(p))
		}
	}
	assertMayHoldLease(t, c, operator, "echelon-system", "echelon")
	for _, verb := range []string{"create", "get", "list", "watch", "update"} {
		a := authorizationv1.ResourceAttributes{Namespace: "echelon-system", Resource: "secrets", Verb: verb, Name: "echelon-webhook-tls"}
		if verb == "create" {
			a.Name = ""
		}
		if !allowed(t, c, operator, a) {
			t.Errorf("operator may not %s: it could not keep its self-signed webhook certificate", describe(a))
		}
	}
	// Nor any other Secret: the analysis Secrets are granted only on request.
	for _, ns := range []string{"apps", "kube-system"} {
		if a := (authorizationv1.ResourceAttributes{Namespace: ns, Resource: "secrets", Verb: "get", Name: "prometheus-auth"}); allowed(t, c, operator, a) {
			t.Errorf("operator may %s with the defaults (rbac.analysisSecretNamespaces is empty)", describe(a))
		}
	}
	assertNamespaceUsersManageRolloutGroups(t, cp)

	// The operator as the install runs it (its flags, environment and
	// ServiceAccount) rolls out a group, reports a stalled one, scales two
	// zones one after the other through ScalingPolicies, and rolls a group
	// back after a failed analysis gate; its metrics
	// then hold every series the chart's alerts and dashboard query.
	op := installed.Run(t, cp, "echelon-system", "echelon")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rollout"}}); err != nil {
		t.Fatal(err)
	}
	if err := installed.RollOut(ctx, c, "rollout", "web"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
	if err := installed.Stall(ctx, c, "rollout", "stuck"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
	if err := installed.Scale(ctx, c, "rollout", "scaled"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
	// The API server calls the installed webhooks, at the Service's paths,
	// trusting the CA the operator injected into the labelled configurations.
	if err := installed.GuardDownscales(ctx, c, "rollout", "guard"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
	// An analysis gate fails and the group rolls back, with the chart's RBAC.
	if err := rollBackOnAnalysis(ctx, t, c, "rollout", "gated"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
	scrape, err := op.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	assertQueriesUseExportedMetrics(t, scrape)
	op.Stop()

	// helm uninstall must not take the users' RolloutGroups with the CRD.
	// Every uninstall here skips the chart's post-delete hook (--no-hooks):
	// its Job would never finish on kwok nodes, which run no container. The
	// node tier runs it (e2e/node, chart_test.go).
	helm("uninstall", "echelon", "--namespace", "echelon-system", "--wait", "--no-hooks")
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("CRD after helm uninstall: %v; want it kept (crds.keep)", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "ingester"}, rolloutGroup("", "")); err != nil {
		t.Errorf("RolloutGroup after helm uninstall: %v; want it kept", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "echelon"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole after helm uninstall: err=%v, want it deleted", err)
	}
	// The rollout's StatefulSets are the users': untouched, still OnDelete.
	for _, name := range installed.Zones("web") {
		var sts appsv1.StatefulSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: "rollout", Name: name}, &sts); err != nil || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			t.Errorf("StatefulSet %s after helm uninstall: %v, strategy %q; want it kept as it was", name, err, sts.Spec.UpdateStrategy.Type)
		}
	}

	// Reinstalling: under another release name, Helm refuses the kept CRD
	// (another release owns it) and says how; under the same name and
	// namespace, it takes the CRD back with the groups in it.
	args := []string{"install", "other", chartDir, "--namespace", "other", "--create-namespace", "--kubeconfig", cp.Kubeconfig()}
	if _, stderr, err := runHelm(t, args...); err == nil || !strings.Contains(stderr, ".echelon.dev") || !strings.Contains(stderr, "ownership") {
		t.Errorf("helm install of a second release over the kept CRDs: err=%v, want an error naming an echelon.dev CRD and its ownership\n%s", err, stderr)
	}
	helm("install", "echelon", chartDir, "--namespace", "echelon-system", "--wait", "--timeout", "2m")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "ingester"}, rolloutGroup("", "")); err != nil {
		t.Errorf("RolloutGroup after reinstalling over the kept CRD: %v", err)
	}
	helm("uninstall", "echelon", "--namespace", "echelon-system", "--wait", "--no-hooks")

	// Confined to team-a and team-b, with the CRDs left from above.
	helm("install", "scoped", chartDir, "--namespace", "echelon-scoped", "--create-namespace", "--wait", "--timeout", "2m",
		"--set", "crds.enabled=false", "--set", "watchNamespaces={team-a,team-b}", "--set", "rbac.analysisSecretNamespaces={team-a}")
	operator = serviceAccountUser("echelon-scoped", "scoped-echelon")
	getSecret := func(ns string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Resource: "secrets", Verb: "get", Name: "prometheus-auth"}
	}
	if !allowed(t, c, operator, getSecret("team-a")) {
		t.Errorf("scoped operator may not %s (rbac.analysisSecretNamespaces)", describe(getSecret("team-a")))
	}
	if allowed(t, c, operator, getSecret("team-b")) {
		t.Errorf("scoped operator may %s, not in rbac.analysisSecretNamespaces", describe(getSecret("team-b")))
	}
	// Cluster-scoped resources (the webhook configurations the operator
	// injects its CA into) have no namespace to confine them to.
	clusterScoped := map[string]bool{}
	for _, cr := range operatorClusterRoles(render(t, "--set", "watchNamespaces={team-a,team-b}")) {
		for _, r := range requests(cr.Rules) {
			clusterScoped[r.Group+"/"+r.Resource] = true
		}
	}
	for _, p := range requests(rules) {
		if strings.HasSuffix(p.Resource, "webhookconfigurations") && p.Name != "" {
			// The chart names the webhook configurations after the release,
			// and grants patch on those names only.
			p.Name = "scoped-echelon"
		}
		for _, ns := range []string{"team-a", "team-b"} {
			p.Namespace = ns
			if !allowed(t, c, operator, p) {
				t.Errorf("scoped operator may not %s", describe(p))
			}
		}
		p.Namespace = "apps"
		if !clusterScoped[p.Group+"/"+p.Resource] && allowed(t, c, operator, p) {
			t.Errorf("scoped operator may %s, outside its namespaces", describe(p))
		}
	}
	assertMayHoldLease(t, c, operator, "echelon-scoped", "scoped-echelon")

	// Narrowing the namespaces on upgrade withdraws the permissions.
	helm("upgrade", "scoped", chartDir, "--namespace", "echelon-scoped", "--wait", "--timeout", "2m",
		"--set", "crds.enabled=false", "--set", "watchNamespaces={team-a}")
	deletePods := authorizationv1.ResourceAttributes{Namespace: "team-b", Verb: "delete", Resource: "pods"}
	if allowed(t, c, operator, deletePods) {
		t.Errorf("after removing team-b from watchNamespaces the operator may still %s", describe(deletePods))
	}
	if allowed(t, c, operator, getSecret("team-a")) {
		t.Errorf("after emptying rbac.analysisSecretNamespaces the operator may still %s", describe(getSecret("team-a")))
	}
	helm("uninstall", "scoped", "--namespace", "echelon-scoped", "--wait", "--no-hooks")

	// A webhook certificate the user provides: the operator serves the
	// mounted Secret's files, and the API server trusts the values' caBundle.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "echelon-provided"}}); err != nil {
		t.Fatal(err)
	}
	secret, caPEM, err := installed.ProvidedWebhookSecret("echelon-provided", "provided-webhook-tls", "provided-echelon-webhook")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	helm("install", "provided", chartDir, "--namespace", "echelon-provided", "--wait", "--timeout", "2m",
		"--set", "crds.enabled=false", "--set", "webhooks.certificates.mode=secret",
		"--set", "webhooks.certificates.secret.name=provided-webhook-tls",
		"--set", "webhooks.certificates.secret.caBundle="+base64.StdEncoding.EncodeToString(caPEM))
	if err := c.Get(ctx, client.ObjectKey{Namespace: "echelon-provided", Name: "provided-echelon-webhook-cert"}, &rbacv1.Role{}); !apierrors.IsNotFound(err) {
		t.Errorf("Role for the self-signed certificate's Secret with a provided certificate: err=%v, want none", err)
	}
	op = installed.Run(t, cp, "echelon-provided", "provided-echelon")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "provided"}}); err != nil {
		t.Fatal(err)
	}
	if err := installed.GuardDownscales(ctx, c, "provided", "guard"); err != nil {
		t.Fatalf("%v\n%s", err, op.LogTail(40))
	}
}

func rolloutGroup(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "echelon.dev/v1alpha1",
		"kind":       "RolloutGroup",
		"metadata":   map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{
			"statefulSets": []any{map[string]any{"name": "ingester-zone-a"}, map[string]any{"name": "ingester-zone-b"}},
		},
	}}
	return u
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

type user struct {
	name   string
	groups []string
}

func serviceAccountUser(namespace, name string) user {
	return user{
		name:   "system:serviceaccount:" + namespace + ":" + name,
		groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// requests turns rules into one access request per group, resource, verb and name.
func requests(rules []rbacv1.PolicyRule) []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, authorizationv1.ResourceAttributes{Group: g, Resource: resource, Subresource: sub, Verb: v, Name: n})
					}
				}
			}
		}
	}
	return out
}

// allowed asks the API server's authorizer, which is what the operator meets.
func allowed(t *testing.T, c client.Client, u user, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.name, Groups: u.groups, ResourceAttributes: &attrs,
	}}
	if err := c.Create(context.Background(), sar); err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return sar.Status.Allowed
}

func describe(a authorizationv1.ResourceAttributes) string {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Group != "" {
		res += "." + a.Group
	}
	if a.Name != "" {
		res += " " + a.Name
	}
	return a.Verb + " " + res + " in " + a.Namespace
}

func assertMayHoldLease(t *testing.T, c client.Client, u user, namespace, lease string) {
	t.Helper()
	for _, verb := range []string{"create", "get", "update"} {
		a := authorizationv1.ResourceAttributes{Namespace: namespace, Group: "coordination.k8s.io", Resource: "leases", Verb: verb}
		if verb != "create" {
			a.Name = lease
		}
		if !allowed(t, c, u, a) {
			t.Errorf("operator may not %s: leader election would fail", describe(a))
		}
	}
}

// assertNamespaceUsersManageRolloutGroups checks the aggregated ClusterRoles as
// a namespace user meets them: bound to the built-in edit role in one
// namespace, a user may create RolloutGroups there and nowhere else; bound to
// view, only read them. Aggregation is asynchronous, so the check polls.
func assertNamespaceUsersManageRolloutGroups(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	c := cp.Client()
	for userName, role := range map[string]string{"alice": "edit", "bob": "view"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: userName + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: userName}},
		}
		if err := c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	alice := user{name: "alice", groups: []string{"system:authenticated"}}
	bob := user{name: "bob", groups: []string{"system:authenticated"}}
	rg := func(ns, verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Group: "echelon.dev", Resource: "rolloutgroups", Verb: verb}
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return allowed(t, c, alice, rg("apps", "create")) && allowed(t, c, bob, rg("apps", "list")), nil
	})
	if err != nil {
		t.Fatalf("a user bound to edit may not create RolloutGroups, or one bound to view may not list them, in its namespace: %v", err)
	}
	for _, denied := range []struct {
		u   user
		a   authorizationv1.ResourceAttributes
		why string
	}{
		{alice, rg("team-a", "create"), "outside the namespace of its binding"},
		{bob, rg("apps", "create"), "with view only"},
		{alice, authorizationv1.ResourceAttributes{Namespace: "apps", Group: "echelon.dev", Resource: "rolloutgroups", Subresource: "status", Verb: "update"}, "status is the operator's"},
	} {
		if allowed(t, c, denied.u, denied.a) {
			t.Errorf("%s may %s: %s", denied.u.name, describe(denied.a), denied.why)
		}
	}
}
