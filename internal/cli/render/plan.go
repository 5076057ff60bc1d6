package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// PlanView is the planner's decision on a group's live objects, made by the
// plugin without acting on it.
type PlanView struct {
	Group *v1alpha1.RolloutGroup
	Plan  rollout.Plan
	// IfResumed is the decision with spec.paused unset, for a paused group:
	// what the operator deletes once it is resumed.
	IfResumed *rollout.Plan
	// IfPromoted is the decision with echelon.dev/promote given, for a group
	// whose step waits for a promote: what the promote starts.
	IfPromoted *rollout.Plan
	// MinReadySeconds is the group's, which availability is judged by.
	MinReadySeconds int32
	// Notes say what the dry run did not do that the operator would.
	Notes []string
	Now   time.Time
}

// Plan writes the decision: each member as the planner counted it, then the
// pods that would be deleted next and why each, or why none would.
func Plan(w io.Writer, v PlanView, s Style) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan for RolloutGroup %s/%s at %s (dry run: nothing is changed)\n\n",
		v.Group.Namespace, s.Bold(v.Group.Name), stamp(v.Now))

	rows := [][]cell{{plain("MEMBER"), plain("PHASE"), plain("UPDATED"), plain("UNAVAILABLE"), plain("MAXUNAVAILABLE"), plain("OUTDATED"), plain("REVISION")}}
	for _, ms := range v.Plan.Members {
		phase := string(ms.Phase)
		rows = append(rows, []cell{plain(ms.Name), {text: phase, paint: s.Phase},
			plain(fmt.Sprintf("%d/%d", ms.Updated, ms.Replicas)),
			plain(fmt.Sprintf("%d", ms.Unavailable+ms.Leaving)),
			plain(fmt.Sprintf("%d", ms.MaxUnavailable)),
			plain(fmt.Sprintf("%d", ms.ToRoll)),
			plain(shortRevision(ms.Name, ms.UpdateRevision))})
	}
	for _, line := range table(rows) {
		b.WriteString(line)
		b.WriteString("\n")
	}
	b.WriteString("\n")

	switch st := v.Plan.Step; {
	case st == nil:
	case st.WaitingFor == v1alpha1.StepWaitDone:
		fmt.Fprintf(&b, "Step: all %d steps done\n\n", len(v.Group.Spec.Steps))
	default:
		fmt.Fprintf(&b, "Step: %d of %d, %d%% (%d pods), waiting for %s\n\n", st.Index+1, len(v.Group.Spec.Steps), st.Percent, st.Target, stepWait(st.WaitingFor))
	}
	writeDecision(&b, "Next", v.Plan, v, s)
	if v.IfResumed != nil {
		b.WriteString("\n")
		writeDecision(&b, "Once resumed", *v.IfResumed, v, s)
	}
	if p := v.IfPromoted; p != nil {
		label := fmt.Sprintf("Once promoted (kubectl echelon promote %s)", v.Group.Name)
		if st := p.Step; st != nil && st.WaitingFor != v1alpha1.StepWaitDone {
			label += fmt.Sprintf(", step %d of %d, %d%% (%d pods)", st.Index+1, len(v.Group.Spec.Steps), st.Percent, st.Target)
		}
		b.WriteString("\n")
		writeDecision(&b, label, *p, v, s)
	}
	if line := volumePlanLine(v.Group); line != "" {
		fmt.Fprintf(&b, "\n%s\n", line)
	}
	for _, n := range v.Notes {
		fmt.Fprintf(&b, "Note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDecision writes one decision: the batch and each pod's reason, or
// that nothing goes; then the planner's own words and reason.
func writeDecision(b *strings.Builder, label string, p rollout.Plan, v PlanView, s Style) {
	if len(p.Delete) == 0 {
		fmt.Fprintf(b, "%s: %s\n", label, s.Bold("no pod would be deleted"))
	} else {
		ms := memberState(p, p.Current)
		fmt.Fprintf(b, "%s: %s of %s, to revision %s\n", label, s.Bold("delete "+rollout.Plural(len(p.Delete), "pod")),
			p.Current, shortRevision(p.Current, ms.UpdateRevision))
		used := ms.Unavailable + ms.Leaving
		rows := make([][]cell, 0, len(p.Delete))
		for _, pod := range p.Delete {
			rows = append(rows, []cell{plain("  " + pod.Name), plain("revision " + shortRevision(p.Current, podRevision(pod))),
				plain(deletionReason(pod, v, &used, ms.MaxUnavailable))})
		}
		for _, line := range table(rows) {
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	why := p.Message
	if p.Reason != "" {
		why += " (" + p.Reason + ")"
	}
	fmt.Fprintf(b, "Why: %s\n", why)
	if p.Budget != nil {
		verdict := p.Budget.Verdict
		if verdict.Allowed {
			fmt.Fprintf(b, "Budget: allowed; the operator records the batch of zone %s in status.disruption, on a fresh read, before deleting\n", p.Current)
		} else {
			fmt.Fprintf(b, "Budget: refused: %s\n", verdict.Message)
		}
	}
}

// deletionReason says why the planner picked the pod: outdated, and either
// already unavailable (free to replace) or taking one unit of the member's
// maxUnavailable. used counts the units taken so far.
func deletionReason(pod *corev1.Pod, v PlanView, used *int32, maxUnavailable int32) string {
	if pod.DeletionTimestamp == nil && !podAvailable(pod, v.MinReadySeconds, v.Now) {
		return "outdated and not available: replaced at no cost to maxUnavailable"
	}
	*used++
	return fmt.Sprintf("outdated and available: takes %d of maxUnavailable %d", *used, maxUnavailable)
}

func memberState(p rollout.Plan, name string) rollout.MemberState {
	for _, ms := range p.Members {
		if ms.Name == name {
			return ms
		}
	}
	return rollout.MemberState{Name: name}
}

func podRevision(pod *corev1.Pod) string { return pod.Labels[appsv1.ControllerRevisionHashLabelKey] }
