package integration

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

// scaleTo writes replicas through the scale subresource, as kubectl scale does.
func scaleTo(ctx context.Context, c client.Client, obj client.Object, replicas int32, opts ...client.SubResourceUpdateOption) error {
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	return c.SubResource("scale").Update(ctx, obj, append(opts, client.WithSubResourceBody(scale))...)
}

// TestNoDownscale: the API server refuses, through the webhook, a decrease of
// a guarded StatefulSet's or Deployment's replicas, by a spec update or
// through /scale, naming the policy; growth passes; a denial is a Warning
// Event on the workload; a policy that only guards lets nobody pass, not even
// the operator's user with the ScalingPolicy controller's field manager.
func TestNoDownscale(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	sts := builders.MakeStatefulSet(ns, "ingester-zone-a").Replicas(5).Obj()
	deploy := deployment(ns, "gateway", 4)
	guard := builders.MakeScalingPolicy(ns, "ingester-zone-a-scaling").Target(v1alpha1.TargetKindStatefulSet, sts.Name).DownscaleAllowed(false).Obj()
	deployGuard := builders.MakeScalingPolicy(ns, "gateway-guard").Target(v1alpha1.TargetKindDeployment, deploy.Name).DownscaleAllowed(false).Obj()
	for _, obj := range []client.Object{sts, deploy, guard, deployGuard} {
		g.Expect(e.admin.Create(ctx, obj)).To(Succeed())
	}
	e.waitForCache(t, guard, deployGuard)

	// For a StatefulSet the mutating prepare-downscale webhook, called first,
	// refuses it already, so that no pod is prepared for it; the message is
	// the same.
	err := scaleTo(ctx, e.admin, sts, 3)
	g.Expect(err).To(MatchError(And(
		MatchRegexp(`admission webhook "(prepare|no)-downscale.echelon.dev" denied the request`),
		ContainSubstring("downscale of StatefulSet ingester-zone-a from 5 to 3 denied: ScalingPolicy ingester-zone-a-scaling sets spec.downscale.allowed: false"))))

	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
	sts.Spec.Replicas = ptr.To[int32](2)
	g.Expect(e.admin.Update(ctx, sts)).To(MatchError(ContainSubstring("ScalingPolicy ingester-zone-a-scaling")))
	g.Expect(scaleTo(ctx, e.admin, sts, 7)).To(Succeed(), "growth is allowed")

	g.Expect(scaleTo(ctx, e.admin, deploy, 1)).To(MatchError(And(
		ContainSubstring(`admission webhook "no-downscale.echelon.dev" denied the request`),
		ContainSubstring("downscale of Deployment gateway from 4 to 1 denied: ScalingPolicy gateway-guard"))))
	g.Expect(scaleTo(ctx, e.admin, deploy, 6)).To(Succeed())

	// Only the operator's user with the controller's field manager passes.
	patch := func(c client.Client, replicas int32, opts ...client.PatchOption) error {
		cur := &appsv1.StatefulSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sts), cur); err != nil {
			return err
		}
		next := cur.DeepCopy()
		next.Spec.Replicas = ptr.To(replicas)
		return c.Patch(ctx, next, client.MergeFrom(cur), opts...)
	}
	g.Expect(patch(e.admin, 6, client.FieldOwner(lookup.ScalingPolicyFieldManager))).To(MatchError(ContainSubstring("denied")),
		"the admin naming the controller's field manager")
	g.Expect(patch(e.operator, 6)).To(MatchError(ContainSubstring("denied")), "the operator's user under another field manager")
	// This policy only guards: the ScalingPolicy controller never writes its
	// target, so not even its user and field manager pass
	// (TestScalingPolicyOwnDownscale has a policy that scales).
	g.Expect(patch(e.operator, 6, client.FieldOwner(lookup.ScalingPolicyFieldManager))).To(MatchError(ContainSubstring("denied")),
		"the operator's user and the controller's field manager, for a guard-only policy")

	// The Events name the workloads by UID too; a Scale carries its parent's.
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
	g.Eventually(func() []string {
		var events eventsv1.EventList
		g.Expect(e.admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var got []string
		for _, ev := range events.Items {
			if ev.Type == "Warning" && ev.Reason == webhooks.EventReasonDownscaleDenied {
				got = append(got, ev.Regarding.Kind+"/"+ev.Regarding.Name+"/"+string(ev.Regarding.UID))
			}
		}
		slices.Sort(got)
		return slices.Compact(got)
	}, 10*time.Second, 100*time.Millisecond).Should(Equal([]string{
		"Deployment/gateway/" + string(deploy.UID),
		"StatefulSet/ingester-zone-a/" + string(sts.UID),
	}))
}

// TestScalingPolicyOwnDownscale: the ScalingPolicy controller's own downscale
// of a StatefulSet its policy forbids anyone else to downscale goes through
// the API server's webhooks.
func TestScalingPolicyOwnDownscale(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	sts := builders.MakeStatefulSet(ns, "store").Replicas(4).Obj()
	own := builders.MakeScalingPolicy(ns, "store").Target(v1alpha1.TargetKindStatefulSet, sts.Name).Replicas(4).DownscaleAllowed(false).Obj()
	g.Expect(e.admin.Create(ctx, sts)).To(Succeed())
	g.Expect(e.admin.Create(ctx, own)).To(Succeed())
	e.waitForCache(t, own)
	g.Expect(scaleTo(ctx, e.admin, sts, 3)).To(MatchError(ContainSubstring("ScalingPolicy store sets spec.downscale.allowed: false")))

	g.Expect(scaleTo(ctx, e.admin, own, 2)).To(Succeed(), "the policy's own scale subresource")
	g.Eventually(func() int32 {
		g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
		return ptr.Deref(sts.Spec.Replicas, -1)
	}, 20*time.Second, 100*time.Millisecond).Should(Equal(int32(2)))
}

