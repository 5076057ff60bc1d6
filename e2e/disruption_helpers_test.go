package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// budgetGroup is a three-zone group whose pods run on the spec's own nodes
// (a first node per zone, and a spare where evicted pods come back), with
// an operator serving the webhooks (the eviction webhook among them) and a
// monitor that fails on any moment with two zones short at once.
type budgetGroup struct {
	*zoneGroup
	nodes *specNodes
	mon   *framework.Monitor
}

// newBudgetGroup creates the nodes, the StatefulSets of replicas pods on
// them, the group with spec edited by mutate, and the operator, and arms the
// monitor once the group is Complete.
func newBudgetGroup(ctx context.Context, replicas int32, mutate func(*v1alpha1.RolloutGroupSpec)) *budgetGroup {
	GinkgoHelper()
	g := newZones(ctx, replicas)
	// Before the operator, so that the nodes go after it has stopped.
	nodes := newSpecNodes(ctx, g.ns, g.zones, 2)
	g.createStatefulSets(ctx, nodes.pin)
	g.waitPodsOn(ctx, "v1")
	nodes.openSpares(ctx)
	g.createGroup(ctx, mutate)
	startWebhookOperator(ctx, "echelon", g.ns, fastLeaderElection...)
	g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
	mon := g.monitor(ctx)
	mon.JudgeEveryMoment()
	return &budgetGroup{zoneGroup: g, nodes: nodes, mon: mon}
}

// evict asks the Eviction API to evict pod of ns, as a drain does; with
// dryRun the API server and the webhooks decide without acting.
func evict(ctx context.Context, ns, pod string, dryRun bool) error {
	e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
	if dryRun {
		e.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return clientset.PolicyV1().Evictions(ns).Evict(ctx, e)
}

// conditionReasons lists the reasons of the group's conditions.
func conditionReasons(rg *v1alpha1.RolloutGroup) []string {
	var out []string
	for _, c := range rg.Status.Conditions {
		out = append(out, c.Reason)
	}
	return out
}

// evictionBudget sets the group's spec.disruptionBudget.maxUnavailable: how
// many pods of a zone evictions may take at once.
func evictionBudget(n int32) func(*v1alpha1.RolloutGroupSpec) {
	return func(s *v1alpha1.RolloutGroupSpec) {
		s.DisruptionBudget = &v1alpha1.ZoneBudget{MaxUnavailable: ptrIntOrString(intstr.FromInt32(n))}
	}
}
