/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package installed

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/test/builders"
)

// The workloads are built with unstructured RolloutGroups, so that these tests
// exercise the CRD the install put in the cluster rather than the Go types.

// rolloutTimeout bounds each wait of a rollout of a few pods; one takes seconds.
const rolloutTimeout = 3 * time.Minute

// StatefulSet is an OnDelete StatefulSet of replicas pods labelled app=<app>.
func StatefulSet(namespace, name, app string, replicas int32, image string) *appsv1.StatefulSet {
	return builders.MakeStatefulSet(namespace, name).Replicas(replicas).OnDelete().Label("app", app).ServiceName(app).
		PodLabel("app", app).PodLabel("statefulset", name).Container(app, image).Obj()
}

// RolloutGroup returns a RolloutGroup of the members, in order, with spec
// fields merged in.
func RolloutGroup(namespace, name string, members []string, spec map[string]any) *unstructured.Unstructured {
	list := make([]any, 0, len(members))
	for _, m := range members {
		list = append(list, map[string]any{"name": m})
	}
	s := map[string]any{"statefulSets": list}
	for k, v := range spec {
		s[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "echelon.dev/v1alpha1",
		"kind":       "RolloutGroup",
		"metadata":   map[string]any{"namespace": namespace, "name": name},
		"spec":       s,
	}}
}

// Zones are the member names RollOut creates: <app>-zone-a, -b, -c.
func Zones(app string) []string {
	return []string{app + "-zone-a", app + "-zone-b", app + "-zone-c"}
}

// RollOut creates a group (CreateGroup), waits for it to be Complete, starts a
// rollout (NewRevision) and waits until the operator has finished it
// (WaitRolledOut). With OnDelete nothing but the operator replaces the pods, so
// a finished rollout proves the operator worked.
func RollOut(ctx context.Context, c client.Client, namespace, app string) error {
	if err := CreateGroup(ctx, c, namespace, app); err != nil {
		return err
	}
	if err := WaitPhase(ctx, c, namespace, app, "Complete"); err != nil {
		return err
	}
	if err := NewRevision(ctx, c, namespace, app); err != nil {
		return err
	}
	return WaitRolledOut(ctx, c, namespace, app)
}

// CreateGroup creates three zone StatefulSets of two pods (Zones) and a
// RolloutGroup named app over them, with maxUnavailable 1 and one step of
// 100%, which rolls as without steps and exports the step metrics.
func CreateGroup(ctx context.Context, c client.Client, namespace, app string) error {
	zones := Zones(app)
	for _, z := range zones {
		if err := c.Create(ctx, StatefulSet(namespace, z, app, 2, "example.com/"+app+":1.0")); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, RolloutGroup(namespace, app, zones, map[string]any{"maxUnavailable": int64(1),
		"steps": []any{map[string]any{"percent": int64(100)}}})); err != nil {
		return fmt.Errorf("create RolloutGroup: %w", err)
	}
	return nil
}

// NewRevision changes the image of the group's StatefulSets: a rollout to do.
func NewRevision(ctx context.Context, c client.Client, namespace, app string) error {
	return SetImage(ctx, c, namespace, Zones(app), "example.com/"+app+":1.1")
}

// WaitRolledOut waits until every pod of the group's StatefulSets is Ready on
// its update revision and the group is Complete.
func WaitRolledOut(ctx context.Context, c client.Client, namespace, app string) error {
	zones := Zones(app)
	ctx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	var state string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, z := range zones {
			done, why, err := rolledOut(ctx, c, namespace, z)
			if err != nil || !done {
				state = why
				return false, err
			}
		}
		phase, err := Phase(ctx, c, namespace, app)
		state = "group phase " + phase
		return phase == "Complete", err
	})
	if err != nil {
		return fmt.Errorf("rollout of %s/%s: %s: %w", namespace, app, state, err)
	}
	return nil
}

// SetImage changes the pod template of the StatefulSets: a new revision.
func SetImage(ctx context.Context, c client.Client, namespace string, names []string, image string) error {
	for _, n := range names {
		var sts appsv1.StatefulSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: n}, &sts); err != nil {
			return err
		}
		patch := client.MergeFrom(sts.DeepCopy())
		sts.Spec.Template.Spec.Containers[0].Image = image
		if err := c.Patch(ctx, &sts, patch); err != nil {
			return fmt.Errorf("set image of %s: %w", n, err)
		}
	}
	return nil
}

// rolledOut reports whether every pod of the StatefulSet is Ready on its update
// revision, and if not, why.
func rolledOut(ctx context.Context, c client.Client, namespace, name string) (bool, string, error) {
	var sts appsv1.StatefulSet
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sts); err != nil {
		return false, "", err
	}
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "" {
		return false, name + ": StatefulSet controller has not observed the new template", nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"statefulset": name}); err != nil {
		return false, "", err
	}
	updated := 0
	for _, p := range pods.Items {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision && p.DeletionTimestamp == nil && kube.PodReady(&p) {
			updated++
		}
	}
	want := int(ptr.Deref(sts.Spec.Replicas, 1))
	return updated == want, fmt.Sprintf("%s: %d/%d pods Ready on %s", name, updated, want, sts.Status.UpdateRevision), nil
}

