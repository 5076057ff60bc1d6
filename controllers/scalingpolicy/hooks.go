package scalingpolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// hookRetryInterval is how soon a downscale a failed hook holds
// (failurePolicy Fail) calls it again.
const hookRetryInterval = 10 * time.Second

// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch

// beforeDownscale calls the beforePodRemoval hook of each pod the planned
// downscale removes, concurrently, with reason downscale. Under failurePolicy
// Fail the downscale shrinks the StatefulSet only past the pods above the
// highest one whose call failed (none when that is the top pod), and held is
// true; the plan's message names the pods held.
func (r *Reconciler) beforeDownscale(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs observation, plan scaling.Plan) (_ scaling.Plan, held bool) {
	if !isDownscale(plan) || obs.Target == nil || sp.Spec.Hooks == nil || !hooks.Applies(sp.Spec.Hooks.BeforePodRemoval, v1alpha1.RemovalDownscale) {
		return plan, false
	}
	h := sp.Spec.Hooks.BeforePodRemoval
	sts := obs.Target
	s := hooks.SettingsOf(h.HookPolicy)
	reason := string(v1alpha1.RemovalDownscale)
	errs := map[string]error{}
	fail := func(name string, err error) {
		errs[name] = err
		metrics.HookCalls.WithLabelValues(hooks.BeforePodRemoval, reason, "error").Inc()
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	var pods corev1.PodList
	if err == nil {
		err = r.List(ctx, &pods, client.InNamespace(sts.Namespace), client.MatchingLabelsSelector{Selector: sel})
	}
	start := podname.Start(sts)
	lo, hi := podname.Removed(start, plan.Current, *plan.Scale)
	if err != nil {
		// Which pods go is unknown: every ordinal is held.
		for ord := lo; ord < hi; ord++ {
			fail(fmt.Sprintf("%s-%d", sts.Name, ord), fmt.Errorf("list the pods of StatefulSet %s: %w", sts.Name, err))
		}
	}
	group := ""
	if obs.Group != nil {
		group = obs.Group.Name
	}
	endpointTLS, tlsErr := httptls.Load(ctx, r.tlsObjects, sp.Namespace, h.Endpoint.TLS, "spec.hooks.beforePodRemoval.endpoint.tls")
	ordinals := map[string]int{}
	var names []string
	var calls []hooks.Call
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		ord, ok := podname.Ordinal(sts.Name, pod.Name)
		if !ok || ord < lo || ord >= hi || pod.DeletionTimestamp != nil {
			continue
		}
		ordinals[pod.Name], byName[pod.Name] = ord, pod
		names = append(names, pod.Name)
		if r.hooksDone.Done(pod.UID) {
			continue
		}
		host, why := r.podHost(pod, sts.Spec.ServiceName)
		if why == "" && tlsErr != nil {
			why = tlsErr.Error()
		}
		if why != "" {
			fail(pod.Name, fmt.Errorf("pod %s cannot be called: %s", pod.Name, why))
			continue
		}
		payload := hooks.RemovalPayload{Reason: v1alpha1.RemovalDownscale, Pod: pod.Name, Namespace: pod.Namespace, Group: group,
			Member: sts.Name, Revision: pod.Labels[appsv1.ControllerRevisionHashLabelKey]}
		calls = append(calls, hooks.Call{Key: pod.Name, URL: hooks.RemovalURL(h.Endpoint, host, payload), Body: payload, TLS: endpointTLS})
	}
	for name := range errs {
		if ord, ok := podname.Ordinal(sts.Name, name); ok {
			ordinals[name] = ord
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	var called []string
	for name, res := range r.hookCaller.Do(egress.WithField(ctx, "spec.hooks.beforePodRemoval.endpoint"), hooks.BeforePodRemoval, reason, s, calls) {
		if res.Err != nil {
			errs[name] = res.Err
			continue
		}
		r.hooksDone.Mark(byName[name].UID, r.now())
		called = append(called, name)
	}
	slices.Sort(names)
	v := hooks.Decide(s.FailurePolicy, names, errs)
	if len(called) > 0 {
		slices.Sort(called)
		r.events.Eventf(sp, sts, corev1.EventTypeNormal, "HookCalled", "CallHook", "beforePodRemoval (reason downscale) called for %d pods: %s",
			len(called), strings.Join(called, ", "))
	}
	for _, pod := range slices.Sorted(maps.Keys(v.Ignored)) {
		r.events.Eventf(sp, sts, corev1.EventTypeWarning, v1alpha1.ReasonHookFailed, "CallHook",
			"beforePodRemoval (reason downscale) of pod %s failed, ignored (failurePolicy Ignore): %s", pod, v.Ignored[pod])
	}
	if len(v.Held) == 0 {
		return plan, false
	}
	highest := -1
	for _, pod := range slices.Sorted(maps.Keys(v.Held)) {
		highest = max(highest, ordinals[pod])
		r.events.Eventf(sp, sts, corev1.EventTypeWarning, v1alpha1.ReasonHookFailed, "CallHook",
			"pod %s not removed: beforePodRemoval (reason downscale) failed (failurePolicy Fail), called again in %s: %s", pod, hookRetryInterval, v.Held[pod])
	}
	keep := int32(highest) - start + 1
	if keep >= plan.Current {
		plan.Scale = nil
	} else {
		plan.Scale = &keep
	}
	plan.Message += fmt.Sprintf("; beforePodRemoval holds %s", strings.Join(slices.Sorted(maps.Keys(v.Held)), ", "))
	return plan, true
}

// WithAddressing sets how the beforePodRemoval hook reaches pods (the
// --pod-address and --cluster-domain flags).
func (r *Reconciler) WithAddressing(a podcall.Addressing) *Reconciler {
	r.podHost = a.Host
	return r
}
