/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package builders

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestStatefulSetObjIsACopy(t *testing.T) {
	w := MakeStatefulSet("ns", "a").Replicas(3)
	first := w.Obj()
	first.Spec.Template.Labels["app"] = "changed"
	*first.Spec.Replicas = 7
	second := w.Replicas(4).Obj()
	if got := second.Spec.Template.Labels["app"]; got != "a" {
		t.Errorf("template label app = %q after editing an earlier Obj, want a", got)
	}
	if *second.Spec.Replicas != 4 || *first.Spec.Replicas != 7 {
		t.Errorf("replicas = %d and %d, want 7 and 4: the two objects share spec.replicas", *first.Spec.Replicas, *second.Spec.Replicas)
	}
}

func TestStatefulSetSetsWhatItSays(t *testing.T) {
	at := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	sts := MakeStatefulSet("ns", "a").Replicas(3).OnDelete().Revision("r2").CurrentRevision("r1").
		Generation(4).NotObserved().OrdinalsStart(2).StatusReplicas(3, 2).Parallel().
		PodLabel("zone", "a").Label("group", "g").TemplateAnnotation("v", "1").Image("img:2").Deleting(at).TypeMeta().Obj()
	checks := []struct {
		what      string
		got, want any
	}{
		{"namespace/name", sts.Namespace + "/" + sts.Name, "ns/a"},
		{"replicas", *sts.Spec.Replicas, int32(3)},
		{"strategy", sts.Spec.UpdateStrategy.Type, appsv1.OnDeleteStatefulSetStrategyType},
		{"updateRevision", sts.Status.UpdateRevision, "r2"},
		{"currentRevision", sts.Status.CurrentRevision, "r1"},
		{"generation", sts.Generation, int64(4)},
		{"observedGeneration", sts.Status.ObservedGeneration, int64(3)},
		{"ordinals.start", sts.Spec.Ordinals.Start, int32(2)},
		{"status replicas", [2]int32{sts.Status.Replicas, sts.Status.ReadyReplicas}, [2]int32{3, 2}},
		{"podManagementPolicy", sts.Spec.PodManagementPolicy, appsv1.ParallelPodManagement},
		{"label", sts.Labels["group"], "g"},
		{"template annotation", sts.Spec.Template.Annotations["v"], "1"},
		{"image", sts.Spec.Template.Spec.Containers[0].Image, "img:2"},
		{"deletionTimestamp", sts.DeletionTimestamp.Time, at},
		{"kind", sts.Kind, "StatefulSet"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(sts.Spec.Template.Labels)) || !sel.Matches(labels.Set{"app": "a", "zone": "a"}) || sel.Matches(labels.Set{"app": "a"}) {
		t.Errorf("selector %s does not select exactly the template's labels %v", sel, sts.Spec.Template.Labels)
	}
	if unset := MakeStatefulSet("ns", "a").NilReplicas().Obj(); unset.Spec.Replicas != nil {
		t.Errorf("NilReplicas left spec.replicas %d", *unset.Spec.Replicas)
	}
}

func TestPodOfStatefulSet(t *testing.T) {
	sts := MakeStatefulSet("ns", "zone-a").PodLabel("zone", "a").Obj()
	w := MakePod("ns", "zone-a", 2).ControlledBy(sts).Revision("r1")
	pod := w.Obj()
	if pod.Name != "zone-a-2" || pod.Labels[appsv1.PodIndexLabel] != "2" || pod.Labels[appsv1.StatefulSetPodNameLabel] != "zone-a-2" {
		t.Errorf("pod %s labels %v, want zone-a-2 with its StatefulSet pod labels", pod.Name, pod.Labels)
	}
	if pod.Labels[appsv1.ControllerRevisionHashLabelKey] != "r1" {
		t.Errorf("revision label = %q, want r1", pod.Labels[appsv1.ControllerRevisionHashLabelKey])
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the StatefulSet's selector %s does not select its pod's labels %v", sel, pod.Labels)
	}
	if owner := pod.OwnerReferences; len(owner) != 1 || owner[0].UID != sts.UID || owner[0].Kind != "StatefulSet" || owner[0].Controller == nil || !*owner[0].Controller {
		t.Errorf("owner references %+v, want one controller reference to StatefulSet %s", owner, sts.UID)
	}
	if !podReady(pod) {
		t.Errorf("a new pod is not Running and Ready: %+v", pod.Status)
	}

	again := w.Obj()
	if again.UID != pod.UID {
		t.Errorf("two Obj of one wrapper have UIDs %s and %s, want the pod's one UID", pod.UID, again.UID)
	}
	if replacement := MakePod("ns", "zone-a", 2).Obj(); replacement.UID == pod.UID {
		t.Errorf("a pod and its replacement share UID %s", pod.UID)
	}
	pod.Labels["edited"] = "yes"
	if _, ok := w.Obj().Labels["edited"]; ok {
		t.Error("editing an Obj changed the wrapper's pod")
	}

	at := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		pod   *corev1.Pod
		ready bool
	}{
		"not ready":   {MakePod("ns", "a", 0).NotReady().Obj(), false},
		"pending":     {MakePod("ns", "a", 0).Phase(corev1.PodPending).Obj(), false},
		"ready again": {MakePod("ns", "a", 0).NotReady().Ready(at).Obj(), true},
	} {
		if got := podReady(c.pod); got != c.ready {
			t.Errorf("%s: ready = %v, want %v", name, got, c.ready)
		}
		if n := len(c.pod.Status.Conditions); n != 1 {
			t.Errorf("%s: %d conditions, want one Ready condition", name, n)
		}
	}
	if p := MakePod("ns", "a", 0).Terminating(at).IP("10.0.0.1").NoRevision().Obj(); p.DeletionTimestamp == nil || p.Status.PodIP != "10.0.0.1" || len(p.Status.PodIPs) != 1 {
		t.Errorf("Terminating and IP: deletionTimestamp %v, podIP %q, podIPs %v", p.DeletionTimestamp, p.Status.PodIP, p.Status.PodIPs)
	}
}

