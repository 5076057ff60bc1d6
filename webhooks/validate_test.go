package webhooks

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// errorsOf renders errs as "<field>: <detail>" for comparison.
func errorsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Detail)
	}
	return out
}

func sameErrors(t *testing.T, got field.ErrorList, want []string) {
	t.Helper()
	g := errorsOf(got)
	if len(g) != len(want) {
		t.Fatalf("errors %q, want %q", g, want)
	}
	for i := range want {
		if !strings.HasPrefix(g[i], want[i]) {
			t.Errorf("error %d: %q, want it to start with %q", i, g[i], want[i])
		}
	}
}

func TestValidateRolloutGroup(t *testing.T) {
	sets := []appsv1.StatefulSet{
		*builders.MakeStatefulSet(testNS, "zone-a").Replicas(3).TypeMeta().Label("app", "ingester").Obj(),
		*builders.MakeStatefulSet(testNS, "zone-b").Replicas(3).TypeMeta().Label("app", "ingester").Obj(),
		*builders.MakeStatefulSet(testNS, "zone-c").Replicas(3).TypeMeta().Label("app", "ingester").Label("tier", "hot").Obj(),
		*builders.MakeStatefulSet(testNS, "store-a").Replicas(3).TypeMeta().Label("app", "store").Obj(),
	}
	for _, tc := range []struct {
		name   string
		group  v1alpha1.RolloutGroup
		others []v1alpha1.RolloutGroup
		want   []string
	}{
		{name: "alone", group: *builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a", "zone-b").Obj()},
		{name: "disjoint groups", group: *builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a", "zone-b").Obj(), others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "store").Members("store-a").Obj()}},
		{name: "its own stored version does not count", group: *builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a").Obj(), others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a").Obj()}},
		{name: "a member listed by another group",
			group:  *builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a", "zone-b").Obj(),
			others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "other").Members("zone-b").Obj()},
			want:   []string{"spec.statefulSets[1].name: StatefulSet zone-b is already a member of RolloutGroup other"}},
		{name: "a listed member that does not exist yet, listed by another group",
			group:  *builders.MakeRolloutGroup(testNS, "ingester").Members("zone-x").Obj(),
			others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "other").Members("zone-x").Obj()},
			want:   []string{"spec.statefulSets[0].name: StatefulSet zone-x is already a member of RolloutGroup other"}},
		{name: "a member selected by another group",
			group:  *builders.MakeRolloutGroup(testNS, "ingester").Members("zone-c", "store-a").Obj(),
			others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "hot").Selector("tier", "hot").Obj()},
			want:   []string{"spec.statefulSets[0].name: StatefulSet zone-c is already a member of RolloutGroup hot"}},
		{name: "a selector matching another group's members",
			group:  *builders.MakeRolloutGroup(testNS, "ingester").Selector("app", "ingester").Obj(),
			others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "b").Members("zone-b").Obj(), *builders.MakeRolloutGroup(testNS, "a").Members("zone-a", "zone-b").Obj()},
			want: []string{
				"spec.selector: selects StatefulSet zone-a, which is already a member of RolloutGroup a",
				"spec.selector: selects StatefulSet zone-b, which is already a member of RolloutGroup a, b",
			}},
		{name: "two selectors overlapping",
			group:  *builders.MakeRolloutGroup(testNS, "hot").Selector("tier", "hot").Obj(),
			others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "ingester").Selector("app", "ingester").Obj()},
			want:   []string{"spec.selector: selects StatefulSet zone-c, which is already a member of RolloutGroup ingester"}},
		{name: "a selector matching nothing claimed", group: *builders.MakeRolloutGroup(testNS, "store").Selector("app", "store").Obj(),
			others: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "ingester").Selector("app", "ingester").Obj()}},
		{name: "an invalid selector",
			group: func() v1alpha1.RolloutGroup {
				g := *builders.MakeRolloutGroup(testNS, "bad").Obj()
				g.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
				return g
			}(),
			want: []string{`spec.selector: "Near" is not a valid`}},
		{name: "a query template that is more than the variables",
			group: func() v1alpha1.RolloutGroup {
				g := *builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a").Obj()
				g.Spec.Analysis = &v1alpha1.RolloutAnalysis{Checks: []v1alpha1.AnalysisCheck{
					{Name: "errors", Query: `up{pod=~"{{ .Member }}-.*"}`},
					{Name: "nested", Query: `{{ define "a" }}x{{ end }}{{ template "a" }}`},
				}}
				return g
			}(),
			want: []string{`spec.analysis.checks[1].query: check nested: query template: {{ define "a" }} at byte 0 is not a variable`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameErrors(t, ValidateRolloutGroup(&tc.group, NamespaceObjects{RolloutGroups: tc.others, StatefulSets: sets}), tc.want)
		})
	}
}

