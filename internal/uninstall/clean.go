/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Options says what the release installed and where.
type Options struct {
	// Namespaces are those the operator watched; empty for every namespace.
	Namespaces []string
	// ReleaseNamespace holds the operator's pods, its Lease and its Secret.
	ReleaseNamespace string
	// OperatorPods selects the operator's pods in ReleaseNamespace: nothing
	// is changed while one is there, since a running operator would hold
	// the partitions again.
	OperatorPods labels.Selector
	// Lease is the operator's leader election Lease; empty for none.
	Lease string
	// CertificateSecret is the Secret the operator wrote its self-signed
	// webhook certificates to; empty for none (a Secret the user gave is
	// theirs).
	CertificateSecret string
	// Timeout bounds the wait for the operator's pods to be gone.
	Timeout time.Duration
	// Poll is how often they are looked for.
	Poll time.Duration
}

// Clean waits for the operator's pods to be gone, then hands back each held
// partition that Judge lets go, removes PartitionFinalizer from every group,
// and deletes the Lease and the certificate Secret. It writes a line for
// each thing it does or keeps to out, and goes on past a failure, returning
// every error.
func Clean(ctx context.Context, c client.Client, o Options, out io.Writer) error {
	if err := waitOperatorGone(ctx, c, o); err != nil {
		return err
	}
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""} // every namespace
	}
	var errs []error
	kept := 0
	for _, ns := range namespaces {
		n, err := handBackPartitions(ctx, c, ns, out)
		kept += n
		errs = append(errs, err, removeFinalizers(ctx, c, ns, out))
	}
	errs = append(errs,
		deleteIfThere(ctx, c, "Lease", &coordinationv1.Lease{}, o.ReleaseNamespace, o.Lease, out),
		deleteIfThere(ctx, c, "Secret", &corev1.Secret{}, o.ReleaseNamespace, o.CertificateSecret, out))
	if kept > 0 {
		fmt.Fprintf(out, "%d StatefulSet(s) keep the partition Echelon held (label %s): see docs/uninstall.md, \"Hand the partitions back\"\n", kept, PartitionHolderLabel)
	}
	return errors.Join(errs...)
}

// waitOperatorGone polls until no pod of the operator is left; a failed list
// is tried again (an API server restarting, a rate limit) until the timeout.
func waitOperatorGone(ctx context.Context, c client.Client, o Options) error {
	if o.OperatorPods == nil || o.OperatorPods.Empty() {
		return nil
	}
	var left []string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, o.Poll, o.Timeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(o.ReleaseNamespace), client.MatchingLabelsSelector{Selector: o.OperatorPods}); err != nil {
			lastErr = err
			return false, nil
		}
		left, lastErr = left[:0], nil
		for _, p := range pods.Items {
			left = append(left, p.Name)
		}
		return len(left) == 0, nil
	})
	switch {
	case err == nil:
		return nil
	case lastErr != nil && len(left) == 0:
		return fmt.Errorf("list the operator's pods (%s) in namespace %s: %w: nothing changed", o.OperatorPods, o.ReleaseNamespace, lastErr)
	case wait.Interrupted(err):
		return fmt.Errorf("the operator's pods %v in namespace %s were still there after %s: nothing changed (a running operator would hold the partitions again)", left, o.ReleaseNamespace, o.Timeout)
	}
	return err
}

