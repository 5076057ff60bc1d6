package framework

import (
	"fmt"
	"k8s.io/client-go/tools/cache"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/echelon-operator/echelon/test/builders"
)

// The monitor is what makes the e2e specs able to fail, so its rules are tested
// here on made-up pod events, without a control plane.

type podState int

const (
	ready podState = iota
	notReady
	terminating
)

// fakePod is member's pod at ordinal, with a UID that stays the same for the
// same generation of the pod, as the API server's would.
func fakePod(member string, ordinal, gen int, state podState) *corev1.Pod {
	p := builders.MakePod("", member, ordinal).UID(types.UID(fmt.Sprintf("%s-%d-uid-%d", member, ordinal, gen)))
	switch state {
	case notReady:
		p.NotReady()
	case terminating:
		p.Terminating(time.Unix(1, 0))
	}
	return p.Obj()
}

// armedMonitor watches members a and b of replicas pods, all Ready.
func armedMonitor(t *testing.T, replicas int, maxUnavailable intstr.IntOrString) *Monitor {
	t.Helper()
	m := newMonitor([]WatchedMember{
		{Name: "a", Replicas: replicas, MaxUnavailable: maxUnavailable},
		{Name: "b", Replicas: replicas, MaxUnavailable: maxUnavailable},
	})
	for _, member := range []string{"a", "b"} {
		for i := range replicas {
			if m.Armed() {
				t.Fatalf("armed before every pod was Ready")
			}
			m.observe(fakePod(member, i, 0, ready), false, time.Now())
		}
	}
	if !m.Armed() {
		t.Fatalf("not armed with every pod Ready")
	}
	return m
}

func update(m *Monitor, pod *corev1.Pod) { m.observe(pod, false, time.Now()) }
func remove(m *Monitor, pod *corev1.Pod) { m.observe(pod, true, time.Now()) }

func expectBreaches(t *testing.T, m *Monitor, want int, contains string) {
	t.Helper()
	got := m.Breaches()
	if len(got) != want {
		t.Fatalf("got %d breaches, want %d: %v", len(got), want, got)
	}
	for _, b := range got {
		if !strings.Contains(b.Detail, contains) {
			t.Errorf("breach %q does not mention %q", b.Detail, contains)
		}
	}
}

// replace rolls member's pod at ordinal of generation gen: terminating, gone,
// back Ready.
func replace(m *Monitor, member string, ordinal, gen int) {
	update(m, fakePod(member, ordinal, gen, terminating))
	remove(m, fakePod(member, ordinal, gen, terminating))
	update(m, fakePod(member, ordinal, gen+1, notReady))
	update(m, fakePod(member, ordinal, gen+1, ready))
}

func TestMonitorAcceptsARolloutWithinTheGuarantees(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(2))
	update(m, fakePod("a", 0, 0, terminating))
	update(m, fakePod("a", 1, 0, terminating))
	remove(m, fakePod("a", 0, 0, terminating))
	remove(m, fakePod("a", 1, 0, terminating))
	update(m, fakePod("a", 0, 1, ready))
	update(m, fakePod("a", 1, 1, ready))
	replace(m, "a", 2, 0)
	for i := range 3 {
		replace(m, "b", i, 0)
	}
	expectBreaches(t, m, 0, "")
	if got := len(m.Rolls()); got != 6 {
		t.Errorf("got %d rolls, want 6", got)
	}
	if got := m.MemberOrder(); strings.Join(got, ",") != "a,b" {
		t.Errorf("member order %v, want [a b]", got)
	}
	if peak := m.PeakNotReady(); peak["a"] != 2 || peak["b"] != 1 {
		t.Errorf("peaks %v, want a:2 b:1", peak)
	}
	if len(m.ForcedDeletions()) != 0 {
		t.Errorf("forced deletions %v, want none", m.ForcedDeletions())
	}
}

func TestMonitorFlagsARollAboveMaxUnavailable(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	update(m, fakePod("a", 0, 0, terminating))
	update(m, fakePod("a", 1, 0, terminating))
	expectBreaches(t, m, 1, "a-1 rolled while a has 2 pods unavailable, above maxUnavailable 1")
}

func TestMonitorResolvesAPercentAgainstTheCurrentReplicas(t *testing.T) {
	m := armedMonitor(t, 4, intstr.FromString("50%"))
	update(m, fakePod("a", 0, 0, terminating))
	update(m, fakePod("a", 1, 0, terminating))
	expectBreaches(t, m, 0, "")
	m.SetReplicas("b", 3)
	update(m, fakePod("b", 3, 0, terminating))
	remove(m, fakePod("b", 3, 0, terminating))
	replace(m, "a", 0, 0)
	replace(m, "a", 1, 0)
	// 50% of 3 is 1.
	update(m, fakePod("b", 0, 0, terminating))
	update(m, fakePod("b", 1, 0, terminating))
	expectBreaches(t, m, 1, "above maxUnavailable 1")
}

