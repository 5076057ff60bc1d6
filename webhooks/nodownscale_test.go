package webhooks

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestNoDownscale: every decision of the no-downscale webhook, through its
// HTTP handler: the answer, its reason in the metrics and the Event.
func TestNoDownscale(t *testing.T) {
	forbid := *builders.MakeScalingPolicy(testNS, "ingester-zone-a-scaling").Target("StatefulSet", "ingester-zone-a").DownscaleAllowed(false).Obj()
	permit := *builders.MakeScalingPolicy(testNS, "ingester-zone-a-scaling").Target("StatefulSet", "ingester-zone-a").DownscaleAllowed(true).Obj()
	forbidDeploy := *builders.MakeScalingPolicy(testNS, "gateway-guard").Target("Deployment", "gateway").DownscaleAllowed(false).Obj()
	forbidRS := *builders.MakeScalingPolicy(testNS, "rs-guard").Target("ReplicaSet", "gateway-7d4").DownscaleAllowed(false).Obj()
	deployment := func(n int32) *appsv1.Deployment {
		return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "gateway", UID: "uid-gateway"},
			Spec:       appsv1.DeploymentSpec{Replicas: &n}}
	}
	type want struct {
		allowed bool
		reason  string
		code    int32
		message string // a substring
		warning string // a substring of the first warning
		event   string // the Event's reason, on the target
	}
	for _, tc := range []struct {
		name     string
		cluster  *fakeCluster
		req      *reqBuilder
		want     want
		eventFor string // kind/name the Event is about
	}{
		{name: "decrease refused, naming the policy", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req: stsUpdate("ingester-zone-a", 5, 3),
			want: want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied,
				message: "downscale of StatefulSet ingester-zone-a from 5 to 3 denied: ScalingPolicy ingester-zone-a-scaling sets spec.downscale.allowed: false"},
			eventFor: "StatefulSet/ingester-zone-a"},
		{name: "kubectl scale refused: the parent is looked up by name", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req: scaleUpdate("statefulsets", "ingester-zone-a", 5, 3),
			want: want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied,
				message: "ScalingPolicy ingester-zone-a-scaling"},
			eventFor: "StatefulSet/ingester-zone-a"},
		{name: "scale to zero refused", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req:      scaleUpdate("statefulsets", "ingester-zone-a", 1, 0),
			want:     want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied, message: "from 1 to 0"},
			eventFor: "StatefulSet/ingester-zone-a"},
		{name: "Deployment refused", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbidDeploy}},
			req:      updateOf("deployments", deployment(4), deployment(2)),
			want:     want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied, message: "downscale of Deployment gateway from 4 to 2 denied: ScalingPolicy gateway-guard"},
			eventFor: "Deployment/gateway"},
		{name: "Deployment /scale refused", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbidDeploy}},
			req:      scaleUpdate("deployments", "gateway", 4, 2),
			want:     want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied, message: "Deployment gateway"},
			eventFor: "Deployment/gateway"},
		{name: "ReplicaSet /scale refused", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbidRS}},
			req:      scaleUpdate("replicasets", "gateway-7d4", 4, 2),
			want:     want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied, message: "ReplicaSet gateway-7d4"},
			eventFor: "ReplicaSet/gateway-7d4"},
		{name: "a StatefulSet's policy does not guard a Deployment of the same name",
			cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "p").Target("StatefulSet", "gateway").DownscaleAllowed(false).Obj()}},
			req:     updateOf("deployments", deployment(4), deployment(2)),
			want:    want{allowed: true, reason: reasonNoPolicy}},
		{name: "growth allowed", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req: stsUpdate("ingester-zone-a", 3, 5), want: want{allowed: true, reason: reasonNotDecrease}},
		{name: "scale growth allowed", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req: scaleUpdate("statefulsets", "ingester-zone-a", 0, 1), want: want{allowed: true, reason: reasonNotDecrease}},
		{name: "downscale allowed by the policy", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{permit}},
			req: stsUpdate("ingester-zone-a", 5, 3), want: want{allowed: true, reason: reasonDownscaleAllowed}},
		{name: "no policy", req: stsUpdate("ingester-zone-a", 5, 3), want: want{allowed: true, reason: reasonNoPolicy}},
		{name: "the ScalingPolicy controller's own downscale", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "ingester-zone-a-scaling").Target("StatefulSet", "ingester-zone-a").DownscaleAllowed(false).Leader("ingester-zone-z").Obj()}},
			req: stsUpdate("ingester-zone-a", 5, 3).operatorOwn(), want: want{allowed: true, reason: reasonOperatorOwn}},
		{name: "someone using the controller's field manager", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req:      stsUpdate("ingester-zone-a", 5, 3).user("alice", "echelon-scalingpolicy"),
			want:     want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied},
			eventFor: "StatefulSet/ingester-zone-a"},
		{name: "the operator under another field manager", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req:      stsUpdate("ingester-zone-a", 5, 3).user(operatorUser, "echelon-rolloutgroup"),
			want:     want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied},
			eventFor: "StatefulSet/ingester-zone-a"},
		{name: "dry run refused without an Event", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req:  stsUpdate("ingester-zone-a", 5, 3).dryRun(),
			want: want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden}},
		{name: "two policies: the stricter holds", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{permit, *builders.MakeScalingPolicy(testNS, "b-second").Target("StatefulSet", "ingester-zone-a").DownscaleAllowed(false).Obj()}},
			req:      stsUpdate("ingester-zone-a", 5, 3),
			want:     want{reason: reasonDownscaleNotAllowed, code: http.StatusForbidden, event: EventReasonDownscaleDenied, message: "ScalingPolicy b-second"},
			eventFor: "StatefulSet/ingester-zone-a"},
		{name: "lookup failure refused as an error", cluster: &fakeCluster{lookupErr: errors.New("cache is gone")},
			req:  stsUpdate("ingester-zone-a", 5, 3),
			want: want{reason: reasonLookupFailed, code: http.StatusInternalServerError, message: "cache is gone"}},
		{name: "namespace not watched", cluster: &fakeCluster{unwatched: []string{testNS}, policies: []v1alpha1.ScalingPolicy{forbid}},
			req:  stsUpdate("ingester-zone-a", 5, 3),
			want: want{allowed: true, reason: reasonNamespaceNotWatched, warning: "does not watch namespace mimir"}},
		{name: "CREATE is not judged", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req:  stsUpdate("ingester-zone-a", 5, 3).op(admissionv1.Create),
			want: want{allowed: true, reason: reasonUnhandled, warning: "does not handle CREATE of statefulsets.apps"}},
		{name: "status subresource is not judged", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req:  func() *reqBuilder { b := stsUpdate("ingester-zone-a", 5, 3); b.r.SubResource = "status"; return b }(),
			want: want{allowed: true, reason: reasonUnhandled, warning: "statefulsets.apps/status"}},
		{name: "missing oldObject refused as malformed", cluster: &fakeCluster{policies: []v1alpha1.ScalingPolicy{forbid}},
			req:  func() *reqBuilder { b := stsUpdate("ingester-zone-a", 5, 3); b.r.OldObject.Raw = nil; return b }(),
			want: want{reason: reasonMalformed, code: http.StatusBadRequest, message: "request.oldObject is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := &eventRecorder{}
			webhook := "test-no-downscale"
			before := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, decisionOf(tc.want.allowed, tc.want.code), tc.want.reason))
			h := handler(webhook, &NoDownscale{Cluster: orEmpty(tc.cluster), Identity: Identity{Username: operatorUser}}, events)
			a := serve(t, h, tc.req.review(), "timeout=10s")
			checkAnswer(t, a, tc.want.allowed, tc.want.code, tc.want.message, tc.want.warning)
			if got := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, decisionOf(tc.want.allowed, tc.want.code), tc.want.reason)) - before; got != 1 {
				t.Errorf("reason %q counted %v times, want 1", tc.want.reason, got)
			}
			checkEvent(t, events.list(), tc.want.event, tc.eventFor, a.message())
		})
	}
}

