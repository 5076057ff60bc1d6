/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The tests share one control plane: starting one takes seconds, and sharing it
// is also what proves that per-test namespaces keep tests apart.
var (
	shared    *controlplane.ControlPlane
	sharedErr error
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime, which otherwise complains with a
	// stack trace that no logger was set.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	// A helper process of TestComponentsDieWithTheTestBinary starts its own.
	if os.Getenv(helperEnv) == "" {
		shared, sharedErr = controlplane.Start(context.Background(), controlplane.Options{})
	}
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// controlPlane returns the shared control plane, or ends the test with the
// reason it did not start.
func controlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if sharedErr != nil {
		if errors.Is(sharedErr, controlplane.ErrAssetsMissing) && os.Getenv(controlplane.SkipEnv) == "1" {
			t.Skipf("skipping: %v (%s=1)", sharedErr, controlplane.SkipEnv)
		}
		t.Fatalf("%v", sharedErr)
	}
	shared.DumpLogsOnFailure(t, 40)
	return shared
}

func readyReplicas(ctx context.Context, c client.Client, sts *appsv1.StatefulSet) func() (int32, error) {
	return func() (int32, error) {
		var got appsv1.StatefulSet
		err := c.Get(ctx, client.ObjectKeyFromObject(sts), &got)
		return got.Status.ReadyReplicas, err
	}
}

func TestStatefulSetsBecomeReadyWithLoopbackPodIPs(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := cp.Client()
	ns := cp.NewNamespace(t)

	var sets []*appsv1.StatefulSet
	for _, name := range []string{"ingester-a", "ingester-b", "ingester-c"} {
		sts := builders.MakeStatefulSet(ns, name).Replicas(3).OnDelete().Obj()
		g.Expect(c.Create(ctx, sts)).To(Succeed())
		sets = append(sets, sts)
	}
	for _, sts := range sets {
		g.Eventually(readyReplicas(ctx, c, sts)).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).
			Should(Equal(int32(3)), "StatefulSet %s", sts.Name)
	}

	var pods corev1.PodList
	g.Expect(c.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(9))
	podCIDR := netip.MustParsePrefix(controlplane.DefaultPodCIDR).Masked()
	seen := map[string]string{}
	for _, pod := range pods.Items {
		g.Expect(pod.Spec.NodeName).To(BeElementOf(cp.Nodes()), "pod %s was scheduled onto a fake node", pod.Name)
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", pod.Name)
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		g.Expect(err).NotTo(HaveOccurred(), "pod %s IP", pod.Name)
		g.Expect(podCIDR.Contains(ip)).To(BeTrue(), "pod %s IP %s in %s", pod.Name, ip, podCIDR)
		g.Expect(seen).NotTo(HaveKey(pod.Status.PodIP), "pod %s shares its IP", pod.Name)
		seen[pod.Status.PodIP] = pod.Name
	}

	// OnDelete: only the StatefulSet controller brings a deleted pod back.
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingester-b-1"}}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(victim), victim)).To(Succeed())
	oldUID := victim.UID
	g.Expect(c.Delete(ctx, victim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var pod corev1.Pod
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(victim), &pod)).To(Succeed())
		g.Expect(pod.UID).NotTo(Equal(oldUID), "pod was recreated")
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	g.Eventually(readyReplicas(ctx, c, sets[1])).WithTimeout(30 * time.Second).Should(Equal(int32(3)))
}

func TestFiveReplicaStatefulSetIsReadyWithinSeconds(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := cp.Client()
	ns := cp.NewNamespace(t)

	sts := builders.MakeStatefulSet(ns, "store").Replicas(5).OnDelete().Obj()
	start := time.Now()
	g.Expect(c.Create(ctx, sts)).To(Succeed())
	g.Eventually(readyReplicas(ctx, c, sts)).WithTimeout(30 * time.Second).WithPolling(10 * time.Millisecond).
		Should(Equal(int32(5)))
	took := time.Since(start)
	t.Logf("5 replicas Ready %v after creation", took)
	// About a second on an idle two-core machine (pods start one after the other:
	// OrderedReady); the bound leaves room for a busy one while still catching a
	// component that waits on a resync period or a rate limiter.
	g.Expect(took).To(BeNumerically("<", 10*time.Second))
}

