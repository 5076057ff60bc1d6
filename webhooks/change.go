package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// workloadKinds are the apps/v1 resources whose replicas a ScalingPolicy
// guards, with their kinds.
var workloadKinds = map[string]string{
	"statefulsets": v1alpha1.TargetKindStatefulSet,
	"deployments":  v1alpha1.TargetKindDeployment,
	"replicasets":  v1alpha1.TargetKindReplicaSet,
}

const scaleSubresource = "scale"

// replicaChange is what an UPDATE of a workload, or of its scale subresource,
// does to its replicas.
type replicaChange struct {
	// Kind and Name are the workload's: for /scale, the parent the scale
	// subresource belongs to (kubectl scale carries no labels, so the parent
	// is what a policy is looked up by).
	Kind, Namespace, Name string
	// UID is the workload's, for Events: a Scale carries its parent's UID.
	UID types.UID
	// Old and New are spec.replicas before and after; nil when unset.
	Old, New *int32
	// Scale says the change came through the scale subresource.
	Scale bool
}

// decrease says whether the change lowers replicas. A change to or from
// unset replicas is not a decrease: unset means "the default", which the
// API server has already applied to what it stores.
func (c replicaChange) decrease() bool {
	return c.Old != nil && c.New != nil && *c.New < *c.Old
}

// String is "StatefulSet ingester-zone-a" for messages.
func (c replicaChange) String() string { return c.Kind + " " + c.Name }

// workloadOf says which workload kind the request is about, and whether it
// is through /scale; ok is false for anything but an apps/v1 StatefulSet,
// Deployment or ReplicaSet, or its scale subresource.
func workloadOf(req *admissionv1.AdmissionRequest) (kind string, scale, ok bool) {
	if req.Resource.Group != appsv1.GroupName || req.Resource.Version != "v1" {
		return "", false, false
	}
	kind, ok = workloadKinds[req.Resource.Resource]
	switch req.SubResource {
	case "":
		return kind, false, ok
	case scaleSubresource:
		return kind, true, ok
	}
	return "", false, false
}

// describe names what a request is about, for "does not handle" warnings.
func describe(req *admissionv1.AdmissionRequest) string {
	r := req.Resource.Resource
	if req.Resource.Group != "" {
		r += "." + req.Resource.Group
	}
	if req.SubResource != "" {
		r += "/" + req.SubResource
	}
	return fmt.Sprintf("%s of %s", req.Operation, r)
}

// replicasObject is the part of a StatefulSet, Deployment or ReplicaSet the
// no-downscale webhook reads: decoding only it keeps a review of a large
// object cheap.
type replicasObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Replicas *int32 `json:"replicas"`
	} `json:"spec"`
}

// readReplicaChange reads the replicas change of an UPDATE whose workloadOf
// is kind (scale for /scale). An error says what the request lacks.
func readReplicaChange(req *admissionv1.AdmissionRequest, kind string, scale bool) (replicaChange, error) {
	c := replicaChange{Kind: kind, Namespace: req.Namespace, Name: req.Name, Scale: scale}
	if scale {
		want := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
		var oldScale, newScale autoscalingv1.Scale
		if err := decodeObject("oldObject", req.OldObject, want, &oldScale); err != nil {
			return c, err
		}
		if err := decodeObject("object", req.Object, want, &newScale); err != nil {
			return c, err
		}
		// A Scale's spec.replicas is not a pointer: absent is 0, a scale to zero.
		c.Old, c.New = &oldScale.Spec.Replicas, &newScale.Spec.Replicas
		c.UID = oldScale.UID
		if c.Name == "" {
			c.Name = newScale.Name
		}
		return c, negativeReplicas(c.New)
	}
	want := appsv1.SchemeGroupVersion.WithKind(kind)
	var oldObj, newObj replicasObject
	if err := decodeObject("oldObject", req.OldObject, want, &oldObj); err != nil {
		return c, err
	}
	if err := decodeObject("object", req.Object, want, &newObj); err != nil {
		return c, err
	}
	c.Old, c.New, c.UID = oldObj.Spec.Replicas, newObj.Spec.Replicas, oldObj.UID
	if c.Name == "" {
		c.Name = newObj.Name
	}
	if c.Name == "" {
		return c, errors.New("the request names no object (request.name and object.metadata.name are empty)")
	}
	return c, negativeReplicas(c.New)
}

// negativeReplicas refuses a negative replica count. Mutating webhooks see
// the object before the API server validates it, and it refuses the count
// afterwards: prepare-downscale must not call pods (all of them, counting
// from a negative ordinal) for an update that will never be stored.
func negativeReplicas(n *int32) error {
	if n != nil && *n < 0 {
		return fmt.Errorf("spec.replicas %d is negative", *n)
	}
	return nil
}

// decodeObject decodes one of a request's objects, which must be of kind
// want when it says its kind.
func decodeObject(field string, raw runtime.RawExtension, want schema.GroupVersionKind, into kinded) error {
	if len(raw.Raw) == 0 {
		return fmt.Errorf("request.%s is missing: an UPDATE of a %s carries it", field, want.Kind)
	}
	if err := json.Unmarshal(raw.Raw, into); err != nil {
		return fmt.Errorf("request.%s is not a %s: %w", field, want.Kind, err)
	}
	if got := into.GetObjectKind().GroupVersionKind(); !got.Empty() && got != want {
		return fmt.Errorf("request.%s is %s, want %s", field, gvkString(got), gvkString(want))
	}
	return nil
}

// kinded is an object that says its kind, as every decoded object does
// through its TypeMeta.
type kinded interface {
	GetObjectKind() schema.ObjectKind
}

func gvkString(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String() + " " + gvk.Kind
}
