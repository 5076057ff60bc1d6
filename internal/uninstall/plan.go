/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package uninstall is `echelon uninstall`, which the chart runs as a
// post-delete hook once the operator is gone: it hands back the partitions
// Echelon held where that rolls nothing, removes the groups' finalizers and
// deletes the objects the operator created outside the release (its Lease,
// the Secret of its self-signed certificates). What it must keep, it says.
package uninstall

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// The marks Echelon leaves on what it holds (controllers/rolloutgroup,
// partition.go).
const (
	PartitionHolderLabel = v1alpha1.PartitionHolderLabel
	PartitionFinalizer   = v1alpha1.PartitionsFinalizer
)

// Verdict is what uninstall does with a StatefulSet whose partition Echelon
// holds.
type Verdict struct {
	// HandBack: remove the partition and the label. The StatefulSet
	// controller then rolls the StatefulSet on its own again.
	HandBack bool
	// Why says why, in a user's terms.
	Why string
}

// Judge decides for one held StatefulSet. Its partition is handed back only
// when that replaces no pod: the StatefulSet controller has seen its spec,
// and every pod is on the update revision. A StatefulSet with a template
// change pending keeps its partition: handed back, it would roll at once,
// and with it every other zone of its group that has the change pending —
// the zones together, which the group exists to prevent. Its label stays,
// so that a reinstalled operator resumes the rollout where it stopped.
func Judge(sts *appsv1.StatefulSet) Verdict {
	st := sts.Status
	replicas := ptr.Deref(sts.Spec.Replicas, 1)
	switch {
	case st.ObservedGeneration < sts.Generation:
		return Verdict{Why: fmt.Sprintf("the StatefulSet controller has not seen generation %d of its spec yet: whether it would roll pods is unknown", sts.Generation)}
	case st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision:
		return Verdict{Why: fmt.Sprintf("%d of %d pods are on its update revision %s: handing the partition back would roll the rest at once, with the other zones that wait for the change", st.UpdatedReplicas, replicas, st.UpdateRevision)}
	}
	return Verdict{HandBack: true, Why: "every pod is on its update revision: handing the partition back rolls nothing"}
}