func TestRBACIsEnforced(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := cp.NewNamespace(t)

	user, err := cp.NewUser("pod-reader")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(user.Kubeconfig).To(BeARegularFile())
	c, err := client.New(user.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	var pods corev1.PodList
	err = c.List(ctx, &pods, client.InNamespace(ns))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a user without roles lists pods: %v", err)

	role := filepath.Join(t.TempDir(), "role.yaml")
	g.Expect(os.WriteFile(role, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: test-pod-reader
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
`), 0o644)).To(Succeed())
	g.Expect(cp.BindRBAC(ctx, user.Name, role)).To(Succeed())

	// RBAC bindings take effect through the API server's informers: eventually.
	g.Eventually(func() error {
		return c.List(ctx, &pods, client.InNamespace(ns))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-allowed"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	err = c.Create(ctx, pod)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a pod reader creates pods: %v", err)
}

func TestBindRBACRefusesOtherKinds(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "binding.yaml")
	g.Expect(os.WriteFile(file, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: sneaky
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: someone}]
`), 0o644)).To(Succeed())
	g.Expect(cp.BindRBAC(t.Context(), "someone", file)).To(MatchError(ContainSubstring("only ClusterRoles and Roles")))
}

func TestNamespacesAreUniquePerTest(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	a, b := cp.NewNamespace(t), cp.NewNamespace(t)
	g.Expect(a).NotTo(Equal(b))
	g.Expect(a).To(HavePrefix("testnamespacesareuniquepertest-"))
}

func TestPodStartAndReadyDelays(t *testing.T) {
	controlPlane(t) // same skip-or-fail rule as the other tests
	cp := controlplane.StartForTest(t, controlplane.Options{
		Nodes:         1,
		PodStartDelay: time.Second,
		PodReadyDelay: time.Second,
	})
	g := NewWithT(t)
	ctx := t.Context()
	c := cp.Client()
	ns := cp.NewNamespace(t)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	start := time.Now()
	g.Expect(c.Create(ctx, pod)).To(Succeed())
	var gotIP, ready time.Duration
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		if gotIP == 0 && pod.Status.PodIP != "" {
			gotIP = time.Since(start)
			// Between the two delays the pod is starting: an IP, not Ready.
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
		}
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
		ready = time.Since(start)
	}).WithTimeout(30 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
	t.Logf("pod got its IP after %v and was Ready after %v", gotIP, ready)
	g.Expect(gotIP).To(BeNumerically(">=", time.Second), "IP before the start delay")
	g.Expect(ready-gotIP).To(BeNumerically(">=", 900*time.Millisecond), "Ready before the ready delay")
	g.Expect(ready).To(BeNumerically("<", 10*time.Second))
}

// allowed asks the API server whether user may verb resource, as RBAC decides.
func allowed(ctx context.Context, g Gomega, c client.Client, user string, attrs authorizationv1.ResourceAttributes) bool {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		ResourceAttributes: &attrs,
	}}
	g.Expect(c.Create(ctx, review)).To(Succeed())
	return review.Status.Allowed
}

func TestOperatorUserIsBoundToTheGeneratedRBACOnly(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := cp.Client()

	user, err := cp.NewOperatorUser(ctx, "echelon-operator-test")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(user.Kubeconfig).To(BeARegularFile())

	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, controlplane.OperatorRBACFile))
	g.Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	g.Expect(yaml.Unmarshal(data, &role)).To(Succeed())
	g.Expect(role.Rules).NotTo(BeEmpty(), "%s has rules", controlplane.OperatorRBACFile)

	// Every verb the generated role grants, the user has (eventually: the API
	// server's RBAC informers lag the binding by a moment)...
	for _, rule := range role.Rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					for _, name := range names {
						resource, subresource, _ := strings.Cut(resource, "/")
						attrs := authorizationv1.ResourceAttributes{Group: group, Resource: resource, Subresource: subresource, Verb: verb, Namespace: "any", Name: name}
						g.Eventually(func(g Gomega) bool { return allowed(ctx, g, c, user.Name, attrs) }).
							WithTimeout(10*time.Second).Should(BeTrue(), "%s may %s %s %s", user.Name, verb, rule.Resources, name)
					}
				}
			}
		}
	}
	// ...and nothing a rollout operator must never do.
	g.Expect(allowed(ctx, g, c, user.Name, authorizationv1.ResourceAttributes{Verb: "delete", Resource: "nodes"})).To(BeFalse())
	g.Expect(allowed(ctx, g, c, user.Name, authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "kube-system"})).To(BeFalse())
	// It injects its CA into its own webhook configurations (config/webhook
	// names them echelon), and into no one else's: a CA of its choosing in
	// another admission webhook would let it answer for that webhook.
	for _, resource := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
		webhooks := func(verb, name string) authorizationv1.ResourceAttributes {
			return authorizationv1.ResourceAttributes{Group: "admissionregistration.k8s.io", Resource: resource, Verb: verb, Name: name}
		}
		for _, attrs := range []authorizationv1.ResourceAttributes{webhooks("patch", "echelon"), webhooks("list", ""), webhooks("watch", "")} {
			g.Expect(allowed(ctx, g, c, user.Name, attrs)).To(BeTrue(), "%s may %s %s %s", user.Name, attrs.Verb, resource, attrs.Name)
		}
		for _, attrs := range []authorizationv1.ResourceAttributes{
			webhooks("patch", "cert-manager-webhook"), webhooks("patch", ""), webhooks("update", "echelon"), webhooks("delete", "echelon"), webhooks("create", ""),
		} {
			g.Expect(allowed(ctx, g, c, user.Name, attrs)).To(BeFalse(), "%s must not %s %s %q", user.Name, attrs.Verb, resource, attrs.Name)
		}
	}
}

