package delayeddownscale

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// Two DelayedDownscales of one StatefulSet (admission is best effort): both
// are Blocked, each naming the other, no pod is asked to prepare and the
// StatefulSet keeps its replicas; once one is deleted, the other goes on.
func TestDelayedDownscalesOfOneTargetBlockEachOther(t *testing.T) {
	e := newScalingEnv(t)
	pods := startPreparePods(t)
	servedStatefulSet(e, 4)
	var dds []*v1alpha1.DelayedDownscale
	for _, name := range []string{"ing-a", "ing-b"} {
		dd := builders.MakeDelayedDownscale(e.NS, name).Target("ing").Delay("1h").PrepareEndpoint("/prepare", int32(pods.port)).Obj()
		if err := e.Admin.Create(e.Ctx, dd); err != nil {
			t.Fatal(err)
		}
		dds = append(dds, dd)
	}
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })

	blockedBy := func(dd *v1alpha1.DelayedDownscale, other string) func() (bool, error) {
		return func() (bool, error) {
			got := &v1alpha1.DelayedDownscale{}
			if err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), got); err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.DelayedConditionReady)
			return got.Status.Phase == v1alpha1.DelayedPhaseBlocked && c != nil && c.Reason == v1alpha1.DelayedReasonTargetClaimedByOther &&
				strings.Contains(got.Status.Message, "DelayedDownscale "+other), nil
		}
	}
	e.Eventually(10*time.Second, "ing-a Blocked, naming ing-b", blockedBy(dds[0], "ing-b"))
	e.Eventually(10*time.Second, "ing-b Blocked, naming ing-a", blockedBy(dds[1], "ing-a"))
	time.Sleep(time.Second) // let a pass that would prepare pods happen
	if posts := pods.callsOf("POST"); len(posts) > 0 {
		t.Errorf("pods asked to prepare by one of two DelayedDownscales of the StatefulSet: %v", posts)
	}
	if n := *e.GetSTS("ing").Spec.Replicas; n != 4 {
		t.Errorf("StatefulSet has %d replicas, want its 4 while its DelayedDownscales are Blocked", n)
	}

	if err := e.Admin.Delete(e.Ctx, dds[1]); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "ing-a preparing pods 3 and 2 once alone", func() (bool, error) {
		got := &v1alpha1.DelayedDownscale{}
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dds[0]), got)
		return err == nil && got.Status.Phase == v1alpha1.DelayedPhaseWaiting && got.Status.PreparedCount == 2, err
	})
}
