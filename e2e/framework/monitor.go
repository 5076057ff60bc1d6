// Package framework holds what the end-to-end tests share: the operator run as a
// separate process, and a monitor that watches every pod of a group while a
// rollout runs and records every breach of the guarantees as it happens.
package framework

import (
	"context"
	"fmt"
	"regexp"
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
	// Domain is the failure domain of a member of several groups that
	// share one budget (the ingesters and the store-gateways of zone a):
	// members of one domain may be short together, each within its own
	// limit. "" is a domain of its own.
	Domain string
}

// sameDomain reports whether two members are in one failure domain: the
// same member, or both of one named Domain.
func sameDomain(a, b *WatchedMember) bool {
	return a.Name == b.Name || (a.Domain != "" && a.Domain == b.Domain)
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
//   - no other member (of another failure domain, when members have one)
//     has an unavailable pod (guarantees 1 and 2: members are
//     never rolled together, and a member is rolled only while every other one
//     is fully available, including pods that are being scaled away);
//   - the rolled member's unavailable pods, the rolled one included, do not
//     exceed its maxUnavailable (guarantee 4).
//
// Judging rolls rather than every state keeps what others do (a scale-down, a
// scale-up, a readiness probe failing) from counting against Echelon, while
// Echelon's next roll still has to respect it.
//
// With JudgeEveryMoment, every state is judged as well: two members short at
// once is a breach whoever caused it (a roll, an eviction, a scale-down), which
// is what a zone-replicated store cannot survive. A member is short when a pod
// at a wanted ordinal that has been Ready is missing, terminating or not Ready,
// or a pod above the wanted ordinals is still there but not Ready and live. A
// pod a scale-up adds counts only once it has been Ready: until then the member
// has lost nothing. In this mode rolls are judged the same way: a scale-up is
// no disruption, Echelon does not order it with its rolls, and it may land
// between Echelon's last read and its deletion.
//
// With partitions (SetPartitions), pods whose names give the same partition
// across members hold copies of the same data, as Mimir's partition ingesters
// do: other members' unavailable pods count against a roll, and two members
// short count as a breach, only within one partition. A pod whose name gives
// no partition counts against every partition.
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

	// everyMoment turns on the judging of every state (JudgeEveryMoment);
	// overlapping is true while two members are short, so that one episode
	// is one breach.
	everyMoment bool
	overlapping bool
	// established holds the names of wanted pods seen Ready since their
	// ordinal became wanted: only they can make a member short.
	established sets.Set[string]
	// pending are the replica changes SetReplicasAt made that wait for the
	// watch to pass their write, oldest first.
	pending []pendingReplicas
	// partition gives a pod name's partition, "" when it has none; nil
	// judges zone-wise.
	partition func(pod string) string
	// readiness holds, per pod UID, its last changes of readiness as the
	// watch delivered them (at most maxReadinessChanges), so that a breach
	// says whether an unavailable pod had been Ready, and when it stopped.
	readiness map[types.UID][]string
	// firstReady and unready hold, per pod UID, when the watch first showed
	// the pod turn Ready (after showing it not Ready) and when it last
	// showed it lose readiness; flaps are the rolls startupFlap excused.
	firstReady, unready map[types.UID]time.Time
	flaps               []string
}

// flapWindow bounds a kubelet's startup flap (startupFlap): readiness
// granted and withdrawn within it, and the roll that followed within it.
const flapWindow = time.Second

// maxReadinessChanges bounds the readiness history kept per pod.
const maxReadinessChanges = 4

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
		peak: map[string]int{}, seenDeleted: sets.New[types.UID](), established: sets.New[string](),
		readiness: map[types.UID][]string{}, firstReady: map[types.UID]time.Time{}, unready: map[types.UID]time.Time{}}
}

// JudgeEveryMoment makes every state with two members short at once a breach,
// not only the rolls made in one (see Monitor). A spec that makes pods
// unavailable itself (a readiness flip) while another member is short must
// not turn it on.
func (m *Monitor) JudgeEveryMoment() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.everyMoment = true
	m.track(time.Now())
}

// SetPartitions makes the monitor partition-aware: group of re, matched
// against a pod's name, is its partition (see Monitor).
func (m *Monitor) SetPartitions(re *regexp.Regexp, group int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.partition = func(pod string) string {
		if sub := re.FindStringSubmatch(pod); sub != nil && group < len(sub) {
			return sub[group]
		}
		return ""
	}
}

