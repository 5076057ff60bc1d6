// Package storagestub stands in for a storage driver on the test control
// plane, as kwok stands in for kubelets: the control plane runs no volume
// controller and no CSI driver, so a claim would never bind and a size
// patch never grow. A Driver binds every claim of its StorageClass to a
// PersistentVolume it creates, and answers a larger request after a delay:
// at once (online growth), or by leaving the claim FileSystemResizePending
// until a pod that mounts it is created again (offline growth, which a
// kubelet finishes on the next mount). It lives in the test tree and is
// never part of the shipped binary.
package storagestub

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationOffline on a claim (or its StatefulSet's volumeClaimTemplate)
// makes its growth offline: FileSystemResizePending until a pod mounts it
// again.
const AnnotationOffline = "storagestub.echelon.dev/offline"

// pollInterval is how often the driver looks at the claims.
const pollInterval = 100 * time.Millisecond

// Options configure a Driver.
type Options struct {
	// Namespace holds the claims the driver serves.
	Namespace string
	// Class is the StorageClass it serves; Expandable sets its
	// allowVolumeExpansion.
	Class      string
	Expandable bool
	// Delay is how long after a claim asks for more the volume grows.
	Delay time.Duration
}

// Driver binds and grows the claims of one StorageClass in one namespace.
type Driver struct {
	c    client.Client
	opts Options
	// asked is when each claim's current request was first seen above its
	// capacity, by claim UID and request.
	asked map[string]time.Time
	// mounted is, for each claim left FileSystemResizePending, the UID of
	// the pod that mounted it then ("" for none): another pod mounting it
	// is a new mount.
	mounted    map[types.UID]types.UID
	expansions atomic.Int64
	pvs        sync.Map
	stop       context.CancelFunc
	done       chan struct{}
}

// Start creates the StorageClass (provisioner storagestub.echelon.dev,
// Immediate binding) and runs the driver until Stop or ctx ends.
func Start(ctx context.Context, c client.Client, opts Options) (*Driver, error) {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: opts.Class}, Provisioner: "storagestub.echelon.dev",
		AllowVolumeExpansion: ptr.To(opts.Expandable), VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete)}
	if err := c.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create StorageClass %s: %w", opts.Class, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &Driver{c: c, opts: opts, asked: map[string]time.Time{}, mounted: map[types.UID]types.UID{}, stop: cancel, done: make(chan struct{})}
	go d.run(ctx)
	return d, nil
}

// Expansions counts the volumes grown so far (online, or offline once
// mounted again).
func (d *Driver) Expansions() int64 { return d.expansions.Load() }

// Stop stops the driver and deletes its PersistentVolumes and StorageClass.
func (d *Driver) Stop(ctx context.Context) {
	d.stop()
	<-d.done
	d.pvs.Range(func(k, _ any) bool {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: k.(string)}}
		_ = client.IgnoreNotFound(d.c.Delete(ctx, pv))
		return true
	})
	_ = client.IgnoreNotFound(d.c.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: d.opts.Class}}))
}

func (d *Driver) run(ctx context.Context) {
	defer close(d.done)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Errors are a moment's conflict or a claim going; the next
		// round tries again.
		_ = d.pass(ctx)
	}
}

// pass serves every claim of the class once.
func (d *Driver) pass(ctx context.Context) error {
	var claims corev1.PersistentVolumeClaimList
	if err := d.c.List(ctx, &claims, client.InNamespace(d.opts.Namespace)); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(d.opts.Namespace)); err != nil {
		return err
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != d.opts.Class {
			continue
		}
		var err error
		switch {
		case pvc.DeletionTimestamp != nil:
			// No pvc-protection controller runs here: let it go.
			if len(pvc.Finalizers) > 0 {
				err = d.c.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			}
		case pvc.Spec.VolumeName == "":
			err = d.bind(ctx, pvc)
		default:
			err = d.grow(ctx, pvc, pods.Items)
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// bind creates a volume of the claim's request and binds the two, as the
// volume controller would once a provisioner made it.
func (d *Driver) bind(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + string(pvc.UID), Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "storagestub.echelon.dev"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              d.opts.Class,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/storagestub/" + string(pvc.UID)}},
		},
	}
	if err := d.c.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	d.pvs.Store(pv.Name, true)
	pv.Status.Phase = corev1.VolumeBound
	if err := d.c.Status().Update(ctx, pv); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"pv.kubernetes.io/bind-completed":"yes","pv.kubernetes.io/bound-by-controller":"yes"}},"spec":{"volumeName":%q}}`, pv.Name)
	if err := d.c.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return err
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	return d.c.Status().Update(ctx, pvc)
}

// grow answers a request above the capacity after the delay: the volume
// grows, then the claim's capacity at once, or, offline, once a pod that
// mounts it was created after the claim became FileSystemResizePending.
func (d *Driver) grow(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pods []corev1.Pod) error {
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return nil
	}
	if _, pending := fsResizePending(pvc); pending {
		before, seen := d.mounted[pvc.UID]
		if !seen {
			// A driver restarted while the claim was pending: the pod
			// mounting it now is the one to wait out.
			d.mounted[pvc.UID] = mountedBy(pvc.Name, pods)
			return nil
		}
		if now := mountedBy(pvc.Name, pods); now == "" || now == before {
			return nil
		}
		delete(d.mounted, pvc.UID)
		return d.setCapacity(ctx, pvc, want)
	}
	key := string(pvc.UID) + "/" + want.String()
	first, ok := d.asked[key]
	if !ok {
		d.asked[key] = time.Now()
		return nil
	}
	if time.Since(first) < d.opts.Delay {
		return nil
	}
	pv := &corev1.PersistentVolume{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return err
	}
	if cur := pv.Spec.Capacity[corev1.ResourceStorage]; cur.Cmp(want) < 0 {
		patch := fmt.Sprintf(`{"spec":{"capacity":{"storage":%q}}}`, want.String())
		if err := d.c.Patch(ctx, pv, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return err
		}
	}
	if pvc.Annotations[AnnotationOffline] == "true" {
		d.mounted[pvc.UID] = mountedBy(pvc.Name, pods)
		pvc.Status.Conditions = append(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
			Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node."})
		return d.c.Status().Update(ctx, pvc)
	}
	return d.setCapacity(ctx, pvc, want)
}

func (d *Driver) setCapacity(ctx context.Context, pvc *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	var kept []corev1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if c.Type != corev1.PersistentVolumeClaimFileSystemResizePending {
			kept = append(kept, c)
		}
	}
	pvc.Status.Conditions = kept
	if err := d.c.Status().Update(ctx, pvc); err != nil {
		return err
	}
	d.expansions.Add(1)
	return nil
}

func fsResizePending(pvc *corev1.PersistentVolumeClaim) (time.Time, bool) {
	for _, c := range pvc.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// mountedBy is the UID of the running pod that mounts claim; "" when none.
func mountedBy(claim string, pods []corev1.Pod) types.UID {
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return p.UID
			}
		}
	}
	return ""
}
