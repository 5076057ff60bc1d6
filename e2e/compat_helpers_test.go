package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/internal/certs"
	"github.com/echelon-operator/echelon/internal/migrate"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// installZPDBCRD installs the fixture CRD of the Grafana operator's
// ZoneAwarePodDisruptionBudget (once for the suite: it is cluster-scoped
// and harmless to the other specs) and waits until it serves.
func installZPDBCRD(ctx context.Context) {
	GinkgoHelper()
	root, err := controlplane.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "e2e", "testdata", "grafana-zpdb-crd.yaml"))
	Expect(err).NotTo(HaveOccurred())
	crd := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal(data, &crd.Object)).To(Succeed())
	if err := k8s.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(func() error {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(zpdbGVK("ZoneAwarePodDisruptionBudgetList").GroupVersionKind())
		return k8s.List(ctx, &list)
	}).WithContext(ctx).Should(Succeed(), "the ZoneAwarePodDisruptionBudget CRD serves")
}

func zpdbGVK(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(migrate.ZoneAwarePDBGroup + "/v1")
	u.SetKind(kind)
	return u
}

// createZPDB creates a ZoneAwarePodDisruptionBudget and returns the API
// server's answer.
func createZPDB(ctx context.Context, ns, name string, spec map[string]any) error {
	u := zpdbGVK(migrate.ZoneAwarePDBKind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.Object["spec"] = spec
	return k8s.Create(ctx, u)
}

// installGrafanaWebhookConfigurations registers webhook configurations
// shaped as the Grafana rollout-operator's deployments write them (its
// webhook names, paths, rules and labels for CA injection, with no caBundle),
// changed only to call the spec's operator at a loopback URL and to select
// ns alone. It waits until compat mode has injected the CA into each.
func installGrafanaWebhookConfigurations(ctx context.Context, ns string, port int) {
	GinkgoHelper()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name + "-" + ns, Labels: map[string]string{
			certs.GrafanaInjectCALabel: "true", certs.GrafanaNamespaceLabel: ns}}
	}
	only := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
	hook := func(name, path string, group string, resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
		return admissionregistrationv1.ValidatingWebhook{
			Name:         name + "-" + ns + ".grafana.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources, Scope: ptr.To(admissionregistrationv1.NamespacedScope)}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector:       only,
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}
	}
	configs := []*admissionregistrationv1.ValidatingWebhookConfiguration{
		{ObjectMeta: meta("no-downscale"), Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("no-downscale", "/admission/no-downscale", "apps",
			[]string{"statefulsets", "deployments", "replicasets", "statefulsets/scale", "deployments/scale", "replicasets/scale"}, admissionregistrationv1.Update)}},
		{ObjectMeta: meta("pod-eviction"), Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("pod-eviction", "/admission/pod-eviction", "",
			[]string{"pods/eviction"}, admissionregistrationv1.Create)}},
		{ObjectMeta: meta("zpdb-validation"), Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("zpdb-validation", "/admission/zpdb-validation", migrate.ZoneAwarePDBGroup,
			[]string{"zoneawarepoddisruptionbudgets"}, admissionregistrationv1.Create, admissionregistrationv1.Update)}},
	}
	for _, c := range configs {
		Expect(k8s.Create(ctx, c)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = k8s.Delete(ctx, c) })
	}
	Eventually(func(g Gomega) {
		for _, c := range configs {
			got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: c.Name}, got)).To(Succeed())
			for _, w := range got.Webhooks {
				g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), "CA injected into %s", w.Name)
			}
		}
	}).WithContext(ctx).Should(Succeed())
}

// hasMetricLine says whether the operator's /metrics has a line of name
// holding every one of the label pairs (`key="value"`).
func hasMetricLine(w *webhookOperator, name string, pairs ...string) bool {
	GinkgoHelper()
	_, body, err := w.Get("/metrics")
	Expect(err).NotTo(HaveOccurred())
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		all := true
		for _, p := range pairs {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
