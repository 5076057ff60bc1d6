// Package framework holds what the end-to-end tests share: the operator run as a
// separate process, and a monitor that watches every pod of a group while a
// rollout runs and records every breach of the guarantees as it happens.
package framework

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// WatchedMember is one member StatefulSet as the monitor judges it.
type WatchedMember struct {
	Name string
	// Replicas is the number of pods the member wants (spec.replicas);
	// Monitor.SetReplicas changes it when a spec scales the member.
	Replicas int
	// MaxUnavailable is the member's limit as the group's spec states it,
	// resolved against Replicas whenever a roll is judged.
	MaxUnavailable intstr.IntOrString
}

// Breach is one moment at which a guarantee did not hold.
type Breach struct {
	At     time.Time
	Detail string
}

// Monitor watches the pods of a group through one watch, so that it sees every
// state the API server went through in order.
//
// A member's pod is unavailable when a pod it wants (ordinal below its replicas)
// is missing, terminating or not Ready, and when a pod above its wanted ordinals
// (being scaled away) is still there but not Ready and live: such a pod keeps
// status.replicas above the ready pods, so it uses availability too.
//
// A roll is a pod at a wanted ordinal that starts terminating (or vanishes).
// Echelon is the only one that rolls pods in these tests, so every roll is
// judged against the guarantees at the moment it is seen:
//   - no other member has an unavailable pod (guarantees 1 and 2: members are
//     never rolled together, and a member is rolled only while every other one
//     is fully available, including pods that are being scaled away);
//   - the rolled member's unavailable pods, the rolled one included, do not
//     exceed its maxUnavailable (guarantee 4).
//
// Judging rolls rather than every state keeps what others do (a scale-down, a
// scale-up, a readiness probe failing) from counting against Echelon, while
// Echelon's next roll still has to respect it.
//
// The monitor also records every pod deletion it sees, once per pod UID, and
// every pod that vanished without terminating first: Echelon deletes and evicts
// gracefully, so such a pod was force-deleted by someone else, which no spec
// expects (see ForcedDeletions).
type Monitor struct {
	stop context.CancelFunc

	mu        sync.Mutex
	members   []WatchedMember
	pods      map[string]*corev1.Pod
	armed     bool
	breaches  []Breach
	deletions []Deletion
	// seenDeleted holds the UIDs already recorded as deleted.
	seenDeleted sets.Set[types.UID]
	forced      []string
	peak        map[string]int
}

// Deletion is a pod the monitor saw start terminating, or vanish.
type Deletion struct {
	At     time.Time
	Pod    string
	UID    types.UID
	Member string
	// ScaledAway is set for a pod above its member's wanted ordinals: the
	// StatefulSet controller removed it in a scale-down; it was not rolled.
	ScaledAway bool
	// Labels and Annotations are the pod's, e.g. to tell which template
	// version or revision it ran.
	Labels      map[string]string
	Annotations map[string]string
}

// MaxUnavailableOf resolves an int-or-percent the way the API documents it, so the
// monitor's limit is computed independently of the operator's code.
func MaxUnavailableOf(v intstr.IntOrString, replicas int) int {
	if v.Type == intstr.Int {
		return max(1, v.IntValue())
	}
	pct, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil {
		panic(fmt.Sprintf("bad percentage %q", v.StrVal))
	}
	return max(1, replicas*pct/100)
}

// StartMonitor watches the pods of namespace. It judges nothing until every
// member is fully available (the group's starting point); from then on every
// roll is judged.
func StartMonitor(ctx context.Context, cs kubernetes.Interface, namespace string, members []WatchedMember) (*Monitor, error) {
	ctx, cancel := context.WithCancel(ctx)
	m := newMonitor(members)
	m.stop = cancel
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.observe(o, false, time.Now()) },
		UpdateFunc: func(_, o any) { m.observe(o, false, time.Now()) },
		DeleteFunc: func(o any) { m.observe(o, true, time.Now()) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("pod monitor in %s: cache did not sync", namespace)
	}
	return m, nil
}