// SetMaxUnavailable changes member's limit, e.g. when the PodDisruptionBudget
// it comes from changes. Call it before the change can take effect, so that
// a roll the new limit allows is never judged against the old one.
func (m *Monitor) SetMaxUnavailable(member string, limit intstr.IntOrString) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.member(member).MaxUnavailable = limit
}

// member returns the watched member named name. Caller holds mu.
func (m *Monitor) member(name string) *WatchedMember {
	for i := range m.members {
		if m.members[i].Name == name {
			return &m.members[i]
		}
	}
	panic(fmt.Sprintf("monitor: no member %s", name))
}

// Stop ends the watch.
func (m *Monitor) Stop() { m.stop() }

// SetReplicas tells the monitor that member now wants replicas pods. Call it
// before scaling the StatefulSet, so that the pods the scale-down removes are
// never mistaken for rolled ones.
func (m *Monitor) SetReplicas(member string, replicas int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setReplicas(member, replicas)
}

// SetReplicasAt tells the monitor that member wants replicas pods from the
// moment of resourceVersion on: the StatefulSet write that scaled it. The
// change takes effect before the first pod event that comes after that write,
// so the pod events from before it (an eviction admitted just before the
// scale) are judged against the replicas of their time, whatever the lag of
// the monitor's watch. A resourceVersion that is not a number (the API does
// not promise one) makes it SetReplicas.
func (m *Monitor) SetReplicasAt(member string, replicas int, resourceVersion string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		m.setReplicas(member, replicas)
		return
	}
	m.pending = append(m.pending, pendingReplicas{member: member, replicas: replicas, after: rv})
}

// pendingReplicas is a change of replicas waiting for the monitor's watch to
// pass the write that made it.
type pendingReplicas struct {
	member   string
	replicas int
	after    uint64
}

// applyPending applies the replica changes made before the pod event of
// resourceVersion rv, in order. Caller holds mu.
func (m *Monitor) applyPending(rv string) {
	at, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	for len(m.pending) > 0 && m.pending[0].after < at {
		p := m.pending[0]
		m.pending = m.pending[1:]
		m.setReplicas(p.member, p.replicas)
	}
}

// setReplicas is SetReplicas with mu held.
func (m *Monitor) setReplicas(member string, replicas int) {
	wm := m.member(member)
	// The ordinals given up are new again if a later scale-up wants them;
	// those wanted again while their pods are still there and Ready (a
	// scale-down that did not happen) have lost nothing.
	for ordinal := replicas; ordinal < wm.Replicas; ordinal++ {
		m.established.Delete(fmt.Sprintf("%s-%d", member, ordinal))
	}
	for ordinal := wm.Replicas; ordinal < replicas; ordinal++ {
		if name := fmt.Sprintf("%s-%d", member, ordinal); readyAndLive(m.pods[name]) {
			m.established.Insert(name)
		}
	}
	wm.Replicas = replicas
}

func (m *Monitor) observe(o any, deleted bool, now time.Time) {
	// A tombstone is a deletion the watch did not deliver: the informer found
	// the pod gone when it listed again (after the API server restarted, say,
	// its watch cache too young to resume from). What happened in between,
	// a graceful termination included, was not seen, so such a pod is not
	// taken for a force-deleted one.
	finalStateUnknown := false
	if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o, deleted, finalStateUnknown = tomb.Obj, true, true
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !finalStateUnknown {
		// A tombstone carries the pod's last known state, from before its
		// deletion: its resourceVersion says nothing of when it went.
		m.applyPending(pod.ResourceVersion)
	}
	prev := m.pods[pod.Name]
	m.noteReadiness(prev, pod, deleted, now)
	if deleted {
		delete(m.pods, pod.Name)
		if prev != nil && prev.UID == pod.UID && prev.DeletionTimestamp == nil && !finalStateUnknown {
			m.forced = append(m.forced, fmt.Sprintf("%s (uid %s) at %s", pod.Name, pod.UID, now.Format(time.StampMilli)))
		}
	} else {
		m.pods[pod.Name] = pod
	}
	wm, ordinal := m.memberOf(pod.Name)
	if wm != nil && ordinal < wm.Replicas && !deleted && readyAndLive(pod) {
		m.established.Insert(pod.Name)
	}
	if wm != nil && (pod.DeletionTimestamp != nil || deleted) && !m.seenDeleted.Has(pod.UID) {
		m.seenDeleted.Insert(pod.UID)
		d := Deletion{At: now, Pod: pod.Name, UID: pod.UID, Member: wm.Name, ScaledAway: ordinal >= wm.Replicas,
			Labels: pod.Labels, Annotations: pod.Annotations}
		m.deletions = append(m.deletions, d)
		if m.armed && !d.ScaledAway {
			m.judgeRoll(now, wm, pod.Name)
		}
	}
	m.track(now)
}

