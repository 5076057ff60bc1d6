package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
)

// Reasons of the eviction webhook's answers (metric labels) besides the
// disruption.Code* of a refusal.
const (
	reasonEvictionAllowed = "allowed"
	reasonEvictionDryRun  = "dry-run"
	reasonNotCovered      = "not-covered"
	reasonInvalidBudget   = "invalid-budget"
	reasonPodNotFound     = "pod-not-found"
	reasonPodTerminating  = "pod-terminating"
	reasonPodFinished     = "pod-finished"
	reasonHoldContended   = "hold-contended"
)

const evictionSubresource = "eviction"

// evictionEventInterval spaces the EvictionRefused Events of one pod: a
// drain asks again every 5 seconds, and one Event a minute says as much as
// twelve.
const evictionEventInterval = time.Minute

// EventReasonEvictionRefused is the reason of the Warning Event on a
// RolloutGroup or ZoneDisruptionBudget whose budget refused an eviction; the
// pod is the Event's related object. One per pod per minute and replica
// (evictionEventInterval).
const EventReasonEvictionRefused = "EvictionRefused"

// evictionKinds are the kinds an eviction's body may be: policy/v1, and
// policy/v1beta1, which clients from before Kubernetes 1.22 send. Both have
// the same fields.
var evictionKinds = []schema.GroupVersionKind{
	policyv1.SchemeGroupVersion.WithKind("Eviction"),
	{Group: policyv1.GroupName, Version: "v1beta1", Kind: "Eviction"},
}

// Eviction is the validating webhook of the Eviction API (CREATE of
// pods/eviction): it admits the eviction of a pod only when the pod's budget
// allows it (disruption.Decide, on what the API server holds), and records
// the budget's hold before admitting, so that a second eviction, a rollout
// or a downscale decided at the same moment sees it. A refusal answers 429,
// as the API server does for a PodDisruptionBudget, so that `kubectl drain`,
// the cluster autoscaler and Karpenter ask again by themselves.
//
// The budget of a pod is the RolloutGroup that claims its StatefulSet (its
// spec.disruptionBudget), or else the ZoneDisruptionBudgets that select it;
// a pod neither covers is evicted as Kubernetes alone decides.
type Eviction struct {
	Cluster Cluster
	Budgets EvictionBudgets
	// Hooks, Caller and Addressing call the pod's beforePodRemoval hook
	// (reason eviction) once the eviction is allowed; no hook when nil.
	Hooks      EvictionHooks
	Caller     *hooks.Caller
	Addressing podcall.Addressing
	// Secrets reads, live, the Secrets and ConfigMaps of the hook
	// endpoint's tls block.
	Secrets client.Reader
}

func (h *Eviction) decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	v := h.judge(ctx, req)
	decision := metrics.DecisionAllowed
	switch {
	case v.failed:
		decision = metrics.DecisionError
	case !v.allowed:
		decision = metrics.DecisionDenied
	}
	if v.reason != reasonUnhandled {
		metrics.Evictions.WithLabelValues(decision, v.reason).Inc()
	}
	return v
}

func (h *Eviction) judge(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	if req.Resource.Group != "" || req.Resource.Resource != "pods" || req.SubResource != evictionSubresource || req.Operation != admissionv1.Create {
		return unhandled(metrics.WebhookEviction, describe(req))
	}
	eviction, err := decodeEviction(req.Object)
	if err != nil {
		return failed(reasonMalformed, http.StatusBadRequest, err)
	}
	// kubectl drain --dry-run=server says so in the Eviction's
	// deleteOptions, not in the request's dryRun.
	dryRun := isDryRun(req) || (eviction.DeleteOptions != nil && slices.Contains(eviction.DeleteOptions.DryRun, metav1.DryRunAll))
	if !h.Cluster.Watches(req.Namespace) {
		return allow(reasonNamespaceNotWatched, fmt.Sprintf("Echelon does not watch namespace %s: no budget of its judges evictions; allowed (narrow the webhook's namespaceSelector to the watched namespaces)", req.Namespace))
	}
	name := req.Name
	if name == "" {
		name = eviction.Name
	}
	pod, err := h.Budgets.Pod(ctx, req.Namespace, name)
	switch {
	case err != nil:
		return failed(reasonLookupFailed, http.StatusInternalServerError, err)
	case pod == nil:
		return allow(reasonPodNotFound)
	case pod.DeletionTimestamp != nil:
		// Already going: evicting it again disrupts nothing more.
		return allow(reasonPodTerminating)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return allow(reasonPodFinished)
	}
	budgets, unusable, err := h.Budgets.Judging(ctx, pod)
	if err != nil {
		return failed(reasonLookupFailed, http.StatusInternalServerError, err)
	}
	// First on the cache, writing nothing: a refusal there is final (and
	// a refusal writes nothing), and the pod's hook is called only for an
	// eviction the budget would allow. Then, after the hook and right
	// before the answer, on the API server, recording the eviction's
	// intent: nothing slow sits between the recorded decision and the
	// eviction the API server then carries out.
	for _, b := range budgets {
		v, err := h.Budgets.Judge(ctx, b, pod)
		if errors.Is(err, errBudgetGone) {
			continue
		}
		if err != nil {
			return failed(reasonLookupFailed, http.StatusInternalServerError, err)
		}
		if !v.Allowed {
			metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterEviction, metrics.DecisionDenied, v.Code).Inc()
			return refuseEviction(b, pod, v, dryRun)
		}
	}
	var warnings []string
	if !dryRun {
		var refusal *verdict
		if refusal, warnings = h.callRemovalHook(ctx, pod); refusal != nil {
			return *refusal
		}
	}
	judged := false
	for _, b := range budgets {
		v, err := h.Budgets.Acquire(ctx, b, pod, dryRun)
		switch {
		case errors.Is(err, errBudgetGone):
			continue
		case apierrors.IsConflict(err):
			return holdContended(b, pod, err)
		case err != nil:
			return failed(reasonLookupFailed, http.StatusInternalServerError, err)
		}
		judged = true
		if !v.Allowed {
			metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterEviction, metrics.DecisionDenied, v.Code).Inc()
			return refuseEviction(b, pod, v, dryRun)
		}
		metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterEviction, metrics.DecisionAllowed, "").Inc()
	}
	if dryRun {
		if !judged {
			return allow(reasonNotCovered)
		}
		return allow(reasonEvictionDryRun, unusable...)
	}
	switch {
	case !judged && len(unusable) > 0:
		return allow(reasonInvalidBudget, append(unusable, warnings...)...)
	case !judged:
		return allow(reasonNotCovered, warnings...)
	}
	return allow(reasonEvictionAllowed, append(unusable, warnings...)...)
}

