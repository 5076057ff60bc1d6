/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/installed"
	"github.com/echelon-operator/echelon/test/nodetier"
)

// The tier has one real node, which cannot be drained: the operator's new
// pods of a helm upgrade need it. The node drained is a kwok node instead,
// beside the real one: its pods run no container, but their evictions are
// judged by the operator on the real node, called by the API server through
// the webhook Service and kube-proxy, like any drain's.
const (
	// fakeNodeTaint keeps every pod but the drained group's off the kwok
	// nodes: the operator's above all, which kwok would report Ready
	// without running it.
	fakeNodeTaint = "nodetier.echelon.dev/fake"
	// drainTimeout is kubectl drain's own --timeout.
	drainTimeout = 4 * time.Minute
)

// fakeNodes starts kwok and creates count kwok nodes, tainted fakeNodeTaint,
// all but the first cordoned, and waits until they are Ready.
func fakeNodes(ctx context.Context, count int) []string {
	GinkgoHelper()
	Expect(node.ControlPlane().StartKwok()).To(Succeed())
	names := make([]string, 0, count)
	for i := range count {
		name := fmt.Sprintf("fake-node-%d", i)
		Expect(k8s.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{controlplane.FakeNodeAnnotation: "fake"},
				Labels:      map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", "type": "kwok"},
			},
			Spec: corev1.NodeSpec{
				Unschedulable: i > 0,
				Taints:        []corev1.Taint{{Key: fakeNodeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			},
		})).To(Succeed())
		names = append(names, name)
	}
	Eventually(func(g Gomega) {
		for _, name := range names {
			var n corev1.Node
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &n)).To(Succeed())
			g.Expect(n.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))), "kwok made node %s Ready", name)
			g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", corev1.TaintNodeNotReady)), "node %s still tainted not-ready", name)
		}
	}).WithContext(ctx).Should(Succeed())
	return names
}

// onFakeNodes makes a StatefulSet's pods run on the kwok nodes only.
func onFakeNodes(sts *appsv1.StatefulSet) *appsv1.StatefulSet {
	spec := &sts.Spec.Template.Spec
	spec.NodeSelector = map[string]string{"type": "kwok"}
	spec.Tolerations = []corev1.Toleration{{Key: fakeNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return sts
}

// podsOn lists the names of the namespace's pods bound to nodeName.
func podsOn(ctx context.Context, ns, nodeName string) []string {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == nodeName {
			out = append(out, p.Name)
		}
	}
	return out
}

// drainDuringUpgrade drains a node holding three zones of a group while
// helm upgrade replaces the operator's pods.
func drainDuringUpgrade(ctx SpecContext) {
	nodes := fakeNodes(ctx, 2)
	ns := newNamespace(ctx, "drain")
	zones := installed.Zones("cache")
	const replicas = 3
	for _, z := range zones {
		Expect(k8s.Create(ctx, onFakeNodes(podStatefulSet(ns, z, "cache", replicas, "1")))).To(Succeed())
	}
	Expect(k8s.Create(ctx, installed.RolloutGroup(ns, "cache", zones, map[string]any{"maxUnavailable": int64(1)}))).To(Succeed())
	waitPodsReady(ctx, ns, zones...)
	Expect(installed.WaitPhase(ctx, k8s, ns, "cache", "Complete")).To(Succeed())
	Expect(podsOn(ctx, ns, nodes[0])).To(HaveLen(replicas * len(zones)))
	// The second node takes the evicted pods' replacements.
	Expect(k8s.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[1]}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`)))).To(Succeed())

	monitor := startGroupMonitor(ctx, ns, zones, replicas)
	// Two zones short at once is a breach whoever caused it: here the drain.
	monitor.JudgeEveryMoment()

	tag := chartTag() + "-drain"
	Expect(node.TagImage(ctx, node.OperatorImage, strings.TrimSuffix(node.OperatorImage, ":"+chartTag())+":"+tag)).To(Succeed())
	probe := startWebhookProbe(ctx)
	drain, err := framework.StartDrain(ctx, node.ControlPlane().Assets().Kubectl, node.ControlPlane().Kubeconfig(), nodes[0], drainTimeout)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(drain.Kill)
	// The upgrade starts once the drain's first eviction went through, so
	// that the evictions after it meet the operator's pods going and coming.
	Eventually(func() int { return len(monitor.Rolls()) }).WithContext(ctx).Should(BeNumerically(">", 0))
	upgradeStarted := time.Now()
	helm(ctx, "upgrade", release, chartDir(), "--namespace", releaseNamespace, "--reuse-values",
		"--set", "image.tag="+tag, "--wait", "--timeout", "3m")
	upgradeTook := time.Since(upgradeStarted)
	took, drainErr := drain.Wait(ctx, drainTimeout+10*time.Second)
	failures, longest := probe.stop()
	AddReportEntry("kubectl drain during helm upgrade", fmt.Sprintf("drain %s (%d evictions refused with 429 and retried), upgrade %s, drain ended %s after the upgrade began",
		took.Round(100*time.Millisecond), len(drain.Refusals()), upgradeTook.Round(100*time.Millisecond), drain.Finished().Sub(upgradeStarted).Round(100*time.Millisecond)))
	AddReportEntry("webhook requests during the drain and helm upgrade", fmt.Sprintf("%d, %d failed, longest unavailability %s", probe.count(), len(failures), longest))

	// kubectl drain stops at the first eviction answered with anything but
	// 429 (a webhook that could not be called is a 500): each eviction was
	// admitted or refused by the operator, and the node drained.
	Expect(drainErr).NotTo(HaveOccurred())
	Expect(drain.Output()).NotTo(ContainSubstring("failed calling webhook"))
	Expect(drain.Finished()).To(BeTemporally(">", upgradeStarted), "the drain was still evicting when the upgrade began")
	expectNoBreaches(monitor)
	Expect(monitor.Rolls()).To(HaveLen(replicas*len(zones)), "each pod was evicted once")
	Expect(podsOn(ctx, ns, nodes[0])).To(BeEmpty())
	waitPodsReady(ctx, ns, zones...)
	for _, p := range operatorPods(ctx) {
		Expect(p.Spec.Containers[0].Image).To(HaveSuffix(":" + tag))
		Expect(p.Spec.NodeName).To(Equal(nodetier.NodeName), "operator pod %s runs on the real node", p.Name)
	}
	Expect(failures).To(BeEmpty(), "admission requests that failed during the drain and upgrade (longest unavailability %s)", longest)
}
