// Package resize plans, without any client, the growth of a RolloutGroup's
// volumes (spec.volumeClaimSizes): zone by zone in the group's order, patch
// every claim of the zone, wait for the storage driver's capacity, restart
// the pods whose filesystem grows offline (through the disruption budget),
// then replace the zone's StatefulSet by an orphaning delete and a create
// with the new size, so that its pods are adopted again and new replicas
// get the size. Nothing is touched while any zone has a claim that cannot
// grow. Plan is tested with tables and fuzzed together with
// disruption.Decide.
package resize

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Action is what the controller does next.
type Action string

const (
	// ActNone: no resize is asked for.
	ActNone Action = "None"
	// ActBlock: nothing may be touched; Plan.Message says why.
	ActBlock Action = "Block"
	// ActWait: wait for the driver, the pods or the budget.
	ActWait Action = "Wait"
	// ActHold: record the budget's hold of Plan.Zone before touching it.
	ActHold Action = "Hold"
	// ActPatch: patch Plan.Claims to the new size.
	ActPatch Action = "Patch"
	// ActRestart: restart Plan.Pods, through the budget.
	ActRestart Action = "Restart"
	// ActRecord: record Plan.Recreate in status, before the delete.
	ActRecord Action = "Record"
	// ActDelete: delete Plan.Zone's StatefulSet (UID Plan.Recreate.UID),
	// orphaning its pods.
	ActDelete Action = "Delete"
	// ActCreate: create the StatefulSet recorded in status.
	ActCreate Action = "Create"
	// ActComplete: every zone has the size; release the hold.
	ActComplete Action = "Complete"
)

// Claim is one PersistentVolumeClaim of a zone's template.
type Claim struct {
	Name     string
	Template string
	Ordinal  int
	// Class is spec.storageClassName; "" when the claim names none.
	Class     string
	Requested resource.Quantity
	Capacity  resource.Quantity
	// FileSystemResizePending is the claim's condition of that name, and
	// PendingSince when it became true.
	FileSystemResizePending bool
	PendingSince            time.Time
}

// Pod is the pod of a claim's ordinal.
type Pod struct {
	Name        string
	UID         types.UID
	Created     time.Time
	Terminating bool
	Ready       bool
}

// Zone is one member as read.
type Zone struct {
	Name string
	// StatefulSet is nil when it does not exist (deleted for its
	// replacement, or missing).
	StatefulSet *appsv1.StatefulSet
	Claims      []Claim
	// Pods by name.
	Pods map[string]Pod
	// MaxUnavailable is the member's rollout maxUnavailable: how many pods
	// one restart asks for at most.
	MaxUnavailable int32
}

// Input is what Plan decides on.
type Input struct {
	Now time.Time
	// Sizes is spec.volumeClaimSizes.
	Sizes []v1alpha1.VolumeClaimSize
	// Zones are the members in the group's order.
	Zones []Zone
	// Expandable says, for each StorageClass the claims name, whether it
	// allows volume expansion; a class absent does not exist.
	Expandable map[string]bool
	// Status is status.volumeResize as recorded.
	Status *v1alpha1.VolumeResizeStatus
	// HeldZone is the zone the group's hold is recorded for, and HeldUntil
	// when it expires; "" when none.
	HeldZone  string
	HeldUntil time.Time
}

// renewBefore is how long before its expiry a hold is renewed.
const renewBefore = 60 * time.Second

// Plan is the answer.
type Plan struct {
	Action  Action
	Zone    string
	Message string
	// Claims to patch, with the size each gets.
	Claims []ClaimPatch
	// Pods to restart.
	Pods []string
	// Recreate is the StatefulSet to record, delete or create.
	Recreate *v1alpha1.StatefulSetRecreate
	// RecreateObject is Recreate's object, decoded.
	RecreateObject *appsv1.StatefulSet
	// Status is status.volumeResize to write.
	Status *v1alpha1.VolumeResizeStatus
}

// ClaimPatch is a claim and the size it is patched to.
type ClaimPatch struct {
	Name string
	Size resource.Quantity
}

