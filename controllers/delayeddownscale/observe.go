package delayeddownscale

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/delayed"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/podname"
)

// observation is what a pass read: the planner's input, and how to
// reach each pod.
type observation struct {
	in delayed.Input
	// urls are the prepare endpoint of each addressable pod, by name.
	urls map[string]string
	// problem, with its reason, says why the downscale cannot be worked on.
	problem, problemReason string
}

// observe reads the target, its pods and the desired replicas of the
// ScalingPolicy that targets it, all from the cache.
func (r *Reconciler) observe(ctx context.Context, dd *v1alpha1.DelayedDownscale) (observation, error) {
	obs := observation{urls: map[string]string{}}
	in := &obs.in
	in.Now = r.now()
	in.NamePrefix = dd.Spec.TargetRef.Name
	delay, err := model.ParseDuration(dd.Spec.Delay)
	if err != nil {
		obs.problem, obs.problemReason = fmt.Sprintf("spec.delay %q is not a duration: %v", dd.Spec.Delay, err), v1alpha1.DelayedReasonPodErrors
		return obs, nil
	}
	in.Delay = time.Duration(delay)
	for _, p := range dd.Status.PreparedPods {
		rec := delayed.Record{Name: p.Name, UID: p.UID, Err: p.Error}
		if p.PreparedAt != nil {
			rec.PreparedAt = p.PreparedAt.Time
		}
		in.Previous = append(in.Previous, rec)
	}
	for _, p := range dd.Status.CancellingPods {
		c := delayed.CancelRetry{Name: p.Name, UID: p.UID, Attempts: p.Attempts, Err: p.Error}
		if p.NextAttemptTime != nil {
			c.Next = p.NextAttemptTime.Time
		}
		in.Cancelling = append(in.Cancelling, c)
	}
	if t := dd.Status.EarliestDownscaleTime; t != nil {
		in.EarliestEligible = t.Time
	}

	// Two DelayedDownscales of one StatefulSet would each prepare pods on
	// their own clock, and the ScalingPolicy would follow either: all of
	// them are blocked until one is left. (The validation webhook refuses
	// the second, but only as far as its cache knows.)
	others, err := lookup.DelayedFor(ctx, r.Client, dd.Namespace, dd.Spec.TargetRef.Name)
	if err != nil {
		return obs, err
	}
	if names := otherNames(others, dd.Name); len(names) > 0 {
		obs.problem, obs.problemReason = fmt.Sprintf("StatefulSet %s is also the target of DelayedDownscale %s: a StatefulSet has one DelayedDownscale at most",
			dd.Spec.TargetRef.Name, strings.Join(names, ", ")), v1alpha1.DelayedReasonTargetClaimedByOther
		return obs, nil
	}

	target := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: dd.Namespace, Name: dd.Spec.TargetRef.Name}, target); err != nil {
		if client.IgnoreNotFound(err) == nil {
			obs.problem, obs.problemReason = fmt.Sprintf("StatefulSet %s does not exist", dd.Spec.TargetRef.Name), v1alpha1.DelayedReasonTargetNotFound
			return obs, nil
		}
		return obs, fmt.Errorf("get StatefulSet %s: %w", dd.Spec.TargetRef.Name, err)
	}
	in.Current, in.OrdinalStart = kube.Replicas(target), podname.Start(target)

	policies, err := lookup.PoliciesForTarget(ctx, r.Client, dd.Namespace, v1alpha1.TargetKindStatefulSet, target.Name)
	if err != nil {
		return obs, err
	}
	for i := range policies {
		desired, current := policyDesired(&policies[i])
		if !current {
			// Its status is of an earlier spec (a pass not made yet, or one
			// whose action failed): no new desired replicas, but no end of
			// the downscale either, which would cancel every prepared pod.
			desired = dd.Status.DesiredReplicas
		}
		in.Desired = desired
	}
	if len(policies) == 0 {
		obs.problem, obs.problemReason = fmt.Sprintf("no ScalingPolicy targets StatefulSet %s: it alone says the desired replicas, and shrinks the StatefulSet", target.Name), v1alpha1.DelayedReasonNoScalingPolicy
	}

	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(dd.Namespace), client.MatchingFields{lookup.IndexPodOwner: target.Name}); err != nil {
		return obs, fmt.Errorf("list pods of StatefulSet %s: %w", target.Name, err)
	}
	in.Pods = map[string]delayed.Pod{}
	for _, pod := range kube.ControlledBy(pods.Items, target) {
		if pod.DeletionTimestamp != nil {
			continue
		}
		ordinal, ok := podname.Ordinal(target.Name, pod.Name)
		if !ok {
			continue // not named as a pod of the StatefulSet
		}
		host, addrErr := r.config.Host(pod, target.Spec.ServiceName)
		p := delayed.Pod{Name: pod.Name, UID: string(pod.UID), Ordinal: ordinal, AddressError: addrErr}
		if addrErr == "" {
			obs.urls[pod.Name] = dd.Spec.PrepareEndpoint.URL(host)
		}
		in.Pods[pod.Name] = p
	}
	return obs, nil
}

// policyDesired is the desired replicas a ScalingPolicy's status gives, and
// whether that status is of its current spec.
func policyDesired(p *v1alpha1.ScalingPolicy) (desired *int32, current bool) {
	return p.Status.DesiredReplicas, p.Status.ObservedGeneration == p.Generation
}

// otherNames names, sorted, the DelayedDownscales in dds other than self.
func otherNames(dds []v1alpha1.DelayedDownscale, self string) []string {
	var names []string
	for _, dd := range dds {
		if dd.Name != self {
			names = append(names, dd.Name)
		}
	}
	slices.Sort(names)
	return names
}

// targets are the pods to call, with their URLs and the endpoint's tls;
// pods that cannot be reached answer at once with why, and so do all of
// them when the endpoint's tls block could not be read (tlsErr).
func (obs observation) targets(names []string, endpointTLS *httptls.Material, tlsErr error) ([]podcall.Target, map[string]podcall.Result) {
	var targets []podcall.Target
	unreachable := map[string]podcall.Result{}
	for _, name := range names {
		u, addressable := obs.urls[name]
		pod, exists := obs.in.Pods[name]
		switch {
		case addressable && tlsErr != nil:
			unreachable[name] = podcall.Result{Err: tlsErr}
		case addressable:
			targets = append(targets, podcall.Target{Pod: name, URL: u, TLS: endpointTLS})
		case exists:
			unreachable[name] = podcall.Result{Err: fmt.Errorf("%s", pod.AddressError)}
		}
	}
	return targets, unreachable
}