func newMonitor(members []WatchedMember) *Monitor {
	return &Monitor{members: slices.Clone(members), stop: func() {}, pods: map[string]*corev1.Pod{},
		peak: map[string]int{}, seenDeleted: sets.New[types.UID]()}
}

// Stop ends the watch.
func (m *Monitor) Stop() { m.stop() }

// SetReplicas tells the monitor that member now wants replicas pods. Call it
// before scaling the StatefulSet, so that the pods the scale-down removes are
// never mistaken for rolled ones.
func (m *Monitor) SetReplicas(member string, replicas int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.members {
		if m.members[i].Name == member {
			m.members[i].Replicas = replicas
			return
		}
	}
	panic(fmt.Sprintf("monitor: no member %s", member))
}

func (m *Monitor) observe(o any, deleted bool, now time.Time) {
	if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o, deleted = tomb.Obj, true
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.pods[pod.Name]
	if deleted {
		delete(m.pods, pod.Name)
		if prev != nil && prev.UID == pod.UID && prev.DeletionTimestamp == nil {
			m.forced = append(m.forced, fmt.Sprintf("%s (uid %s) at %s", pod.Name, pod.UID, now.Format(time.StampMilli)))
		}
	} else {
		m.pods[pod.Name] = pod
	}
	wm, ordinal := m.memberOf(pod.Name)
	if wm != nil && (pod.DeletionTimestamp != nil || deleted) && !m.seenDeleted.Has(pod.UID) {
		m.seenDeleted.Insert(pod.UID)
		d := Deletion{At: now, Pod: pod.Name, UID: pod.UID, Member: wm.Name, ScaledAway: ordinal >= wm.Replicas,
			Labels: pod.Labels, Annotations: pod.Annotations}
		m.deletions = append(m.deletions, d)
		if m.armed && !d.ScaledAway {
			m.judgeRoll(now, wm, pod.Name)
		}
	}
	m.track()
}

// judgeRoll checks the guarantees at the moment a pod of wm is seen rolled.
// Caller holds mu.
func (m *Monitor) judgeRoll(now time.Time, wm *WatchedMember, pod string) {
	for i := range m.members {
		other := &m.members[i]
		why := m.unavailable(other)
		switch {
		case other.Name == wm.Name:
			if limit := MaxUnavailableOf(wm.MaxUnavailable, wm.Replicas); len(why) > limit {
				m.breaches = append(m.breaches, Breach{At: now, Detail: fmt.Sprintf(
					"%s rolled while %s has %d pods unavailable, above maxUnavailable %d: %s",
					pod, wm.Name, len(why), limit, strings.Join(why, "; "))})
			}
		case len(why) > 0:
			m.breaches = append(m.breaches, Breach{At: now, Detail: fmt.Sprintf(
				"%s rolled while %s has %d pods unavailable: %s", pod, other.Name, len(why), strings.Join(why, "; "))})
		}
	}
}

// track arms the monitor once every member is fully available and keeps the
// peak of unavailable pods per member. Caller holds mu.
func (m *Monitor) track() {
	all := 0
	for i := range m.members {
		n := len(m.unavailable(&m.members[i]))
		all += n
		if m.armed {
			m.peak[m.members[i].Name] = max(m.peak[m.members[i].Name], n)
		}
	}
	if !m.armed && all == 0 {
		m.armed = true
	}
}

