/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package uninstall

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// TestClean runs the uninstall hook's cleanup against the real control plane:
// it waits for the operator's pod to be gone, hands back the partition of a
// StatefulSet whose pods are all updated, keeps (with an Event) that of one
// with a template change pending, which then rolls nothing, removes the
// groups' finalizer and deletes the Lease and the certificate Secret.
func TestClean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs against a real control plane; skipped with -short")
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cp := controlplane.StartForTest(t, controlplane.Options{Nodes: 2, CRDDirs: []string{controlplane.CRDBasesDir}, Scheme: scheme})
	c := cp.Client()
	ctx := context.Background()
	apps, err := cp.CreateNamespace(ctx, "apps")
	if err != nil {
		t.Fatal(err)
	}
	system, err := cp.CreateNamespace(ctx, "echelon-system")
	if err != nil {
		t.Fatal(err)
	}

	done, pending := heldZone(t, c, apps, "web-zone-a"), heldZone(t, c, apps, "web-zone-b")
	// A template change the operator would have rolled by the partition.
	pending.Spec.Template.Labels["version"] = "2"
	if err := c.Update(ctx, pending); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "web-zone-b's template change seen", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pending), pending)
		return err == nil && pending.Status.ObservedGeneration == pending.Generation && pending.Status.UpdateRevision != pending.Status.CurrentRevision, err
	})

	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "web", Finalizers: []string{PartitionFinalizer}}}
	rg.Spec.StatefulSets = []v1alpha1.RolloutMember{{Name: done.Name}, {Name: pending.Name}}
	if err := c.Create(ctx, rg); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "echelon"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "echelon-webhook-tls"}}
	operatorPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "echelon-0", Labels: map[string]string{"app.kubernetes.io/name": "echelon"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "echelon"}}},
	}
	for _, obj := range []client.Object{lease, secret, operatorPod} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	o := Options{
		Namespaces: []string{apps}, ReleaseNamespace: system, Lease: lease.Name, CertificateSecret: secret.Name,
		OperatorPods: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "echelon"}), Timeout: 2 * time.Second, Poll: 50 * time.Millisecond,
	}
	var out bytes.Buffer
	err = Clean(ctx, c, o, &out)
	if err == nil || !strings.Contains(err.Error(), "[echelon-0]") || !strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("Clean with the operator's pod there = %v, want an error naming it", err)
	}
	expectHeld(t, c, done)

	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = c.Delete(context.Background(), operatorPod, client.GracePeriodSeconds(0))
	}()
	o.Timeout = time.Minute
	out.Reset()
	if err := Clean(ctx, c, o, &out); err != nil {
		t.Fatalf("Clean: %v\n%s", err, out.String())
	}
	t.Logf("Clean said:\n%s", out.String())

	if err := c.Get(ctx, client.ObjectKeyFromObject(done), done); err != nil {
		t.Fatal(err)
	}
	// A removed partition reads 0, the API's default.
	if p := ptr.Deref(partitionOf(done), 0); p != 0 || done.Labels[PartitionHolderLabel] != "" {
		t.Errorf("web-zone-a: partition %d, label %q; want both removed", p, done.Labels[PartitionHolderLabel])
	}
	expectHeld(t, c, pending)
	if err := c.Get(ctx, client.ObjectKeyFromObject(rg), rg); err != nil || len(rg.Finalizers) != 0 {
		t.Errorf("RolloutGroup web: %v, finalizers %v; want none", err, rg.Finalizers)
	}
	for _, obj := range []client.Object{lease, secret} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s after Clean: %v, want it gone", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	if !strings.Contains(out.String(), "1 StatefulSet(s) keep the partition") {
		t.Errorf("Clean's output does not count the kept partition:\n%s", out.String())
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(apps)); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, e := range events.Items {
		if e.Source.Component == eventSource {
			reasons[e.InvolvedObject.Name] = e.Reason + ": " + e.Message
		}
	}
	if !strings.HasPrefix(reasons[done.Name], "PartitionHandedBack: partition 1 handed back") ||
		!strings.HasPrefix(reasons[pending.Name], "PartitionKept: partition 1 kept") || !strings.Contains(reasons[pending.Name], "0 of 1 pods") {
		t.Errorf("Events of the uninstall: %v", reasons)
	}

	// Run again (a retried hook): nothing left to do, nothing fails.
	out.Reset()
	if err := Clean(ctx, c, o, &out); err != nil {
		t.Fatalf("Clean again: %v\n%s", err, out.String())
	}

	// With crds.keep=false the CRD goes with the release, before the hook.
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "rolloutgroups.echelon.dev"}}
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the RolloutGroup CRD gone", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	fresh, err := client.New(cp.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for name, cl := range map[string]client.Client{"a client that knew the CRD": c, "a new client": fresh} {
		out.Reset()
		if err := Clean(ctx, cl, o, &out); err != nil {
			t.Errorf("Clean without the CRD, %s: %v\n%s", name, err, out.String())
		}
	}
}

// heldZone creates a one-pod RollingUpdate StatefulSet, waits for its pod,
// and holds its partition at its replicas as the operator does.
func heldZone(t *testing.T, c client.Client, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	ctx := context.Background()
	podLabels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "version": "1"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			},
		},
	}
	if err := c.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	waitFor(t, name+" ready", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(sts), sts)
		return err == nil && sts.Status.ReadyReplicas == 1 && sts.Status.CurrentRevision == sts.Status.UpdateRevision, err
	})
	sts.Labels = map[string]string{PartitionHolderLabel: "some-group-uid"}
	sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
	if err := c.Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	waitFor(t, name+"'s partition seen", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(sts), sts)
		return err == nil && sts.Status.ObservedGeneration == sts.Generation, err
	})
	return sts
}

func expectHeld(t *testing.T, c client.Client, sts *appsv1.StatefulSet) {
	t.Helper()
	live := &appsv1.StatefulSet{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sts), live); err != nil {
		t.Fatal(err)
	}
	if p := partitionOf(live); ptr.Deref(p, -1) != 1 || live.Labels[PartitionHolderLabel] == "" {
		t.Errorf("%s: partition %v, label %q; want it held at 1", sts.Name, ptr.Deref(p, -1), live.Labels[PartitionHolderLabel])
	}
	if live.Status.UpdatedReplicas != 0 && live.Status.UpdateRevision != live.Status.CurrentRevision {
		t.Errorf("%s: %d pods rolled to the pending revision; want none", sts.Name, live.Status.UpdatedReplicas)
	}
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