// Decide plans the next step of in's resize.
func Decide(in Input) Plan {
	if len(in.Sizes) == 0 {
		if in.Status != nil && in.Status.Recreate != nil {
			return recreate(in, newStatus(in))
		}
		return Plan{Action: ActNone}
	}
	st := newStatus(in)
	if in.Status != nil && in.Status.Recreate != nil {
		return recreate(in, st)
	}
	if msg := blocked(in); msg != "" {
		st.Phase, st.Message, st.CurrentZone = v1alpha1.VolumeResizeBlocked, msg, ""
		return Plan{Action: ActBlock, Message: msg, Status: st}
	}
	for i := range in.Zones {
		z := &in.Zones[i]
		if zoneDone(in, z) {
			continue
		}
		st.Phase, st.CurrentZone = v1alpha1.VolumeResizeResizing, z.Name
		if st.StartTime == nil || st.CompletionTime != nil {
			st.StartTime, st.CompletionTime = ptrTime(in.Now), nil
		}
		p := zonePlan(in, z, st)
		p.Zone = z.Name
		st.Message = z.Name + ": " + p.Message
		p.Status = st
		return p
	}
	st.Phase, st.CurrentZone, st.Message = v1alpha1.VolumeResizeComplete, "", "every claim and member has the size asked for"
	if st.CompletionTime == nil {
		st.CompletionTime = ptrTime(in.Now)
	}
	return Plan{Action: ActComplete, Message: st.Message, Status: st}
}

// zonePlan is the next step in zone z, the first not done.
func zonePlan(in Input, z *Zone, st *v1alpha1.VolumeResizeStatus) Plan {
	setZonePhase(st, z.Name, v1alpha1.ZoneVolumeExpanding)
	if in.HeldZone != z.Name || !in.Now.Add(renewBefore).Before(in.HeldUntil) {
		return Plan{Action: ActHold, Message: "waiting for the disruption budget to hold the zone"}
	}
	var patch []ClaimPatch
	for _, c := range z.Claims {
		if want, ok := sizeOf(in.Sizes, c.Template); ok && c.Requested.Cmp(want) < 0 {
			patch = append(patch, ClaimPatch{Name: c.Name, Size: want})
		}
	}
	if len(patch) > 0 {
		return Plan{Action: ActPatch, Claims: patch, Message: fmt.Sprintf("asking %d claims for the new size", len(patch))}
	}
	var expanding, restarting, waitingPods []string
	for _, c := range z.Claims {
		want, _ := sizeOf(in.Sizes, c.Template)
		switch phase := claimPhase(c, want); phase {
		case v1alpha1.ClaimExpanding:
			expanding = append(expanding, c.Name)
		case v1alpha1.ClaimFileSystemResizePending:
			pod, ok := z.Pods[podName(z.Name, c.Ordinal)]
			switch {
			case !ok:
				// No pod mounts it: the next one to mount it grows it.
			// Times are to the second: a pod created in the second the
			// claim became pending is taken for its replacement (a pod
			// that mounts the claim after its volume grew grows its
			// filesystem), so that no pod is restarted twice.
			case pod.Terminating || !pod.Ready || !pod.Created.Before(c.PendingSince):
				waitingPods = append(waitingPods, pod.Name)
			default:
				restarting = append(restarting, pod.Name)
			}
		}
	}
	switch {
	case len(expanding) > 0:
		return Plan{Action: ActWait, Message: fmt.Sprintf("waiting for the storage driver to expand %s", list(expanding))}
	case len(restarting) > 0:
		setZonePhase(st, z.Name, v1alpha1.ZoneVolumeRestarting)
		slices.Sort(restarting)
		batch := restarting[:min(len(restarting), int(max(z.MaxUnavailable, 1)))]
		return Plan{Action: ActRestart, Pods: batch, Message: fmt.Sprintf("restarting %s so that their filesystems grow", list(batch))}
	case len(waitingPods) > 0:
		setZonePhase(st, z.Name, v1alpha1.ZoneVolumeRestarting)
		return Plan{Action: ActWait, Message: fmt.Sprintf("waiting for %s to mount their grown volumes", list(waitingPods))}
	}
	setZonePhase(st, z.Name, v1alpha1.ZoneVolumeReplacing)
	if z.StatefulSet == nil {
		return Plan{Action: ActWait, Message: "the StatefulSet does not exist"}
	}
	if !allPodsReady(z) {
		return Plan{Action: ActWait, Message: "waiting for every pod to be Ready before replacing the StatefulSet"}
	}
	obj := RecreateObject(z.StatefulSet, in.Sizes)
	rec, err := recordOf(obj, z.StatefulSet.UID)
	if err != nil {
		return Plan{Action: ActWait, Message: err.Error()}
	}
	return Plan{Action: ActRecord, Recreate: rec, RecreateObject: obj, Message: "replacing the StatefulSet with the new size"}
}

