package webhooks

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// statusFieldManager owns the webhook's writes of a policy's
// status.lastDownscaleTime.
const statusFieldManager = "echelon-prepare-downscale"

// Cluster is what the webhooks read and write. The decisions take it as an
// interface so that unit tests and the fuzzer give them fixed answers; the
// operator's Cluster (NewCluster) reads the manager's cache, through the same
// indexes as the controllers, so a webhook and a controller never disagree
// about which policy guards a target or which group a StatefulSet is in.
type Cluster interface {
	// Watches says whether the operator watches the namespace: outside its
	// namespaces it applies no policy, and its cache has nothing to read.
	Watches(namespace string) bool
	// PoliciesForTarget lists the ScalingPolicies of a StatefulSet,
	// Deployment or ReplicaSet.
	PoliciesForTarget(ctx context.Context, namespace, kind, name string) ([]v1alpha1.ScalingPolicy, error)
	// StatefulSet and Pod return nil, nil when the object does not exist.
	StatefulSet(ctx context.Context, namespace, name string) (*appsv1.StatefulSet, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// DownscaleGroup is the RolloutGroup of sts with its other members'
	// readiness and last downscales, nil when sts is in no group.
	DownscaleGroup(ctx context.Context, sts *appsv1.StatefulSet) (*scaling.Group, error)
	// Objects lists what the cross-object rules read in a namespace.
	Objects(ctx context.Context, namespace string) (NamespaceObjects, error)
	// RecordDownscale sets the policy's status.lastDownscaleTime to
	// pending.admittedAt, and status.pendingDownscale to pending.
	RecordDownscale(ctx context.Context, policy *v1alpha1.ScalingPolicy, pending v1alpha1.PendingDownscale) error
}

// cacheCluster is the operator's Cluster: reads from the manager's cache
// (every replica keeps it warm, leader or not), writes through its client.
type cacheCluster struct {
	reader     client.Reader
	writer     client.Client
	namespaces []string
}

// NewCluster returns the Cluster of the operator: reads through reader (the
// manager's cache, with the indexes lookup.Register adds), writes
// through writer. namespaces are the watched ones; empty means all.
func NewCluster(reader client.Reader, writer client.Client, namespaces []string) Cluster {
	return &cacheCluster{reader: reader, writer: writer, namespaces: namespaces}
}

func (c *cacheCluster) Watches(namespace string) bool {
	return len(c.namespaces) == 0 || slices.Contains(c.namespaces, namespace)
}

func (c *cacheCluster) PoliciesForTarget(ctx context.Context, namespace, kind, name string) ([]v1alpha1.ScalingPolicy, error) {
	return lookup.PoliciesForTarget(ctx, c.reader, namespace, kind, name)
}

func (c *cacheCluster) StatefulSet(ctx context.Context, namespace, name string) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	if err := getOrNil(ctx, c.reader, namespace, name, sts); err != nil || sts.Name == "" {
		return nil, err
	}
	return sts, nil
}

func (c *cacheCluster) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := getOrNil(ctx, c.reader, namespace, name, pod); err != nil || pod.Name == "" {
		return nil, err
	}
	return pod, nil
}

// getOrNil reads obj, leaving it empty when it does not exist.
func getOrNil(ctx context.Context, r client.Reader, namespace, name string, obj client.Object) error {
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %T %s/%s: %w", obj, namespace, name, err)
	}
	return nil
}

func (c *cacheCluster) DownscaleGroup(ctx context.Context, sts *appsv1.StatefulSet) (*scaling.Group, error) {
	return lookup.DownscaleGroup(ctx, c.reader, sts)
}

func (c *cacheCluster) Objects(ctx context.Context, namespace string) (NamespaceObjects, error) {
	var objs NamespaceObjects
	var groups v1alpha1.RolloutGroupList
	if err := c.reader.List(ctx, &groups, client.InNamespace(namespace)); err != nil {
		return objs, fmt.Errorf("list RolloutGroups: %w", err)
	}
	var policies v1alpha1.ScalingPolicyList
	if err := c.reader.List(ctx, &policies, client.InNamespace(namespace)); err != nil {
		return objs, fmt.Errorf("list ScalingPolicies: %w", err)
	}
	var sets appsv1.StatefulSetList
	if err := c.reader.List(ctx, &sets, client.InNamespace(namespace)); err != nil {
		return objs, fmt.Errorf("list StatefulSets: %w", err)
	}
	var delayed v1alpha1.DelayedDownscaleList
	if err := c.reader.List(ctx, &delayed, client.InNamespace(namespace)); err != nil {
		return objs, fmt.Errorf("list DelayedDownscales: %w", err)
	}
	objs.RolloutGroups, objs.ScalingPolicies, objs.StatefulSets = groups.Items, policies.Items, sets.Items
	objs.DelayedDownscales = delayed.Items
	return objs, nil
}

func (c *cacheCluster) RecordDownscale(ctx context.Context, policy *v1alpha1.ScalingPolicy, pending v1alpha1.PendingDownscale) error {
	patched := policy.DeepCopy()
	patched.Status.LastDownscaleTime = pending.AdmittedAt.DeepCopy()
	patched.Status.PendingDownscale = &pending
	if err := c.writer.Status().Patch(ctx, patched, client.MergeFrom(policy), client.FieldOwner(statusFieldManager)); err != nil {
		return fmt.Errorf("record the downscale in ScalingPolicy %s status.lastDownscaleTime and status.pendingDownscale: %w", policy.Name, err)
	}
	return nil
}