func TestMonitorFlagsARollWhileAnotherMemberIsUnavailable(t *testing.T) {
	for name, disrupt := range map[string]func(m *Monitor){
		"a pod not Ready":   func(m *Monitor) { update(m, fakePod("b", 2, 0, notReady)) },
		"a pod terminating": func(m *Monitor) { update(m, fakePod("b", 2, 0, terminating)) },
		"a pod missing":     func(m *Monitor) { remove(m, fakePod("b", 2, 0, terminating)) },
	} {
		t.Run(name, func(t *testing.T) {
			m := armedMonitor(t, 3, intstr.FromInt32(1))
			disrupt(m)
			update(m, fakePod("a", 0, 0, terminating))
			expectBreaches(t, m, 1, "a-0 rolled while b has 1 pods unavailable")
		})
	}
}

func TestMonitorCountsPodsBeingScaledAwayAsUnavailable(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	m.SetReplicas("b", 2)
	// b-2 is still Ready: status.replicas equals the ready pods, so a roll may go on.
	replace(m, "a", 0, 0)
	update(m, fakePod("b", 2, 0, terminating))
	update(m, fakePod("a", 1, 0, terminating))
	expectBreaches(t, m, 1, "b-2 terminating (uid b-2-uid-0, rv ), above the wanted ordinals")
	remove(m, fakePod("b", 2, 0, terminating))
	remove(m, fakePod("a", 1, 0, terminating))
	update(m, fakePod("a", 1, 1, ready))
	replace(m, "a", 2, 0)
	expectBreaches(t, m, 1, "")
	scaled := m.Deletions()[1]
	if scaled.Pod != "b-2" || !scaled.ScaledAway {
		t.Errorf("deletion %+v, want b-2 scaled away", scaled)
	}
	if got := len(m.Rolls()); got != 3 {
		t.Errorf("got %d rolls, want 3 (the scaled-away pod is not one)", got)
	}
}

func TestMonitorCountsPodsAScaleUpStillWaitsForAsUnavailable(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	m.SetReplicas("b", 4)
	if m.Available("b") {
		t.Fatalf("b is available while b-3 does not exist")
	}
	update(m, fakePod("a", 0, 0, terminating))
	expectBreaches(t, m, 1, "b-3 missing")
	update(m, fakePod("b", 3, 0, ready))
	if !m.Available("b") {
		t.Errorf("b is not available with b-3 Ready")
	}
}

func TestMonitorRecordsPodsThatVanishWithoutTerminating(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	remove(m, fakePod("a", 0, 0, ready))
	if got := m.ForcedDeletions(); len(got) != 1 || !strings.HasPrefix(got[0], "a-0 (uid a-0-uid-0)") {
		t.Errorf("forced deletions %v, want a-0", got)
	}
	// A graceful deletion is not forced.
	update(m, fakePod("a", 0, 1, ready))
	update(m, fakePod("a", 0, 1, terminating))
	remove(m, fakePod("a", 0, 1, terminating))
	if got := m.ForcedDeletions(); len(got) != 1 {
		t.Errorf("forced deletions %v, want only the first a-0", got)
	}
	// A pod an informer's relist found gone (a tombstone) may have terminated
	// gracefully unseen: not forced, but still recorded as deleted.
	update(m, fakePod("a", 1, 1, ready))
	m.observe(cache.DeletedFinalStateUnknown{Key: "ns/a-1", Obj: fakePod("a", 1, 1, ready)}, true, time.Now())
	if got := m.ForcedDeletions(); len(got) != 1 {
		t.Errorf("forced deletions %v, want only the first a-0 (a-1's final state is unknown)", got)
	}
	if d := m.Deletions(); len(d) == 0 || d[len(d)-1].Pod != "a-1" {
		t.Errorf("deletions %v, want a-1 last", d)
	}
}

func TestMonitorJudgesNothingBeforeItIsArmed(t *testing.T) {
	m := newMonitor([]WatchedMember{{Name: "a", Replicas: 2, MaxUnavailable: intstr.FromInt32(1)}})
	update(m, fakePod("a", 0, 0, terminating))
	update(m, fakePod("a", 1, 0, terminating))
	expectBreaches(t, m, 0, "")
	if len(m.Deletions()) != 2 {
		t.Errorf("deletions %v, want both recorded", m.Deletions())
	}
}

