package webhooks

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// Reasons of the no-downscale webhook's decisions (metric label).
const (
	reasonNotDecrease         = "not-a-decrease"
	reasonNoPolicy            = "no-policy"
	reasonDownscaleAllowed    = "downscale-allowed"
	reasonOperatorOwn         = "operator-own"
	reasonNamespaceNotWatched = "namespace-not-watched"
	reasonDownscaleNotAllowed = "downscale-not-allowed"
)

// EventReasonDownscaleDenied is the reason of the Warning Event on a workload
// whose downscale a ScalingPolicy's spec.downscale.allowed: false refused.
const EventReasonDownscaleDenied = "DownscaleDenied"

// NoDownscale is the validating webhook that refuses decreases of replicas of
// a StatefulSet, Deployment or ReplicaSet whose ScalingPolicy sets
// spec.downscale.allowed: false, whether through the object or its scale
// subresource. The ScalingPolicy controller's own writes pass (Identity).
type NoDownscale struct {
	Cluster  Cluster
	Identity Identity
}

func (h *NoDownscale) decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	change, policies, v, judged := readDownscale(ctx, req, h.Cluster, metrics.WebhookNoDownscale, workloadKinds)
	if !judged {
		return v
	}
	if len(policies) == 0 {
		return allow(reasonNoPolicy)
	}
	forbidding := forbiddingPolicy(policies)
	if forbidding == nil {
		return allow(reasonDownscaleAllowed)
	}
	if h.Identity.ownScalingPolicyWriteOf(req, policies) {
		return allow(reasonOperatorOwn)
	}
	return denyDownscaleNotAllowed(change, forbidding)
}

// readDownscale reads a decrease of the replicas of a workload whose kind is
// one of kinds (resource -> kind), and the policies that guard it. judged is
// false when the request needs no more judging: v is then the answer (not a
// decrease, a resource not handled, a malformed request, a failed lookup).
func readDownscale(ctx context.Context, req *admissionv1.AdmissionRequest, cluster Cluster, webhook string, kinds map[string]string) (
	change replicaChange, policies []v1alpha1.ScalingPolicy, v verdict, judged bool) {
	kind, scale, ok := workloadOf(req)
	if !ok || kinds[req.Resource.Resource] == "" || req.Operation != admissionv1.Update {
		return change, nil, unhandled(webhook, describe(req)), false
	}
	change, err := readReplicaChange(req, kind, scale)
	if err != nil {
		return change, nil, failed(reasonMalformed, http.StatusBadRequest, err), false
	}
	if !change.decrease() {
		return change, nil, allow(reasonNotDecrease), false
	}
	if !cluster.Watches(req.Namespace) {
		return change, nil, allow(reasonNamespaceNotWatched, notWatchedWarning(req.Namespace)), false
	}
	policies, err = cluster.PoliciesForTarget(ctx, req.Namespace, change.Kind, change.Name)
	if err != nil {
		return change, nil, failed(reasonLookupFailed, http.StatusInternalServerError, err), false
	}
	return change, policies, verdict{}, true
}

// forbiddingPolicy is the first policy, by name, that sets
// spec.downscale.allowed: false; nil when none does. Two policies of one
// target are an error the validation webhook refuses and the controller
// reports; until one goes, the stricter holds.
func forbiddingPolicy(policies []v1alpha1.ScalingPolicy) *v1alpha1.ScalingPolicy {
	var found *v1alpha1.ScalingPolicy
	for i := range policies {
		p := &policies[i]
		if !p.Spec.DownscaleAllowed() && (found == nil || p.Name < found.Name) {
			found = p
		}
	}
	return found
}

func denyDownscaleNotAllowed(change replicaChange, policy *v1alpha1.ScalingPolicy) verdict {
	v := deny(reasonDownscaleNotAllowed, fmt.Sprintf("downscale of %s from %d to %d denied: ScalingPolicy %s sets spec.downscale.allowed: false",
		change, *change.Old, *change.New, policy.Name))
	v.event = &denialEvent{regarding: workloadRef(change), reason: EventReasonDownscaleDenied, action: "Deny"}
	return v
}

// workloadRef is an object the Events API can name as the regarding object:
// kind (through the scheme), namespace, name and UID.
func workloadRef(c replicaChange) runtime.Object {
	meta := metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, UID: c.UID}
	switch c.Kind {
	case v1alpha1.TargetKindDeployment:
		return &appsv1.Deployment{ObjectMeta: meta}
	case v1alpha1.TargetKindReplicaSet:
		return &appsv1.ReplicaSet{ObjectMeta: meta}
	default:
		return &appsv1.StatefulSet{ObjectMeta: meta}
	}
}

func notWatchedWarning(namespace string) string {
	return fmt.Sprintf("Echelon does not watch namespace %s: no ScalingPolicy applies there; allowed (narrow the webhook's namespaceSelector to the watched namespaces)", namespace)
}