// The operator holds Lease rights only in its leader-election namespace, and
// there reads and renews only its own Lease.
func TestOperatorUserHoldsLeaseRightsOnlyForItsLease(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := cp.Client()

	user, err := cp.NewOperatorUser(ctx, "echelon-operator-lease-test")
	g.Expect(err).NotTo(HaveOccurred())
	ns, err := cp.CreateNamespace(ctx, "lease")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cp.GrantLeaderElection(ctx, user.Name, ns)).To(Succeed())

	lease := func(verb, namespace, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: verb, Namespace: namespace, Name: name}
	}
	for _, attrs := range []authorizationv1.ResourceAttributes{
		lease("create", ns, ""), lease("get", ns, "echelon-leader"), lease("update", ns, "echelon-leader"),
	} {
		g.Eventually(func(g Gomega) bool { return allowed(ctx, g, c, user.Name, attrs) }).
			WithTimeout(10*time.Second).Should(BeTrue(), "%s may %s Lease %s/%s", user.Name, attrs.Verb, attrs.Namespace, attrs.Name)
	}
	for _, attrs := range []authorizationv1.ResourceAttributes{
		lease("update", ns, "someone-elses-lease"), lease("create", "kube-system", ""), lease("update", "kube-system", "echelon-leader"),
		lease("list", ns, ""),
	} {
		g.Expect(allowed(ctx, g, c, user.Name, attrs)).To(BeFalse(), "%s must not %s Lease %s/%s", user.Name, attrs.Verb, attrs.Namespace, attrs.Name)
	}
}

// The operator reads analysis Secrets only where they are granted: get, in
// the namespaces given to GrantAnalysisSecrets, and nothing else on Secrets.
func TestOperatorUserReadsAnalysisSecretsOnlyWhereGranted(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	ctx := t.Context()
	c := cp.Client()

	user, err := cp.NewOperatorUser(ctx, "echelon-operator-secrets-test")
	g.Expect(err).NotTo(HaveOccurred())
	granted, err := cp.CreateNamespace(ctx, "secrets-granted")
	g.Expect(err).NotTo(HaveOccurred())
	other, err := cp.CreateNamespace(ctx, "secrets-other")
	g.Expect(err).NotTo(HaveOccurred())
	secret := func(verb, namespace string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Resource: "secrets", Verb: verb, Namespace: namespace, Name: "prometheus-auth"}
	}
	g.Expect(allowed(ctx, g, c, user.Name, secret("get", granted))).To(BeFalse(), "%s may read Secrets before any grant", user.Name)

	g.Expect(cp.GrantAnalysisSecrets(ctx, user.Name, granted)).To(Succeed())
	g.Eventually(func(g Gomega) bool { return allowed(ctx, g, c, user.Name, secret("get", granted)) }).
		WithTimeout(10*time.Second).Should(BeTrue(), "%s may get Secrets in %s", user.Name, granted)
	for _, attrs := range []authorizationv1.ResourceAttributes{
		secret("get", other), secret("get", "kube-system"), secret("list", granted), secret("watch", granted), secret("update", granted),
	} {
		g.Expect(allowed(ctx, g, c, user.Name, attrs)).To(BeFalse(), "%s must not %s Secrets in %s", user.Name, attrs.Verb, attrs.Namespace)
	}
}