func TestMonitorJudgingEveryMomentFlagsTwoMembersShortAtOnce(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	m.JudgeEveryMoment()
	update(m, fakePod("b", 2, 0, notReady))
	expectBreaches(t, m, 0, "")
	// A scale-down is no roll, so only the moment judges it.
	m.SetReplicas("a", 2)
	update(m, fakePod("a", 2, 0, terminating))
	expectBreaches(t, m, 1, "a and b short at once: a-2 terminating")
	// One episode is one breach, however long it lasts.
	update(m, fakePod("a", 1, 0, notReady))
	remove(m, fakePod("a", 2, 0, terminating))
	expectBreaches(t, m, 1, "")
	update(m, fakePod("a", 1, 0, ready))
	update(m, fakePod("b", 2, 0, ready))
	update(m, fakePod("b", 0, 0, terminating))
	update(m, fakePod("a", 0, 0, notReady))
	if got := m.Breaches(); len(got) != 2 || !strings.Contains(got[1].Detail, "a-0") || !strings.Contains(got[1].Detail, "b-0 terminating") {
		t.Errorf("breaches %v, want a second one naming a-0 and b-0", got)
	}
}

func TestMonitorJudgesMomentsOnlyWhenAsked(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	update(m, fakePod("b", 2, 0, notReady))
	m.SetReplicas("a", 2)
	update(m, fakePod("a", 2, 0, terminating))
	expectBreaches(t, m, 0, "")
	m.JudgeEveryMoment()
	expectBreaches(t, m, 1, "a and b short at once")
}

func TestMonitorCountsAScaleUpPodOnlyOnceItWasReady(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	m.JudgeEveryMoment()
	update(m, fakePod("a", 0, 0, notReady))
	m.SetReplicas("b", 4)
	update(m, fakePod("b", 3, 0, notReady))
	expectBreaches(t, m, 0, "")
	update(m, fakePod("b", 3, 0, ready))
	update(m, fakePod("b", 3, 0, notReady))
	expectBreaches(t, m, 1, "b-3 Running not Ready")

	// An ordinal given up by a scale-down is new again when a scale-up
	// wants it back.
	m = armedMonitor(t, 3, intstr.FromInt32(1))
	m.JudgeEveryMoment()
	m.SetReplicas("b", 2)
	update(m, fakePod("b", 2, 0, terminating))
	remove(m, fakePod("b", 2, 0, terminating))
	update(m, fakePod("a", 0, 0, notReady))
	m.SetReplicas("b", 3)
	update(m, fakePod("b", 2, 1, notReady))
	expectBreaches(t, m, 0, "")

	// A scale-down taken back before it happened leaves Ready pods that
	// count again at once.
	m = armedMonitor(t, 3, intstr.FromInt32(1))
	m.JudgeEveryMoment()
	m.SetReplicas("b", 2)
	m.SetReplicas("b", 3)
	update(m, fakePod("a", 0, 0, notReady))
	update(m, fakePod("b", 2, 0, terminating))
	expectBreaches(t, m, 2, "a-0 Running not Ready")
}

func TestMonitorWithPartitionsJudgesWithinAPartition(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	m.SetPartitions(regexp.MustCompile(`^[a-z]-([0-9]+)$`), 1)
	m.JudgeEveryMoment()
	update(m, fakePod("a", 0, 0, notReady))
	update(m, fakePod("b", 1, 0, terminating))
	expectBreaches(t, m, 0, "")
	remove(m, fakePod("b", 1, 0, terminating))
	update(m, fakePod("b", 1, 1, ready))
	update(m, fakePod("b", 0, 0, terminating))
	got := m.Breaches()
	if len(got) != 2 {
		t.Fatalf("got %d breaches, want the roll and the moment: %v", len(got), got)
	}
	for _, b := range got {
		if !strings.Contains(b.Detail, "in partition 0") || !strings.Contains(b.Detail, "a-0") {
			t.Errorf("breach %q does not name partition 0 and a-0", b.Detail)
		}
	}
}

func TestMonitorJudgesRollsAgainstAChangedMaxUnavailable(t *testing.T) {
	m := armedMonitor(t, 4, intstr.FromInt32(1))
	m.SetMaxUnavailable("a", intstr.FromInt32(2))
	update(m, fakePod("a", 0, 0, terminating))
	update(m, fakePod("a", 1, 0, terminating))
	expectBreaches(t, m, 0, "")
	update(m, fakePod("a", 2, 0, terminating))
	expectBreaches(t, m, 1, "above maxUnavailable 2")
}

