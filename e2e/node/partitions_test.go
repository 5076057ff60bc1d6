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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	expectNoBreaches(monitor)
	Expect(monitor.Rolls()).To(HaveLen(len(zones)))
	Eventually(func(g Gomega) { expectPartitionsHeld(ctx, g, zones) }).WithContext(ctx).Should(Succeed())
}

// pendingZoneBeforeUninstall pauses the group of RollingUpdate members and
// gives its first zone a new template, which the paused group does not roll:
// at the uninstall, that zone has a change pending and the others none.
func pendingZoneBeforeUninstall(ctx SpecContext) {
	ns, zones := partitionsNamespace, installed.Zones("kafka")
	out, ok := kubectl(ctx, "-n", ns, "patch", "rolloutgroup", "kafka", "--type", "merge", "-p", `{"spec":{"paused":true}}`)
	Expect(ok).To(BeTrue(), out)
	// The operator has seen the pause once its status names the generation
	// (a paused group with nothing to roll stays Complete).
	Eventually(func(g Gomega) {
		group := installed.RolloutGroup(ns, "kafka", nil, nil)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(group), group)).To(Succeed())
		observed, _, _ := unstructured.NestedInt64(group.Object, "status", "observedGeneration")
		g.Expect(observed).To(Equal(group.GetGeneration()))
	}).WithContext(ctx).Should(Succeed())
	setRevision(ctx, ns, zones[:1], "3")
	Eventually(func(g Gomega) { expectPending(ctx, g, zones[0]) }).WithContext(ctx).Should(Succeed())
	expectPartitionsHeld(ctx, Default, zones)
}

// expectPending expects the StatefulSet name of namespace "partitions" to
// have a template change that rolled no pod.
func expectPending(ctx context.Context, g Gomega, name string) {
	var sts appsv1.StatefulSet
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: partitionsNamespace, Name: name}, &sts)).To(Succeed())
	g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation), "the StatefulSet controller saw the template of %s", name)
	g.Expect(sts.Status.UpdateRevision).NotTo(Equal(sts.Status.CurrentRevision))
	g.Expect(sts.Status.UpdatedReplicas).To(BeZero())
	g.Expect(sts.Status.ReadyReplicas).To(Equal(*sts.Spec.Replicas))
}

// uninstallEvents are the Events `echelon uninstall` recorded on the
// StatefulSet name of namespace "partitions", as "<reason>: <message>".
func uninstallEvents(ctx context.Context, name string) []string {
	var events corev1.EventList
	Expect(k8s.List(ctx, &events, client.InNamespace(partitionsNamespace))).To(Succeed())
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Source.Component == "echelon-uninstall" {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// partitionsAfterUninstall checks what docs/uninstall.md says of RollingUpdate
// members after helm uninstall: the zones with nothing pending handed back,
// the zone with a change pending kept, each with an Event, the group free of
// its finalizer. Then it follows the docs' steps to hand the kept one back.
func partitionsAfterUninstall(ctx SpecContext) {
	ns, zones := partitionsNamespace, installed.Zones("kafka")
	group := installed.RolloutGroup(ns, "kafka", nil, nil)
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(group), group)).To(Succeed())
	Expect(group.GetFinalizers()).NotTo(ContainElement(partitionFinalizer))

	By("the zones with nothing pending handed back: a new template rolls on its own")
	for _, z := range zones[1:] {
		var sts appsv1.StatefulSet
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: z}, &sts)).To(Succeed())
		Expect(sts.Labels).NotTo(HaveKey(partitionHolderLabel), "StatefulSet %s", z)
		Expect(ptr.Deref(sts.Spec.UpdateStrategy.RollingUpdate, appsv1.RollingUpdateStatefulSetStrategy{}).Partition).To(Or(BeNil(), HaveValue(BeZero())), "StatefulSet %s", z)
		Expect(uninstallEvents(ctx, z)).To(ConsistOf(HavePrefix("PartitionHandedBack: partition 1 handed back")))
	}
	setRevision(ctx, ns, zones[1:2], "3")
	expectRolled(ctx, zones[1])

	By("the zone with a change pending kept, rolling nothing, and saying why")
	expectPartitionsHeld(ctx, Default, zones[:1])
	expectPending(ctx, Default, zones[0])
	Expect(uninstallEvents(ctx, zones[0])).To(ConsistOf(And(HavePrefix("PartitionKept: partition 1 kept"), ContainSubstring("0 of 1 pods are on its update revision"))))

	By("its partition handed back as docs/uninstall.md says: the StatefulSet controller rolls it")
	out, ok := kubectl(ctx, "-n", ns, "patch", "statefulset", zones[0], "--type", "json",
		"-p", `[{"op":"remove","path":"/spec/updateStrategy/rollingUpdate/partition"}]`)
	Expect(ok).To(BeTrue(), out)
	out, ok = kubectl(ctx, "-n", ns, "label", "statefulset", zones[0], partitionHolderLabel+"-")
	Expect(ok).To(BeTrue(), out)
	expectRolled(ctx, zones[0])

	By("the group deleted at once: the hook removed its finalizer")
	out, ok = kubectl(ctx, "-n", ns, "delete", "rolloutgroup", "kafka", "--timeout=1m")
	Expect(ok).To(BeTrue(), out)
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	Expect(pods.Items).To(HaveLen(len(zones)), "deleting the group touched no pod")
}

// expectRolled waits for every pod of the StatefulSet name of namespace
// "partitions" to be on its update revision and Ready.
func expectRolled(ctx SpecContext, name string) {
	Eventually(func(g Gomega) {
		var sts appsv1.StatefulSet
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: partitionsNamespace, Name: name}, &sts)).To(Succeed())
		g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
		g.Expect(sts.Status.UpdatedReplicas).To(Equal(ptr.Deref(sts.Spec.Replicas, 1)), "StatefulSet %s: pods on the new revision", name)
		g.Expect(sts.Status.ReadyReplicas).To(Equal(ptr.Deref(sts.Spec.Replicas, 1)))
	}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
}