// recreate finishes a replacement recorded in status: delete the old
// StatefulSet (orphaning) if it is still there, create the new one once it
// is gone, and clear the record once it exists.
func recreate(in Input, st *v1alpha1.VolumeResizeStatus) Plan {
	rec := in.Status.Recreate
	obj, err := decodeRecreate(rec)
	p := Plan{Zone: rec.Name, Recreate: rec, RecreateObject: obj, Status: st}
	setZonePhase(st, rec.Name, v1alpha1.ZoneVolumeReplacing)
	st.Phase, st.CurrentZone = v1alpha1.VolumeResizeResizing, rec.Name
	if err != nil {
		p.Action, p.Message = ActBlock, fmt.Sprintf("status.volumeResize.recreate: %v", err)
		st.Message = p.Message
		return p
	}
	i := slices.IndexFunc(in.Zones, func(z Zone) bool { return z.Name == rec.Name })
	var sts *appsv1.StatefulSet
	if i >= 0 {
		sts = in.Zones[i].StatefulSet
	}
	switch {
	case sts == nil:
		p.Action, p.Message = ActCreate, "creating the StatefulSet again with the new size"
	case string(sts.UID) != rec.UID:
		// Created again: the record has served. Plan the rest on the next
		// pass, with the record cleared.
		st.Recreate = nil
		p.Action, p.Message = ActWait, "the StatefulSet was created again"
	case sts.DeletionTimestamp != nil:
		p.Action, p.Message = ActWait, "waiting for the orphaning delete of the StatefulSet to finish"
	default:
		p.Action, p.Message = ActDelete, "deleting the StatefulSet, orphaning its pods"
	}
	st.Message = rec.Name + ": " + p.Message
	return p
}

// blocked says why nothing may be touched: a template no member has, a
// size below a member's template or claim, a claim to grow whose class
// does not allow expansion. "" when nothing blocks.
func blocked(in Input) string {
	var msgs []string
	for i, s := range in.Sizes {
		found := false
		for _, z := range in.Zones {
			if z.StatefulSet == nil {
				continue
			}
			t := template(z.StatefulSet, s.Name)
			if t == nil {
				continue
			}
			found = true
			if cur := t.Spec.Resources.Requests[corev1.ResourceStorage]; cur.Cmp(s.Quantity()) > 0 {
				msgs = append(msgs, fmt.Sprintf("spec.volumeClaimSizes[%d].size: %s is below %s's volumeClaimTemplate %s (%s); a claim cannot shrink",
					i, s.Size, z.Name, s.Name, cur.String()))
			}
		}
		if !found {
			msgs = append(msgs, fmt.Sprintf("spec.volumeClaimSizes[%d].name: no member has a volumeClaimTemplate %q", i, s.Name))
		}
	}
	classes := map[string][]string{}
	for _, z := range in.Zones {
		for _, c := range z.Claims {
			want, ok := sizeOf(in.Sizes, c.Template)
			if !ok {
				continue
			}
			if c.Requested.Cmp(want) > 0 {
				msgs = append(msgs, fmt.Sprintf("spec.volumeClaimSizes: claim %s requests %s, above %s; a claim cannot shrink", c.Name, c.Requested.String(), want.String()))
				continue
			}
			if c.Capacity.Cmp(want) >= 0 || in.Expandable[c.Class] {
				continue
			}
			classes[c.Class] = append(classes[c.Class], c.Name)
		}
	}
	for _, class := range sortedKeys(classes) {
		claims := classes[class]
		switch _, exists := in.Expandable[class]; {
		case class == "":
			msgs = append(msgs, fmt.Sprintf("claims %s name no StorageClass, so they cannot be expanded", list(claims)))
		case !exists:
			msgs = append(msgs, fmt.Sprintf("StorageClass %s of claims %s does not exist", class, list(claims)))
		default:
			msgs = append(msgs, fmt.Sprintf("StorageClass %s of claims %s does not set allowVolumeExpansion: true", class, list(claims)))
		}
	}
	return strings.Join(msgs, "; ")
}

