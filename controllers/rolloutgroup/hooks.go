package rolloutgroup

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// hookRetryInterval is how soon a group a failed hook holds (failurePolicy
// Fail) calls it again. Hook endpoints are not watched, so this is polled.
const hookRetryInterval = 10 * time.Second

// hookPass is what the hooks of one pass decided.
type hookPass struct {
	// heldPods are the pods of the batch a beforePodRemoval call holds, with
	// the error of each.
	heldPods map[string]string
	// heldMember names the member whose hook holds the group, with the error.
	heldMember, memberError string
	// records are the member hook records to write; nil when the group has no
	// member hook.
	records []v1alpha1.MemberHookStatus
	// configured is true when the group has any hook: the HookFailed
	// condition is then kept.
	configured bool
}

func (h hookPass) holding() bool { return len(h.heldPods) > 0 || h.heldMember != "" }

// message names what the hooks hold, for the HookFailed condition.
func (h hookPass) message() string {
	var parts []string
	if h.heldMember != "" {
		parts = append(parts, fmt.Sprintf("member hook of StatefulSet %s failed: %s", h.heldMember, h.memberError))
	}
	for _, pod := range slices.Sorted(maps.Keys(h.heldPods)) {
		parts = append(parts, fmt.Sprintf("pod %s not removed: beforePodRemoval failed: %s", pod, h.heldPods[pod]))
	}
	return strings.Join(parts, "; ")
}

// memberHooks calls the member hooks the pass makes due: the afterMember
// hook of each member that completed since it started, then the beforeMember
// hook of the member whose first batch the plan removes. A call that fails
// under failurePolicy Fail holds the group: the caller removes no pod this
// pass. Each call is recorded (in the returned records, written to status)
// once it succeeded or failed under Ignore, so it is made once per member
// and revision across restarts; a restart between a call and the status
// write repeats it (at least once).
func (r *Reconciler) memberHooks(ctx context.Context, rg *v1alpha1.RolloutGroup, plan rollout.Plan, now time.Time) hookPass {
	h := rg.Spec.Hooks
	pass := hookPass{configured: h != nil}
	if h == nil || (h.BeforeMember == nil && h.AfterMember == nil) {
		return pass
	}
	var records []v1alpha1.MemberHookStatus
	if rg.Status.Hooks != nil {
		records = rg.Status.Hooks.Members
	}
	views := make([]hooks.MemberView, 0, len(plan.Members))
	for _, m := range plan.Members {
		views = append(views, hooks.MemberView{Name: m.Name, Revision: m.UpdateRevision, Complete: m.Phase == v1alpha1.MemberComplete})
	}
	records = hooks.Prune(records, views)
	due := hooks.DueMemberHooks(records, views, plan.Current, len(plan.Delete) > 0)
	for _, m := range due.After {
		if h.AfterMember != nil {
			if err := r.callMemberHook(ctx, rg, hooks.AfterMember, h.AfterMember, m); err != nil {
				pass.heldMember, pass.memberError, pass.records = m.Name, err.Error(), records
				return pass
			}
		}
		records = hooks.Finished(records, m.Name, m.Revision, now)
	}
	if m := due.Before; m != nil {
		if h.BeforeMember != nil {
			if err := r.callMemberHook(ctx, rg, hooks.BeforeMember, h.BeforeMember, *m); err != nil {
				pass.heldMember, pass.memberError, pass.records = m.Name, err.Error(), records
				return pass
			}
		}
		records = hooks.Started(records, m.Name, m.Revision, now)
	}
	pass.records = records
	return pass
}