func TestMonitorJudgingEveryMomentLeavesAScaleUpOutOfRolls(t *testing.T) {
	m := armedMonitor(t, 3, intstr.FromInt32(1))
	m.JudgeEveryMoment()
	m.SetReplicas("b", 4)
	update(m, fakePod("a", 0, 0, terminating))
	expectBreaches(t, m, 0, "")
	remove(m, fakePod("a", 0, 0, terminating))
	update(m, fakePod("a", 0, 1, ready))
	update(m, fakePod("b", 3, 0, ready))
	update(m, fakePod("b", 3, 0, notReady))
	update(m, fakePod("a", 1, 0, terminating))
	expectBreaches(t, m, 2, "b-3 Running not Ready")
}

// withRV is pod with resourceVersion rv.
func withRV(pod *corev1.Pod, rv string) *corev1.Pod {
	pod.ResourceVersion = rv
	return pod
}

// A scale-up told to the monitor takes effect only once its watch passes the
// write that made it: a roll the API server made before the scale (an
// eviction admitted just before it), seen late, is judged against the
// replicas of its time. Told at once (SetReplicas), the same order of events
// is a breach: b's pod the scale-up has not created yet counts as missing.
func TestMonitorAppliesAScaleAtItsResourceVersion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scale    func(m *Monitor)
		breaches int
	}{
		{"at its resourceVersion", func(m *Monitor) { m.SetReplicasAt("b", 4, "20") }, 0},
		{"at once", func(m *Monitor) { m.SetReplicas("b", 4) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := armedMonitor(t, 3, intstr.FromInt32(1))
			tc.scale(m)
			// The eviction of a-0 happened at 15, before the scale at 20.
			update(m, withRV(fakePod("a", 0, 0, terminating), "15"))
			expectBreaches(t, m, tc.breaches, "a-0 rolled while b has 1 pods unavailable")
			// The scale's new pod, created after it, finds the scale applied;
			// a-0's replacement Ready, a-1 rolls while b-3 is still missing.
			update(m, withRV(fakePod("b", 3, 0, notReady), "21"))
			remove(m, withRV(fakePod("a", 0, 0, terminating), "22"))
			update(m, withRV(fakePod("a", 0, 1, ready), "23"))
			update(m, withRV(fakePod("a", 1, 0, terminating), "24"))
			expectBreaches(t, m, tc.breaches+1, "rolled while b has 1 pods unavailable")
		})
	}
}

func TestMonitorExcusesAKubeletStartupFlapOnly(t *testing.T) {
	readyAt := func(m *Monitor, pod *corev1.Pod, at time.Time) { m.observe(pod, false, at) }
	t0 := time.Now()
	for _, tc := range []struct {
		name              string
		readyFor, rollGap time.Duration
		seenNotReadyFirst bool
		breaches, flaps   int
	}{
		{"a new pod Ready for 200ms, the roll 300ms after", 200 * time.Millisecond, 300 * time.Millisecond, true, 0, 1},
		{"a new pod Ready for 2s", 2 * time.Second, 300 * time.Millisecond, true, 1, 0},
		{"the roll 2s after the readiness went", 200 * time.Millisecond, 2 * time.Second, true, 1, 0},
		{"a pod first seen Ready", 200 * time.Millisecond, 300 * time.Millisecond, false, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := armedMonitor(t, 3, intstr.FromInt32(1))
			// b-2 replaced: its new pod (generation 1) appears not Ready.
			remove(m, fakePod("b", 2, 0, terminating))
			if tc.seenNotReadyFirst {
				readyAt(m, fakePod("b", 2, 1, notReady), t0)
			}
			readyAt(m, fakePod("b", 2, 1, ready), t0.Add(100*time.Millisecond))
			lost := t0.Add(100*time.Millisecond + tc.readyFor)
			readyAt(m, fakePod("b", 2, 1, notReady), lost)
			m.observe(fakePod("a", 0, 0, terminating), false, lost.Add(tc.rollGap))
			if got := len(m.Breaches()); got != tc.breaches {
				t.Errorf("%d breaches, want %d: %v", got, tc.breaches, m.Breaches())
			}
			if got := m.Flaps(); len(got) != tc.flaps || (tc.flaps > 0 && !strings.Contains(got[0], "b-2 Running not Ready")) {
				t.Errorf("flaps %v, want %d naming b-2", got, tc.flaps)
			}
		})
	}
}
