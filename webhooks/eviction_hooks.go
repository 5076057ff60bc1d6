package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// reasonHookFailed is the eviction webhook's answer (metric label) when the
// pod's beforePodRemoval hook failed under failurePolicy Fail.
const reasonHookFailed = "hook-failed"

// RemovalHook is the beforePodRemoval hook an eviction of a pod calls: its
// group's, with the StatefulSet's service name for the pod's address.
type RemovalHook struct {
	Hook    *v1alpha1.PodRemovalHook
	Group   *v1alpha1.RolloutGroup
	Member  string
	Service string
}

// EvictionHooks finds the hook an eviction calls; nil when none applies.
type EvictionHooks interface {
	RemovalHook(ctx context.Context, pod *corev1.Pod) (*RemovalHook, error)
}

// groupHooks finds a pod's hook in the cache: the first group (by name) that
// claims its StatefulSet and has a beforePodRemoval hook for reason eviction.
type groupHooks struct{ cache client.Reader }

// NewEvictionHooks returns the operator's EvictionHooks, reading the cache
// (with lookup's indexes).
func NewEvictionHooks(cache client.Reader) EvictionHooks { return groupHooks{cache: cache} }

func (g groupHooks) RemovalHook(ctx context.Context, pod *corev1.Pod) (*RemovalHook, error) {
	owner := lookup.OwnerStatefulSet(pod)
	if owner == "" {
		return nil, nil
	}
	sts := &appsv1.StatefulSet{}
	if err := getOrNil(ctx, g.cache, pod.Namespace, owner, sts); err != nil {
		return nil, err
	}
	var claimed *appsv1.StatefulSet
	if sts.Name != "" {
		claimed = sts
	}
	groups, err := lookup.GroupsClaiming(ctx, g.cache, pod.Namespace, owner, claimed)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(groups, func(a, b v1alpha1.RolloutGroup) int { return strings.Compare(a.Name, b.Name) })
	for i := range groups {
		rg := &groups[i]
		if rg.Spec.Hooks != nil && hooks.Applies(rg.Spec.Hooks.BeforePodRemoval, v1alpha1.RemovalEviction) {
			return &RemovalHook{Hook: rg.Spec.Hooks.BeforePodRemoval, Group: rg, Member: owner, Service: sts.Spec.ServiceName}, nil
		}
	}
	return nil, nil
}

// callRemovalHook calls the pod's beforePodRemoval hook with reason eviction,
// within hooks.EvictionBudget (retries dropped, then the timeout shortened,
// so that the admission answers well within the API server's 10 s). It
// returns a refusal when the call failed under failurePolicy Fail: 429, so
// that the evicting client (kubectl drain, the autoscaler) asks again, and
// the call is made again then. A failure under Ignore adds a warning.
func (h *Eviction) callRemovalHook(ctx context.Context, pod *corev1.Pod) (refusal *verdict, warnings []string) {
	if h.Hooks == nil || h.Caller == nil {
		return nil, nil
	}
	found, err := h.Hooks.RemovalHook(ctx, pod)
	if err != nil || found == nil {
		// The hook is a courtesy to the pod; a lookup error does not stop an
		// eviction the budget allowed.
		if err != nil {
			return nil, []string{fmt.Sprintf("beforePodRemoval hook not called: %v", err)}
		}
		return nil, nil
	}
	s := hooks.Within(hooks.SettingsOf(found.Hook.HookPolicy), hooks.EvictionBudget)
	payload := hooks.RemovalPayload{Reason: v1alpha1.RemovalEviction, Pod: pod.Name, Namespace: pod.Namespace, Group: found.Group.Name,
		Member: found.Member, Revision: pod.Labels[appsv1.ControllerRevisionHashLabelKey], RolloutID: found.Group.Spec.RolloutID}
	var callErr error
	endpointTLS, tlsErr := httptls.Load(ctx, h.Secrets, pod.Namespace, found.Hook.Endpoint.TLS, "spec.hooks.beforePodRemoval.endpoint.tls")
	if host, why := h.Addressing.Host(pod, found.Service); why != "" {
		callErr = fmt.Errorf("pod %s cannot be called: %s", pod.Name, why)
	} else if tlsErr != nil {
		callErr = fmt.Errorf("pod %s cannot be called: %w", pod.Name, tlsErr)
	} else {
		call := hooks.Call{Key: pod.Name, URL: hooks.RemovalURL(found.Hook.Endpoint, host, payload), Body: payload, TLS: endpointTLS}
		callErr = h.Caller.Do(egress.WithField(ctx, "spec.hooks.beforePodRemoval.endpoint"), hooks.BeforePodRemoval, string(v1alpha1.RemovalEviction), s, []hooks.Call{call})[pod.Name].Err
	}
	if callErr == nil {
		return nil, nil
	}
	group := fmt.Sprintf("RolloutGroup %s", found.Group.Name)
	if s.FailurePolicy == v1alpha1.HookIgnore {
		return nil, []string{fmt.Sprintf("%s: beforePodRemoval of pod %s failed, ignored (failurePolicy Ignore): %v", group, pod.Name, callErr)}
	}
	msg := fmt.Sprintf("%s: beforePodRemoval of pod %s failed (failurePolicy Fail): %v; evict %s later", group, pod.Name, callErr, pod.Name)
	out := tooManyRequests(reasonHookFailed, msg)
	out.event = &denialEvent{regarding: &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: found.Group.Namespace, Name: found.Group.Name, UID: found.Group.UID}},
		related: podRef(pod), reason: v1alpha1.ReasonHookFailed, action: "Evict", once: "hook/" + pod.Namespace + "/" + pod.Name}
	return &out, nil
}

// newHookCaller is the eviction webhook's caller: no client timeout, each
// call carries one.
func newHookCaller() *hooks.Caller { return &hooks.Caller{HTTP: httptls.NewClient(0)} }