func TestPodFromTemplate(t *testing.T) {
	tmpl := MakeStatefulSet("ns", "a").TemplateAnnotation("v", "1").Image("img:1").Obj().Spec.Template
	pod := MakePod("ns", "a", 1).FromTemplate(tmpl).Obj()
	if pod.Labels["app"] != "a" || pod.Annotations["v"] != "1" || pod.Spec.Containers[0].Image != "img:1" {
		t.Errorf("pod labels %v, annotations %v, containers %v: not the template's", pod.Labels, pod.Annotations, pod.Spec.Containers)
	}
	if _, ok := pod.Labels[appsv1.ControllerRevisionHashLabelKey]; ok {
		t.Error("a pod from a template has a revision label")
	}
	pod.Spec.Containers[0].Image = "edited"
	if tmpl.Spec.Containers[0].Image != "img:1" {
		t.Error("editing the pod changed the template it came from")
	}
}

func TestRolloutGroup(t *testing.T) {
	w := MakeRolloutGroup("ns", "g").Members("a", "b").MemberMaxUnavailable("c", 2).MaxUnavailablePercent(25).Selector("app", "x").Paused()
	rg := w.Obj()
	var names []string
	for _, m := range rg.Spec.StatefulSets {
		names = append(names, m.Name)
	}
	if len(names) != 3 || names[0] != "a" || names[1] != "b" || names[2] != "c" {
		t.Errorf("members %v, want [a b c] in order", names)
	}
	if m := rg.Spec.StatefulSets[2].MaxUnavailable; m == nil || *m != intstr.FromInt32(2) {
		t.Errorf("member c maxUnavailable %v, want 2", m)
	}
	if m := rg.Spec.MaxUnavailable; m == nil || *m != intstr.FromString("25%") {
		t.Errorf("maxUnavailable %v, want 25%%", m)
	}
	if rg.Spec.Selector.MatchLabels["app"] != "x" || !rg.Spec.Paused {
		t.Errorf("selector %v paused %v", rg.Spec.Selector, rg.Spec.Paused)
	}
	rg.Spec.StatefulSets[0].Name = "edited"
	if w.Obj().Spec.StatefulSets[0].Name != "a" {
		t.Error("editing an Obj changed the wrapper's group")
	}
}

func TestScalingPolicyAndDelayedDownscale(t *testing.T) {
	sp := MakeScalingPolicy("ns", "b").Target("", "b").Leader("a").ZoneDelay(time.Minute).Prepare("/prepare", 8080, time.Second).Obj()
	if sp.Spec.TargetRef != (v1alpha1.PolicyTargetReference{Name: "b"}) || sp.Spec.ReplicasFrom.Leader.Name != "a" ||
		sp.Spec.MinTimeBetweenZoneDownscales.Duration != time.Minute || sp.Spec.Downscale.Prepare.Port != 8080 || sp.Spec.Downscale.Prepare.Timeout.Duration != time.Second {
		t.Errorf("policy spec %+v", sp.Spec)
	}
	if self := MakeScalingPolicy("ns", "b").Replicas(3).DownscaleAllowed(false).Obj(); *self.Spec.Replicas != 3 || *self.Spec.Downscale.Allowed {
		t.Errorf("self-scaled policy spec %+v", self.Spec)
	}
	dd := MakeDelayedDownscale("ns", "a").Delay("1m").PrepareEndpoint("/prepare", 9000).Timeout(2 * time.Second).Obj()
	if dd.Spec.TargetRef.Name != "a" || dd.Spec.Delay != "1m" || dd.Spec.PrepareEndpoint.Port != 9000 || dd.Spec.Timeout.Duration != 2*time.Second {
		t.Errorf("DelayedDownscale spec %+v", dd.Spec)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.Status.Phase == corev1.PodRunning && c.Status == corev1.ConditionTrue
		}
	}
	return false
}
