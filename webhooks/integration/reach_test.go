package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestOnlyDownscalesReachTheDownscaleWebhooks: a rollout's partition write,
// a template change and an upscale of a guarded StatefulSet, by a spec
// update or through /scale, never reach the no-downscale and
// prepare-downscale webhooks (their matchConditions keep them out), so a
// rollout pays for no webhook call on each partition write; a downscale
// still does, and is refused.
func TestOnlyDownscalesReachTheDownscaleWebhooks(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	sts := builders.MakeStatefulSet(ns, "ingester-zone-a").Replicas(5).RollingUpdate().Partition(5).Obj()
	guard := builders.MakeScalingPolicy(ns, "ingester-zone-a-scaling").Target(v1alpha1.TargetKindStatefulSet, sts.Name).DownscaleAllowed(false).Obj()
	for _, obj := range []client.Object{sts, guard} {
		g.Expect(e.admin.Create(ctx, obj)).To(Succeed())
	}
	e.waitForCache(t, guard)

	reached := func() float64 {
		var n float64
		for _, webhook := range []string{metrics.WebhookNoDownscale, metrics.WebhookPrepareDownscale} {
			n += testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, metrics.DecisionAllowed, "not-a-decrease"))
		}
		return n
	}
	before := reached()

	update := func(what string, change func(*appsv1.StatefulSet)) {
		t.Helper()
		g.Expect(patchStatefulSet(ctx, e.admin, sts, change)).Error().NotTo(HaveOccurred(), what)
	}
	update("a partition lowered", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](3) })
	update("a template change", func(s *appsv1.StatefulSet) {
		s.Spec.Template.Annotations = map[string]string{"example.com/version": "2"}
	})
	update("an upscale by a spec update", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](6) })
	g.Expect(scaleTo(ctx, e.admin, sts, 7)).To(Succeed(), "an upscale through /scale")
	g.Expect(scaleTo(ctx, e.admin, sts, 7)).To(Succeed(), "/scale to the same size")

	g.Expect(reached()-before).To(BeZero(), "writes that lower no replicas reached the downscale webhooks")

	g.Expect(scaleTo(ctx, e.admin, sts, 4)).To(MatchError(ContainSubstring("ScalingPolicy ingester-zone-a-scaling sets spec.downscale.allowed: false")),
		"a downscale still reaches them")
}

// TestTemplateChangeHoldsThePartition: the API server stores a template
// change of a StatefulSet whose partition a RolloutGroup holds with its
// partition raised to its replicas, so that the StatefulSet controller rolls
// none of its pods before the group releases them; the group's own
// partition writes, and a StatefulSet no group holds, are left as written.
func TestTemplateChangeHoldsThePartition(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	held := builders.MakeStatefulSet(ns, "ingester-zone-a").Replicas(3).RollingUpdate().Partition(0).
		Label(v1alpha1.PartitionHolderLabel, "uid-of-the-group").Obj()
	free := builders.MakeStatefulSet(ns, "cache").Replicas(3).RollingUpdate().Partition(0).Obj()
	for _, obj := range []client.Object{held, free} {
		g.Expect(e.admin.Create(ctx, obj)).To(Succeed())
	}
	update := func(sts *appsv1.StatefulSet, change func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		t.Helper()
		stored, err := patchStatefulSet(ctx, e.admin, sts, change)
		g.Expect(err).NotTo(HaveOccurred())
		return stored
	}
	partition := func(sts *appsv1.StatefulSet) int32 { return *sts.Spec.UpdateStrategy.RollingUpdate.Partition }
	newTemplate := func(version string) func(*appsv1.StatefulSet) {
		return func(s *appsv1.StatefulSet) {
			s.Spec.Template.Annotations = map[string]string{"example.com/version": version}
		}
	}

	g.Expect(partition(update(held, newTemplate("2")))).To(Equal(int32(3)), "a template change of a held member")
	g.Expect(partition(update(held, func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1) }))).To(Equal(int32(1)),
		"the group's partition write, which changes no template")
	g.Expect(partition(update(held, func(s *appsv1.StatefulSet) {
		newTemplate("3")(s)
		s.Spec.Replicas = ptr.To[int32](5)
	}))).To(Equal(int32(5)), "a template change with an upscale, in the middle of a release")
	g.Expect(partition(update(free, newTemplate("2")))).To(BeZero(), "a StatefulSet no group holds")
}

// patchStatefulSet reads sts, applies change to it and patches the
// difference; it returns the object as the API server stored it, after
// the mutating webhooks.
func patchStatefulSet(ctx context.Context, c client.Client, sts *appsv1.StatefulSet, change func(*appsv1.StatefulSet)) (*appsv1.StatefulSet, error) {
	cur := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sts), cur); err != nil {
		return nil, err
	}
	next := cur.DeepCopy()
	change(next)
	if err := c.Patch(ctx, next, client.MergeFrom(cur)); err != nil {
		return nil, err
	}
	return next, nil
}