// callMemberHook makes one member hook's call and emits its Event. It
// returns the error that holds the group: a failure under failurePolicy Fail.
func (r *Reconciler) callMemberHook(ctx context.Context, rg *v1alpha1.RolloutGroup, name string, h *v1alpha1.MemberHook, m hooks.MemberView) error {
	s := hooks.SettingsOf(h.HookPolicy)
	vars := analysis.Vars{Member: m.Name, Namespace: rg.Namespace, Group: rg.Name, Revision: m.Revision}
	field := "spec.hooks." + name
	err := func() error {
		url, err := analysis.ExpandQuery(h.URL, vars)
		if err != nil {
			return fmt.Errorf("%s.url: %w", field, err)
		}
		call := hooks.Call{Key: m.Name, URL: url, Body: hooks.MemberPayload{Hook: name, Namespace: rg.Namespace, Group: rg.Name, Member: m.Name, Revision: m.Revision, RolloutID: rg.Spec.RolloutID}}
		if ref := h.AuthSecretRef; ref != nil {
			data, err := r.secretData(ctx, rg.Namespace, ref.Name)
			if err != nil {
				return secretReadError(field+".authSecretRef", rg.Namespace, ref.Name, err)
			}
			if call.BearerToken = string(data["token"]); call.BearerToken == "" {
				return fmt.Errorf("%s.authSecretRef: Secret %s has no token key", field, ref.Name)
			}
		}
		if call.TLS, err = httptls.Load(ctx, r.tlsObjects, rg.Namespace, h.TLS, field+".tls"); err != nil {
			// Counted as a call without an answer, as an unreachable pod
			// is: the hook-failure alert covers a CA Secret gone missing.
			metrics.HookCalls.WithLabelValues(name, "member", "error").Inc()
			return err
		}
		return r.hookCaller.Do(egress.WithField(ctx, field+".url"), name, "member", s, []hooks.Call{call})[m.Name].Err
	}()
	switch {
	case err == nil:
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "HookCalled", "CallHook", "%s of StatefulSet %s called for revision %s", name, m.Name, m.Revision)
		return nil
	case s.FailurePolicy == v1alpha1.HookIgnore:
		r.events.Eventf(rg, nil, corev1.EventTypeWarning, v1alpha1.ReasonHookFailed, "CallHook",
			"%s of StatefulSet %s failed, ignored (failurePolicy Ignore): %v", name, m.Name, err)
		return nil
	}
	r.events.Eventf(rg, nil, corev1.EventTypeWarning, v1alpha1.ReasonHookFailed, "CallHook",
		"%s of StatefulSet %s failed (failurePolicy Fail): the rollout waits and calls it again: %v", name, m.Name, err)
	return err
}

