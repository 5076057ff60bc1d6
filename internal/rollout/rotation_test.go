package rollout

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/test/builders"
)

// restartAt is the spec.restartAt of the rotation tables: a minute ago. Built
// pods are created at the zero time, long before it, unless young.
var restartAt = testNow.Add(-time.Minute)

// young are long-Ready pods on rev created after restartAt: already restarted.
func young(sts, rev string, ordinals ...int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, len(ordinals))
	for _, o := range ordinals {
		pods = append(pods, builders.MakePod(testNamespace, sts, o).Revision(rev).Created(restartAt.Add(time.Second)).Obj())
	}
	return pods
}

// restarted is a member whose replicas all run newRev, created after restartAt.
func restarted(name string, replicas int) *memberBuilder {
	return makeMember(onDeleteSTS(name, int32(replicas)).Obj()).Pods(young(name, newRev, ords(0, replicas)...))
}

// rotate is the group with spec.restartAt set to restartAt.
func rotate(members ...*memberBuilder) Input {
	return with(group(members...), func(in *Input) { in.RestartAt = restartAt })
}

// partitionedUpdated is a RollingUpdate member whose pods all run newRev, its
// partition held at its replicas and its status.currentRevision cur.
func partitionedUpdated(name string, replicas int, cur string) *memberBuilder {
	return partitioned(name, replicas, replicas, newRev, cur)
}

