package lookup

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// ObserveScalingPolicy reads sp's target, source and the target's
// RolloutGroup into the scaling planner's input. It is the one observation
// of a policy: the controller reads it from its cache, the kubectl plugin's
// `plan sp` from the API server (c an Unindexed client), so that the dry run
// plans on what the controller would see. live tells a missing object from
// a missing scale subresource. watch, when not nil, is called with each kind
// whose scale subresource is read (a source resource, a guarded target), so
// that the controller can watch it.
func ObserveScalingPolicy(ctx context.Context, c client.Client, live client.Reader, watch func(context.Context, schema.GroupVersionKind) error,
	sp *v1alpha1.ScalingPolicy, now time.Time) (ScalingObservation, error) {
	if watch == nil {
		watch = func(context.Context, schema.GroupVersionKind) error { return nil }
	}
	o := &scalingObserver{c: c, live: live, watch: watch, now: now}
	return o.observe(ctx, sp)
}

// scalingObserver carries one observation's readers.
type scalingObserver struct {
	c     client.Client
	live  client.Reader
	watch func(context.Context, schema.GroupVersionKind) error
	now   time.Time
}

// ScalingObservation is what ObserveScalingPolicy read: the planner's input
// and the objects the controller acts on.
type ScalingObservation struct {
	In scaling.Input
	// Target is the target StatefulSet as read, nil when missing.
	Target *appsv1.StatefulSet
	// Resource is the source resource (resource mode), and ResourceScale its
	// scale subresource as read, for write-back.
	Resource      *unstructured.Unstructured
	ResourceScale *autoscalingv1.Scale
	// GuardedSelector is a guarded Deployment's or ReplicaSet's pod selector,
	// from its scale subresource.
	GuardedSelector string
	// Group is the RolloutGroup that claims the target, nil when none.
	Group *v1alpha1.RolloutGroup
}

// observe reads the target, the source and the target's RolloutGroup. The
// target, a leader, other policies and groups come from c (the controller's
// cache); a resource's scale subresource is read from the API server, as it
// cannot be cached.
func (o *scalingObserver) observe(ctx context.Context, sp *v1alpha1.ScalingPolicy) (ScalingObservation, error) {
	var obs ScalingObservation
	in := &obs.In
	in.Now = o.now
	in.Paused = sp.Spec.Paused
	in.Force = sp.Spec.ForceReplicas
	in.UpscaleOnlyWhenLeaderReady = sp.Spec.UpscaleOnlyWhenLeaderReady
	if d := sp.Spec.MinTimeBetweenZoneDownscales; d != nil {
		in.ZoneDelay = d.Duration
	}
	if sp.Status.Phase == v1alpha1.ScalingPhaseStable {
		settled := sp.Status.Replicas
		in.SettledAt = &settled
	}

	if !sp.Spec.TargetRef.IsStatefulSet() {
		return obs, o.observeGuardedTarget(ctx, sp, &obs)
	}
	target, err := StatefulSet(ctx, o.c, sp.Namespace, sp.Spec.TargetRef.Name)
	if err != nil {
		return obs, err
	}
	obs.Target = target
	if target != nil {
		in.Target = &scaling.Target{Name: target.Name, Replicas: kube.Replicas(target),
			StatusReplicas: target.Status.Replicas, ReadyReplicas: target.Status.ReadyReplicas}
	}

	others, err := PoliciesForTarget(ctx, o.c, sp.Namespace, v1alpha1.TargetKindStatefulSet, sp.Spec.TargetRef.Name)
	if err != nil {
		return obs, err
	}
	in.ClaimedBy = otherPolicies(sp, others)

	if err := o.observeSource(ctx, sp, &obs); err != nil {
		return obs, err
	}
	if target != nil {
		if err := o.observeGroup(ctx, target, &obs); err != nil {
			return obs, err
		}
		if err := o.observeDelayed(ctx, sp, target, in); err != nil {
			return obs, err
		}
	}
	return obs, nil
}