// noteReadiness records a change of pod's readiness from prev (the same pod
// when the UIDs match). Caller holds mu.
func (m *Monitor) noteReadiness(prev, pod *corev1.Pod, deleted bool, now time.Time) {
	if deleted {
		delete(m.readiness, pod.UID)
		delete(m.firstReady, pod.UID)
		delete(m.unready, pod.UID)
		return
	}
	same := prev != nil && prev.UID == pod.UID
	was, is := same && readyAndLive(prev), readyAndLive(pod)
	_, sawReady := m.firstReady[pod.UID]
	switch {
	case !same && !is:
		m.unready[pod.UID] = time.Time{} // new to the watch, not Ready yet
	case is && !was && same && !sawReady:
		if _, born := m.unready[pod.UID]; born {
			m.firstReady[pod.UID] = now // its first Ready
		}
	case was && !is:
		m.unready[pod.UID] = now
	}
	if is != was || !same {
		state := "not Ready"
		if is {
			state = "Ready"
		}
		m.readiness[pod.UID] = append(m.readiness[pod.UID], fmt.Sprintf("%s at rv %s (%s)", state, pod.ResourceVersion, now.Format("15:04:05.000")))
		if h := m.readiness[pod.UID]; len(h) > maxReadinessChanges {
			m.readiness[pod.UID] = h[len(h)-maxReadinessChanges:]
		}
	}
}

// judgeRoll checks the guarantees at the moment a pod of wm is seen rolled.
// Caller holds mu.
func (m *Monitor) judgeRoll(now time.Time, wm *WatchedMember, pod string) {
	for i := range m.members {
		other := &m.members[i]
		gaps := m.unavailable(other)
		if m.everyMoment {
			gaps = m.lost(gaps)
		}
		if other.Name == wm.Name {
			if limit := MaxUnavailableOf(wm.MaxUnavailable, wm.Replicas); len(gaps) > limit {
				m.breaches = append(m.breaches, Breach{At: now, Detail: fmt.Sprintf(
					"%s rolled while %s has %d pods unavailable, above maxUnavailable %d: %s",
					pod, wm.Name, len(gaps), limit, details(gaps))})
			}
			continue
		}
		if sameDomain(other, wm) {
			continue
		}
		in := ""
		if p := m.partitionOf(pod); p != "" {
			gaps = slices.DeleteFunc(gaps, func(g gap) bool { return !samePartition(m.partitionOf(g.pod), p) })
			in = " in partition " + p
		}
		gaps = slices.DeleteFunc(gaps, func(g gap) bool {
			if !m.startupFlap(g.pod, now) {
				return false
			}
			m.flaps = append(m.flaps, fmt.Sprintf("%s rolled at %s while %s: readiness withdrawn by its kubelet right after it was granted",
				pod, now.Format("15:04:05.000"), g.detail))
			return true
		})
		if len(gaps) > 0 {
			m.breaches = append(m.breaches, Breach{At: now, Detail: fmt.Sprintf(
				"%s rolled while %s has %d pods unavailable%s: %s", pod, other.Name, len(gaps), in, details(gaps))})
		}
	}
}

// startupFlap reports whether the pod named name, unavailable when a pod of
// another member rolls at now, is a new pod whose kubelet withdrew the
// readiness it had just granted: the watch showed it not Ready, then Ready,
// then not Ready again less than flapWindow later, and the roll came less
// than flapWindow after that. A real kubelet does this under load (its
// status for the pod, computed before the readiness probe's first success,
// is written after it); a decision made while the pod was Ready could not
// see it coming, as the StatefulSet controller could not. Such a roll is
// recorded in Flaps, not as a breach. Caller holds mu.
func (m *Monitor) startupFlap(name string, now time.Time) bool {
	pod := m.pods[name]
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	ready, ok := m.firstReady[pod.UID]
	lost, ok2 := m.unready[pod.UID]
	return ok && ok2 && lost.After(ready) && lost.Sub(ready) < flapWindow && now.Sub(lost) < flapWindow
}