// handBackPartitions judges every StatefulSet of ns labelled as held and
// hands back those Judge lets go; it returns how many it kept.
func handBackPartitions(ctx context.Context, c client.Client, ns string, out io.Writer) (kept int, _ error) {
	var held appsv1.StatefulSetList
	if err := c.List(ctx, &held, client.InNamespace(ns), client.HasLabels{PartitionHolderLabel}); err != nil {
		return 0, fmt.Errorf("list the StatefulSets labelled %s: %w", PartitionHolderLabel, err)
	}
	var errs []error
	for i := range held.Items {
		sts := &held.Items[i]
		v := Judge(sts)
		if !v.HandBack {
			kept++
			msg := fmt.Sprintf("partition %d kept at the operator's uninstall: %s", ptr.Deref(partitionOf(sts), 0), v.Why)
			fmt.Fprintf(out, "StatefulSet %s/%s: %s\n", sts.Namespace, sts.Name, msg)
			recordEvent(ctx, c, sts, corev1.EventTypeWarning, "PartitionKept", msg, out)
			continue
		}
		patched := sts.DeepCopy()
		delete(patched.Labels, PartitionHolderLabel)
		if ru := patched.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			ru.Partition = nil
		}
		// The optimistic lock: a spec changed since the read is judged again
		// on the next run rather than handed back on a stale verdict.
		if err := c.Patch(ctx, patched, client.MergeFromWithOptions(sts, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("hand back the partition of StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err))
			continue
		}
		msg := fmt.Sprintf("partition %d handed back (removed) at the operator's uninstall: %s", ptr.Deref(partitionOf(sts), 0), v.Why)
		fmt.Fprintf(out, "StatefulSet %s/%s: %s\n", sts.Namespace, sts.Name, msg)
		recordEvent(ctx, c, sts, corev1.EventTypeNormal, "PartitionHandedBack", msg, out)
	}
	return kept, errors.Join(errs...)
}

func partitionOf(sts *appsv1.StatefulSet) *int32 {
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		return ru.Partition
	}
	return nil
}

// recordEvent records an Event on sts, which `kubectl describe` shows after
// the hook's Job is gone; a failure to record it is printed, not fatal.
func recordEvent(ctx context.Context, c client.Client, sts *appsv1.StatefulSet, eventType, reason, msg string, out io.Writer) {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, GenerateName: sts.Name + "."},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: sts.Namespace, Name: sts.Name, UID: sts.UID, ResourceVersion: sts.ResourceVersion,
		},
		Type: eventType, Reason: reason, Message: msg, Action: "Uninstall",
		Source:         corev1.EventSource{Component: eventSource},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "echelon.dev/uninstall", ReportingInstance: eventSource,
	}
	if err := c.Create(ctx, ev); err != nil {
		fmt.Fprintf(out, "record Event %s on StatefulSet %s/%s: %v\n", reason, sts.Namespace, sts.Name, err)
	}
}

// eventSource names the uninstall hook in the Events it records.
const eventSource = "echelon-uninstall"

// removeFinalizers removes PartitionFinalizer from every group of ns, so that
// deleting one (or the CRD) does not wait for an operator that is gone. A
// partition kept stays labelled with its group's UID: a reinstalled operator
// adds the finalizer again before it writes a partition.
func removeFinalizers(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	var groups v1alpha1.RolloutGroupList
	if err := c.List(ctx, &groups, client.InNamespace(ns)); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			// The CRD went with the release (crds.keep=false) and held no
			// group: nothing carries the finalizer.
			return nil
		}
		return fmt.Errorf("list RolloutGroups: %w", err)
	}
	var errs []error
	for i := range groups.Items {
		rg := &groups.Items[i]
		if !controllerutil.ContainsFinalizer(rg, PartitionFinalizer) {
			continue
		}
		patched := rg.DeepCopy()
		controllerutil.RemoveFinalizer(patched, PartitionFinalizer)
		if err := c.Patch(ctx, patched, client.MergeFromWithOptions(rg, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove finalizer %s from RolloutGroup %s/%s: %w", PartitionFinalizer, rg.Namespace, rg.Name, err))
			continue
		}
		fmt.Fprintf(out, "removed finalizer %s from RolloutGroup %s/%s\n", PartitionFinalizer, rg.Namespace, rg.Name)
	}
	return errors.Join(errs...)
}

// deleteIfThere deletes the object kind ns/name when there is one; an empty
// name is nothing to delete.
func deleteIfThere(ctx context.Context, c client.Client, kind string, obj client.Object, ns, name string, out io.Writer) error {
	if name == "" {
		return nil
	}
	obj.SetNamespace(ns)
	obj.SetName(name)
	switch err := c.Delete(ctx, obj); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("delete %s %s/%s: %w", kind, ns, name, err)
	}
	fmt.Fprintf(out, "deleted %s %s/%s\n", kind, ns, name)
	return nil
}