// otherPolicies names the policies of others that are not sp, sorted.
func otherPolicies(sp *v1alpha1.ScalingPolicy, others []v1alpha1.ScalingPolicy) []string {
	var names []string
	for _, other := range others {
		if other.UID != sp.UID {
			names = append(names, other.Name)
		}
	}
	slices.Sort(names)
	return names
}

// observeGuardedTarget observes a Deployment or ReplicaSet target, which the
// policy only guards: its replicas, read through its scale subresource (so no
// informer of every Deployment or ReplicaSet is needed beyond a metadata
// watch, which wakes the policy when the target's replicas change).
func (o *scalingObserver) observeGuardedTarget(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs *ScalingObservation) error {
	in := &obs.In
	in.Source.Kind = scaling.SourceNone
	ref := sp.Spec.TargetRef
	gvk := appsv1.SchemeGroupVersion.WithKind(ref.Kind)
	if err := o.watch(ctx, gvk); err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(sp.Namespace)
	obj.SetName(ref.Name)
	raw := &unstructured.Unstructured{}
	if err := o.c.SubResource("scale").Get(ctx, obj, raw); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // in.Target stays nil: TargetNotFound
		}
		return fmt.Errorf("read the scale subresource of %s %s: %w", ref.Kind, ref.Name, err)
	}
	scale := &autoscalingv1.Scale{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw.Object, scale); err != nil {
		return fmt.Errorf("decode the scale subresource of %s %s: %w", ref.Kind, ref.Name, err)
	}
	in.Target = &scaling.Target{Name: ref.Name, Replicas: scale.Spec.Replicas, StatusReplicas: scale.Status.Replicas, ReadyReplicas: scale.Status.Replicas}
	others, err := o.policiesFor(ctx, sp.Namespace, ref.Kind, ref.Name)
	if err != nil {
		return err
	}
	in.ClaimedBy = otherPolicies(sp, others)
	obs.GuardedSelector = scale.Status.Selector
	return nil
}

// observeDelayed sets the floor a DelayedDownscale of the target puts under
// downscales. Its status counts only when it speaks of the present: the
// target's current replicas and the policy's current desired count, for its
// current spec. Otherwise (it has not caught up yet) the floor is the current
// replicas: no downscale until it has.
func (o *scalingObserver) observeDelayed(ctx context.Context, sp *v1alpha1.ScalingPolicy, target *appsv1.StatefulSet, in *scaling.Input) error {
	items, err := DelayedFor(ctx, o.c, target.Namespace, target.Name)
	if err != nil || len(items) == 0 {
		return err
	}
	dd := items[0]
	current := kube.Replicas(target)
	floor := current
	st := dd.Status
	if st.ObservedGeneration == dd.Generation && st.Replicas == current && st.EligibleReplicas != nil &&
		st.DesiredReplicas != nil && sp.Status.DesiredReplicas != nil && *st.DesiredReplicas == *sp.Status.DesiredReplicas {
		floor = *st.EligibleReplicas
	}
	in.Floor, in.FloorSource = &floor, dd.Name
	return nil
}

// observeSource reads the desired replicas from the policy's source.
func (o *scalingObserver) observeSource(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs *ScalingObservation) error {
	src := &obs.In.Source
	switch from := sp.Spec.ReplicasFrom; {
	case from == nil && sp.Spec.Replicas == nil:
		src.Kind, src.Name = scaling.SourceNone, "none"
	case from == nil:
		src.Kind, src.Name, src.Replicas = scaling.SourceSelf, "spec.replicas", sp.Spec.Replicas
	case from.Leader != nil:
		src.Kind, src.Name = scaling.SourceLeader, "leader "+from.Leader.Name
		leader, err := StatefulSet(ctx, o.c, sp.Namespace, from.Leader.Name)
		if err != nil {
			return err
		}
		if leader == nil {
			src.Problem, src.ProblemReason = fmt.Sprintf("leader StatefulSet %s does not exist", from.Leader.Name), v1alpha1.ScalingReasonSourceNotFound
			return nil
		}
		replicas := kube.Replicas(leader)
		src.Replicas = &replicas
		src.LeaderReady = kube.StatefulSetReady(leader)
	case from.Resource != nil:
		return o.observeResource(ctx, sp, from.Resource, obs)
	}
	return nil
}

