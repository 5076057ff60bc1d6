package webhooks

import (
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// delayedRequest is a CREATE or UPDATE of a DelayedDownscale.
func delayedRequest(op admissionv1.Operation, old, new *v1alpha1.DelayedDownscale) *reqBuilder {
	gvk := v1alpha1.GroupVersion.WithKind("DelayedDownscale")
	new.SetGroupVersionKind(gvk)
	b := &reqBuilder{admissionv1.AdmissionRequest{
		UID:       "req-1",
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "delayeddownscales"},
		Name:      new.Name,
		Namespace: testNS,
		Operation: op,
		Object:    raw(new),
	}}
	if old != nil {
		old.SetGroupVersionKind(gvk)
		b.r.OldObject = raw(old)
	}
	return b
}

func delayedOf(name, target string) *v1alpha1.DelayedDownscale {
	return builders.MakeDelayedDownscale(testNS, name).Target(target).Delay("4h").PrepareEndpoint("/prepare", 8080).Obj()
}

// TestValidateDelayedDownscaleThroughTheWebhook: a second DelayedDownscale
// of a StatefulSet is refused, naming spec.targetRef.name; one of another
// StatefulSet, and an update of one that already shared its target, pass.
func TestValidateDelayedDownscaleThroughTheWebhook(t *testing.T) {
	objs := NamespaceObjects{DelayedDownscales: []v1alpha1.DelayedDownscale{*delayedOf("zone-a", "zone-a")}}
	for _, tc := range []struct {
		name    string
		req     *reqBuilder
		allowed bool
		code    int32
		message string
		warning string
	}{
		{name: "CREATE of the first for a StatefulSet", req: delayedRequest(admissionv1.Create, nil, delayedOf("zone-b", "zone-b")), allowed: true},
		{name: "CREATE of a second for a StatefulSet",
			req: delayedRequest(admissionv1.Create, nil, delayedOf("zone-a-2", "zone-a")), code: http.StatusUnprocessableEntity,
			message: `DelayedDownscale.echelon.dev "zone-a-2" is invalid: spec.targetRef.name: Invalid value: "zone-a": StatefulSet zone-a is already the target of DelayedDownscale zone-a: a StatefulSet has one DelayedDownscale at most`},
		{name: "UPDATE retargeting onto a taken StatefulSet",
			req:  delayedRequest(admissionv1.Update, delayedOf("zone-b", "zone-b"), delayedOf("zone-b", "zone-a")),
			code: http.StatusUnprocessableEntity, message: "spec.targetRef.name"},
		{name: "UPDATE of one that already shared its target: allowed, with a warning",
			req:     delayedRequest(admissionv1.Update, delayedOf("zone-a-2", "zone-a"), delayedOf("zone-a-2", "zone-a")),
			allowed: true, warning: "already so before this change: spec.targetRef.name"},
		{name: "its own stored version does not count", req: delayedRequest(admissionv1.Update, delayedOf("zone-a", "zone-a"), delayedOf("zone-a", "zone-a")), allowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := serve(t, handler("test-validate-delayed", &Validate{Cluster: &fakeCluster{objs: objs}}, &eventRecorder{}), tc.req.review(), "")
			checkAnswer(t, a, tc.allowed, tc.code, tc.message, tc.warning)
			if tc.allowed && len(a.response.Warnings) > 0 && tc.warning == "" {
				t.Errorf("warnings %q, want none", a.response.Warnings)
			}
		})
	}
}
