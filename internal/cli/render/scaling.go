package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// ScalingPolicyView is a policy with its target StatefulSet (nil when it is
// missing or not a StatefulSet), read at Now.
type ScalingPolicyView struct {
	Policy *v1alpha1.ScalingPolicy
	Target *appsv1.StatefulSet
	Now    time.Time
}

// ScalingPolicy writes the policy: its target and source, the replicas it
// has, wants and the source asks for, and what it waits for and until when.
func ScalingPolicy(w io.Writer, v ScalingPolicyView, s Style) error {
	sp := v.Policy
	st := sp.Status
	var b strings.Builder
	field := header(&b, s, sp.Name, sp.Namespace, string(st.Phase), conditionReason(st.Conditions, v1alpha1.ScalingConditionReady))
	if sp.Spec.Paused {
		field("Paused", s.Phase("Paused")+": spec.paused is set; replicas are frozen")
	}
	field("Target", fmt.Sprintf("%s %s", sp.Spec.TargetRef.KindOrDefault(), sp.Spec.TargetRef.Name))
	source := st.Source
	if source == "" {
		source = "-"
	}
	field("Source", source)
	replicas := fmt.Sprintf("%d now, %s desired, %s asked by the source", st.Replicas, optional(st.DesiredReplicas), optional(st.SourceReplicas))
	if v.Target != nil {
		replicas += fmt.Sprintf("; StatefulSet %d/%d Ready", v.Target.Status.ReadyReplicas, v.Target.Status.Replicas)
	}
	field("Replicas", replicas)
	field("Waiting for", scalingWait(sp, v.Now))
	if st.LastDownscaleTime != nil {
		field("Downscaled", fmt.Sprintf("%s (%s)", ago(v.Now, st.LastDownscaleTime.Time), stamp(st.LastDownscaleTime.Time)))
	}
	if d := sp.Spec.MinTimeBetweenZoneDownscales; d != nil {
		field("Zone delay", d.Duration.String()+" between downscales of the group's zones")
	}
	if p := st.PendingDownscale; p != nil {
		field("Pending", fmt.Sprintf("downscale to %d admitted %s, confirmed by %s", p.Replicas, ago(v.Now, p.AdmittedAt.Time), stamp(p.Deadline.Time)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// scalingWait says what the policy waits for and until when.
func scalingWait(sp *v1alpha1.ScalingPolicy, now time.Time) string {
	st := sp.Status
	if st.Phase == "" {
		return "the operator to report a status (is it running and watching this namespace?)"
	}
	msg := st.Message
	if st.Phase == v1alpha1.ScalingPhaseStable {
		msg = "nothing: " + msg
	}
	if st.WaitingUntil != nil {
		msg += fmt.Sprintf("; until %s (%s)", stamp(st.WaitingUntil.Time), ago(now, st.WaitingUntil.Time))
	}
	if st.WaitingSince != nil {
		msg += " (since " + ago(now, st.WaitingSince.Time) + ")"
	}
	return msg
}

func optional(n *int32) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// conditionReason is the reason of the condition of type typ, "" without one.
func conditionReason(conditions []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conditions, typ); c != nil {
		return c.Reason
	}
	return ""
}

// header starts a view with the object's name, namespace and phase, and
// returns how to add a field to it: a label and its value, aligned.
func header(b *strings.Builder, s Style, name, namespace, phase, reason string) func(label, value string) {
	field := func(label, value string) { fmt.Fprintf(b, "%-13s %s\n", label+":", value) }
	field("Name", s.Bold(name))
	field("Namespace", namespace)
	field("Phase", phaseWithReason(phase, reason, s))
	return field
}

// phaseWithReason is a phase, coloured, with the reason that explains it.
func phaseWithReason(phase, reason string, s Style) string {
	if phase == "" {
		phase = "Unknown"
	}
	if reason == "" {
		return s.Phase(phase)
	}
	return s.Phase(phase) + " (" + reason + ")"
}