// beforePodRemoval calls the beforePodRemoval hook of each pod of the plan's
// batch, concurrently, telling it the reason (rollout, or rotation for a
// rotation batch), before any of them goes: an OnDelete member's batch (and
// any rotation's) is then deleted or evicted, a RollingUpdate member's is
// released by lowering the partition, after which the StatefulSet controller
// deletes those pods, so the whole released batch is called before the
// partition moves. It returns the plan without the pods the hook holds
// (failurePolicy Fail; Plan.HoldBack: a partition is not lowered past a held
// pod) and those pods with their errors. A pod whose call succeeded is not
// called again while this process runs (by UID), so a batch cut short by a
// stale view, a failed patch or a held pod below it does not repeat its
// calls; a restart may repeat them.
func (r *Reconciler) beforePodRemoval(ctx context.Context, rg *v1alpha1.RolloutGroup, plan rollout.Plan, members []rollout.Member, now time.Time) (rollout.Plan, map[string]string) {
	if rg.Spec.Hooks == nil {
		return plan, nil
	}
	h := rg.Spec.Hooks.BeforePodRemoval
	reason := v1alpha1.RemovalRollout
	if plan.Rotation {
		reason = v1alpha1.RemovalRotation
	}
	if !hooks.Applies(h, reason) || len(plan.Delete) == 0 {
		return plan, nil
	}
	s := hooks.SettingsOf(h.HookPolicy)
	service := ""
	if sts := memberStatefulSet(members, plan.Current); sts != nil {
		service = sts.Spec.ServiceName
	}
	names := make([]string, 0, len(plan.Delete))
	errs := map[string]error{}
	var calls []hooks.Call
	tlsMaterial, tlsErr := httptls.Load(ctx, r.tlsObjects, rg.Namespace, h.Endpoint.TLS, "spec.hooks.beforePodRemoval.endpoint.tls")
	for _, pod := range plan.Delete {
		names = append(names, pod.Name)
		if r.hooksDone.Done(pod.UID) {
			continue
		}
		host, why := r.podHost(pod, service)
		if why == "" && tlsErr != nil {
			why = tlsErr.Error()
		}
		if why != "" {
			errs[pod.Name] = fmt.Errorf("pod %s cannot be called: %s", pod.Name, why)
			metrics.HookCalls.WithLabelValues(hooks.BeforePodRemoval, string(reason), "error").Inc()
			continue
		}
		revision := updateRevisionOf(plan)
		if plan.Rotation {
			revision = podRevisionLabel(pod)
		}
		payload := hooks.RemovalPayload{Reason: reason, Pod: pod.Name, Namespace: pod.Namespace, Group: rg.Name, Member: plan.Current, Revision: revision, RolloutID: rg.Spec.RolloutID}
		calls = append(calls, hooks.Call{Key: pod.Name, URL: hooks.RemovalURL(h.Endpoint, host, payload), Body: payload, TLS: tlsMaterial})
	}
	results := r.hookCaller.Do(egress.WithField(ctx, "spec.hooks.beforePodRemoval.endpoint"), hooks.BeforePodRemoval, string(reason), s, calls)
	var called []string
	for _, pod := range plan.Delete {
		res, ok := results[pod.Name]
		switch {
		case !ok:
		case res.Err != nil:
			errs[pod.Name] = res.Err
		default:
			r.hooksDone.Mark(pod.UID, now)
			called = append(called, pod.Name)
		}
	}
	v := hooks.Decide(s.FailurePolicy, names, errs)
	if len(called) > 0 {
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "HookCalled", "CallHook", "beforePodRemoval (reason %s) called for %s: %s",
			reason, rollout.Plural(len(called), "pod"), strings.Join(called, ", "))
	}
	// Each pod's failure is an Event related to the pod: the Events API folds
	// Events that agree on reason, action, regarding and related into one
	// series, which would show one pod's failure for all.
	byName := map[string]*corev1.Pod{}
	for _, pod := range plan.Delete {
		byName[pod.Name] = pod
	}
	for _, pod := range slices.Sorted(maps.Keys(v.Ignored)) {
		r.events.Eventf(rg, byName[pod], corev1.EventTypeWarning, v1alpha1.ReasonHookFailed, "CallHook",
			"beforePodRemoval (reason %s) of pod %s failed, ignored (failurePolicy Ignore): %s", reason, pod, v.Ignored[pod])
	}
	if len(v.Held) == 0 {
		return plan, nil
	}
	held := "removed"
	if plan.CurrentPartitioned() {
		held = "released (the partition of StatefulSet " + plan.Current + " is not lowered past it)"
	}
	for _, pod := range slices.Sorted(maps.Keys(v.Held)) {
		r.events.Eventf(rg, byName[pod], corev1.EventTypeWarning, v1alpha1.ReasonHookFailed, "CallHook",
			"pod %s not %s: beforePodRemoval (reason %s) failed (failurePolicy Fail), called again in %s: %s", pod, held, reason, hookRetryInterval, v.Held[pod])
	}
	plan.HoldBack(func(pod *corev1.Pod) bool { _, ok := v.Held[pod.Name]; return ok })
	if len(plan.Delete) == 0 {
		// Nothing of the batch goes: the group waits for the hook.
		plan.Message, plan.Reason = hookPass{heldPods: v.Held}.message(), v1alpha1.ReasonHookFailed
	}
	return plan, v.Held
}

// withoutUnheard is plan without the pods of its batch that the
// beforePodRemoval hook has not been called for, neither in this pass
// (heard: the batch it let go, a failure under Ignore included) nor in an
// earlier one: a live read that changed the batch after the hooks were
// called. They go in a later pass, once called.
func (r *Reconciler) withoutUnheard(rg *v1alpha1.RolloutGroup, plan rollout.Plan, heard map[types.UID]bool) rollout.Plan {
	if rg.Spec.Hooks == nil {
		return plan
	}
	reason := v1alpha1.RemovalRollout
	if plan.Rotation {
		reason = v1alpha1.RemovalRotation
	}
	if !hooks.Applies(rg.Spec.Hooks.BeforePodRemoval, reason) {
		return plan
	}
	plan.HoldBack(func(pod *corev1.Pod) bool { return !heard[pod.UID] && !r.hooksDone.Done(pod.UID) })
	return plan
}

func podUIDs(pods []*corev1.Pod) map[types.UID]bool {
	out := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		out[p.UID] = true
	}
	return out
}

// applyHooks writes the pass's member hook records and the HookFailed
// condition into st: True naming the pods and members a hook holds, False
// when none does; absent for a group without hooks.
func applyHooks(st *v1alpha1.RolloutGroupStatus, generation int64, hp hookPass, now time.Time) {
	if hp.records != nil {
		st.Hooks = &v1alpha1.HooksStatus{Members: hp.records}
	}
	if !hp.configured {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionHookFailed)
		return
	}
	c := metav1.Condition{Type: v1alpha1.ConditionHookFailed, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHooksSucceeded,
		Message: "no hook holds the group", ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	if hp.holding() {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonHookFailed, hp.message()
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
