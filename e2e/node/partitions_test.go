/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package node

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/installed"
)

// The RollingUpdate members of namespace "partitions": the operator rolls
// them by their partition and holds it at their replicas in between.
const (
	partitionsNamespace = "partitions"
	// partitionHolderLabel and partitionFinalizer are what docs/uninstall.md
	// tells users to look for after an uninstall.
	partitionHolderLabel = "echelon.dev/partition-holder"
	partitionFinalizer   = "echelon.dev/partitions"
)

// expectPartitionsHeld expects every member's partition at its replicas,
// labelled as held by the group.
func expectPartitionsHeld(ctx context.Context, g Gomega, zones []string) {
	for _, z := range zones {
		var sts appsv1.StatefulSet
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: partitionsNamespace, Name: z}, &sts)).To(Succeed())
		g.Expect(sts.Spec.UpdateStrategy.RollingUpdate).NotTo(BeNil(), "StatefulSet %s has no partition", z)
		g.Expect(sts.Spec.UpdateStrategy.RollingUpdate.Partition).To(HaveValue(Equal(*sts.Spec.Replicas)), "StatefulSet %s: partition", z)
		g.Expect(sts.Labels).To(HaveKey(partitionHolderLabel), "StatefulSet %s", z)
	}
}

// rollsByPartition rolls a group of RollingUpdate members, one real pod
// each, by their partitions, and leaves them held.
func rollsByPartition(ctx SpecContext) {
	ns := newNamespace(ctx, partitionsNamespace)
	zones := installed.Zones("kafka")
	for _, z := range zones {
		sts := podStatefulSet(ns, z, "kafka", 1, "1")
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
		Expect(k8s.Create(ctx, sts)).To(Succeed())
	}
	Expect(k8s.Create(ctx, installed.RolloutGroup(ns, "kafka", zones, map[string]any{"maxUnavailable": int64(1)}))).To(Succeed())
	waitPodsReady(ctx, ns, zones...)
	Eventually(func(g Gomega) { expectPartitionsHeld(ctx, g, zones) }).WithContext(ctx).Should(Succeed())

	monitor := startGroupMonitor(ctx, ns, zones, 1)
	start := time.Now()
	setRevision(ctx, ns, zones, "2")
	Expect(installed.WaitRolledOut(ctx, k8s, ns, "kafka")).To(Succeed())
	AddReportEntry("rollout of three RollingUpdate members by partition", time.Since(start).Round(100*time.Millisecond).String())
	Expect(monitor.Breaches()).To(BeEmpty())
	Expect(monitor.Rolls()).To(HaveLen(len(zones)))
	Eventually(func(g Gomega) { expectPartitionsHeld(ctx, g, zones) }).WithContext(ctx).Should(Succeed())
}

// partitionsAfterUninstall checks what docs/uninstall.md says of RollingUpdate
// members once the operator is gone, then follows its steps to hand their
// partitions back and to delete the group.
func partitionsAfterUninstall(ctx SpecContext) {
	ns, zones := partitionsNamespace, installed.Zones("kafka")
	group := installed.RolloutGroup(ns, "kafka", nil, nil)
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(group), group)).To(Succeed())
	Expect(group.GetFinalizers()).To(ContainElement(partitionFinalizer))
	expectPartitionsHeld(ctx, Default, zones)

	By("a new template rolls nothing while the partitions are held")
	setRevision(ctx, ns, zones, "3")
	for _, z := range zones {
		Eventually(func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: z}, &sts)).To(Succeed())
			g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation), "the StatefulSet controller saw the template of %s", z)
			g.Expect(sts.Status.UpdateRevision).NotTo(Equal(sts.Status.CurrentRevision))
			g.Expect(sts.Status.UpdatedReplicas).To(BeZero())
			g.Expect(sts.Status.ReadyReplicas).To(Equal(*sts.Spec.Replicas))
		}).WithContext(ctx).Should(Succeed())
	}

	By("the partitions handed back as docs/uninstall.md says: the StatefulSet controller rolls them")
	for _, z := range zones {
		out, ok := kubectl(ctx, "-n", ns, "patch", "statefulset", z, "--type", "json",
			"-p", `[{"op":"remove","path":"/spec/updateStrategy/rollingUpdate/partition"}]`)
		Expect(ok).To(BeTrue(), out)
		out, ok = kubectl(ctx, "-n", ns, "label", "statefulset", z, partitionHolderLabel+"-")
		Expect(ok).To(BeTrue(), out)
	}
	for _, z := range zones {
		Eventually(func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: z}, &sts)).To(Succeed())
			g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
			g.Expect(sts.Status.UpdatedReplicas).To(Equal(ptr.Deref(sts.Spec.Replicas, 1)), "StatefulSet %s: pods on the new revision", z)
			g.Expect(sts.Status.ReadyReplicas).To(Equal(ptr.Deref(sts.Spec.Replicas, 1)))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
	}

	By("the group deleted once its finalizer is removed, as docs/uninstall.md says")
	out, ok := kubectl(ctx, "-n", ns, "patch", "rolloutgroup", "kafka", "--type", "merge", "-p", `{"metadata":{"finalizers":null}}`)
	Expect(ok).To(BeTrue(), out)
	out, ok = kubectl(ctx, "-n", ns, "delete", "rolloutgroup", "kafka", "--timeout=1m")
	Expect(ok).To(BeTrue(), out)
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	Expect(pods.Items).To(HaveLen(len(zones)), "deleting the group touched no pod")
}
