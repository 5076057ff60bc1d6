// Package gatetest builds the groups, member states and query outcomes that
// the analysis tests share: the unit tests of package gate and the status
// tests of the controller start from the same fixtures.
package gatetest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// Group is a group of members a, b and c with one AfterBatch check "batch"
// and one AfterMember check "zone", a soak of soak, and policy.
func Group(soak time.Duration, policy v1alpha1.FailurePolicy, mutate func(*v1alpha1.RolloutGroup)) *v1alpha1.RolloutGroup {
	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Name: "ingester", Namespace: "mimir", Generation: 3}}
	rg.Spec.OnFailure = policy
	rg.Spec.Analysis = &v1alpha1.RolloutAnalysis{
		Prometheus: &v1alpha1.PrometheusSource{Address: "http://prometheus:9090"},
		SoakTime:   &metav1.Duration{Duration: soak},
		Checks: []v1alpha1.AnalysisCheck{
			{Name: "batch", Query: `errors{pod=~"{{ .Member }}-.*"}`, Gate: v1alpha1.GateAfterBatch,
				Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: "<", Threshold: "1"}}},
			{Name: "zone", Query: `up{sts="{{ .Member }}"}`, Gate: v1alpha1.GateAfterMember, SuccessThreshold: 2,
				Condition: v1alpha1.CheckCondition{HasData: ptr.To(true)}},
		},
	}
	rg.Status.StatefulSets = []v1alpha1.MemberStatus{{Name: "a", StableRevision: "r1"}, {Name: "b", StableRevision: "r1"}, {Name: "c", StableRevision: "r1"}}
	if mutate != nil {
		mutate(rg)
	}
	return rg
}

// Member is a member state: name, pods on r2 of 3, available pods.
func Member(name string, updated, available int32) rollout.MemberState {
	ms := rollout.MemberState{Name: name, Replicas: 3, Updated: updated, Available: available, Ready: available,
		MaxUnavailable: 1, UpdateRevision: "r2", CurrentRevision: "r1", StatusReplicas: 3, StatusReady: available, StatusUpdated: updated,
		StableRevision: "r1", Unavailable: 3 - available, ToRoll: 3 - updated, Phase: v1alpha1.MemberPending}
	if updated == 3 && available == 3 {
		ms.Phase = v1alpha1.MemberComplete
	}
	return ms
}

// Plan is a settled plan of members.
func Plan(members ...rollout.MemberState) rollout.Plan {
	return rollout.Plan{Settled: true, Members: members}
}

// Outcome is a query's outcome: a success (value 0) or a failure (value 5).
func Outcome(success bool) analysis.Outcome {
	return analysis.Outcome{Query: "q", Verdict: analysis.Verdict{Success: success, Value: map[bool]string{true: "0", false: "5"}[success]}}
}
