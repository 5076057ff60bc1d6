package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

// TestPrepareDownscaleOneZoneAtATime: two kubectl scale of two zones of a
// RolloutGroup sent at the same moment are not both admitted. Each
// admission asks the group's disruption budget (writing nothing), prepares
// its pods, then asks again on the API server and records its intent with
// an optimistic lock, so the second sees the first: exactly one is
// admitted, the other refused naming the zone that holds the budget, and
// any pod of it that was prepared is told to cancel. Several tries, each in
// a fresh namespace and group.
func TestPrepareDownscaleOneZoneAtATime(t *testing.T) {
	for try := range 3 {
		t.Run(fmt.Sprintf("try %d", try), func(t *testing.T) {
			e, g, ns := begin(t)
			ctx := context.Background()
			zones := []string{"ingester-zone-a", "ingester-zone-b"}
			sets := make([]*appsv1.StatefulSet, len(zones))
			servers := make([]*webhookstest.PodServer, len(zones))
			for i, zone := range zones {
				sets[i], servers[i] = e.preparingZone(t, ns, zone, 40+2*try+i)
			}
			e.completeGroup(t, ns, zones...)

			start := make(chan struct{})
			errs := make([]error, len(zones))
			var wg sync.WaitGroup
			for i := range sets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = scaleTo(ctx, e.admin, sets[i], 3)
				}()
			}
			close(start)
			wg.Wait()

			var admitted []int
			for i, err := range errs {
				if err == nil {
					admitted = append(admitted, i)
				}
			}
			g.Expect(admitted).To(HaveLen(1), "admitted: %v; answers: %v", admitted, errs)
			won, lost := admitted[0], 1-admitted[0]
			t.Logf("%s admitted; %s refused: %v", zones[won], zones[lost], errs[lost])
			g.Expect(errs[lost]).To(MatchError(And(
				ContainSubstring(`admission webhook "prepare-downscale.echelon.dev" denied the request`),
				ContainSubstring(fmt.Sprintf("downscale of StatefulSet %s from 5 to 3 denied: the disruption budget of RolloutGroup ingester", zones[lost])),
				ContainSubstring(zones[won]))))
			g.Expect(servers[won].DistinctCalls()).To(Equal([]string{
				fmt.Sprintf("POST %s-3", zones[won]), fmt.Sprintf("POST %s-4", zones[won])}))
			// Both may have prepared their pods before the recorded
			// decision (pod calls run before it, so that nothing slow
			// follows it); the refused zone's prepared pods are told to
			// cancel, each after its prepare.
			if calls := servers[lost].DistinctCalls(); len(calls) > 0 {
				g.Expect(calls).To(ConsistOf(
					fmt.Sprintf("DELETE %s-3", zones[lost]), fmt.Sprintf("DELETE %s-4", zones[lost]),
					fmt.Sprintf("POST %s-3", zones[lost]), fmt.Sprintf("POST %s-4", zones[lost])), "the refused zone's prepared pods are cancelled")
			}
			for i, want := range map[int]int32{won: 3, lost: 5} {
				g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(sets[i]), sets[i])).To(Succeed())
				g.Expect(*sets[i].Spec.Replicas).To(Equal(want), zones[i])
			}
		})
	}
}

// preparingZone creates the StatefulSet name of 5 pods, Running and Ready
// on revision r1 as its controller reports, each served by a PodServer on
// loopback net net8, and its ScalingPolicy name-scaling that prepares its
// downscales, and waits until the operator's cache holds them.
func (e *env) preparingZone(t *testing.T, ns, name string, net8 int) (*appsv1.StatefulSet, *webhookstest.PodServer) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pods := webhookstest.NewPodServer(t, net8, name, 0, 1, 2, 3, 4)
	sts := builders.MakeStatefulSet(ns, name).Replicas(5).OnDelete().Obj()
	g.Expect(e.admin.Create(ctx, sts)).To(Succeed())
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 5, ReadyReplicas: 5, AvailableReplicas: 5,
		UpdatedReplicas: 5, CurrentReplicas: 5, CurrentRevision: "r1", UpdateRevision: "r1"}
	g.Expect(e.admin.Status().Update(ctx, sts)).To(Succeed())
	for pod, ip := range pods.IPs() {
		ord, ok := podname.Ordinal(name, pod)
		if !ok {
			t.Fatalf("pod %s is not of StatefulSet %s", pod, name)
		}
		e.createPod(t, builders.MakePod(ns, name, ord).FromTemplate(sts.Spec.Template).ControlledBy(sts).Revision("r1").IP(ip).Obj())
	}
	prep := builders.MakeScalingPolicy(ns, name+"-scaling").Target(v1alpha1.TargetKindStatefulSet, name).Prepare("/ingester/prepare-shutdown", pods.Port, 2*time.Second).Obj()
	g.Expect(e.admin.Create(ctx, prep)).To(Succeed())
	e.waitForCache(t, prep, sts)
	return sts, pods
}