// zoneDone reports whether zone z has the size: every claim resized (or
// left to grow at its next mount with no pod to restart), and its
// StatefulSet's templates asking for the size.
func zoneDone(in Input, z *Zone) bool {
	if z.StatefulSet == nil {
		return false
	}
	for _, s := range in.Sizes {
		if t := template(z.StatefulSet, s.Name); t != nil {
			if cur := t.Spec.Resources.Requests[corev1.ResourceStorage]; cur.Cmp(s.Quantity()) != 0 {
				return false
			}
		}
	}
	for _, c := range z.Claims {
		want, ok := sizeOf(in.Sizes, c.Template)
		if !ok {
			continue
		}
		switch claimPhase(c, want) {
		case v1alpha1.ClaimResized:
		case v1alpha1.ClaimFileSystemResizePending:
			if _, ok := z.Pods[podName(z.Name, c.Ordinal)]; ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// claimPhase is where claim c stands against size want.
func claimPhase(c Claim, want resource.Quantity) v1alpha1.ClaimPhase {
	switch {
	case c.Capacity.Cmp(want) >= 0:
		return v1alpha1.ClaimResized
	case c.Requested.Cmp(want) < 0:
		return v1alpha1.ClaimPending
	case c.FileSystemResizePending:
		return v1alpha1.ClaimFileSystemResizePending
	}
	return v1alpha1.ClaimExpanding
}

// newStatus is the status of every zone and claim as read, with what the
// recorded status keeps (start and completion, the recreate record).
func newStatus(in Input) *v1alpha1.VolumeResizeStatus {
	st := &v1alpha1.VolumeResizeStatus{}
	if in.Status != nil {
		st.StartTime, st.CompletionTime = in.Status.StartTime.DeepCopy(), in.Status.CompletionTime.DeepCopy()
		st.Recreate = in.Status.Recreate.DeepCopy()
	}
	for i := range in.Zones {
		z := &in.Zones[i]
		zs := v1alpha1.ZoneVolumeStatus{Name: z.Name, Phase: v1alpha1.ZoneVolumePending}
		if len(in.Sizes) > 0 && zoneDone(in, z) {
			zs.Phase = v1alpha1.ZoneVolumeComplete
		}
		for _, c := range z.Claims {
			want, ok := sizeOf(in.Sizes, c.Template)
			if !ok {
				continue
			}
			cs := v1alpha1.ClaimStatus{Name: c.Name, Requested: ptrQuantity(c.Requested), Phase: claimPhase(c, want)}
			if !c.Capacity.IsZero() {
				cs.Capacity = ptrQuantity(c.Capacity)
			}
			zs.Claims = append(zs.Claims, cs)
		}
		if len(zs.Claims) > 512 {
			zs.Claims = zs.Claims[:512]
		}
		st.Zones = append(st.Zones, zs)
	}
	return st
}

func setZonePhase(st *v1alpha1.VolumeResizeStatus, zone string, phase v1alpha1.ZoneVolumePhase) {
	for i := range st.Zones {
		if st.Zones[i].Name == zone {
			st.Zones[i].Phase = phase
		}
	}
}

func allPodsReady(z *Zone) bool {
	for _, p := range z.Pods {
		if p.Terminating || !p.Ready {
			return false
		}
	}
	return true
}

// template is sts's volumeClaimTemplate named name; nil when none.
func template(sts *appsv1.StatefulSet, name string) *corev1.PersistentVolumeClaim {
	for i := range sts.Spec.VolumeClaimTemplates {
		if sts.Spec.VolumeClaimTemplates[i].Name == name {
			return &sts.Spec.VolumeClaimTemplates[i]
		}
	}
	return nil
}

func sizeOf(sizes []v1alpha1.VolumeClaimSize, tmpl string) (resource.Quantity, bool) {
	for _, s := range sizes {
		if s.Name == tmpl {
			return s.Quantity(), true
		}
	}
	return resource.Quantity{}, false
}

func podName(sts string, ordinal int) string { return fmt.Sprintf("%s-%d", sts, ordinal) }

// list is "a, b and 3 more".
func list(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

func ptrQuantity(q resource.Quantity) *resource.Quantity { return &q }