// Phase returns status.phase of a RolloutGroup once the operator has observed
// its current generation, and "" before.
func Phase(ctx context.Context, c client.Client, namespace, name string) (string, error) {
	rg := RolloutGroup(namespace, name, nil, nil)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rg); err != nil {
		return "", err
	}
	observed, _, _ := unstructured.NestedInt64(rg.Object, "status", "observedGeneration")
	if observed < rg.GetGeneration() {
		return "", nil
	}
	phase, _, _ := unstructured.NestedString(rg.Object, "status", "phase")
	return phase, nil
}

// WaitPhase waits until the RolloutGroup reports phase for its current generation.
func WaitPhase(ctx context.Context, c client.Client, namespace, name, phase string) error {
	ctx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		last, err = Phase(ctx, c, namespace, name)
		return last == phase, err
	})
	if err != nil {
		return fmt.Errorf("RolloutGroup %s/%s: phase %q, want %s: %w", namespace, name, last, phase, err)
	}
	return nil
}

// Stall makes a group that cannot progress: one StatefulSet whose pods a
// PodDisruptionBudget protects, rolled by eviction with a one-second progress
// deadline, then given a new revision. It returns once the group is Stalled,
// so the operator has counted a stall (echelon_rolloutgroup_stalls_total).
func Stall(ctx context.Context, c client.Client, namespace, app string) error {
	name := app + "-zone-a"
	if err := c.Create(ctx, StatefulSet(namespace, name, app, 1, "example.com/"+app+":1.0")); err != nil {
		return err
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	if err := c.Create(ctx, pdb); err != nil {
		return err
	}
	rg := RolloutGroup(namespace, app, []string{name}, map[string]any{"podDeletion": "Evict", "progressDeadline": "1s"})
	if err := c.Create(ctx, rg); err != nil {
		return fmt.Errorf("create RolloutGroup: %w", err)
	}
	if err := WaitPhase(ctx, c, namespace, app, "Complete"); err != nil {
		return err
	}
	if err := SetImage(ctx, c, namespace, []string{name}, "example.com/"+app+":1.1"); err != nil {
		return err
	}
	return WaitPhase(ctx, c, namespace, app, "Stalled")
}

// Scheme holds the types these tests read with typed clients: client-go's and
// CustomResourceDefinitions. RolloutGroups are read unstructured.
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	return scheme
}

// Scale gives zones a and b of a new group named app a self-scaled
// ScalingPolicy each, both down to one replica with a zone delay of two
// seconds, and waits until both are scaled: the first at once, the second
// after waiting out the delay. Zone c gets a ScalingPolicy down to one replica
// through a DelayedDownscale whose pods (kwok's, which serve no HTTP) cannot
// be prepared, and Scale waits until the DelayedDownscale reports that. The
// operator then exports every echelon_scalingpolicy_* series, the waiting
// histogram included, and every echelon_delayeddownscale_* series.
func Scale(ctx context.Context, c client.Client, namespace, app string) error {
	if err := CreateGroup(ctx, c, namespace, app); err != nil {
		return err
	}
	if err := WaitPhase(ctx, c, namespace, app, "Complete"); err != nil {
		return err
	}
	zones := Zones(app)[:2]
	for _, z := range zones {
		sp := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "echelon.dev/v1alpha1",
			"kind":       "ScalingPolicy",
			"metadata":   map[string]any{"namespace": namespace, "name": z},
			"spec": map[string]any{
				"targetRef":                    map[string]any{"name": z},
				"replicas":                     int64(1),
				"minTimeBetweenZoneDownscales": "2s",
			},
		}}
		if err := c.Create(ctx, sp); err != nil {
			return fmt.Errorf("create ScalingPolicy %s: %w", z, err)
		}
	}
	held := Zones(app)[2]
	for _, obj := range []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "echelon.dev/v1alpha1", "kind": "DelayedDownscale",
			"metadata": map[string]any{"namespace": namespace, "name": held},
			"spec": map[string]any{
				"targetRef":       map[string]any{"name": held},
				"delay":           "1h",
				"prepareEndpoint": map[string]any{"port": int64(8080), "path": "/prepare"},
				"timeout":         "1s",
			},
		}},
		{Object: map[string]any{
			"apiVersion": "echelon.dev/v1alpha1", "kind": "ScalingPolicy",
			"metadata": map[string]any{"namespace": namespace, "name": held},
			"spec":     map[string]any{"targetRef": map[string]any{"name": held}, "replicas": int64(1)},
		}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %s %s: %w", obj.GetKind(), held, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		dd := &unstructured.Unstructured{}
		dd.SetAPIVersion("echelon.dev/v1alpha1")
		dd.SetKind("DelayedDownscale")
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: held}, dd); err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(dd.Object, "status", "phase")
		return phase == "Blocked", nil
	}); err != nil {
		return fmt.Errorf("DelayedDownscale %s does not report its unreachable pods: %w", held, err)
	}
	for _, z := range zones {
		if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			sts := &appsv1.StatefulSet{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: z}, sts); err != nil {
				return false, err
			}
			return *sts.Spec.Replicas == 1 && sts.Status.Replicas == 1 && sts.Status.ReadyReplicas == 1, nil
		}); err != nil {
			return fmt.Errorf("StatefulSet %s not scaled down to 1 by its ScalingPolicy: %w", z, err)
		}
	}
	return nil
}
