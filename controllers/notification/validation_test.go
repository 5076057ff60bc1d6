package notification

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The API server refuses bad notification specs at admission, naming the
// field.
func TestNotificationValidation(t *testing.T) {
	cp := controllertest.APIServer(t)
	ns, err := cp.CreateNamespace(t.Context(), "validation")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, spec string
		want       string // "" accepts
	}{
		{name: "the documented example", spec: `
rolloutId: deploy-4711
notifications:
- {name: chat, secretRef: {name: rollout-slack}, format: Slack, events: [Started, MemberReached, Complete]}
- {name: deploys, secretRef: {name: rollout-hook}, timeout: 5s}
callback: {secretRef: {name: deploy-callback}}`},
		{name: "an unknown format", spec: "notifications: [{name: x, secretRef: {name: s}, format: Teams}]", want: "spec.notifications[0].format"},
		{name: "an unknown event", spec: "notifications: [{name: x, secretRef: {name: s}, events: [Deployed]}]", want: "spec.notifications[0].events[0]"},
		{name: "a receiver name that is no DNS label", spec: "notifications: [{name: Chat_1, secretRef: {name: s}}]", want: "spec.notifications[0].name"},
		{name: "two receivers of one name", spec: "notifications: [{name: x, secretRef: {name: s}}, {name: x, secretRef: {name: t}}]", want: "spec.notifications[1]"},
		{name: "no Secret", spec: "notifications: [{name: x}]", want: "spec.notifications[0].secretRef"},
		{name: "a URL in the spec", spec: "notifications: [{name: x, url: 'https://hooks.example/x', secretRef: {name: s}}]", want: `unknown field "spec.notifications[0].url"`},
		{name: "a zero timeout", spec: "notifications: [{name: x, secretRef: {name: s}, timeout: 0s}]", want: "spec.notifications[].timeout must be more than 0s"},
		{name: "a callback timeout over a minute", spec: "callback: {secretRef: {name: s}, timeout: 2m}", want: "spec.callback.timeout must be more than 0s and at most 1m"},
		{name: "a rolloutId with spaces", spec: "rolloutId: 'deploy 1'", want: "spec.rolloutId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			spec["statefulSets"] = []any{map[string]any{"name": "a"}}
			expectAdmission(t, cp, "RolloutGroup", ns, spec, tt.want)
		})
	}
}

// Each kind admits its own events only, naming the field.
func TestNotificationEventsOfEachKind(t *testing.T) {
	cp := controllertest.APIServer(t)
	ns, err := cp.CreateNamespace(t.Context(), "kinds")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, kind, events, want string
	}{
		{"ScalingPolicy events on a ScalingPolicy", "ScalingPolicy", "[Scaled, ScaleHeld, ScaleFailed]", ""},
		{"a rollout event on a ScalingPolicy", "ScalingPolicy", "[Scaled, Complete]", "spec.notifications[].events of a ScalingPolicy may name Scaled, ScaleHeld and ScaleFailed only"},
		{"DelayedDownscale events on a DelayedDownscale", "DelayedDownscale", "[DownscaleRequested, DownscaleDelayed, DownscaleDone, DownscaleCancelled, DownscaleFailed]", ""},
		{"a ScalingPolicy event on a DelayedDownscale", "DelayedDownscale", "[Scaled]", "spec.notifications[].events of a DelayedDownscale may name"},
		{"a DelayedDownscale event on a RolloutGroup", "RolloutGroup", "[Started, DownscaleDone]", "spec.notifications[].events of a RolloutGroup may name"},
	}
	base := map[string]string{
		"ScalingPolicy":    "targetRef: {kind: StatefulSet, name: b}\nreplicasFrom: {leader: {name: a}}",
		"DelayedDownscale": "targetRef: {name: a}\ndelay: 1h\nprepareEndpoint: {path: /prepare, port: 8080}",
		"RolloutGroup":     "statefulSets: [{name: a}]",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := map[string]any{}
			src := base[tt.kind] + "\nnotifications: [{name: x, secretRef: {name: s}, events: " + tt.events + "}]"
			if err := yaml.Unmarshal([]byte(src), &spec); err != nil {
				t.Fatal(err)
			}
			expectAdmission(t, cp, tt.kind, ns, spec, tt.want)
		})
	}
}

// expectAdmission creates (dry run) an object of kind with spec and
// expects the API server to admit it (want "") or refuse it with an error
// containing want.
func expectAdmission(t *testing.T, cp *controlplane.ControlPlane, kind, ns string, spec map[string]any, want string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "echelon.dev/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": "o", "namespace": ns}, "spec": spec,
	}}
	err := cp.Client().Create(t.Context(), obj, client.DryRunAll, client.FieldValidation("Strict"))
	if want == "" && err != nil {
		t.Fatalf("refused: %v", err)
	}
	if want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}