// TestPrepareDownscale: kubectl scale of a StatefulSet whose policy prepares
// downscales reaches each removed pod before the API server admits it, and
// the policy records when; a dry run calls nobody; a pod that refuses denies
// the downscale, naming it, and the pods that prepared are told to cancel.
func TestPrepareDownscale(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	sts, prep, pods := e.preparingStatefulSet(t, ns, 1)
	g.Expect(scaleTo(ctx, e.admin, sts, 2, client.DryRunAll)).To(Succeed())
	g.Expect(pods.DistinctCalls()).To(BeEmpty(), "a dry run calls no pod")

	g.Expect(scaleTo(ctx, e.admin, sts, 3)).To(Succeed())
	g.Expect(pods.DistinctCalls()).To(Equal([]string{"POST ingester-3", "POST ingester-4"}))
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(prep), prep)).To(Succeed())
	g.Expect(prep.Status.LastDownscaleTime).NotTo(BeNil(), "the downscale is recorded where the ScalingPolicy controller reads it")
	g.Expect(time.Since(prep.Status.LastDownscaleTime.Time)).To(BeNumerically("<", time.Minute))

	pods.Reset()
	pods.Answer(http.MethodPost, "ingester-1", webhookstest.Status(http.StatusServiceUnavailable, "ingester is not ACTIVE"))
	err := scaleTo(ctx, e.admin, sts, 1)
	g.Expect(err).To(MatchError(And(
		ContainSubstring(`admission webhook "prepare-downscale.echelon.dev" denied the request`),
		ContainSubstring(`pod ingester-1 did not prepare: POST answered 503: "ingester is not ACTIVE"`),
		ContainSubstring("told the prepared pods ingester-2 to cancel"))))
	g.Expect(pods.DistinctCalls()).To(Equal([]string{"DELETE ingester-2", "POST ingester-1", "POST ingester-2"}))
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
	g.Expect(*sts.Spec.Replicas).To(Equal(int32(3)), "the denied downscale did not happen")
}

// TestValidate: the API server refuses a RolloutGroup claiming another
// group's StatefulSet and a ScalingPolicy for a target that has one, naming
// the field.
func TestValidate(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()

	first := builders.MakeRolloutGroup(ns, "ingester").Members("zone-a", "zone-b").Obj()
	g.Expect(e.admin.Create(ctx, first)).To(Succeed())
	e.waitForCache(t, first)
	second := builders.MakeRolloutGroup(ns, "other").Members("zone-c", "zone-b").Obj()
	g.Expect(e.admin.Create(ctx, second)).To(MatchError(And(
		ContainSubstring(`admission webhook "validate.echelon.dev" denied the request`),
		ContainSubstring(`spec.statefulSets[1].name: Invalid value: "zone-b": StatefulSet zone-b is already a member of RolloutGroup ingester`))))
	second.Spec.StatefulSets = second.Spec.StatefulSets[:1]
	g.Expect(e.admin.Create(ctx, second)).To(Succeed())

	b1 := builders.MakeScalingPolicy(ns, "b1").Target(v1alpha1.TargetKindStatefulSet, "zone-b").Obj()
	g.Expect(e.admin.Create(ctx, b1)).To(Succeed())
	e.waitForCache(t, b1)
	g.Expect(e.admin.Create(ctx, builders.MakeScalingPolicy(ns, "b2").Target("", "zone-b").Obj())).To(MatchError(ContainSubstring("spec.targetRef.name: Invalid value: \"zone-b\": StatefulSet zone-b is already the target of ScalingPolicy b1")))
	g.Expect(e.admin.Create(ctx, builders.MakeScalingPolicy(ns, "c").Target("", "zone-c").Obj())).To(Succeed(), "a policy for a free target")
}

// TestValidateZoneBudgets: the API server refuses a ZoneDisruptionBudget, or
// a RolloutGroup's disruptionBudget, whose partition regex Go cannot
// compile, naming the field.
func TestValidateZoneBudgets(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	bad := builders.MakeZoneBudget().Partitions(`^ingester-zone-[a-z]-(\d+$`)
	g.Expect(e.admin.Create(ctx, builders.MakeZoneDisruptionBudget(ns, "store", "app", "store", bad))).To(MatchError(And(
		ContainSubstring(`admission webhook "validate.echelon.dev" denied the request`),
		ContainSubstring(`spec.podNamePartitionRegex: Invalid value: "^ingester-zone-[a-z]-(\\d+$": error parsing regexp: missing closing )`))))
	g.Expect(e.admin.Create(ctx, builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a").DisruptionBudget(bad).Obj())).To(MatchError(
		ContainSubstring(`spec.disruptionBudget.podNamePartitionRegex: Invalid value`)))
	g.Expect(e.admin.Create(ctx, builders.MakeZoneDisruptionBudget(ns, "store", "app", "store", builders.MakeZoneBudget().Partitions(`-(\d+)$`)))).To(Succeed())
}