func decisionOf(allowed bool, code int32) string {
	switch {
	case allowed:
		return metrics.DecisionAllowed
	case code == http.StatusForbidden:
		return metrics.DecisionDenied
	default:
		return metrics.DecisionError
	}
}

func checkAnswer(t *testing.T, a answer, allowed bool, code int32, message, warning string) {
	t.Helper()
	if a.response == nil {
		t.Fatalf("HTTP %d %s, want an AdmissionReview", a.httpStatus, a.body)
	}
	if a.response.Allowed != allowed {
		t.Fatalf("allowed %v (%s), want %v", a.response.Allowed, a.message(), allowed)
	}
	if !allowed && (a.response.Result == nil || a.response.Result.Code != code || !strings.Contains(a.message(), message)) {
		t.Errorf("result %+v, want code %d and a message containing %q", a.response.Result, code, message)
	}
	if warning != "" && (len(a.response.Warnings) == 0 || !strings.Contains(strings.Join(a.response.Warnings, "\n"), warning)) {
		t.Errorf("warnings %q, want one containing %q", a.response.Warnings, warning)
	}
}

func checkEvent(t *testing.T, events []recordedEvent, reason, about, note string) {
	t.Helper()
	if reason == "" {
		if len(events) > 0 {
			t.Errorf("Events %+v, want none", events)
		}
		return
	}
	if len(events) != 1 {
		t.Fatalf("Events %+v, want one %s", events, reason)
	}
	e := events[0]
	kind, name, _ := strings.Cut(about, "/")
	if e.reason != reason || e.kind != kind || e.name != name || string(e.uid) != "uid-"+name || e.note != note {
		t.Errorf("Event %+v, want %s about %s (uid uid-%s) with the denial's message %q", e, reason, about, name, note)
	}
}

