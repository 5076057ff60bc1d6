package webhooks

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/test/builders"
)

func TestWorkloadOf(t *testing.T) {
	for _, tc := range []struct {
		group, version, resource, sub string
		kind                          string
		scale, ok                     bool
	}{
		{"apps", "v1", "statefulsets", "", "StatefulSet", false, true},
		{"apps", "v1", "statefulsets", "scale", "StatefulSet", true, true},
		{"apps", "v1", "deployments", "", "Deployment", false, true},
		{"apps", "v1", "deployments", "scale", "Deployment", true, true},
		{"apps", "v1", "replicasets", "", "ReplicaSet", false, true},
		{"apps", "v1", "replicasets", "scale", "ReplicaSet", true, true},
		{"apps", "v1", "statefulsets", "status", "", false, false},
		{"apps", "v1", "daemonsets", "", "", false, false},
		{"apps", "v1beta2", "statefulsets", "", "", false, false},
		{"", "v1", "pods", "", "", false, false},
		{"echelon.dev", "v1alpha1", "scalingpolicies", "scale", "", false, false},
	} {
		req := &admissionv1.AdmissionRequest{Resource: metav1.GroupVersionResource{Group: tc.group, Version: tc.version, Resource: tc.resource}, SubResource: tc.sub}
		kind, scale, ok := workloadOf(req)
		if ok != tc.ok || ok && (kind != tc.kind || scale != tc.scale) {
			t.Errorf("%s/%s %s/%s: (%q, %v, %v), want (%q, %v, %v)", tc.group, tc.version, tc.resource, tc.sub, kind, scale, ok, tc.kind, tc.scale, tc.ok)
		}
	}
}

// TestReadReplicaChange: what counts as a decrease, through the object and
// through /scale (whose parent is named by the request), and what a request
// must carry.
func TestReadReplicaChange(t *testing.T) {
	unset := func(name string) *appsv1.StatefulSet {
		return builders.MakeStatefulSet(testNS, name).NilReplicas().TypeMeta().Obj()
	}
	sts := func(name string, n int32) *appsv1.StatefulSet {
		return builders.MakeStatefulSet(testNS, name).Replicas(n).TypeMeta().Obj()
	}
	for _, tc := range []struct {
		name     string
		req      *reqBuilder
		kind     string
		decrease bool
		err      string
	}{
		{name: "5 to 3", req: stsUpdate("a", 5, 3), kind: "StatefulSet", decrease: true},
		{name: "3 to 5", req: stsUpdate("a", 3, 5)},
		{name: "unchanged", req: stsUpdate("a", 3, 3)},
		{name: "1 to 0", req: stsUpdate("a", 1, 0), decrease: true},
		{name: "to unset", req: updateOf("statefulsets", sts("a", 3), unset("a"))},
		{name: "from unset", req: updateOf("statefulsets", unset("a"), sts("a", 0))},
		{name: "scale 5 to 3", req: scaleUpdate("statefulsets", "a", 5, 3), decrease: true},
		// A Scale of 0 replicas omits spec.replicas: it is 0, not unset.
		{name: "scale 2 to 0", req: scaleUpdate("deployments", "a", 2, 0), kind: "Deployment", decrease: true},
		{name: "scale 0 to 2", req: scaleUpdate("replicasets", "a", 0, 2), kind: "ReplicaSet"},
		{name: "no oldObject", req: func() *reqBuilder { b := stsUpdate("a", 5, 3); b.r.OldObject = runtime.RawExtension{}; return b }(), err: "request.oldObject is missing"},
		{name: "no object", req: func() *reqBuilder { b := stsUpdate("a", 5, 3); b.r.Object = runtime.RawExtension{}; return b }(), err: "request.object is missing"},
		{name: "object of another kind", req: func() *reqBuilder {
			b := stsUpdate("a", 5, 3)
			b.r.Object = raw(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "a"}})
			return b
		}(), err: "request.object is v1 Pod, want apps/v1 StatefulSet"},
		{name: "replicas not a number", req: func() *reqBuilder {
			b := stsUpdate("a", 5, 3)
			b.r.Object = runtime.RawExtension{Raw: []byte(`{"spec":{"replicas":"three"}}`)}
			return b
		}(), err: "request.object is not a StatefulSet"},
		{name: "scale object is a StatefulSet", req: func() *reqBuilder {
			b := scaleUpdate("statefulsets", "a", 5, 3)
			b.r.Object = raw(sts("a", 3))
			return b
		}(), err: "want autoscaling/v1 Scale"},
		{name: "no name anywhere", req: func() *reqBuilder {
			b := updateOf("statefulsets", sts("", 5), sts("", 3))
			b.r.Name = ""
			return b
		}(), err: "names no object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, scale, ok := workloadOf(&tc.req.r)
			if !ok {
				t.Fatalf("workloadOf refused the request")
			}
			c, err := readReplicaChange(&tc.req.r, kind, scale)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.decrease() != tc.decrease {
				t.Errorf("decrease %v, want %v (%v to %v)", c.decrease(), tc.decrease, ptr.Deref(c.Old, -1), ptr.Deref(c.New, -1))
			}
			if tc.kind != "" && c.Kind != tc.kind || c.Name != "a" || c.UID != "uid-a" || c.Scale != scale {
				t.Errorf("change %+v, want kind %s name a uid uid-a scale %v", c, tc.kind, scale)
			}
		})
	}
}

// TestOwnScalingPolicyWrite: a request is the ScalingPolicy controller's only
// with the operator's user name AND the controller's field manager.
func TestOwnScalingPolicyWrite(t *testing.T) {
	id := Identity{Username: operatorUser}
	for _, tc := range []struct {
		name string
		id   Identity
		req  *reqBuilder
		own  bool
	}{
		{"operator with the field manager", id, stsUpdate("a", 5, 3).operatorOwn(), true},
		{"operator with another field manager", id, stsUpdate("a", 5, 3).user(operatorUser, "kubectl-edit"), false},
		{"operator without options", id, stsUpdate("a", 5, 3).user(operatorUser, ""), false},
		{"someone naming the field manager", id, stsUpdate("a", 5, 3).user("alice", lookup.ScalingPolicyFieldManager), false},
		{"identity unknown", Identity{}, stsUpdate("a", 5, 3).operatorOwn(), false},
		{"options not JSON", id, func() *reqBuilder {
			b := stsUpdate("a", 5, 3).operatorOwn()
			b.r.Options = runtime.RawExtension{Raw: []byte("{")}
			return b
		}(), false},
	} {
		if got := tc.id.ownScalingPolicyWrite(&tc.req.r); got != tc.own {
			t.Errorf("%s: own %v, want %v", tc.name, got, tc.own)
		}
	}
}