func TestValidateScalingPolicy(t *testing.T) {
	groups := []v1alpha1.RolloutGroup{
		*builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a", "zone-b", "zone-c").Obj(),
		*builders.MakeRolloutGroup(testNS, "store").Selector("app", "store").Obj(),
	}
	sets := []appsv1.StatefulSet{
		*builders.MakeStatefulSet(testNS, "store-a").Replicas(3).TypeMeta().Label("app", "store").Obj(),
		*builders.MakeStatefulSet(testNS, "store-b").Replicas(3).TypeMeta().Label("app", "store").Obj(),
	}
	for _, tc := range []struct {
		name   string
		policy v1alpha1.ScalingPolicy
		others []v1alpha1.ScalingPolicy
		want   []string
	}{
		{name: "alone", policy: *builders.MakeScalingPolicy(testNS, "b").Target("StatefulSet", "zone-b").Leader("zone-a").Obj()},
		{name: "its own stored version does not count", policy: *builders.MakeScalingPolicy(testNS, "b").Target("StatefulSet", "zone-b").Obj(),
			others: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "b").Target("StatefulSet", "zone-b").Obj()}},
		{name: "a target claimed by another policy",
			policy: *builders.MakeScalingPolicy(testNS, "b2").Target("StatefulSet", "zone-b").Obj(),
			others: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "b1").Target("", "zone-b").Obj(), *builders.MakeScalingPolicy(testNS, "c").Target("StatefulSet", "zone-c").Obj()},
			want:   []string{"spec.targetRef.name: StatefulSet zone-b is already the target of ScalingPolicy b1"}},
		{name: "same name, another kind: no conflict",
			policy: *builders.MakeScalingPolicy(testNS, "gw").Target("Deployment", "zone-b").Obj(),
			others: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "b").Target("StatefulSet", "zone-b").Obj()}},
		{name: "a Deployment claimed twice",
			policy: *builders.MakeScalingPolicy(testNS, "gw2").Target("Deployment", "gateway").Obj(),
			others: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "gw1").Target("Deployment", "gateway").Obj()},
			want:   []string{"spec.targetRef.name: Deployment gateway is already the target of ScalingPolicy gw1"}},
		{name: "a leader in another group",
			policy: *builders.MakeScalingPolicy(testNS, "store-b").Target("StatefulSet", "store-b").Leader("zone-a").Obj(),
			want:   []string{"spec.replicasFrom.leader.name: leader StatefulSet zone-a is in RolloutGroup ingester, and the target store-b in RolloutGroup store"}},
		{name: "a leader in the same group, by selector", policy: *builders.MakeScalingPolicy(testNS, "store-b").Target("StatefulSet", "store-b").Leader("store-a").Obj()},
		{name: "a leader in no group", policy: *builders.MakeScalingPolicy(testNS, "b").Target("StatefulSet", "zone-b").Leader("lonely").Obj()},
		{name: "a target in no group", policy: *builders.MakeScalingPolicy(testNS, "x").Target("StatefulSet", "lonely").Leader("zone-a").Obj()},
		{name: "both rules at once",
			policy: *builders.MakeScalingPolicy(testNS, "store-b2").Target("StatefulSet", "store-b").Leader("zone-a").Obj(),
			others: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "store-b").Target("StatefulSet", "store-b").Obj()},
			want: []string{
				"spec.targetRef.name: StatefulSet store-b is already the target of ScalingPolicy store-b",
				"spec.replicasFrom.leader.name: leader StatefulSet zone-a",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := NamespaceObjects{RolloutGroups: groups, ScalingPolicies: tc.others, StatefulSets: sets}
			sameErrors(t, ValidateScalingPolicy(&tc.policy, objs), tc.want)
		})
	}
}

// echelonRequest is a CREATE or UPDATE of an echelon.dev object.
func echelonRequest(op admissionv1.Operation, resource string, old, new runtime.Object) *reqBuilder {
	gvk := v1alpha1.GroupVersion.WithKind(map[string]string{"rolloutgroups": "RolloutGroup", "scalingpolicies": "ScalingPolicy", "zonedisruptionbudgets": "ZoneDisruptionBudget"}[resource])
	new.GetObjectKind().SetGroupVersionKind(gvk)
	b := &reqBuilder{admissionv1.AdmissionRequest{
		UID:       "req-1",
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
		Name:      new.(metav1.Object).GetName(),
		Namespace: testNS,
		Operation: op,
		Object:    raw(new),
	}}
	if old != nil {
		old.GetObjectKind().SetGroupVersionKind(gvk)
		b.r.OldObject = raw(old)
	}
	return b
}