// TestOperatorExemptionOnlyForScalingPolicies: the operator's user with the
// ScalingPolicy controller's field manager passes only when the target's one
// policy scales it (replicas, replicasFrom or forceReplicas), as
// docs/webhooks.md says: a policy that only guards has no controller that
// downscales its target, so no write is its own.
func TestOperatorExemptionOnlyForScalingPolicies(t *testing.T) {
	guardOnly := *builders.MakeScalingPolicy(testNS, "ingester-zone-a-guard").Target("StatefulSet", "ingester-zone-a").DownscaleAllowed(false).Obj()
	scaling := *builders.MakeScalingPolicy(testNS, "ingester-zone-a-scaling").Target("StatefulSet", "ingester-zone-a").DownscaleAllowed(false).Leader("ingester-zone-z").Obj()
	for _, tc := range []struct {
		name     string
		policies []v1alpha1.ScalingPolicy
		allowed  bool
		reason   string
	}{
		{name: "guard-only policy: refused", policies: []v1alpha1.ScalingPolicy{guardOnly}, reason: reasonDownscaleNotAllowed},
		{name: "two policies, one scaling: neither scales it, refused",
			policies: []v1alpha1.ScalingPolicy{guardOnly, scaling}, reason: reasonDownscaleNotAllowed},
		{name: "the one policy scales its target: its own write passes",
			policies: []v1alpha1.ScalingPolicy{scaling}, allowed: true, reason: reasonOperatorOwn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := handler("test-no-downscale-exemption", &NoDownscale{Cluster: &fakeCluster{policies: tc.policies}, Identity: Identity{Username: operatorUser}}, &eventRecorder{})
			a := serve(t, h, stsUpdate("ingester-zone-a", 5, 3).operatorOwn().review(), "timeout=10s")
			checkAnswer(t, a, tc.allowed, http.StatusForbidden, "sets spec.downscale.allowed: false", "")
		})
	}
}