func TestDecideRotation(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		want     wantPlan
		rotation bool
		reason   string
	}{{
		name: "restartAt come: the first member's highest ordinal goes first, as in a rollout",
		in:   rotate(updated("zone-a", 3), updated("zone-b", 3), updated("zone-c", 3)),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a",
			phases:  phases{"zone-a": rolling, "zone-b": pending, "zone-c": pending},
			message: []string{"zone-a: 3 pods to restart", "restarting 1 pod"}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "maxUnavailable 2 restarts two at a time",
		in:   rotate(updated("zone-a", 3).MaxUnavailable(2), updated("zone-b", 3)),
		want: wantPlan{delete: []string{"zone-a-2", "zone-a-1"}, current: "zone-a",
			phases: phases{"zone-a": rolling, "zone-b": pending}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name:   "restartAt in the future: nothing yet, look again when it comes",
		in:     with(group(updated("zone-a", 3), updated("zone-b", 3)), func(in *Input) { in.RestartAt = testNow.Add(90 * time.Second) }),
		want:   wantPlan{complete: true, requeueAfter: 90 * time.Second, phases: phases{"zone-a": complete, "zone-b": complete}},
		reason: v1alpha1.ReasonUpToDate,
	}, {
		name:   "every pod created after restartAt: nothing to restart",
		in:     rotate(restarted("zone-a", 3), restarted("zone-b", 3)),
		want:   wantPlan{complete: true, phases: phases{"zone-a": complete, "zone-b": complete}},
		reason: v1alpha1.ReasonUpToDate,
	}, {
		name: "a member partly restarted goes on with its next old pod",
		in: rotate(
			makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", newRev, 0, 1), young("zone-a", newRev, 2)),
			updated("zone-b", 3)),
		want: wantPlan{delete: []string{"zone-a-1"}, current: "zone-a",
			phases: phases{"zone-a": rolling, "zone-b": pending}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "the member just restarted is waited for before the next starts",
		in: rotate(
			makeMember(onDeleteSTS("zone-a", 3).StatusReplicas(3, 2).Obj()).Pods(young("zone-a", newRev, 0, 1),
				builders.MakePod(testNamespace, "zone-a", 2).Revision(newRev).Created(testNow).NotReady().Obj()),
			updated("zone-b", 3)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-b": pending},
			message: []string{"zone-a: restarted, waiting: 1/3 pods not available"}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "the member being restarted waits for its replaced pod within maxUnavailable 1",
		in: rotate(
			makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", newRev, 0, 1),
				builders.MakePod(testNamespace, "zone-a", 2).Revision(newRev).Created(testNow).NotReady().Obj()),
			updated("zone-b", 3)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": rolling, "zone-b": pending},
			message: []string{"1/1 pods unavailable, waiting before restarting more"}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "a pod to restart that is not available is replaced first, at no cost",
		in: rotate(
			makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", newRev, 1, 2),
				builders.MakePod(testNamespace, "zone-a", 0).Revision(newRev).NotReady().Obj()),
			updated("zone-b", 3)),
		want:     wantPlan{delete: []string{"zone-a-0"}, current: "zone-a", phases: phases{"zone-a": rolling}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "another member not whole: nothing restarted, that member is waited for",
		in: rotate(updated("zone-a", 3),
			makeMember(onDeleteSTS("zone-b", 3).StatusReplicas(3, 2).Obj()).Pods(young("zone-b", newRev, 0, 1),
				builders.MakePod(testNamespace, "zone-b", 2).Revision(newRev).Created(testNow).NotReady().Obj())),
		want:     wantPlan{current: "zone-b", phases: phases{"zone-a": pending}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "a revision rollout pending goes first",
		in:   rotate(updated("zone-a", 3), outdated("zone-b", 3)),
		want: wantPlan{delete: []string{"zone-b-2"}, current: "zone-b",
			phases: phases{"zone-a": complete, "zone-b": rolling}},
		reason: v1alpha1.ReasonDeletingPods,
	}, {
		name:     "paused: nothing restarted",
		in:       with(rotate(updated("zone-a", 3), updated("zone-b", 3)), func(in *Input) { in.Paused = true }),
		want:     wantPlan{current: "zone-a", message: []string{"zone-a: 3 pods to restart, paused"}},
		rotation: true, reason: v1alpha1.ReasonPaused,
	}, {
		name: "held by a gate: nothing restarted",
		in: with(rotate(updated("zone-a", 3)), func(in *Input) {
			in.Hold = &Hold{Reason: v1alpha1.ReasonWaitingForAnalysis, Message: "AfterBatch gate pending"}
		}),
		want:     wantPlan{current: "zone-a", message: []string{"AfterBatch gate pending"}},
		rotation: true, reason: v1alpha1.ReasonWaitingForAnalysis,
	}, {
		name: "within batchInterval: nothing restarted, look again when it ends",
		in: with(rotate(updated("zone-a", 3)), func(in *Input) {
			in.BatchInterval, in.LastBatchTime = time.Minute, testNow.Add(-20*time.Second)
		}),
		want:     wantPlan{current: "zone-a", requeueAfter: 40 * time.Second},
		rotation: true, reason: v1alpha1.ReasonWaitingForBatchInterval,
	}, {
		name: "another zone's recorded eviction, its pod shown untouched: wait for it",
		in: with(rotate(updated("zone-a", 3), updated("zone-b", 3)), func(in *Input) {
			in.Intents = []disruption.Intent{intentOn(*in, "zone-b", v1alpha1.DisruptionEviction, "drain", 5*time.Second, "zone-b-1")}
		}),
		want:     wantPlan{current: "zone-a", requeueAfter: 40 * time.Second, message: []string{"zone zone-b (1 pod", "drain"}},
		rotation: true, reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name: "a pod annotated echelon.dev/rotate is replaced, with no restartAt",
		in: group(updated("zone-a", 3), makeMember(onDeleteSTS("zone-b", 3).Obj()).Pods(readyPods("zone-b", newRev, 0, 2),
			builders.MakePod(testNamespace, "zone-b", 1).Revision(newRev).Annotation(v1alpha1.AnnotationRotate, "node-7").Obj())),
		want: wantPlan{delete: []string{"zone-b-1"}, current: "zone-b",
			phases: phases{"zone-a": complete, "zone-b": rolling}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "echelon.dev/rotate in the pod template is ignored: it would replace pods forever",
		in: group(makeMember(onDeleteSTS("zone-a", 2).TemplateAnnotation(v1alpha1.AnnotationRotate, "x").Obj()).Pods(
			builders.MakePod(testNamespace, "zone-a", 0).Revision(newRev).Annotation(v1alpha1.AnnotationRotate, "x").Obj(),
			builders.MakePod(testNamespace, "zone-a", 1).Revision(newRev).Annotation(v1alpha1.AnnotationRotate, "x").Obj())),
		want:   wantPlan{complete: true},
		reason: v1alpha1.ReasonUpToDate,
	}, {
		name:     "a RollingUpdate member whose currentRevision is its update revision has its pods deleted",
		in:       rotate(partitionedUpdated("zone-a", 3, newRev)),
		want:     wantPlan{delete: []string{"zone-a-2"}, current: "zone-a", phases: phases{"zone-a": rolling}},
		rotation: true, reason: v1alpha1.ReasonRestartingPods,
	}, {
		name: "a RollingUpdate member whose currentRevision lags waits: a deleted pod would come back on it",
		in:   rotate(partitionedUpdated("zone-a", 3, oldRev)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": rolling},
			message: []string{"status.currentRevision"}},
		rotation: true, reason: v1alpha1.ReasonWaitingForStatefulSet,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			checkPlan(t, got, tt.want)
			if got.Rotation != tt.rotation {
				t.Errorf("Rotation = %v, want %v", got.Rotation, tt.rotation)
			}
			if got.Reason != tt.reason {
				t.Errorf("Reason = %s, want %s (message %q)", got.Reason, tt.reason, got.Message)
			}
			if got.Rotation && got.Complete {
				t.Errorf("a plan with pods to restart is Complete")
			}
			if len(got.Delete) > 0 && got.CurrentPartitioned() {
				t.Errorf("a rotation's batch is released by a partition, not deleted")
			}
			for _, c := range got.PartitionChanges() {
				if c.Release {
					t.Errorf("a rotation lowers the partition: %+v", c)
				}
			}
		})
	}
}

func TestNeedsRestart(t *testing.T) {
	at := testNow.Add(-time.Minute)
	tests := []struct {
		name      string
		pod       *corev1.Pod
		restartAt time.Time
		templated bool
		want      bool
	}{
		{"created before restartAt", builders.MakePod(testNamespace, "a", 0).Created(at.Add(-time.Second)).Obj(), at, false, true},
		{"created at restartAt (same second) is not restarted", builders.MakePod(testNamespace, "a", 0).Created(at).Obj(), at, false, false},
		{"created after restartAt", builders.MakePod(testNamespace, "a", 0).Created(at.Add(time.Second)).Obj(), at, false, false},
		{"restartAt not come yet", builders.MakePod(testNamespace, "a", 0).Obj(), testNow.Add(time.Second), false, false},
		{"no restartAt", builders.MakePod(testNamespace, "a", 0).Obj(), time.Time{}, false, false},
		{"annotated, any value", builders.MakePod(testNamespace, "a", 0).Created(testNow).Annotation(v1alpha1.AnnotationRotate, "").Obj(), time.Time{}, false, true},
		{"annotated by its template", builders.MakePod(testNamespace, "a", 0).Created(testNow).Annotation(v1alpha1.AnnotationRotate, "").Obj(), time.Time{}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsRestart(tt.pod, tt.restartAt, testNow, tt.templated); got != tt.want {
				t.Errorf("needsRestart = %v, want %v", got, tt.want)
			}
		})
	}
}
