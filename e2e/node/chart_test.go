/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package node

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/installed"
)

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	Expect(err).NotTo(HaveOccurred())
	return sel
}

// The specs run in order on one installation: `helm install` with the
// chart's defaults, then what a user does with it, then `helm uninstall`.
var _ = Describe("The chart's operator on a real node", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		start := time.Now()
		helm(ctx, "install", release, chartDir(), "--namespace", releaseNamespace, "--create-namespace")
		Eventually(func(g Gomega) {
			var deploy appsv1.Deployment
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release}, &deploy)).To(Succeed())
			g.Expect(deploy.Status.ReadyReplicas).To(BeEquivalentTo(2))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
		AddReportEntry("operator pods Ready after helm install", time.Since(start).Round(100*time.Millisecond).String())
	}, NodeTimeout(5*time.Minute))

	It("runs two operator pods from the chart's image, both Ready, one of them the leader", func(ctx SpecContext) {
		pods := operatorPods(ctx)
		Expect(pods).To(HaveLen(2))
		names := []string{}
		for _, p := range pods {
			Expect(p.Spec.Containers[0].Image).To(Equal(node.OperatorImage))
			Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "pod %s restarted", p.Name)
			names = append(names, p.Name)
			// Ready as soon as the caches are (the startup probe), not at the
			// readiness probe's second period, 10 s after the first fails: a
			// figure for the report, not a timed assertion (it took 8 s once
			// on a loaded machine); the chart tests check the probes.
			started := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
			var ready time.Time
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					ready = c.LastTransitionTime.Time
				}
			}
			AddReportEntry("pod "+p.Name+" Ready after its container started", ready.Sub(started).String())
		}
		Eventually(func() string { return leader(ctx) }).WithContext(ctx).Should(BeElementOf(names))
	})

	It("serves /metrics to Prometheus through the metrics Service", func(ctx SpecContext) {
		var svc corev1.Service
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release + "-metrics"}, &svc)).To(Succeed())
		url := fmt.Sprintf("http://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
		// kube-proxy routes the Service once it has seen the Ready pods'
		// endpoints, a moment after the Deployment counts them Ready.
		Eventually(func() error { _, _, err := scrape(ctx, url); return err }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		// Both replicas serve it; a few scrapes reach both through kube-proxy.
		for range 4 {
			code, body, err := scrape(ctx, url)
			Expect(err).NotTo(HaveOccurred())
			Expect(code).To(Equal(200))
			Expect(body).To(ContainSubstring("leader_election_master_status"))
			Expect(body).To(ContainSubstring("echelon_"))
		}
	})

	It("refuses kubectl scale of a guarded StatefulSet through the webhook Service", func(ctx SpecContext) {
		ns := newNamespace(ctx, "guarded")
		Expect(k8s.Create(ctx, podStatefulSet(ns, "guarded", "guarded", 2, "1"))).To(Succeed())
		Expect(k8s.Create(ctx, builders.MakeScalingPolicy(ns, "guarded").Target("StatefulSet", "guarded").DownscaleAllowed(false).Obj())).To(Succeed())
		waitPodsReady(ctx, ns, "guarded")
		expectScaleRefused(ctx)
		out, ok := kubectl(ctx, "-n", ns, "scale", "statefulset", "guarded", "--replicas=1")
		Expect(ok).To(BeFalse(), "kubectl scale down was admitted: %s", out)
		Expect(out).To(ContainSubstring("downscale.allowed"))
		out, ok = kubectl(ctx, "-n", ns, "scale", "statefulset", "guarded", "--replicas=3")
		Expect(ok).To(BeTrue(), "kubectl scale up was refused: %s", out)
	})

	It("refuses the eviction of a pod while another zone of its group is short", func(ctx SpecContext) {
		ns := newNamespace(ctx, "evict")
		zones := installed.Zones("store")
		for i, z := range zones {
			sts := podStatefulSet(ns, z, "store", 1, "1")
			if i == 0 {
				// zone a's pod never becomes Ready: that zone is short.
				sts.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9)
			}
			Expect(k8s.Create(ctx, sts)).To(Succeed())
		}
		Expect(k8s.Create(ctx, installed.RolloutGroup(ns, "store", zones, map[string]any{"maxUnavailable": int64(1)}))).To(Succeed())
		waitPodsReady(ctx, ns, zones[1:]...)
		evict := func(dryRun bool) error {
			e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: zones[1] + "-0"}}
			if dryRun {
				e.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
			}
			return cs.PolicyV1().Evictions(ns).Evict(ctx, e)
		}
		Eventually(func() error { return evict(true) }).WithContext(ctx).Should(Satisfy(apierrors.IsTooManyRequests))
		err := evict(false)
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "eviction of %s-0: %v", zones[1], err)
		Expect(err.Error()).To(ContainSubstring(zones[0]), "the refusal names the short zone")
		var pod corev1.Pod
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: zones[1] + "-0"}, &pod)).To(Succeed())
		Expect(pod.DeletionTimestamp).To(BeNil())
	})

	It("rolls out three zones of real pods with no breach", func(ctx SpecContext) {
		ns := newNamespace(ctx, "rollout")
		zones := installed.Zones("ingester")
		for _, z := range zones {
			Expect(k8s.Create(ctx, podStatefulSet(ns, z, "ingester", 2, "1"))).To(Succeed())
		}
		Expect(k8s.Create(ctx, installed.RolloutGroup(ns, "ingester", zones, map[string]any{"maxUnavailable": int64(1)}))).To(Succeed())
		waitPodsReady(ctx, ns, zones...)
		Expect(installed.WaitPhase(ctx, k8s, ns, "ingester", "Complete")).To(Succeed())

		monitor := startGroupMonitor(ctx, ns, zones, 2)

		start := time.Now()
		setRevision(ctx, ns, zones, "2")
		Expect(installed.WaitRolledOut(ctx, k8s, ns, "ingester")).To(Succeed())
		AddReportEntry("three-zone rollout of 6 real pods", time.Since(start).Round(100*time.Millisecond).String())
		expectNoBreaches(monitor)
		Expect(monitor.Rolls()).To(HaveLen(6))

		By("deleting the leader pod mid-rollout: the standby takes over")
		old := leader(ctx)
		Expect(old).NotTo(BeEmpty())
		setRevision(ctx, ns, zones, "3")
		Eventually(func() int { return len(monitor.Rolls()) }).WithContext(ctx).Should(BeNumerically(">", 6))
		deleted := time.Now()
		out, ok := kubectl(ctx, "-n", releaseNamespace, "delete", "pod", old, "--grace-period=0", "--force")
		Expect(ok).To(BeTrue(), out)
		Eventually(func() string { return leader(ctx) }).WithContext(ctx).Should(And(Not(BeEmpty()), Not(Equal(old))))
		AddReportEntry("leader handover after the leader pod's forced deletion", time.Since(deleted).Round(100*time.Millisecond).String())
		Expect(installed.WaitRolledOut(ctx, k8s, ns, "ingester")).To(Succeed())
		expectNoBreaches(monitor)
		Expect(monitor.Rolls()).To(HaveLen(12))
	})

	It("upgrades to a new image during a rollout: the rollout completes with no breach, and the webhooks keep answering", func(ctx SpecContext) {
		ns, zones := "rollout", installed.Zones("ingester")
		monitor := startGroupMonitor(ctx, ns, zones, 2)
		// A new operator image: the same content under another tag is a new
		// pod template, which the Deployment rolls.
		upgraded := strings.TrimSuffix(node.OperatorImage, ":"+chartTag()) + ":" + chartTag() + "-upgrade"
		Expect(node.TagImage(ctx, node.OperatorImage, upgraded)).To(Succeed())

		probe := startWebhookProbe(ctx)
		setRevision(ctx, ns, zones, "4")
		Eventually(func() int { return len(monitor.Rolls()) }).WithContext(ctx).Should(BeNumerically(">", 0))
		helm(ctx, "upgrade", release, chartDir(), "--namespace", releaseNamespace, "--reuse-values",
			"--set", "image.tag="+chartTag()+"-upgrade", "--wait", "--timeout", "3m")
		Expect(installed.WaitRolledOut(ctx, k8s, ns, "ingester")).To(Succeed())
		failures, longest := probe.stop()
		AddReportEntry("webhook requests during helm upgrade", fmt.Sprintf("%d, %d failed, longest unavailability %s", probe.count(), len(failures), longest))
		expectNoBreaches(monitor)
		Expect(monitor.Rolls()).To(HaveLen(6))
		for _, p := range operatorPods(ctx) {
			Expect(p.Spec.Containers[0].Image).To(Equal(upgraded))
		}
		Expect(failures).To(BeEmpty(), "admission requests that failed during the upgrade (longest unavailability %s)", longest)
	})

	It("drains a node while helm upgrade replaces the operator's pods: every eviction judged, no admission request failed, no breach", drainDuringUpgrade)

	It("rolls RollingUpdate members by their partitions, holding them in between", rollsByPartition)

	It("leaves no webhook configuration after helm uninstall, and nothing of Echelon's but the CRDs and a partition it keeps on purpose", func(ctx SpecContext) {
		pendingZoneBeforeUninstall(ctx)
		start := time.Now()
		helm(ctx, "uninstall", release, "--namespace", releaseNamespace, "--wait", "--timeout", "3m")
		AddReportEntry("helm uninstall, with its post-delete hook", time.Since(start).Round(100*time.Millisecond).String())

		var validating admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(k8s.List(ctx, &validating)).To(Succeed())
		Expect(validating.Items).To(BeEmpty())
		var mutating admissionregistrationv1.MutatingWebhookConfigurationList
		Expect(k8s.List(ctx, &mutating)).To(Succeed())
		Expect(mutating.Items).To(BeEmpty())
		instance := client.MatchingLabels{"app.kubernetes.io/instance": release}
		var roles rbacv1.ClusterRoleList
		Expect(k8s.List(ctx, &roles, instance)).To(Succeed())
		Expect(roles.Items).To(BeEmpty(), "the operator's and the hook's ClusterRoles")
		var bindings rbacv1.ClusterRoleBindingList
		Expect(k8s.List(ctx, &bindings, instance)).To(Succeed())
		Expect(bindings.Items).To(BeEmpty())
		Eventually(func() []corev1.Pod { return operatorPods(ctx) }).WithContext(ctx).Should(BeEmpty())
		var services corev1.ServiceList
		Expect(k8s.List(ctx, &services, client.InNamespace(releaseNamespace))).To(Succeed())
		Expect(services.Items).To(BeEmpty())

		By("a downscale once refused goes through: nothing blocks the cluster")
		out, ok := kubectl(ctx, "-n", "guarded", "scale", "statefulset", "guarded", "--replicas=1")
		Expect(ok).To(BeTrue(), out)
		out, ok = kubectl(ctx, "get", "crd", "-o", "name")
		Expect(ok).To(BeTrue(), out)
		Expect(strings.Count(out, ".echelon.dev")).To(BeNumerically(">=", 3), "the CRDs stay: %s", out)

		By("the hook deleted the Lease and the self-signed certificate's Secret, and went with its own Job and rights")
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release}, &coordinationv1.Lease{}))).To(BeTrue(), "the Lease")
		var secrets corev1.SecretList
		Expect(k8s.List(ctx, &secrets, client.InNamespace(releaseNamespace))).To(Succeed())
		Expect(secrets.Items).To(BeEmpty())
		var jobs batchv1.JobList
		Expect(k8s.List(ctx, &jobs, client.InNamespace(releaseNamespace))).To(Succeed())
		Expect(jobs.Items).To(BeEmpty())
		var accounts corev1.ServiceAccountList
		Expect(k8s.List(ctx, &accounts, client.InNamespace(releaseNamespace), instance)).To(Succeed())
		Expect(accounts.Items).To(BeEmpty())
		var nsRoles rbacv1.RoleList
		Expect(k8s.List(ctx, &nsRoles, instance)).To(Succeed())
		Expect(nsRoles.Items).To(BeEmpty())
	})

	It("hands back after helm uninstall the partitions that roll nothing, keeps the one with a change pending, and docs/uninstall.md's steps hand it back", partitionsAfterUninstall)

	It("rotates the self-signed webhook certificates while the webhooks keep answering", rotatesSelfSignedCertificates)

	It("serves the webhooks with a TLS Secret the user provides", servesProvidedSecret)
})