// TestValidate: the validation webhook through its handler: a field.ErrorList
// becomes an Invalid status naming the fields; an UPDATE is refused only for
// errors the old object did not have.
func TestValidate(t *testing.T) {
	objs := NamespaceObjects{
		RolloutGroups:   []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "other").Members("zone-b").Obj()},
		ScalingPolicies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "b1").Target("StatefulSet", "zone-b").Obj()},
	}
	g := func(members ...string) *v1alpha1.RolloutGroup {
		o := builders.MakeRolloutGroup(testNS, "ingester").Members(members...).Obj()
		o.UID = "uid-ingester"
		return o
	}
	withLabel := func(rg *v1alpha1.RolloutGroup) *v1alpha1.RolloutGroup {
		rg.Labels = map[string]string{"team": "x"}
		return rg
	}
	for _, tc := range []struct {
		name    string
		req     *reqBuilder
		allowed bool
		reason  string
		code    int32
		message string
		warning string
		causes  []string
		event   bool
	}{
		{name: "CREATE of a valid group", req: echelonRequest(admissionv1.Create, "rolloutgroups", nil, g("zone-a")), allowed: true, reason: reasonValid},
		{name: "CREATE of a group claiming another's member",
			req: echelonRequest(admissionv1.Create, "rolloutgroups", nil, g("zone-a", "zone-b")), reason: reasonInvalid, code: http.StatusUnprocessableEntity,
			message: `RolloutGroup.echelon.dev "ingester" is invalid: spec.statefulSets[1].name: Invalid value: "zone-b": StatefulSet zone-b is already a member of RolloutGroup other`,
			causes:  []string{"spec.statefulSets[1].name"}},
		{name: "UPDATE adding a claimed member: an Event on the group",
			req:    echelonRequest(admissionv1.Update, "rolloutgroups", g("zone-a"), g("zone-a", "zone-b")),
			reason: reasonInvalid, code: http.StatusUnprocessableEntity, message: "spec.statefulSets[1].name", event: true},
		{name: "UPDATE keeping an old conflict: allowed, with a warning",
			req:     echelonRequest(admissionv1.Update, "rolloutgroups", g("zone-b"), withLabel(g("zone-b"))),
			allowed: true, reason: reasonValid, warning: "already so before this change: spec.statefulSets[0].name"},
		{name: "UPDATE moving an old conflict down the list: still the old one",
			req:     echelonRequest(admissionv1.Update, "rolloutgroups", g("zone-b"), g("zone-a", "zone-b")),
			allowed: true, reason: reasonValid, warning: "already so before this change"},
		{name: "CREATE of a policy for a claimed target",
			req:    echelonRequest(admissionv1.Create, "scalingpolicies", nil, builders.MakeScalingPolicy(testNS, "b2").Target("StatefulSet", "zone-b").Obj()),
			reason: reasonInvalid, code: http.StatusUnprocessableEntity, message: "spec.targetRef.name", causes: []string{"spec.targetRef.name"}},
		{name: "DELETE is not judged", req: echelonRequest(admissionv1.Delete, "rolloutgroups", nil, g("zone-b")), allowed: true, reason: reasonUnhandled},
		{name: "another echelon.dev resource is not judged", req: func() *reqBuilder {
			b := echelonRequest(admissionv1.Create, "rolloutgroups", nil, g("zone-b"))
			b.r.Resource.Resource = "widgets"
			return b
		}(), allowed: true, reason: reasonUnhandled, warning: "does not handle CREATE of widgets.echelon.dev"},
		{name: "status is not judged", req: func() *reqBuilder {
			b := echelonRequest(admissionv1.Update, "rolloutgroups", g("zone-a"), g("zone-b"))
			b.r.SubResource = "status"
			return b
		}(), allowed: true, reason: reasonUnhandled},
		{name: "an object of another kind", req: func() *reqBuilder {
			b := echelonRequest(admissionv1.Create, "rolloutgroups", nil, g("zone-b"))
			b.r.Object = raw(map[string]any{"apiVersion": "echelon.dev/v1alpha1", "kind": "ScalingPolicy"})
			return b
		}(), reason: reasonMalformed, code: http.StatusBadRequest, message: "want echelon.dev/v1alpha1 RolloutGroup"},
		{name: "an UPDATE without its old object", req: func() *reqBuilder {
			b := echelonRequest(admissionv1.Update, "rolloutgroups", nil, g("zone-b"))
			return b
		}(), reason: reasonMalformed, code: http.StatusBadRequest, message: "request.oldObject is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := &eventRecorder{}
			a := serve(t, handler("test-validate", &Validate{Cluster: &fakeCluster{objs: objs}}, events), tc.req.review(), "")
			checkAnswer(t, a, tc.allowed, tc.code, tc.message, tc.warning)
			if !tc.allowed && tc.code == http.StatusUnprocessableEntity {
				if a.response.Result.Reason != metav1.StatusReasonInvalid || a.response.Result.Details == nil {
					t.Fatalf("status %+v, want reason Invalid with details", a.response.Result)
				}
				var fields []string
				for _, c := range a.response.Result.Details.Causes {
					fields = append(fields, c.Field)
				}
				if tc.causes != nil && strings.Join(fields, ",") != strings.Join(tc.causes, ",") {
					t.Errorf("causes name %q, want %q", fields, tc.causes)
				}
			}
			if got := events.list(); tc.event != (len(got) == 1) || tc.event && (got[0].kind != "RolloutGroup" || got[0].uid != "uid-ingester" || got[0].reason != EventReasonInvalidChange) {
				body, _ := json.Marshal(got)
				t.Errorf("Events %s, want one on the group: %v", body, tc.event)
			}
		})
	}
}
