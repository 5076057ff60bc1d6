package rolloutgroup

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/test/builders"
)

func TestComputeStatusRotation(t *testing.T) {
	restartAt := ago(time.Minute)
	toRestart := func(n int) []*corev1.Pod {
		var pods []*corev1.Pod
		for i := range n {
			pods = append(pods, builders.MakePod("mimir", "a", i).Obj())
		}
		return pods
	}
	whole := func(name string) rollout.MemberState {
		m := member(name, 3, 3, 3, v1alpha1.MemberComplete)
		m.CurrentRevision = "r2"
		return m
	}
	rotating := func(n int) rollout.Plan {
		a := whole("a")
		a.Phase, a.ToRestart = v1alpha1.MemberRolling, toRestart(n)
		return rollout.Plan{Current: "a", Message: "a: 3 pods to restart, restarting 1 pod", Reason: v1alpha1.ReasonRestartingPods,
			Settled: true, Rotation: true, ToRestart: int32(n), Members: []rollout.MemberState{a, whole("b")}}
	}
	complete := rollout.Plan{Complete: true, Settled: true, Reason: v1alpha1.ReasonUpToDate, Message: "all members updated and available",
		Members: []rollout.MemberState{whole("a"), whole("b")}}
	openRotation := func(rg *v1alpha1.RolloutGroup) {
		rg.Spec.RestartAt = restartAt
		rg.Status.Rotation = &v1alpha1.RotationStatus{StartTime: ago(30 * time.Second), PodsToRestart: 1}
		rg.Status.Phase = v1alpha1.PhaseProgressing
	}

	tests := []struct {
		name             string
		rg               *v1alpha1.RolloutGroup
		plan             rollout.Plan
		phase            v1alpha1.RolloutPhase
		reason           string
		started, ended   bool
		restartedAt      bool
		membersToRestart []int32
	}{{
		name: "pods to restart open a rotation: Progressing, RestartingPods, not stalled by an old rollout's progress time",
		rg: group(func(rg *v1alpha1.RolloutGroup) {
			rg.Spec.RestartAt, rg.Status.LastProgressTime = restartAt, ago(48*time.Hour)
			// Complete on this generation and these counts: nothing else is progress.
			rg.Status.ObservedGeneration, rg.Status.Phase = rg.Generation, v1alpha1.PhaseComplete
			rg.Status.UpdatedReplicas, rg.Status.AvailableReplicas = 6, 6
		}),
		plan:  rotating(3),
		phase: v1alpha1.PhaseProgressing, reason: v1alpha1.ReasonRestartingPods, started: true,
		membersToRestart: []int32{3, 0},
	}, {
		name:  "an open rotation stays Progressing while the last pods come back",
		rg:    group(openRotation),
		plan:  rollout.Plan{Current: "a", Reason: v1alpha1.ReasonRestartingPods, Settled: true, Members: []rollout.MemberState{whole("a"), whole("b")}},
		phase: v1alpha1.PhaseProgressing, reason: v1alpha1.ReasonRestartingPods,
		membersToRestart: []int32{0, 0},
	}, {
		name:  "nothing left to restart and every member whole: complete, restartAt honoured",
		rg:    group(openRotation),
		plan:  complete,
		phase: v1alpha1.PhaseComplete, reason: v1alpha1.ReasonUpToDate, ended: true, restartedAt: true,
		membersToRestart: []int32{0, 0},
	}, {
		name:  "a restartAt with no pod older than it is honoured at once",
		rg:    group(func(rg *v1alpha1.RolloutGroup) { rg.Spec.RestartAt = restartAt }),
		plan:  complete,
		phase: v1alpha1.PhaseComplete, reason: v1alpha1.ReasonUpToDate, restartedAt: true,
		membersToRestart: []int32{0, 0},
	}, {
		name:  "a restartAt still to come is not honoured",
		rg:    group(func(rg *v1alpha1.RolloutGroup) { rg.Spec.RestartAt = ago(-time.Minute) }),
		plan:  complete,
		phase: v1alpha1.PhaseComplete, reason: v1alpha1.ReasonUpToDate,
		membersToRestart: []int32{0, 0},
	}, {
		name: "paused with pods to restart: Paused, not Complete",
		rg: group(func(rg *v1alpha1.RolloutGroup) {
			rg.Spec.RestartAt, rg.Spec.Paused = restartAt, true
		}),
		plan:  rotating(2),
		phase: v1alpha1.PhasePaused, reason: v1alpha1.ReasonPaused, started: true,
		membersToRestart: []int32{2, 0},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := computeStatus(tt.rg, tt.plan, actionResult{}, nil, statusNow)
			st := up.status
			if st.Phase != tt.phase {
				t.Errorf("phase = %s, want %s (message %q)", st.Phase, tt.phase, st.Message)
			}
			if c := findCondition(st.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Reason != tt.reason {
				t.Errorf("Progressing condition = %+v, want reason %s", c, tt.reason)
			}
			if up.rotationStarted != tt.started || up.rotationCompleted != tt.ended {
				t.Errorf("started, completed = %v, %v; want %v, %v", up.rotationStarted, up.rotationCompleted, tt.started, tt.ended)
			}
			if got := st.RestartedAt != nil && st.RestartedAt.Equal(tt.rg.Spec.RestartAt); got != tt.restartedAt {
				t.Errorf("restartedAt = %v, want honoured %v (spec %v)", st.RestartedAt, tt.restartedAt, tt.rg.Spec.RestartAt)
			}
			if st.Rotation != nil && st.Rotation.PodsToRestart != tt.plan.ToRestart {
				t.Errorf("rotation.podsToRestart = %d, want %d", st.Rotation.PodsToRestart, tt.plan.ToRestart)
			}
			for i, want := range tt.membersToRestart {
				if got := st.StatefulSets[i].PodsToRestart; got != want {
					t.Errorf("member %s podsToRestart = %d, want %d", st.StatefulSets[i].Name, got, want)
				}
			}
			if up.rotationStarted && (st.LastProgressTime == nil || !st.LastProgressTime.Time.Equal(statusNow)) {
				t.Errorf("lastProgressTime = %v, want the rotation's start: progressDeadline counts from it", st.LastProgressTime)
			}
			if up.rotationStarted && !rotationChanged(tt.rg.Status, st) {
				t.Errorf("a rotation's start is not written at once")
			}
		})
	}
}