// Flaps are the rolls made while another member's new pod had just lost the
// readiness its kubelet granted it (startupFlap): not breaches, but worth a
// look when there are many.
func (m *Monitor) Flaps() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.flaps)
}

// judgeMoment records a breach when two members are short at once (in one
// partition, when partition-aware), once per episode. Caller holds mu.
func (m *Monitor) judgeMoment(now time.Time) {
	type short struct {
		member *WatchedMember
		gaps   []gap
	}
	var shorts []short
	for i := range m.members {
		if gaps := m.lost(m.unavailable(&m.members[i])); len(gaps) > 0 {
			shorts = append(shorts, short{&m.members[i], gaps})
		}
	}
	var overlap []string
	for i, a := range shorts {
		for _, b := range shorts[i+1:] {
			if sameDomain(a.member, b.member) {
				continue
			}
			if p, ok := m.sharedPartition(a.gaps, b.gaps); ok {
				where := ""
				if p != "" {
					where = " in partition " + p
				}
				overlap = append(overlap, fmt.Sprintf("%s and %s short at once%s: %s; %s", a.member.Name, b.member.Name, where, details(a.gaps), details(b.gaps)))
			}
		}
	}
	if len(overlap) > 0 && !m.overlapping {
		m.breaches = append(m.breaches, Breach{At: now, Detail: strings.Join(overlap, " | ")})
	}
	m.overlapping = len(overlap) > 0
}

// lost keeps the gaps that cost the member availability it had: it leaves
// out the wanted pods a scale-up adds until they have been Ready. Caller
// holds mu.
func (m *Monitor) lost(gaps []gap) []gap {
	return slices.DeleteFunc(gaps, func(g gap) bool { return g.wanted && !m.established.Has(g.pod) })
}

// sharedPartition reports whether two members' gaps meet: zone-wise always,
// partition-aware when they share a partition (or one has a pod of none), and
// the partition they share. Caller holds mu.
func (m *Monitor) sharedPartition(a, b []gap) (string, bool) {
	if m.partition == nil {
		return "", true
	}
	for _, x := range a {
		for _, y := range b {
			px, py := m.partitionOf(x.pod), m.partitionOf(y.pod)
			if samePartition(px, py) {
				return max(px, py), true
			}
		}
	}
	return "", false
}

// partitionOf is pod's partition, "" when the monitor is not partition-aware
// or the name gives none. Caller holds mu.
func (m *Monitor) partitionOf(pod string) string {
	if m.partition == nil {
		return ""
	}
	return m.partition(pod)
}

// samePartition reports whether two pods' partitions meet; a pod of no
// partition meets every one.
func samePartition(a, b string) bool { return a == "" || b == "" || a == b }

// track arms the monitor once every member is fully available and keeps the
// peak of unavailable pods per member. Caller holds mu.
func (m *Monitor) track(now time.Time) {
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
	if m.armed && m.everyMoment {
		m.judgeMoment(now)
	}
}

// gap is one unavailable pod of a member.
type gap struct {
	pod string
	// wanted is false for a pod above the wanted ordinals.
	wanted bool
	detail string
}

// details joins the gaps' descriptions, for breach reports.
func details(gaps []gap) string {
	out := make([]string, len(gaps))
	for i, g := range gaps {
		out[i] = g.detail
	}
	return strings.Join(out, "; ")
}

// unavailable describes each unavailable pod of wm: wanted pods that are not
// Ready and live, and pods above the wanted ordinals that are still there but
// not Ready and live. Caller holds mu.
func (m *Monitor) unavailable(wm *WatchedMember) []gap {
	var why []gap
	for i := 0; i < wm.Replicas; i++ {
		name := fmt.Sprintf("%s-%d", wm.Name, i)
		if pod := m.pods[name]; !readyAndLive(pod) {
			why = append(why, gap{pod: name, wanted: true, detail: describe(name, pod) + m.history(pod)})
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
		why = append(why, gap{pod: name, detail: describe(name, m.pods[name]) + ", above the wanted ordinals"})
	}
	return why
}

// history is pod's readiness history for a breach report, "" when none.
// Caller holds mu.
func (m *Monitor) history(pod *corev1.Pod) string {
	if pod == nil || len(m.readiness[pod.UID]) == 0 {
		return ""
	}
	return " [seen: " + strings.Join(m.readiness[pod.UID], ", ") + "]"
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
	return len(m.unavailable(m.member(member))) == 0
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
