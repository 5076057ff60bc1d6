package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/cli/render"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/test/builders"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the output of the code under test")

// now is the fixed time of every golden file.
var now = time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)

// golden compares got with testdata/<name>.golden, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli/ -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test ./internal/cli/ -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// zone is one member of the fixture group: its StatefulSet and pods.
type zone struct {
	sts  *appsv1.StatefulSet
	pods []*corev1.Pod
}

// zoneOf builds a member of 4 replicas whose pods run the given revisions,
// ordinal by ordinal; edit changes pods after they are built.
func zoneOf(name, update string, revisions []string, edit func(i int, p *builders.PodWrapper)) zone {
	sts := builders.MakeStatefulSet("demo", name).Replicas(int32(len(revisions))).OnDelete().Generation(2).
		Revision(name + "-" + update).CurrentRevision(name + "-" + revisions[0]).Obj()
	ready, updated := int32(0), int32(0)
	var pods []*corev1.Pod
	for i, rev := range revisions {
		if rev == update {
			updated++
		}
		p := builders.MakePod("demo", name, i).ControlledBy(sts).Revision(name + "-" + rev).Ready(now.Add(-10 * time.Minute))
		if edit != nil {
			edit(i, p)
		}
		pod := p.Obj()
		if _, ok := podReadySince(pod); ok && pod.DeletionTimestamp == nil {
			ready++
		}
		pods = append(pods, pod)
	}
	sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas = int32(len(revisions)), ready, updated
	return zone{sts: sts, pods: pods}
}

func podReadySince(p *corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// rollingGroup is a group of three zones rolled to revision "new": zone a
// done, zone b half way (one pod terminating, one recreated and not Ready
// yet), zone c waiting its turn.
func rollingGroup() (*v1alpha1.RolloutGroup, []zone) {
	zones := []zone{
		zoneOf("ingester-zone-a", "new", []string{"new", "new", "new", "new"}, nil),
		zoneOf("ingester-zone-b", "new", []string{"old", "old", "new", "old"}, func(i int, p *builders.PodWrapper) {
			switch i {
			case 2:
				p.NotReady().Phase(corev1.PodPending)
			case 3:
				p.Terminating(now.Add(-2 * time.Second))
			}
		}),
		zoneOf("ingester-zone-c", "new", []string{"old", "old", "old", "old"}, nil),
	}
	rg := builders.MakeRolloutGroup("demo", "ingester").Members("ingester-zone-a", "ingester-zone-b", "ingester-zone-c").MaxUnavailable(2).Obj()
	started := metav1.NewTime(now.Add(-90 * time.Second))
	progress := metav1.NewTime(now.Add(-2 * time.Second))
	rg.Status = v1alpha1.RolloutGroupStatus{
		ObservedGeneration: 1,
		Phase:              v1alpha1.PhaseProgressing,
		Message:            "ingester-zone-b: 1/4 updated, 2/2 pods unavailable, waiting before deleting more",
		CurrentStatefulSet: "ingester-zone-b",
		Updated:            "5/12", Replicas: 12, UpdatedReplicas: 5, AvailableReplicas: 10,
		RolloutStartTime: &started, LastProgressTime: &progress, LastBatchTime: &progress, PodsRolled: 6,
		StatefulSets: []v1alpha1.MemberStatus{
			{Name: "ingester-zone-a", Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4, UpdatedReplicas: 4, MaxUnavailable: 2,
				CurrentRevision: "ingester-zone-a-new", UpdateRevision: "ingester-zone-a-new", StableRevision: "ingester-zone-a-old", Phase: v1alpha1.MemberComplete},
			{Name: "ingester-zone-b", Replicas: 4, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 1, MaxUnavailable: 2,
				CurrentRevision: "ingester-zone-b-old", UpdateRevision: "ingester-zone-b-new", StableRevision: "ingester-zone-b-old", Phase: v1alpha1.MemberRolling},
			{Name: "ingester-zone-c", Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4, MaxUnavailable: 2,
				CurrentRevision: "ingester-zone-c-old", UpdateRevision: "ingester-zone-c-new", StableRevision: "ingester-zone-c-old", Phase: v1alpha1.MemberPending},
		},
		// The batch before the last took pod 2, now recreated and not Ready
		// yet: expired but not seen done. The last took pod 3, terminating,
		// and reserved the rest of the zone (a partition's release).
		Disruption: &v1alpha1.DisruptionHold{Intents: []v1alpha1.DisruptionIntent{{
			Zone: "ingester-zone-b", Reason: v1alpha1.DisruptionRollout, Holder: "RolloutGroup ingester",
			DecidedAt: metav1.NewTime(now.Add(-50 * time.Second)), ExpiresAt: metav1.NewTime(now.Add(-5 * time.Second)),
			Pods: []v1alpha1.IntentPod{{Name: "ingester-zone-b-2", UID: string(zones[1].pods[2].UID) + "-before"}},
		}, {
			Zone: "ingester-zone-b", Reason: v1alpha1.DisruptionRollout, Holder: "RolloutGroup ingester",
			DecidedAt: progress, ExpiresAt: metav1.NewTime(progress.Add(45 * time.Second)), MaxAtOnce: 2,
			Pods: []v1alpha1.IntentPod{{Name: "ingester-zone-b-3", UID: string(zones[1].pods[3].UID)},
				{Name: "ingester-zone-b-1", UID: string(zones[1].pods[1].UID)}, {Name: "ingester-zone-b-0", UID: string(zones[1].pods[0].UID)}},
		}}},
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWaitingForPods, LastTransitionTime: started},
			{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWaitingForPods, LastTransitionTime: started},
		},
	}
	return rg, zones
}