// refuseEviction answers 429 with the budget's reason, as the API server
// answers an eviction a PodDisruptionBudget refuses, so that the evicting
// client asks again; and, unless it is a dry run, a Warning Event on the
// budget's object.
func refuseEviction(b Budget, pod *corev1.Pod, v disruption.Verdict, dryRun bool) verdict {
	msg := fmt.Sprintf("%s: %s; evict %s later", b, v.Message, pod.Name)
	if v.RetryAfter > 0 {
		msg = fmt.Sprintf("%s: %s; evict %s in %s or later", b, v.Message, pod.Name, v.RetryAfter.Round(time.Second))
	}
	out := tooManyRequests(v.Code, msg)
	// The cause the API server gives for a PodDisruptionBudget's refusal.
	out.status.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: msg}}
	// No Retry-After, as the API server sends none for a
	// PodDisruptionBudget: client-go retries a 429 that carries one inside
	// the same call (up to ten times, sleeping as told), so a drain would
	// block in one eviction instead of moving on to the next pod.
	if !dryRun {
		out.event = &denialEvent{regarding: budgetObject(b), related: podRef(pod), reason: EventReasonEvictionRefused,
			action: "Evict", once: pod.Namespace + "/" + pod.Name}
	}
	return out
}

// holdContended answers 429 when other decisions kept winning the race to
// record the budget's hold (budget.Acquire gave up): asking again soon finds
// them recorded.
func holdContended(b Budget, pod *corev1.Pod, err error) verdict {
	out := tooManyRequests(reasonHoldContended, fmt.Sprintf("%s: other disruptions were decided meanwhile (%v); evict %s again", b, err, pod.Name))
	out.failed = true
	return out
}

func tooManyRequests(reason, msg string) verdict {
	return verdict{reason: reason, code: http.StatusTooManyRequests, message: msg, status: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
		Message: msg, Details: &metav1.StatusDetails{},
	}}
}

// decodeEviction reads the Eviction of a request, in either version.
func decodeEviction(raw runtime.RawExtension) (*policyv1.Eviction, error) {
	if len(raw.Raw) == 0 {
		return nil, errors.New("request.object is missing: a CREATE of pods/eviction carries the Eviction")
	}
	eviction := &policyv1.Eviction{}
	if err := json.Unmarshal(raw.Raw, eviction); err != nil {
		return nil, fmt.Errorf("request.object is not an Eviction: %w", err)
	}
	if gvk := eviction.GroupVersionKind(); !gvk.Empty() && !slices.Contains(evictionKinds, gvk) {
		return nil, fmt.Errorf("request.object is %s, want policy/v1 or policy/v1beta1 Eviction", gvkString(gvk))
	}
	return eviction, nil
}

// budgetObject is the object an Event about b is recorded on.
func budgetObject(b Budget) runtime.Object {
	meta := metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name, UID: b.UID}
	if b.Kind == KindZoneDisruptionBudget {
		return &v1alpha1.ZoneDisruptionBudget{ObjectMeta: meta}
	}
	return &v1alpha1.RolloutGroup{ObjectMeta: meta}
}

func podRef(pod *corev1.Pod) runtime.Object {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
}