// unavailable describes each unavailable pod of wm: wanted pods that are not
// Ready and live, and pods above the wanted ordinals that are still there but
// not Ready and live. Caller holds mu.
func (m *Monitor) unavailable(wm *WatchedMember) []string {
	var why []string
	for i := 0; i < wm.Replicas; i++ {
		name := fmt.Sprintf("%s-%d", wm.Name, i)
		if pod := m.pods[name]; !readyAndLive(pod) {
			why = append(why, describe(name, pod))
		}
	}
	var away []int
	for name, pod := range m.pods {
		if owner, ordinal := m.memberOf(name); owner == wm && ordinal >= wm.Replicas && !readyAndLive(pod) {
			away = append(away, ordinal)
		}
	}
	slices.Sort(away)
	for _, ordinal := range away {
		name := fmt.Sprintf("%s-%d", wm.Name, ordinal)
		why = append(why, describe(name, m.pods[name])+", above the wanted ordinals")
	}
	return why
}

// memberOf returns the member a pod name belongs to and the pod's ordinal.
// Caller holds mu.
func (m *Monitor) memberOf(pod string) (*WatchedMember, int) {
	for i := range m.members {
		if rest, ok := strings.CutPrefix(pod, m.members[i].Name+"-"); ok {
			if ordinal, err := strconv.Atoi(rest); err == nil {
				return &m.members[i], ordinal
			}
		}
	}
	return nil, -1
}

// describe says why a pod is unavailable, for breach reports.
func describe(name string, pod *corev1.Pod) string {
	switch {
	case pod == nil:
		return name + " missing"
	case pod.DeletionTimestamp != nil:
		return fmt.Sprintf("%s terminating (uid %s, rv %s)", name, pod.UID, pod.ResourceVersion)
	default:
		return fmt.Sprintf("%s %s not Ready (uid %s, rv %s, created %s)", name, pod.Status.Phase, pod.UID, pod.ResourceVersion,
			pod.CreationTimestamp.Format(time.RFC3339))
	}
}

func readyAndLive(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ForcedDeletions lists the pods that vanished without terminating first. No
// spec expects one: Echelon and the StatefulSet controller delete gracefully,
// so a pod that vanishes at once was force-deleted by someone else (kwok, as it
// stood in for kubelets, once did by name), and the rolls judged around it
// were judged on a group someone else disrupted.
func (m *Monitor) ForcedDeletions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.forced)
}

// Armed reports whether the monitor has seen every member fully available and judges rolls.
func (m *Monitor) Armed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.armed
}

// Available reports whether every pod member wants is Ready and live and no
// pod of it is going away: the moment between two of Echelon's batches.
func (m *Monitor) Available(member string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.members {
		if m.members[i].Name == member {
			return len(m.unavailable(&m.members[i])) == 0
		}
	}
	panic(fmt.Sprintf("monitor: no member %s", member))
}

// Breaches returns every breach seen so far.
func (m *Monitor) Breaches() []Breach {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.breaches)
}

// Deletions returns every pod deletion seen so far, in order.
func (m *Monitor) Deletions() []Deletion {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.deletions)
}

// Rolls returns the deletions of pods at wanted ordinals, in order: the pods
// Echelon rolled, leaving out those a scale-down removed.
func (m *Monitor) Rolls() []Deletion {
	var out []Deletion
	for _, d := range m.Deletions() {
		if !d.ScaledAway {
			out = append(out, d)
		}
	}
	return out
}

// PeakNotReady is the largest number of unavailable pods seen in each member
// since the monitor armed.
func (m *Monitor) PeakNotReady() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.peak {
		out[k] = v
	}
	return out
}

// DeletionsWhere returns the deletions of pods whose annotation key had value,
// e.g. the pods of one template version.
func (m *Monitor) DeletionsWhere(key, value string) []Deletion {
	var out []Deletion
	for _, d := range m.Deletions() {
		if d.Annotations[key] == value {
			out = append(out, d)
		}
	}
	return out
}

// MemberOrder is the sequence of members in which rolls happened, with
// consecutive repeats collapsed: [c a b] means c was rolled, then a, then b.
func (m *Monitor) MemberOrder() []string {
	var order []string
	for _, d := range m.Rolls() {
		if len(order) == 0 || order[len(order)-1] != d.Member {
			order = append(order, d.Member)
		}
	}
	return order
}