func groupView(rg *v1alpha1.RolloutGroup, zones []zone) render.RolloutGroupView {
	v := render.RolloutGroupView{Group: rg, StatefulSets: map[string]*appsv1.StatefulSet{}, Pods: map[string][]*corev1.Pod{}, Now: now}
	for _, z := range zones {
		v.StatefulSets[z.sts.Name] = z.sts
		v.Pods[z.sts.Name] = z.pods
	}
	return v
}

// inputOf is the planner's input for the fixture group, read through the
// controller's own observation (lookup.ObserveRolloutGroup) from a fake API
// holding the fixture's objects.
func inputOf(t *testing.T, rg *v1alpha1.RolloutGroup, zones []zone) rollout.Input {
	t.Helper()
	objs := []client.Object{rg.DeepCopy()}
	for _, z := range zones {
		objs = append(objs, z.sts.DeepCopy())
		for _, p := range z.pods {
			p = p.DeepCopy()
			if p.DeletionTimestamp != nil {
				// The fake API, as a real one, keeps a deleted object only
				// while a finalizer holds it.
				p.Finalizers = append(p.Finalizers, "test/terminating")
			}
			objs = append(objs, p)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).Build()
	in, _, err := lookup.ObserveRolloutGroup(context.Background(), c, lookup.ListedReads{}, rg, now)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func draw(t *testing.T, f func(*bytes.Buffer) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := f(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGoldenRolloutGroupTree(t *testing.T) {
	rg, zones := rollingGroup()
	golden(t, "rolloutgroup-rolling", draw(t, func(b *bytes.Buffer) error {
		return render.RolloutGroup(b, groupView(rg, zones), render.Style{})
	}))
}

// failedGroup is the rolling group held by a failed AfterMember gate of zone
// a, its checks recorded.
func failedGroup() (*v1alpha1.RolloutGroup, []zone) {
	rg, zones := rollingGroup()
	rg.Spec.Analysis = &v1alpha1.RolloutAnalysis{
		Prometheus: &v1alpha1.PrometheusSource{Address: "http://prometheus:9090"},
		Checks: []v1alpha1.AnalysisCheck{
			{Name: "error-rate", Query: "x", Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: "<", Threshold: "0.01"}},
				SuccessThreshold: 2, FailureThreshold: 2, ErrorThreshold: 3, Gate: v1alpha1.GateAfterMember},
			{Name: "alerts", Query: "y", Condition: v1alpha1.CheckCondition{HasData: ptr.To(false)}, Gate: v1alpha1.GateAfterMember},
		},
	}
	gate := &v1alpha1.GateStatus{Member: "ingester-zone-a", Kind: v1alpha1.GateAfterMember, Revision: "ingester-zone-a-new",
		StartTime: ptr.To(metav1.NewTime(now.Add(-time.Minute)))}
	queried := ptr.To(metav1.NewTime(now.Add(-20 * time.Second)))
	rg.Status.Phase = v1alpha1.PhaseFailed
	rg.Status.Message = `check error-rate failed: value 0.05 does not meet "< 0.01" (2 consecutive failures, failureThreshold 2), at the AfterMember gate of ingester-zone-a; set echelon.dev/retry to clear`
	rg.Status.Conditions[0].Reason = v1alpha1.ReasonAnalysisFailed
	rg.Status.Disruption = nil
	rg.Status.Analysis = &v1alpha1.AnalysisStatus{
		Checks: []v1alpha1.CheckStatus{
			{Name: "error-rate", Phase: v1alpha1.CheckFailed, ConsecutiveFailures: 2, LastValue: "0.05", LastTime: queried},
			{Name: "alerts", Phase: v1alpha1.CheckRunning, ConsecutiveErrors: 1, LastError: "prometheus: connection refused", LastTime: queried},
		},
		Failure: &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Check: "error-rate",
			Message: `check error-rate failed: value 0.05 does not meet "< 0.01"`, Time: metav1.NewTime(now.Add(-20 * time.Second)), Gate: gate},
	}
	return rg, zones
}

func TestGoldenRolloutGroupFailedGate(t *testing.T) {
	rg, zones := failedGroup()
	golden(t, "rolloutgroup-failed-gate", draw(t, func(b *bytes.Buffer) error {
		return render.RolloutGroup(b, groupView(rg, zones), render.Style{})
	}))
}

func TestGoldenPlanRolling(t *testing.T) {
	rg, zones := rollingGroup()
	// The terminating pod is gone and its replacement is Ready: the budget
	// of 2 has one unit left.
	zones[1].pods[3] = builders.MakePod("demo", "ingester-zone-b", 3).ControlledBy(zones[1].sts).Revision("ingester-zone-b-new").Ready(now.Add(-time.Second)).Obj()
	rg.Status.Disruption = nil
	golden(t, "plan-rolling", draw(t, func(b *bytes.Buffer) error {
		return render.Plan(b, dryRun(rg, inputOf(t, rg, zones), now), render.Style{})
	}))
}

func TestGoldenPlanPaused(t *testing.T) {
	rg, zones := rollingGroup()
	rg.Spec.Paused = true
	zones[1] = zoneOf("ingester-zone-b", "new", []string{"old", "old", "new", "old"}, func(i int, p *builders.PodWrapper) {
		if i == 1 {
			p.NotReady()
		}
	})
	rg.Status.Disruption = nil
	golden(t, "plan-paused", draw(t, func(b *bytes.Buffer) error {
		return render.Plan(b, dryRun(rg, inputOf(t, rg, zones), now), render.Style{})
	}))
}

func TestGoldenPlanFailedGate(t *testing.T) {
	rg, zones := failedGroup()
	golden(t, "plan-failed-gate", draw(t, func(b *bytes.Buffer) error {
		return render.Plan(b, dryRun(rg, inputOf(t, rg, zones), now), render.Style{})
	}))
}

func TestGoldenScalingPolicy(t *testing.T) {
	sp := builders.MakeScalingPolicy("demo", "ingester-zone-b").Target("", "ingester-zone-b").Leader("ingester-zone-a").ZoneDelay(12 * time.Hour).Obj()
	sp.Status = v1alpha1.ScalingPolicyStatus{
		Phase: v1alpha1.ScalingPhaseWaiting, Message: "downscale from 10 to 8 waits for the zone delay: ingester-zone-a was downscaled 2h ago",
		Replicas: 10, DesiredReplicas: ptr.To[int32](10), SourceReplicas: ptr.To[int32](8), Source: "leader ingester-zone-a",
		LastDownscaleTime: ptr.To(metav1.NewMicroTime(now.Add(-30 * time.Hour))),
		WaitingUntil:      ptr.To(metav1.NewMicroTime(now.Add(10 * time.Hour))),
		WaitingSince:      ptr.To(metav1.NewTime(now.Add(-2 * time.Hour))),
		Conditions:        []metav1.Condition{{Type: v1alpha1.ScalingConditionReady, Status: metav1.ConditionFalse, Reason: "WaitingForZoneDelay"}},
	}
	target := builders.MakeStatefulSet("demo", "ingester-zone-b").Replicas(10).StatusReplicas(10, 10).Obj()
	golden(t, "scalingpolicy-waiting", draw(t, func(b *bytes.Buffer) error {
		return render.ScalingPolicy(b, render.ScalingPolicyView{Policy: sp, Target: target, Now: now}, render.Style{})
	}))
}

func TestGoldenDelayedDownscale(t *testing.T) {
	dd := builders.MakeDelayedDownscale("demo", "ingester-zone-a").Target("ingester-zone-a").Delay("4h").Obj()
	prepared := func(ago time.Duration) (*metav1.Time, *metav1.Time) {
		at := metav1.NewTime(now.Add(-ago))
		return &at, ptr.To(metav1.NewTime(at.Add(4 * time.Hour)))
	}
	p9, e9 := prepared(5 * time.Hour)
	p8, e8 := prepared(time.Hour)
	dd.Status = v1alpha1.DelayedDownscaleStatus{
		Phase: v1alpha1.DelayedPhaseScalingDown, Message: "1 pod prepared long enough; may shrink to 9",
		Replicas: 10, DesiredReplicas: ptr.To[int32](7), EligibleReplicas: ptr.To[int32](9),
		PreparedPods: []v1alpha1.PreparedPod{
			{Name: "ingester-zone-a-9", PreparedAt: p9, EligibleAt: e9},
			{Name: "ingester-zone-a-8", PreparedAt: p8, EligibleAt: e8},
			{Name: "ingester-zone-a-7", Error: "POST http://127.1.0.7:8080/prepare: 503 Service Unavailable"},
		},
		EarliestDownscaleTime: e8,
		Conditions:            []metav1.Condition{{Type: v1alpha1.DelayedConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.DelayedReasonEligible}},
	}
	golden(t, "delayeddownscale-scaling-down", draw(t, func(b *bytes.Buffer) error {
		return render.DelayedDownscale(b, render.DelayedDownscaleView{Delayed: dd, Now: now}, render.Style{})
	}))
}

// Colour is for terminals only: the same tree with Style.Color carries ANSI
// escapes, and differs from the plain one only by them.
func TestColourOnlyWhenAsked(t *testing.T) {
	rg, zones := rollingGroup()
	plainOut := draw(t, func(b *bytes.Buffer) error { return render.RolloutGroup(b, groupView(rg, zones), render.Style{}) })
	colour := draw(t, func(b *bytes.Buffer) error {
		return render.RolloutGroup(b, groupView(rg, zones), render.Style{Color: true})
	})
	if strings.Contains(plainOut, "\x1b[") {
		t.Error("plain output carries ANSI escapes")
	}
	if !strings.Contains(colour, "\x1b[33mProgressing\x1b[0m") {
		t.Errorf("coloured output does not paint the phase:\n%q", colour)
	}
	if stripped := ansi.ReplaceAllString(colour, ""); stripped != plainOut {
		t.Errorf("coloured output differs from the plain one beyond escapes:\n%s\n---\n%s", stripped, plainOut)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

// On a terminal the waiting line wraps at its width, under its label, so
// that it is read whole rather than cut.
func TestWaitingLineWrapsAtTheTerminalsWidth(t *testing.T) {
	rg, zones := rollingGroup()
	out := draw(t, func(b *bytes.Buffer) error {
		return render.RolloutGroup(b, groupView(rg, zones), render.Style{Width: 60})
	})
	want := "Waiting for:  ingester-zone-b: 1/4 updated, 2/2 pods\n" +
		"              unavailable, waiting before deleting more\n" +
		"              (since 2s ago)\n"
	if !strings.Contains(out, want) {
		t.Errorf("waiting line not wrapped at 60 columns:\n%s", out)
	}
}

// stepsGroup is a group with spec.steps whose first step (25%, 3 of 12
// pods) is done and waits for a promote: zone a is updated, b and c not.
func stepsGroup() (*v1alpha1.RolloutGroup, []zone) {
	rg, _ := rollingGroup()
	zones := []zone{
		zoneOf("ingester-zone-a", "new", []string{"new", "new", "new", "new"}, nil),
		zoneOf("ingester-zone-b", "new", []string{"old", "old", "old", "old"}, nil),
		zoneOf("ingester-zone-c", "new", []string{"old", "old", "old", "old"}, nil),
	}
	rg.Spec.Steps = []v1alpha1.RolloutStep{{Percent: 25, Pause: &v1alpha1.StepPause{}}, {Percent: 100}}
	rg.Status.Phase = v1alpha1.PhaseProgressing
	rg.Status.Message = "step 1 of 2 (25%, 3 pods) done, waiting for echelon.dev/promote"
	rg.Status.Updated, rg.Status.UpdatedReplicas, rg.Status.AvailableReplicas = "4/12", 4, 12
	rg.Status.Disruption = nil
	rg.Status.StatefulSets[1].UpdatedReplicas, rg.Status.StatefulSets[1].ReadyReplicas, rg.Status.StatefulSets[1].AvailableReplicas = 0, 4, 4
	rg.Status.StatefulSets[1].Phase = v1alpha1.MemberPending
	rg.Status.Conditions[0].Reason = v1alpha1.ReasonWaitingForPromote
	rg.Status.Step = &v1alpha1.StepStatus{Index: 0, Percent: 25, TargetReplicas: 3, WaitingFor: v1alpha1.StepWaitPromote,
		Since: ptr.To(metav1.NewTime(now.Add(-5 * time.Minute)))}
	return rg, zones
}

func TestGoldenStepsWaitingForPromote(t *testing.T) {
	rg, zones := stepsGroup()
	golden(t, "rolloutgroup-steps-promote", draw(t, func(b *bytes.Buffer) error {
		return render.RolloutGroup(b, groupView(rg, zones), render.Style{})
	}))
	golden(t, "plan-steps-promote", draw(t, func(b *bytes.Buffer) error {
		return render.Plan(b, dryRun(rg, inputOf(t, rg, zones), now), render.Style{})
	}))
	// A promote the operator has not acted on yet ends the pause: the plan
	// goes on to the next step's pods.
	rg.Annotations = map[string]string{v1alpha1.AnnotationPromote: "1"}
	golden(t, "plan-steps-promoted", draw(t, func(b *bytes.Buffer) error {
		return render.Plan(b, dryRun(rg, inputOf(t, rg, zones), now), render.Style{})
	}))
}

// TestWaitingLineAgeIsTheStepWait: a group waiting for a promote since
// 05:41:59Z, 20 s ago, whose conditions a restarted operator wrote again 15 s
// ago, waits "since 20s ago", the age of the time its message names, not of
// the last condition write.
func TestWaitingLineAgeIsTheStepWait(t *testing.T) {
	rg, zones := stepsGroup()
	waiting := metav1.NewTime(now.Add(-20 * time.Second))
	restarted := metav1.NewTime(now.Add(-15 * time.Second))
	rg.Status.Step.Since = &waiting
	rg.Status.Message = "ingester-zone-b: 0/4 updated, step 1 of 2 (25%, 3 of 12 pods) done, waiting for a promote since " + waiting.UTC().Format(time.RFC3339)
	for i := range rg.Status.Conditions {
		rg.Status.Conditions[i].LastTransitionTime = restarted
	}
	rg.Status.LastProgressTime = &restarted
	out := draw(t, func(b *bytes.Buffer) error {
		return render.RolloutGroup(b, groupView(rg, zones), render.Style{Width: 400})
	})
	if !strings.Contains(out, "(since 20s ago)") || strings.Contains(out, "15s ago") {
		t.Errorf("waiting line does not give the step's wait its age, 20s:\n%s", out)
	}
}

// TestPlanWaitingForPromoteSaysWhatThePromoteStarts: as a paused group's plan
// says what resuming starts, a group waiting for a promote says what the
// promote starts, and how to give it.
func TestPlanWaitingForPromoteSaysWhatThePromoteStarts(t *testing.T) {
	rg, zones := stepsGroup()
	out := draw(t, func(b *bytes.Buffer) error {
		return render.Plan(b, dryRun(rg, inputOf(t, rg, zones), now), render.Style{})
	})
	for _, want := range []string{
		"Next: no pod would be deleted",
		"Once promoted (kubectl echelon promote ingester), step 2 of 2, 100% (12 pods): delete 2 pods of ingester-zone-b, to revision new",
		"  ingester-zone-b-3  revision old  outdated and available: takes 1 of maxUnavailable 2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestSharedBudgetLine: a group that shares a ZoneDisruptionBudget shows
// that budget's record, or says it does not exist, not its own.
func TestSharedBudgetLine(t *testing.T) {
	rg, zones := rollingGroup()
	shared := &v1alpha1.ZoneDisruptionBudget{Status: v1alpha1.ZoneDisruptionBudgetStatus{Disruption: rg.Status.Disruption.DeepCopy()}}
	shared.Status.Disruption.Intents[1].Holder = "RolloutGroup store-gateway"
	rg.Status.Disruption = nil
	rg.Spec.SharedDisruptionBudget = "mimir"
	v := groupView(rg, zones)
	v.Shared = shared
	out := draw(t, func(b *bytes.Buffer) error { return render.RolloutGroup(b, v, render.Style{Width: 400}) })
	if want := "Disruption:   shared with ZoneDisruptionBudget mimir: zone ingester-zone-b: Rollout decided"; !strings.Contains(out, want) ||
		!strings.Contains(out, "by RolloutGroup store-gateway") {
		t.Errorf("want %q and the other group's intent in:\n%s", want, out)
	}
	v.Shared = nil
	out = draw(t, func(b *bytes.Buffer) error { return render.RolloutGroup(b, v, render.Style{Width: 400}) })
	if want := "shared with ZoneDisruptionBudget mimir, which does not exist"; !strings.Contains(out, want) {
		t.Errorf("want %q in:\n%s", want, out)
	}
}

// resizingGroup is the rolling group, its rollout complete, growing its
// volumes: zone a done, zone b's claims expanding, zone c pending.
func resizingGroup() (*v1alpha1.RolloutGroup, []zone) {
	rg, zones := rollingGroup()
	rg.Spec.VolumeClaimSizes = []v1alpha1.VolumeClaimSize{{Name: "data", Size: "200Gi"}}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	claims := func(zone string, phase v1alpha1.ClaimPhase, requested, capacity string) []v1alpha1.ClaimStatus {
		var out []v1alpha1.ClaimStatus
		for i := range 4 {
			out = append(out, v1alpha1.ClaimStatus{Name: fmt.Sprintf("data-%s-%d", zone, i), Requested: q(requested), Capacity: q(capacity), Phase: phase})
		}
		return out
	}
	zoneB := claims("ingester-zone-b", v1alpha1.ClaimExpanding, "200Gi", "100Gi")
	zoneB[0].Phase, zoneB[0].Capacity = v1alpha1.ClaimResized, q("200Gi")
	rg.Status.VolumeResize = &v1alpha1.VolumeResizeStatus{
		Phase: v1alpha1.VolumeResizeResizing, CurrentZone: "ingester-zone-b",
		Message:   "ingester-zone-b: waiting for the storage driver to expand data-ingester-zone-b-1, data-ingester-zone-b-2, data-ingester-zone-b-3",
		StartTime: ptr.To(metav1.NewTime(now.Add(-3 * time.Minute))),
		Zones: []v1alpha1.ZoneVolumeStatus{
			{Name: "ingester-zone-a", Phase: v1alpha1.ZoneVolumeComplete, Claims: claims("ingester-zone-a", v1alpha1.ClaimResized, "200Gi", "200Gi")},
			{Name: "ingester-zone-b", Phase: v1alpha1.ZoneVolumeExpanding, Claims: zoneB},
			{Name: "ingester-zone-c", Phase: v1alpha1.ZoneVolumePending, Claims: claims("ingester-zone-c", v1alpha1.ClaimPending, "100Gi", "100Gi")},
		},
	}
	return rg, zones
}

func TestGoldenVolumeResize(t *testing.T) {
	rg, zones := resizingGroup()
	golden(t, "rolloutgroup-resizing", draw(t, func(b *bytes.Buffer) error {
		return render.RolloutGroup(b, groupView(rg, zones), render.Style{})
	}))
	rg.Status.Disruption = nil
	golden(t, "plan-resizing", draw(t, func(b *bytes.Buffer) error {
		return render.Plan(b, dryRun(rg, inputOf(t, rg, zones), now), render.Style{})
	}))
}
