package rollout

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/podname"
)

// BudgetDecision is the group's one disruption budget's answer to a batch:
// the request the planner made for it and disruption.Decide's verdict.
type BudgetDecision struct {
	Request disruption.Request
	Verdict disruption.Verdict
	// Reserved: the group's own reservation (disruption.Covers) already
	// counts the batch's pods; Verdict.Intent is that reservation, and
	// the batch goes with no write before it.
	Reserved bool
}

// Record reports whether the batch may go once Verdict.Intent is recorded
// in the group's status.disruption (budget.Acquire): every batch allowed
// that no reservation of the group's covers.
func (b *BudgetDecision) Record() bool {
	return b != nil && b.Verdict.Allowed && !b.Reserved
}

// BudgetView is the view of the group the budget judges a batch on, built
// from the planner's own input: each member with a StatefulSet a zone, with
// its rollout maxUnavailable, and the intents recorded in the group's status.
// budget.ViewOf builds the same view from the same members, for the decision
// made again on the hold read live.
func BudgetView(in Input) disruption.View {
	v := disruption.View{Now: in.Now, Intents: in.Intents}
	for _, m := range in.Members {
		if m.StatefulSet == nil {
			continue
		}
		opts := disruption.ZoneOptions{
			MaxUnavailable:  ResolveMaxUnavailable(m.MaxUnavailable, kube.Replicas(m.StatefulSet)),
			MinReadySeconds: in.MinReadySeconds,
			Now:             in.Now,
			Deleting:        in.Deleting,
		}
		v.Zones = append(v.Zones, disruption.ZoneOf(m.StatefulSet, m.Pods, opts))
	}
	return v
}

// BatchRequest is the request for a batch of pods of member, by holder.
func BatchRequest(member string, pods []*corev1.Pod, holder string) disruption.Request {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return disruption.Request{Zone: member, Reason: v1alpha1.DisruptionRollout, Pods: names, Holder: holder}
}

// askBudget asks the budget about the batch the plan deletes, and holds it
// back when the budget refuses.
func askBudget(in Input, p *Plan) {
	if len(p.Delete) == 0 {
		return
	}
	req := BatchRequest(p.Current, p.Delete, in.Holder)
	v := BudgetView(in)
	if p.CurrentPartitioned() {
		// A partition's next slot goes under the reservation recorded for
		// the zone's first, with no write between a pod becoming available
		// and the partition lowered for the next; a slot it does not cover
		// records a new reservation for the rest of the zone.
		if verdict := disruption.Reserved(v, req); verdict.Allowed {
			p.Budget = &BudgetDecision{Request: req, Verdict: verdict, Reserved: true}
			return
		}
		req.Then = p.releasedAfter(req.Pods)
	}
	p.Budget = &BudgetDecision{Request: req, Verdict: disruption.Decide(v, req)}
	if !p.Budget.Verdict.Allowed {
		p.WaitForBudget(p.Budget.Verdict)
	}
}

// maxReservedPods is the most pods one intent names (the API's bound).
const maxReservedPods = 512

// releasedAfter is the current partitioned member's outdated pods that the
// partition will release after batch, in the order it releases them
// (highest ordinal first), so that the batch's reservation names the
// whole zone: every pod below the batch's partition.
func (p *Plan) releasedAfter(batch []string) []string {
	i := slices.IndexFunc(p.Members, func(ms MemberState) bool { return ms.Name == p.Current })
	if i < 0 {
		return nil
	}
	ms := &p.Members[i]
	type ordered struct {
		ord  int
		name string
	}
	var rest []ordered
	for _, pod := range ms.Outdated {
		ord, ok := podname.Ordinal(ms.Name, pod.Name)
		if ok && int32(ord) < ms.start+ms.ReleasePartition && !slices.Contains(batch, pod.Name) {
			rest = append(rest, ordered{ord, pod.Name})
		}
	}
	slices.SortFunc(rest, func(a, b ordered) int { return cmp.Compare(b.ord, a.ord) })
	var out []string
	for _, o := range rest {
		if len(batch)+len(out) >= maxReservedPods {
			break
		}
		out = append(out, o.name)
	}
	return out
}

// WaitForBudget turns the plan into a wait for the group's disruption budget,
// which refused its batch (v): nothing is deleted, the reason is
// WaitingForDisruption, the message says who holds the budget or which zone
// is disrupted, and the group looks again when the hold lapses.
func (p *Plan) WaitForBudget(v disruption.Verdict) {
	p.Delete = nil
	p.Reason = v1alpha1.ReasonWaitingForDisruption
	p.RequeueAfter = MinPositive(p.RequeueAfter, v.RetryAfter)
	if p.Budget != nil {
		p.Budget.Verdict = v
	}
	for i := range p.Members {
		ms := &p.Members[i]
		if ms.Name != p.Current {
			continue
		}
		ms.Message = "waiting: " + v.Message
		p.Message = fmt.Sprintf("%s: %d/%d updated, waiting: %s", ms.Name, ms.Updated, ms.Replicas, v.Message)
	}
}