// observeResource reads the replicas of a resource's scale subresource, and
// tells apart the reasons it cannot: an unknown kind, a missing object, an
// object without a scale subresource, or no permission.
func (o *scalingObserver) observeResource(ctx context.Context, sp *v1alpha1.ScalingPolicy, ref *v1alpha1.ScaleResourceReference, obs *ScalingObservation) error {
	src := &obs.In.Source
	src.Kind, src.Name = scaling.SourceResource, ref.Kind+" "+ref.Name
	unreadable := func(format string, args ...any) error {
		src.Problem, src.ProblemReason = fmt.Sprintf(format, args...), v1alpha1.ScalingReasonSourceUnreadable
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return unreadable("spec.replicasFrom.resource.apiVersion %q is not a valid API version: %v", ref.APIVersion, err)
	}
	gvk := gv.WithKind(ref.Kind)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(sp.Namespace)
	obj.SetName(ref.Name)
	scale := &autoscalingv1.Scale{}
	// The client reads an unstructured object's subresource into an unstructured object only.
	raw := &unstructured.Unstructured{}
	if err = o.c.SubResource("scale").Get(ctx, obj, raw); err == nil {
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(raw.Object, scale)
	}
	switch {
	case err == nil:
	case meta.IsNoMatchError(err):
		return unreadable("the API server serves no kind %s in %s", ref.Kind, ref.APIVersion)
	case apierrors.IsForbidden(err):
		return unreadable("the operator may not read the scale subresource of %s %s: grant it get on that resource's scale subresource (%s)", ref.Kind, ref.Name, kube.APIMessage(err))
	case apierrors.IsNotFound(err):
		// Either the object or its scale subresource is missing: ask for the object.
		probe := &metav1.PartialObjectMetadata{}
		probe.SetGroupVersionKind(gvk)
		if getErr := o.live.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: ref.Name}, probe); getErr == nil {
			return unreadable("%s %s has no scale subresource", ref.Kind, ref.Name)
		}
		src.Problem, src.ProblemReason = fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name), v1alpha1.ScalingReasonSourceNotFound
		return nil
	default:
		return fmt.Errorf("read the scale subresource of %s %s: %w", ref.Kind, ref.Name, err)
	}
	src.Replicas = &scale.Spec.Replicas
	obs.Resource, obs.ResourceScale = obj, scale
	return o.watch(ctx, gvk)
}

// observeGroup reads the RolloutGroup that claims the target, if any, and
// its other members' last downscales. The group's disruption budget is asked
// only for a downscale the plan would make (see disruption.go).
func (o *scalingObserver) observeGroup(ctx context.Context, target *appsv1.StatefulSet, obs *ScalingObservation) error {
	rg, err := ClaimingGroup(ctx, o.c, target)
	if err != nil || rg == nil {
		return err
	}
	obs.Group = rg
	obs.In.Group, err = DownscaleGroupOf(ctx, o.c, rg, target)
	return err
}

// StatefulSet reads the StatefulSet namespace/name from c, nil when it does
// not exist.
func StatefulSet(ctx context.Context, c client.Reader, namespace, name string) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get StatefulSet %s: %w", name, err)
	}
	return sts, nil
}

func (o *scalingObserver) policiesFor(ctx context.Context, namespace, kind, name string) ([]v1alpha1.ScalingPolicy, error) {
	return PoliciesForTarget(ctx, o.c, namespace, kind, name)
}
