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
	Name           string
	Replicas       int
	MaxUnavailable int
}

// Breach is one moment at which a guarantee did not hold.
type Breach struct {
	At     time.Time
	Detail string
}

// Monitor watches the pods of a group through one watch, so that it sees every
// state the API server went through in order, and checks after each event:
//   - at most one member has pods that are missing, terminating or not Ready
//     (guarantees 1 and 2: members are never rolled together, and a member is
//     rolled only while every other member is fully Ready);
//   - no member has more such pods than its maxUnavailable (guarantee 4).
//
// It also records every pod deletion it sees (deletionTimestamp set, or the pod
// gone), once per pod UID, in order.
type Monitor struct {
	members []WatchedMember
	stop    context.CancelFunc

	mu        sync.Mutex
	pods      map[string]*corev1.Pod
	armed     bool
	breaches  []Breach
	deletions []Deletion
	// seenDeleted holds the UIDs already recorded as deleted.
	seenDeleted sets.Set[types.UID]
	// forced holds pod names force-deleted by someone else, until Ready again.
	forced          map[string]bool
	forcedDeletions []string
	peak            map[string]int
}

// Deletion is a pod the monitor saw start terminating.
type Deletion struct {
	At     time.Time
	Pod    string
	UID    types.UID
	Member string
	// Annotations are the pod's, e.g. to tell which template version it ran.
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

// StartMonitor watches the pods of namespace. It checks nothing until every
// member is fully Ready (the group's starting point); from then on every event
// is checked.
func StartMonitor(ctx context.Context, cs kubernetes.Interface, namespace string, members []WatchedMember) (*Monitor, error) {
	ctx, cancel := context.WithCancel(ctx)
	m := &Monitor{members: members, stop: cancel, pods: map[string]*corev1.Pod{}, peak: map[string]int{}, seenDeleted: sets.New[types.UID](), forced: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.observe(o, false) },
		UpdateFunc: func(_, o any) { m.observe(o, false) },
		DeleteFunc: func(o any) { m.observe(o, true) },
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

// Stop ends the watch.
func (m *Monitor) Stop() { m.stop() }

func (m *Monitor) observe(o any, deleted bool) {
	if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o, deleted = tomb.Obj, true
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.pods[pod.Name]
	if deleted {
		delete(m.pods, pod.Name)
		// Echelon deletes and evicts gracefully, so the pods it removes are seen
		// terminating first. A live pod that vanishes at once was force-deleted by
		// someone else: kwok, standing in for kubelets, deletes by name rather than
		// by UID and now and then hits the Ready replacement of a pod it just
		// removed. Such a pod is not Echelon's doing and is left out of the counts
		// until its name is Ready again.
		if prev != nil && prev.UID == pod.UID && prev.DeletionTimestamp == nil {
			m.forced[pod.Name] = true
			m.forcedDeletions = append(m.forcedDeletions, fmt.Sprintf("%s (uid %s)", pod.Name, pod.UID))
		}
	} else {
		m.pods[pod.Name] = pod
		if readyAndLive(pod) {
			delete(m.forced, pod.Name)
		}
	}
	member := m.memberOf(pod.Name)
	if member != "" && (pod.DeletionTimestamp != nil || deleted) && !m.seenDeleted.Has(pod.UID) {
		m.seenDeleted.Insert(pod.UID)
		m.deletions = append(m.deletions, Deletion{At: now, Pod: pod.Name, UID: pod.UID, Member: member, Annotations: pod.Annotations})
	}
	m.check(now)
}

// check evaluates the guarantees on the current state. Caller holds mu.
func (m *Monitor) check(now time.Time) {
	var notReady []string
	counts := map[string]int{}
	why := map[string][]string{}
	for _, wm := range m.members {
		n := 0
		for i := 0; i < wm.Replicas; i++ {
			name := fmt.Sprintf("%s-%d", wm.Name, i)
			if pod := m.pods[name]; !readyAndLive(pod) && !m.forced[name] {
				n++
				why[wm.Name] = append(why[wm.Name], describe(name, pod))
			}
		}
		counts[wm.Name] = n
		if n > 0 {
			notReady = append(notReady, fmt.Sprintf("%s(%d)", wm.Name, n))
		}
	}
	if !m.armed {
		m.armed = len(notReady) == 0
		return
	}
	for _, wm := range m.members {
		m.peak[wm.Name] = max(m.peak[wm.Name], counts[wm.Name])
		if counts[wm.Name] > wm.MaxUnavailable {
			m.breaches = append(m.breaches, Breach{At: now, Detail: fmt.Sprintf(
				"%s has %d pods not Ready, above maxUnavailable %d: %s", wm.Name, counts[wm.Name], wm.MaxUnavailable, strings.Join(why[wm.Name], "; "))})
		}
	}
	if len(notReady) > 1 {
		var all []string
		for _, wm := range m.members {
			all = append(all, why[wm.Name]...)
		}
		m.breaches = append(m.breaches, Breach{At: now, Detail: "pods not Ready in several members at once: " + strings.Join(notReady, ", ") + ": " + strings.Join(all, "; ")})
	}
}

func (m *Monitor) memberOf(pod string) string {
	for _, wm := range m.members {
		if rest, ok := strings.CutPrefix(pod, wm.Name+"-"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				return wm.Name
			}
		}
	}
	return ""
}

// describe says why a wanted pod is not Ready, for breach reports.
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

// ForcedDeletions lists the pods that vanished without terminating first, which
// the checks leave out (see observe).
func (m *Monitor) ForcedDeletions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.forcedDeletions)
}

// Armed reports whether the monitor has seen every member fully Ready and checks.
func (m *Monitor) Armed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.armed
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

// PeakNotReady is the largest number of not-Ready pods seen in each member
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

// MemberOrder is the sequence of members in which deletions happened, with
// consecutive repeats collapsed: [c a b] means c was rolled, then a, then b.
func (m *Monitor) MemberOrder() []string {
	var order []string
	for _, d := range m.Deletions() {
		if len(order) == 0 || order[len(order)-1] != d.Member {
			order = append(order, d.Member)
		}
	}
	return order
}
